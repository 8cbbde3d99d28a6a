"""``iwpfast evaluate MODEL DATA``: accuracy and risk on clean data, or the debiased risk on a release."""
from __future__ import annotations

from . import add_subparser, split_names

EXAMPLES = """\
  # clean hold-out in its original units (scaled and clipped as the release did)
  iwpfast evaluate model.json acs_test.parquet

  # a private hold-out (itself a release): unbiased estimate of the clean risk +- its standard error,
  # beside the best constant model's (the class shares debiased) and the paired difference (only
  # when both estimates are reliable); with clean features (a label-only release) also the
  # predicted-class shares and the debiased accuracy; a model fitted with --class-weight: the
  # class-weighted risks first, then the unweighted ones
  iwpfast evaluate model.json acs_test_ldp.parquet --private

  # clean data already in the training scale ([-1, 1] features), other column names
  iwpfast evaluate model.json test.parquet --scaled --features a b c --label target
"""


def register(subparsers) -> None:
    p = add_subparser(
        subparsers, "evaluate",
        help="evaluate a model: accuracy and risk on clean data, or the debiased risk on a release",
        description="On clean data: accuracy (or R^2) and mean loss. With --private, DATA is a "
                    "local-DP release and the estimate uses the same inverse transforms as "
                    "training, so it is unbiased for the clean risk; its standard error is shown, "
                    "beside the best constant model's private risk (a classifier: the intercept "
                    "from the debiased class shares) and the difference with its paired standard "
                    "error. A model fitted with --class-weight is judged by the class-weighted "
                    "risk it minimized (the constant model chosen under the same weights), on a "
                    "line that says so, followed by the unweighted risks (comparable with "
                    "unweighted models); on clean data the class-weighted risk is a line of its "
                    "own. A `warning:` line says when the model is below the majority class "
                    "(clean data) or not clearly below the constant's risk (--private). The "
                    "difference is printed only when both estimates are reliable; otherwise a "
                    "`warning:` line says which is not (JSON: difference_reliable false, the "
                    "numbers kept). A hold-out whose features are clean (label-only or public "
                    "columns) adds the share of rows predicted as each class (exact) and the "
                    "debiased accuracy +- its standard error beside always predicting the "
                    "majority class; with noisy features a line says these cannot be estimated.",
        examples=EXAMPLES,
    )
    p.add_argument("model", metavar="MODEL", help="model file written by `iwpfast fit` or model.save")
    p.add_argument("data", metavar="DATA", help="Parquet/IPC/CSV file, directory or glob")
    p.add_argument("--private", action="store_true",
                   help="DATA is a private hold-out (a release): print the debiased risk estimate "
                        "and the best constant model's beside it")
    p.add_argument("--scaled", action="store_true",
                   help="clean DATA is already in the model's [-1, 1] space (default: raw units, "
                        "scaled by the model's declared ranges when it has them)")
    p.add_argument("--features", nargs="+", default=None, metavar="NAME",
                   help="feature columns of DATA in the model's order (default: the model's names)")
    p.add_argument("--label", default=None, help="label column of DATA (default: the model's)")
    p.add_argument("--json", action="store_true", help="print the numbers as JSON")
    p.set_defaults(handler=run)


def run(args) -> int:
    import json

    from ..estimators import load
    from ..io.sources import open_source
    from . import print_warnings

    model = load(args.model)
    features = split_names(args.features) if args.features else None
    src = open_source(args.data)
    out = {"model": args.model, "data": args.data}
    if args.private or src.release_metadata is not None:
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the reliability verdict is printed below instead
            est = model.private_risk(src, features=features, label=args.label)
        out.update(kind="private", **_private_fields(est))
        # a class-weighted model: the fields above are its weighted risks, the plain ones nested
        out.update(class_weighted=est.class_weight is not None,
                   class_weight=None if est.class_weight is None else list(est.class_weight))
        if est.unweighted is not None:
            out.update(unweighted=_private_fields(est.unweighted))
        text = f"debiased risk estimate on the private hold-out {args.data}: " + est.describe()
        if not args.private:
            text = "DATA is a release, so only the debiased estimate applies:\n" + text
    else:
        import warnings
        has_ranges = bool(getattr(model, "feature_ranges_", None))
        raw = (not args.scaled) and has_ranges
        kw = dict(features=features, label=args.label, scaled=bool(args.scaled))
        report = None
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if hasattr(model, "evaluate_report"):   # one pass: the verdict holds score and risk
                report = model.evaluate_report(src, **kw)
                score, risk = report.accuracy, report.risk
            else:
                score, risk = model.score_and_risk(src, **kw)
        print_warnings(caught)
        name = "accuracy" if report is not None else "R^2"
        out.update(kind="clean", risk=risk, rows=src.num_rows, **{name: score})
        text = (f"clean data {args.data}" + (" (raw units, scaled as the release did)" if raw else "")
                + f": {name} {score:.4f}, {model.loss} risk {risk:.5f}")
        if report is not None:
            out.update({k: v for k, v in report.to_dict().items() if k not in ("risk", "loss")})
            text += "\n" + report.describe()
    print(json.dumps(out, indent=2) if args.json else text)
    return 0


def _private_fields(est) -> dict:
    """The JSON fields of a ``RiskEstimate`` and of its best constant model."""
    out = dict(risk=est.risk, stderr=est.stderr, rows=est.n_rows, reliable=est.reliable,
               effective_rows=est.effective_rows, largest_share=est.largest_share,
               noise_energy=est.noise_energy, ci95=None if est.ci95 is None else list(est.ci95),
               warnings=list(est.warnings))
    if est.baseline is not None:
        c = est.baseline
        out.update(constant_risk=c.risk, constant_stderr=c.stderr,
                   constant_intercept=list(c.intercept), constant_shares=list(c.shares),
                   difference=c.difference, difference_stderr=c.difference_stderr,
                   constant_warnings=list(c.warnings), difference_reliable=c.difference_reliable)
    if est.predictions is not None:
        out.update(est.predictions.to_dict())
    return out
