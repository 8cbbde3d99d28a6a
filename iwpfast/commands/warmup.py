"""``iwpfast warmup``: compile the kernels that fits use now, into the per-user kernel cache.

The first fit of an installation compiles its kernels (seconds: ``bench/compile_cost.py``
measures each function); later fits load them from the cache (``iwpfast/_kernels/_options.py``).
This command pays that once, e.g. right after ``pip install`` or in a container image's build, by
running small fits in separate processes, several at once (``--jobs``): each process compiles
other kernels or other specializations of them, and the saves into the shared cache are atomic
(the cache folder's lock).  It changes nothing for a fit whose cache is empty: it fills the cache.
"""
from __future__ import annotations

import os

from ..losses import CLASSIFICATION_LOSSES
from . import add_subparser, split_names

EXAMPLES = """\
  iwpfast warmup                          # float32 and float64, exponential loss, all cores
  iwpfast warmup --dtypes float64 --jobs 2
  iwpfast warmup --losses exponential,logistic
"""

#: the fits whose kernels a warmup compiles, heaviest first (so that parallel processes end
#: together): one-vs-rest heads of private class labels (the k-class table form) and of public
#: ones, the 'auto' grid of binary heads, one head with fixed alpha / learning_rate; each on an
#: array of a feature dtype; a release file written and fitted with 'auto' (the release
#: kernels, the file's dtypes); and ``iwpfast demo``'s scan (its three heads of a file)
KINDS = ("classes", "auto", "fixed")
DTYPES = ("float32", "float64")


def register(subparsers) -> None:
    p = add_subparser(
        subparsers, "warmup",
        help="compile the kernels now (once per installation) so that the first fit loads them",
        description="Compile the kernels that releases and fits use into the per-user kernel "
                    "cache ($IWPFAST_CACHE_DIR, else the platform's user cache folder), by small "
                    "fits in parallel processes. Needed once per installation and iwpfast "
                    "version; never needed for correctness (a fit compiles what it lacks).",
        examples=EXAMPLES,
    )
    p.add_argument("--dtypes", nargs="+", default=["float32,float64"], metavar="DTYPE",
                   help="feature dtypes of the array fits: float32, float64 (default both)")
    p.add_argument("--losses", nargs="+", default=["exponential"], metavar="LOSS",
                   help=f"losses: {', '.join(CLASSIFICATION_LOSSES)} (default exponential, the "
                        "estimators' default)")
    p.add_argument("--jobs", type=int, default=None,
                   help="processes at once (default: the CPU cores, at most one per fit)")
    p.add_argument("--no-release", action="store_true",
                   help="skip the release file (its release kernels and fit) and the demo's scan")
    p.set_defaults(handler=run)


def warmup_jobs(dtypes, losses, release: bool = True) -> list[tuple[str, str, str]]:
    """The (kind, dtype, loss) of each warmup fit, heaviest first."""
    jobs = [(kind, dtype, loss) for kind in KINDS for loss in losses for dtype in dtypes]
    if release:
        jobs.insert(len(jobs) - len(losses) * len(dtypes), ("release", "float32", losses[0]))
        jobs.append(("demo", "float64", losses[0]))
    return jobs


def warm(kind: str, dtype: str, loss: str) -> None:
    """One warmup fit (run in a process of its own by ``run``); its warnings (made-up data, a
    seeded release) are not the user's."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _fit(kind, dtype, loss)


def _fit(kind: str, dtype: str, loss: str) -> None:
    import tempfile

    import numpy as np

    from ..estimators import IWPClassifier
    if kind == "demo":      # `iwpfast demo`'s one scan of clean / naive / IWP heads, small
        import io

        from ..demo import run_demo
        with tempfile.TemporaryDirectory(prefix="iwpfast-warmup-") as folder:
            run_demo(rows=2000, features=3, loss=loss, out_dir=folder, progress=False, plot=False,
                     stream=io.StringIO())
        return
    rng = np.random.default_rng(0)
    X = rng.uniform(-1.0, 1.0, (1000, 3)).astype(dtype)
    if kind == "release":
        from ..privacy import ReleaseSpec, release
        names = ("x0", "x1", "x2")
        spec = ReleaseSpec(epsilon_x=4.0, delta=1e-5, bound=2.0, epsilon_y=2.0, features=names,
                           ranges={f: (-1.0, 1.0) for f in names}, label="y")
        with tempfile.TemporaryDirectory(prefix="iwpfast-warmup-") as folder:
            path = os.path.join(folder, "release.parquet")
            release({**{f: X[:, j] for j, f in enumerate(names)},
                     "y": (X[:, 0] > 0).astype(np.int8)}, path, spec, seed=1)
            IWPClassifier(loss=loss, progress=False).fit(path)
            from ..moment_stats import moments
            moments(path)                # the debiased second moments of a release
        # the row digest every part of a multi-part release computes (one signature: uint64)
        import pyarrow as pa

        from ..privacy.part_rows import RowDigest
        RowDigest(bytes(16)).update(pa.record_batch({"x0": X[:, 0]}))
        return
    noise = dict(noise_var=0.25, epsilon_y=2.0)     # private labels: the k-class table form
    if kind == "classes":     # private class labels (the table form), then public ones
        for given in (noise, dict(noise_var=0.25)):
            IWPClassifier(loss=loss, progress=False).fit(X, np.arange(1000) % 3,
                                                         classes=[0, 1, 2], **given)
    elif kind == "auto":
        IWPClassifier(loss=loss, progress=False).fit(X, (X[:, 0] > 0).astype(int), **noise)
        from ..sgd.scoring import warm_scoring
        warm_scoring(dtype)         # the kernel of large hold-outs (this one is scored by NumPy)
    else:
        IWPClassifier(loss=loss, alpha=1.0, learning_rate=0.01, progress=False).fit(
            X, (X[:, 0] > 0).astype(int), **noise)


CHILD = "import sys\nfrom iwpfast.commands.warmup import warm\nwarm(*sys.argv[1:])\n"


def run(args) -> int:
    import subprocess
    import sys
    import tempfile
    import time

    from ..exceptions import InvalidInputError, IWPError
    dtypes = split_names(args.dtypes)
    losses = split_names(args.losses)
    for name, values, legal in (("--dtypes", dtypes, DTYPES),
                                ("--losses", losses, CLASSIFICATION_LOSSES)):
        bad = [v for v in values if v not in legal]
        if bad or not values:
            raise InvalidInputError(f"{name} {' '.join(bad)}: choose from {', '.join(legal)}")
    if args.jobs is not None and args.jobs < 1:
        raise InvalidInputError(f"--jobs {args.jobs}: give at least 1")
    if os.environ.get("NUMBA_DISABLE_JIT") == "1":
        print("iwpfast warmup: NUMBA_DISABLE_JIT=1, nothing to compile")
        return 0
    from .._kernels._options import CACHE_FOLDER
    jobs = warmup_jobs(dtypes, losses, release=not args.no_release)
    at_once = max(1, min(args.jobs or os.cpu_count() or 1, len(jobs)))
    where = "uncached: nothing will be kept" if CACHE_FOLDER is None else f"into {CACHE_FOLDER}"
    print(f"iwpfast warmup: {len(jobs)} fits, {at_once} at a time, {where}", flush=True)
    start = time.perf_counter()
    pending = list(jobs)
    running: dict = {}
    failed = []
    while pending or running:
        while pending and len(running) < at_once:
            job = pending.pop(0)
            errors = tempfile.TemporaryFile("w+")     # a file: a pipe could fill and block
            running[job] = (subprocess.Popen([sys.executable, "-c", CHILD, *job],
                                             stdout=subprocess.DEVNULL, stderr=errors, text=True),
                            errors, time.perf_counter())
        done = next((job for job, (proc, _, _) in running.items() if proc.poll() is not None),
                    None)
        if done is None:
            time.sleep(0.05)
            continue
        proc, errors, began = running.pop(done)
        with errors:
            errors.seek(0)
            lines = [line for line in errors.read().splitlines() if line.strip()]
        if proc.returncode != 0:
            failed.append(f"{' '.join(done)}: {lines[-1] if lines else f'exit {proc.returncode}'}")
        print(f"  {' '.join(done):<30} {time.perf_counter() - began:6.1f} s"
              f"{'' if proc.returncode == 0 else '  FAILED'}", flush=True)
    if failed:
        raise IWPError("warmup fits failed: " + "; ".join(failed))
    print(f"iwpfast warmup: done in {time.perf_counter() - start:.1f} s")
    return 0
