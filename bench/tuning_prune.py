"""Early pruning of the 'auto' grid (``iwpfast.sgd.tuning._Race``): what it saves, and whether it
changes the choice.  Issue 20 ("consider dropping hopeless grid heads early, if the selection rule
stays honest").

    python bench/tuning_prune.py                       # both parts (~3 min on 2 cores)
    python bench/tuning_prune.py --part speed --rows 4000000 --repeats 5
    python bench/tuning_prune.py --part choice --rungs 0.125,0.5

``speed``: ``IWPClassifier(progress=False).fit(path)`` on the Parquet release of
``bench/default_cost.py`` (``--rows`` x 10, eps_x = 4, eps_y = 2), with pruning off and on
with each noise credit (``PRUNE_CREDIT``: "second_moment", "variance" (the default), "none"),
rungs at ``--rungs`` (default the library's: after 1/8 of the training rows); medians of
interleaved repeats in one process, the heads pruned, the head updates per row, and whether the
chosen head is the one of the full grid.

``choice``: 16 synthetic private data sets (n in {2e5, 1e6}, p in {3, 10}, 2 or 3 classes,
feature noise sd 0.3 or 0.7, eps_y = 2, clean test rows apart), each fitted with pruning off and
on with each credit: how often the chosen heads differ from the full grid's, and the change of
the clean test accuracy when they do.

Prints the CPU model and the load average.  Not run by the test suite.
"""
from __future__ import annotations

import argparse
import itertools
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

CREDITS = ("second_moment", "variance", "none")
RUNGS: tuple = ()      # --rungs; default: the library's PRUNE_AT


def settings(name: str):
    from iwpfast.sgd import tuning
    if name == "off":
        tuning.PRUNE_AT = ()
    else:
        tuning.PRUNE_AT, tuning.PRUNE_CREDIT = RUNGS, name


def pruned_count(model) -> int:
    return sum(r is not None for r in model.tuning_["pruned_at_row"])


def speed(rows: int, repeats: int) -> None:
    from default_cost import write_release

    from iwpfast import IWPClassifier
    names = ("off", *CREDITS)
    with tempfile.TemporaryDirectory(prefix="iwpfast-prune-") as tmp:
        path = Path(tmp) / "release.parquet"
        write_release(path, rows, 10)
        times: dict[str, list[float]] = {n: [] for n in names}
        models = {}
        for r in range(repeats + 1):          # round 0 compiles and warms the page cache
            for name in (names if r % 2 == 0 else names[::-1]):
                settings(name)
                t0 = time.perf_counter()
                models[name] = IWPClassifier(progress=False).fit(path)
                if r:
                    times[name].append(time.perf_counter() - t0)
        settings("off")
    base = statistics.median(times["off"])
    full = models["off"].tuning_["chosen"]
    print(f"\n# speed: 'auto' fit(path), {rows:,} x 10 release, medians of {repeats}")
    for name in names:
        m = statistics.median(times[name])
        t = models[name].tuning_
        note = next((n for n in t["notes"] if "pruned early" in n), "")
        per_row = note.split("the scan made ")[1].split(" head")[0] if note else str(len(full))
        print(f"{name:14s} {m:7.3f} s  {m / base:5.2f}x off   pruned {pruned_count(models[name]):2d}"
              f"/{len(full)}  head updates per row {per_row:>5}  same choice "
              f"{t['chosen'] == full}", flush=True)


def task(n, p, k, sigma, seed):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, p))
    W = rng.normal(0, 1.5, (p, k))
    if k == 2:
        y = (rng.random(n) < 1 / (1 + np.exp(-(X @ W[:, 0])))).astype(int)
    else:
        y = np.argmax(X @ W + rng.gumbel(size=(n, k)), axis=1)
    keep = np.exp(2.0) / (np.exp(2.0) + k - 1)             # k-ary randomized response, eps_y 2
    flip = rng.random(n) > keep
    noisy_y = np.where(flip, (y + rng.integers(1, k, n)) % k, y)
    return X, y, X + rng.normal(0, sigma, X.shape), noisy_y


def choice() -> None:
    from iwpfast import IWPClassifier
    names = ("off", *CREDITS)
    changed = {n: 0 for n in CREDITS}
    pruned = {n: 0 for n in CREDITS}
    heads = 0
    worst = {n: 0.0 for n in CREDITS}
    cases = list(itertools.product([200_000, 1_000_000], [3, 10], [2, 3], [0.3, 0.7]))
    print(f"\n# choice: {len(cases)} synthetic data sets, pruning after {RUNGS} of the rows")
    for i, (n, p, k, sigma) in enumerate(cases):
        X, y, Xn, yn = task(n + 50_000, p, k, sigma, i)
        kw = dict(noise_var=sigma ** 2, feature_bound=float(np.sqrt(p)), epsilon_y=2.0)
        if k > 2:
            kw["classes"] = list(range(k))
        fits = {}
        for name in names:
            settings(name)
            fits[name] = IWPClassifier(progress=False).fit(Xn[:n], yn[:n], **kw)
        settings("off")
        accuracy = {name: float((m.predict(X[n:]) == y[n:]).mean()) for name, m in fits.items()}
        line = f"n={n:>9,} p={p:2d} k={k} sd={sigma}: accuracy {accuracy['off']:.4f}"
        heads += len(fits["off"].tuning_["chosen"])
        for name in CREDITS:
            same = fits[name].tuning_["chosen"] == fits["off"].tuning_["chosen"]
            changed[name] += not same
            pruned[name] += pruned_count(fits[name])
            worst[name] = min(worst[name], accuracy[name] - accuracy["off"])
            delta = accuracy[name] - accuracy["off"]
            line += (f" | {name}: pruned {pruned_count(fits[name]):2d}"
                     + ("" if same else f", CHANGED ({delta:+.4f})"))
        print(line, flush=True)
    for name in CREDITS:
        print(f"{name:14s} changed the choice in {changed[name]} of {len(cases)}; pruned "
              f"{pruned[name]} of {heads} heads; worst accuracy change {worst[name]:+.4f}")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", choices=("speed", "choice", "both"), default="both")
    ap.add_argument("--rows", type=int, default=4_000_000, help="rows of the speed part")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--rungs", default=None,
                    help="shares of the rows with a pruning rung, e.g. 0.125,0.5 (default: "
                         "iwpfast.sgd.tuning.PRUNE_AT)")
    a = ap.parse_args(argv)
    global RUNGS
    from iwpfast.sgd import tuning
    RUNGS = (tuple(float(x) for x in a.rungs.split(",")) if a.rungs else tuple(tuning.PRUNE_AT))
    from default_cost import load, machine
    print(f"# {machine()}\n# {load()} at the start", flush=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if a.part in ("speed", "both"):
            speed(a.rows, a.repeats)
        if a.part in ("choice", "both"):
            choice()
    print(f"# {load()} at the end; {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
