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

  # a regressor fitted on a release with --target-range 0:200000: R^2, RMSE and the risk in
  # dollars (the target's units), beside the constant model; --target-units model: in the
  # release's [-1, 1] scale instead (DATA's target column then in that scale too, as --scaled
  # says of the features)
  iwpfast evaluate income.json holdout.parquet
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
                    "majority class; with noisy features a line says these cannot be estimated. "
                    "A regressor fitted on a release that declares the target's range "
                    "(--target-range) is evaluated in the target's units (R^2, RMSE, mean "
                    "absolute error and the risk, half the mean squared error; --private: the "
                    "debiased risk and an RMSE from it), and the output says which units.",
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
    p.add_argument("--target-units", choices=("target", "model"), default="target",
                   help="a regressor: compare in the target's units (default: those of its "
                        "declared range, e.g. dollars; DATA's target column in them) or in the "
                        "model's space ('model': the release's [-1, 1] scale, the target column "
                        "already in it)")
    p.add_argument("--json", action="store_true", help="print the numbers as JSON")
    p.set_defaults(handler=run)


def run(args) -> int:
    import json

    from ..estimators import load
    from ..io.sources import open_source

    model = load(args.model)
    features = split_names(args.features) if args.features else None
    src = open_source(args.data)
    out = {"model": args.model, "data": args.data}
    units = {} if model._task != "regression" else {"target_units": args.target_units}
    if args.private or src.release_metadata is not None:
        text = _private(model, src, args, features, units, out)
    else:
        text = _clean(model, src, args, features, units, out)
    print(json.dumps(out, indent=2) if args.json else text)
    return 0


def _private(model, src, args, features, units: dict, out: dict) -> str:
    """The debiased risk on a private hold-out: ``out`` filled, the text returned."""
    import math
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the reliability verdict is printed below instead
        est = model.private_risk(src, features=features, label=args.label, **units)
    out.update(kind="private", **_private_fields(est))
    # a class-weighted model: the fields above are its weighted risks, the plain ones nested
    out.update(class_weighted=est.class_weight is not None,
               class_weight=None if est.class_weight is None else list(est.class_weight))
    if est.unweighted is not None:
        out.update(unweighted=_private_fields(est.unweighted))
    text = f"debiased risk estimate on the private hold-out {args.data}: " + est.describe()
    if units:
        # the risk is half the mean squared error: RMSE = sqrt(2 risk), its SE by the delta method
        where = model.target_units_text(args.target_units)
        rmse = math.sqrt(2.0 * est.risk) if est.risk > 0 else float("nan")
        rmse_se = est.stderr / rmse if rmse > 0 else float("nan")
        out.update(units=where, target_range=_range(model, args.target_units), rmse=rmse,
                   rmse_stderr=rmse_se)
        text = (f"debiased risk estimate (half the mean squared error) on the private hold-out "
                f"{args.data}, in {where} squared: " + est.describe())
        text += (f"\nRMSE about {rmse:,.6g} +- {rmse_se:,.3g} (sqrt(2 risk)), in {where}"
                 if est.reliable and rmse > 0 else
                 "\nno RMSE shown: the risk estimate above is not reliable")
    if not args.private:
        text = "DATA is a release, so only the debiased estimate applies:\n" + text
    return text


def _clean(model, src, args, features, units: dict, out: dict) -> str:
    """The verdict on clean data: ``out`` filled, the text returned."""
    import warnings

    from . import print_warnings
    has_ranges = bool(getattr(model, "feature_ranges_", None))
    raw = (not args.scaled) and has_ranges
    kw = dict(features=features, label=args.label, scaled=bool(args.scaled), **units)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = model.evaluate_report(src, **kw)   # one pass: the verdict holds score and risk
    print_warnings(caught)
    where = f"clean data {args.data}" + (" (raw units, scaled as the release did)" if raw else "")
    out.update(kind="clean", rows=src.num_rows)
    if units:                                       # a regressor: in the target's units
        out.update({"R^2": report.r2, "risk": report.risk},
                   **{k: v for k, v in report.to_dict().items() if k not in ("risk", "r2")})
        return (f"{where}: {report.describe()}\n{model.loss} risk (half the mean squared error) "
                f"{report.risk:,.6g}, in {report.units} squared")
    out.update(accuracy=report.accuracy, risk=report.risk)
    out.update({k: v for k, v in report.to_dict().items() if k not in ("risk", "loss")})
    return (f"{where}: accuracy {report.accuracy:.4f}, {model.loss} risk {report.risk:.5f}\n"
            + report.describe())


def _range(model, target_units: str):
    rng = model.target_range_
    return None if rng is None or target_units == "model" else list(rng)


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
