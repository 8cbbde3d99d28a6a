"""``iwpfast demo`` (temporary): release a built-in synthetic dataset and print the guarantee."""
from __future__ import annotations

from . import add_subparser

EXAMPLES = """\
  iwpfast demo                     # release 200,000 synthetic rows into a temporary file
  iwpfast demo --out demo.parquet  # keep the released file
"""


def register(subparsers) -> None:
    p = add_subparser(
        subparsers, "demo",
        help="release a built-in synthetic dataset under local DP and print the privacy statement",
        description="Generate a synthetic classification dataset (4 features with known ranges), "
                    "release it under (2, 1e-5)-LDP and print what was promised.",
        examples=EXAMPLES,
    )
    p.add_argument("--rows", type=int, default=200_000)
    p.add_argument("--out", help="keep the release at this path (default: a temporary file)")
    p.add_argument("--overwrite", action="store_true")
    p.set_defaults(handler=run)


def synthetic_classification(n: int, seed: int = 0):
    """Four features with public ranges [-4, 4] and a logistic label in {0, 1}."""
    import numpy as np

    rng = np.random.default_rng(seed)
    X = np.clip(rng.standard_normal((4, n)), -4.0, 4.0)
    theta = np.array([1.5, -1.0, 0.5, 0.0])
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-(theta @ X)))).astype(np.int8)
    columns = {f"x{j}": X[j] for j in range(4)}
    columns["y"] = y
    return columns, {f"x{j}": (-4.0, 4.0) for j in range(4)}


def run(args) -> int:
    import os
    import tempfile

    from ..exceptions import InvalidInputError
    from ..privacy import ReleaseSpec, read_release_spec, release

    if args.rows < 1:
        raise InvalidInputError(f"--rows {args.rows}: give a positive number of rows")
    columns, ranges = synthetic_classification(args.rows)
    spec = ReleaseSpec(epsilon_x=1.0, epsilon_y=1.0, delta=1e-5, bound=1.0, ranges=ranges,
                       features=tuple(ranges), label="y")
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or os.path.join(tmp, "demo_release.parquet")
        result = release(columns, out, spec, overwrite=args.overwrite)
        stored = read_release_spec(out)
        print(f"synthetic dataset: {args.rows:,} rows, features {', '.join(ranges)} in [-4, 4], label y in {{0, 1}}")
        print(result.summary())
        print(stored.describe())
        if args.out is None:
            print("(temporary file removed; use --out PATH to keep it)")
    return 0
