"""``iwpfast plan``: the noise a budget implies and what one pass can learn, before releasing."""
from __future__ import annotations

from ..noise_registry import mechanism_choices, mechanism_help
from . import add_subparser, feature_delta

EXAMPLES = """\
  # 5 features, (4 + 2, 1e-5)-LDP, bound 2, 32,561 rows: sigma, keep probability, what is learnable
  iwpfast plan --epsilon-x 4 --epsilon-y 2 --delta 1e-5 --bound 2 --features 5 --rows 32561

  # 2 of the 5 features public: the noise covers the other 3 only; and labels only
  iwpfast plan --epsilon-x 4 --epsilon-y 2 --bound 2 --features 5 --public 2 --rows 32561
  iwpfast plan --epsilon-y 1 --features 5 --public 5 --rows 32561

  # the logistic loss (its variance does not grow exponentially with |theta|)
  iwpfast plan --epsilon-x 1 --epsilon-y 1 --bound 1 --features 4 --loss logistic
"""


def register(subparsers) -> None:
    p = add_subparser(
        subparsers, "plan",
        help="before releasing: sigma, keep probability and what one pass can learn at a budget",
        description="Print the noise a release with these parameters will add (the same "
                    "calibration as `iwpfast release`), how the IWP gradient's variance grows with "
                    "|theta|, and with --rows the weakest feature-label correlation one pass can "
                    "tell from noise. Orders of magnitude, not guarantees. Categorical columns: "
                    "public when they may be; private at a total epsilon_x <= 4, release the "
                    "numeric columns only; at ~8, --categorical-mechanism rr with --epsilon-cat ~1 "
                    "per column (few rows, or release size matters) or the Gaussian one-hot blocks "
                    "(many rows): measured in docs/release.md.",
        examples=EXAMPLES,
    )
    p.add_argument("--epsilon-x", type=float, default=None,
                   help="privacy budget of the (private) feature vector; none with --public P: "
                        "a label-only release")
    p.add_argument("--epsilon-y", type=float, default=None,
                   help="budget of the label / target (default: public labels)")
    p.add_argument("--mechanism", choices=mechanism_choices(), default="gaussian",
                   help="feature mechanism: " + mechanism_help())
    p.add_argument("--delta", type=float, default=None,
                   help="delta (default 1e-5; 0 with --mechanism laplace)")
    p.add_argument("--bound", type=float, default=1.0,
                   help="bound of the scaled feature vector: L2 (L1 with --mechanism laplace); default 1")
    p.add_argument("--features", type=int, required=True, metavar="P", help="number of features p")
    p.add_argument("--public", type=int, default=0, metavar="K",
                   help="how many of the P features are public (released without noise)")
    p.add_argument("--positive-share", type=float, default=None, metavar="P",
                   help="the share of positive labels, when known: says whether a model held by "
                        "the variance cap can move predictions off the majority class")
    p.add_argument("--rows", type=int, default=None, metavar="N", help="rows the release will have")
    p.add_argument("--loss", default=None,
                   help="exponential (default), logistic, quadratic; squared_error for regression")
    p.add_argument("--task", choices=["classification", "regression"], default=None)
    p.add_argument("--calibration", choices=["analytic", "classic"], default="analytic")
    p.add_argument("--target-bound", type=float, default=1.0, help="regression target bound (default 1)")
    p.add_argument("--json", action="store_true", help="print the numbers as JSON")
    p.set_defaults(handler=run)


def run(args) -> int:
    import json

    from ..planning import plan_release

    delta = feature_delta(args)
    plan = plan_release(epsilon_x=args.epsilon_x, epsilon_y=args.epsilon_y, delta=delta,
                        bound=args.bound, n_features=args.features, n_rows=args.rows,
                        loss=args.loss, task=args.task, calibration=args.calibration,
                        target_bound=args.target_bound, n_public=args.public,
                        positive_share=args.positive_share, mechanism=args.mechanism)
    if args.json:
        out = dict(sigma=plan.sigma, label_keep_prob=plan.label_keep_prob,
                   target_noise_scale=plan.target_noise_scale, label_factor=plan.label_factor,
                   feature_factor=plan.feature_factor, guarantee=plan.guarantee,
                   variance=[dict(theta_norm=r, noise_energy=v, factor=f) for r, v, f in plan.variance_rows],
                   detectable_correlation=plan.detectable_correlation(),
                   rows_needed={str(c): plan.rows_needed(c) for c in (0.05, 0.1, 0.2, 0.3)},
                   majority_class=plan.majority_verdict())
        print(json.dumps(out, indent=2))
    else:
        print(plan.describe())
    return 0
