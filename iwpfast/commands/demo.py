"""``iwpfast demo``: the paper's result on this machine in about a minute (see iwpfast/demo.py)."""
from __future__ import annotations

from . import add_subparser

EXAMPLES = """\
  iwpfast demo                       # 10^6 synthetic rows, p = 10, (5, 1e-5)-LDP; table + iwpfast_demo.png
  iwpfast demo --rows 200000 --out /tmp/demo
  iwpfast demo --real                # the shipped ACS 2024 income task (FL, NY, PA), (10, 1e-5)-LDP
  iwpfast demo --epsilon 2 --features 2 --loss logistic

How to read it: 'SGD on clean data' is what one would get without privacy; the naive head trains
on the release as if it were clean and lands far from the clean optimum theta* (biased, however
many rows); IWP-SGD trains on the same release with unbiased gradients and lands near theta*.
"""


def register(subparsers) -> None:
    p = add_subparser(
        subparsers, "demo",
        help="show the paper's result: clean vs naive vs IWP-SGD on a local-DP release, in one scan",
        description="Generate the paper's synthetic problem (or use the shipped ACS 2024 data), "
                    "release it under local DP, train clean / naive / IWP heads in one scan, and "
                    "print test risk, accuracy and distance to the clean optimum; write a PNG plot "
                    "of the test risk against batches (needs matplotlib).",
        examples=EXAMPLES,
    )
    p.add_argument("--rows", type=int, default=1_000_000,
                   help="training rows (default 10^6; a clean test set of rows/5 is added). "
                        "With --real: cap on the ACS training rows (default: all)")
    p.add_argument("--features", type=int, default=10, help="p of the synthetic problem (default 10)")
    p.add_argument("--epsilon", type=float, default=None,
                   help="total LDP budget, split evenly between features and labels "
                        "(default 5; 10 with --real)")
    p.add_argument("--loss", default="exponential", help="exponential (default), logistic or quadratic")
    p.add_argument("--alpha", type=float, default=None,
                   help="lambda (default: the paper's, 5; 0.5 with --real)")
    p.add_argument("--learning-rate", type=float, default=None,
                   help="step (default: max(1e-4, 4 / (lambda * updates)))")
    p.add_argument("--out", default=".", metavar="DIR", help="where to write the plot (default: .)")
    p.add_argument("--seed", type=int, default=0, help="seed of the data and the (simulated) release")
    p.add_argument("--real", action="store_true", help="use the shipped ACS 2024 income data")
    p.add_argument("--no-plot", action="store_true", help="print the table only")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(handler=run)


def run(args) -> int:
    from ..demo import run_demo

    run_demo(rows=args.rows, features=args.features, epsilon=args.epsilon, loss=args.loss,
             out_dir=args.out, seed=args.seed, real=args.real, alpha=args.alpha,
             learning_rate=args.learning_rate, progress=not args.no_progress, plot=not args.no_plot)
    return 0
