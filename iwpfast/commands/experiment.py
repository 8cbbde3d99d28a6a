"""``iwpfast experiment NAME``: reproduce one of the paper's experiments (figures, tables, JSON)."""
from __future__ import annotations

import argparse

from . import add_subparser

EXAMPLES = """\
  iwpfast experiment synthetic-p2                    # 20 seeds, n = 10^6, classic + analytic
  iwpfast experiment synthetic-p10 --seeds 100       # the paper's seed count
  iwpfast experiment acs-income --out results/       # JSON + PNG figures under results/
  iwpfast experiment logloss --seeds 5 --rows 20000  # quick, reduced run of the log-loss group
  iwpfast experiment all --calibration analytic --no-plots
  iwpfast experiment multiclass --out results/       # k = 3, 5 synthetic + ACS education level
  iwpfast experiment --list
"""


def register(subparsers) -> None:
    p = add_subparser(
        subparsers, "experiment",
        help="reproduce the paper's experiments: clean vs naive vs IWP-SGD over seeds",
        description="Run a paper experiment: per seed, draw the data (synthetic) or take the fixed "
                    "split (ACS), simulate the LDP release in memory, train clean / naive / IWP heads "
                    "in one pass each, and report test risk, accuracy and the distance to the clean "
                    "optimum theta* (full-batch Newton). Writes NAME.json and PNG figures.",
        examples=EXAMPLES,
    )
    p.add_argument("name", nargs="?", metavar="NAME",
                   help="synthetic-p2, synthetic-p10, acs-income, acs-pubcov, logloss, regression, "
                        "all (or one logloss-* setting), multiclass (or one multiclass-* setting)")
    p.add_argument("--list", action="store_true", help="list the experiments and exit")
    p.add_argument("--seeds", type=int, default=20, help="number of seeds (default 20; paper: 100)")
    p.add_argument("--first-seed", type=int, default=0, help="first seed (seeds are consecutive)")
    p.add_argument("--rows", type=int, default=None,
                   help="training rows (default: the paper's n = 10^6 synthetic / the 80%% ACS split)")
    p.add_argument("--calibration", default=None,
                   help="classic, analytic or classic,analytic (default: both)")
    p.add_argument("--out", default="iwpfast-results", help="output directory (default %(default)s)")
    p.add_argument("--no-plots", action="store_true", help="write JSON and tables only")
    p.add_argument("--engine", choices=("numba", "numpy"), default=None,
                   help="numba kernels (default) or the NumPy reference twin")
    # the option's old name, kept working (hidden from --help)
    p.add_argument("--backend", choices=("numba", "numpy"), default=None, dest="engine",
                   help=argparse.SUPPRESS)
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.set_defaults(handler=run)


def run(args) -> int:
    import sys

    from ..exceptions import InvalidInputError
    from ..experiments import GROUPS, SETTINGS
    from ..experiments import run as run_experiment

    if args.list or not args.name:
        for name, s in SETTINGS.items():
            print(f"{name:24s} {s.title}")
        for name, members in GROUPS.items():
            print(f"{name:24s} group: {', '.join(members)}")
        from ..experiments.multiclass import MULTICLASS_GROUP, MULTICLASS_SETTINGS
        for name, multiclass in MULTICLASS_SETTINGS.items():
            print(f"{name:24s} {multiclass.title}")
        print(f"{'multiclass':24s} group: {', '.join(MULTICLASS_GROUP)}")
        return 0 if args.list else 2
    if args.seeds < 1:
        raise InvalidInputError(f"--seeds {args.seeds}: give at least 1 seed")
    if args.rows is not None and args.rows < 2:
        raise InvalidInputError(f"--rows {args.rows}: give at least 2 training rows")
    calibrations = None
    if args.calibration:
        calibrations = tuple(c for c in args.calibration.replace(",", " ").split() if c)
        bad = [c for c in calibrations if c not in ("classic", "analytic")]
        if bad:
            raise InvalidInputError(f"--calibration {bad[0]!r}: use classic, analytic or both "
                                    "separated by a comma")

    def progress(name, done, total, seconds):
        if not args.quiet:
            print(f"[{name}] seed {done}/{total} ({seconds:.1f} s)", file=sys.stderr, flush=True)

    results = run_experiment(args.name, seeds=args.seeds, first_seed=args.first_seed,
                             n_train=args.rows, out_dir=args.out, engine=args.engine,
                             plots=not args.no_plots, calibrations=calibrations, progress=progress)
    for r in results:
        print(f"## {r['setting']['title']}\n")
        print(r["table"])
    print(f"results written under {args.out}/")
    return 0
