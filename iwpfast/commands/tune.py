"""``iwpfast tune DATA --out model.json``: choose alpha and the step by private validation, and show how."""
from __future__ import annotations

from . import add_subparser

EXAMPLES = """\
  # a derived grid of (alpha, step) heads in one scan, scored on 10% of the release held out
  iwpfast tune acs_ldp.parquet --out model.json

  # your own grid, scored on a separate private release (e.g. a released hold-out)
  iwpfast tune train_ldp.parquet --validation holdout_ldp.parquet \\
      --alpha 0.1,0.5,2 --learning-rate 0.01,0.03,0.1 --variance-cap 2 --out model.json
"""


def register(subparsers) -> None:
    from .fit import add_fit_arguments

    p = add_subparser(
        subparsers, "tune",
        help="choose alpha and the learning rate by private validation (no clean data needed)",
        description="Train a grid of (alpha, learning rate) heads in ONE scan of DATA's training "
                    "part, score every head by its unbiased private risk on a private validation "
                    "part (--validation-fraction of DATA in blocks over the file, or --validation "
                    "RELEASE), drop heads whose estimate is unreliable, pick by the "
                    "standard-error rule (the most regularized head within half a paired "
                    "standard error of the best), print the table and write "
                    "the chosen model. The default grid is derived from the rows, sigma, the "
                    "bound and the loss (docs/tuning.md). Same options as `iwpfast fit`, whose "
                    "default is the same tuning without the table.",
        examples=EXAMPLES,
    )
    add_fit_arguments(p)
    p.set_defaults(handler=run, table=True)


def run(args) -> int:
    from ..exceptions import InvalidInputError
    from .fit import run as fit_run

    if isinstance(args.alpha, float) and (isinstance(args.learning_rate, float)
                                          or args.schedule == "paper"):
        raise InvalidInputError("tune chooses among several values: leave --alpha/--learning-rate "
                                "at auto or give a comma-separated grid (e.g. --alpha 0.1,1,10); "
                                "for one fixed setting use `iwpfast fit`")
    return fit_run(args)
