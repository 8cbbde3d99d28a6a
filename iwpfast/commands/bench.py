"""``iwpfast bench``: iwpfast against its peers on the same generated data, in one run."""
from __future__ import annotations

from ..losses import CLASSIFICATION_LOSSES
from . import add_subparser

EXAMPLES = """\
  iwpfast bench                               # 2*10^6 rows, p = 10, logistic loss, float32
  iwpfast bench --rows 10000000 --features 100
  iwpfast bench --json > bench.json           # machine-readable, for harnesses
"""


def register(subparsers) -> None:
    p = add_subparser(
        subparsers, "bench",
        help="one table: iwpfast IWP / clean vs NumPy, scikit-learn (and River, VW if installed)",
        description="Generate one dataset and its release in memory, then time one pass of each "
                    "implementation on it (median of --repeats runs; compile time excluded and "
                    "reported). Prints rows/s and the ratio to iwpfast IWP.",
        examples=EXAMPLES,
    )
    p.add_argument("--rows", type=int, default=2_000_000)
    p.add_argument("--features", type=int, default=10)
    p.add_argument("--loss", default="logistic", choices=CLASSIFICATION_LOSSES)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--dtype", default="float32", choices=("float32", "float64"))
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--numpy-rows", type=int, default=200_000,
                   help="rows for the (slow) NumPy baseline (default %(default)s)")
    p.add_argument("--peer-rows", type=int, default=None,
                   help="rows for scikit-learn/River/VW (default: all)")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.set_defaults(handler=run)


def run(args) -> int:
    import json

    from ..benchmarks import format_bench, run_bench

    result = run_bench(rows=args.rows, features=args.features, loss=args.loss,
                       batch_size=args.batch_size, dtype=args.dtype, repeats=args.repeats,
                       numpy_rows=args.numpy_rows, peer_rows=args.peer_rows)
    print(json.dumps(result, indent=1) if args.json else format_bench(result))
    return 0
