"""``iwpfast fit DATA --out model.json``: one IWP-SGD pass over a release, model written as JSON."""
from __future__ import annotations

import math

from ..losses import REGRESSION_LOSSES
from ..progress import add_progress_arguments, cli_progress
from . import add_cluster_arguments, add_subparser, split_names

EXAMPLES = """\
  # the noise parameters, features and label are read from the release's metadata
  iwpfast fit acs_ldp.parquet --out model.json

  # the paper's settings, tail averaging, logistic loss with the MSE-optimal truncation
  iwpfast fit acs_ldp.parquet --loss logistic --truncation auto --alpha 10 \\
      --learning-rate 2e-5 --batch-size 50 --average tail --out model.json

  # a long pass: checkpoint every 10M rows; after an interruption, the same command with --resume
  iwpfast fit big_ldp/ --out model.json --checkpoint fit.ckpt --checkpoint-every 10000000 --resume

  # a multi-part release in a bucket, 8 shards on a Dask cluster, merged every quarter of the rows;
  # alpha and step are 'auto' as on one machine (the grid runs on every shard and is scored on the
  # validation rows of every shard) or fixed values; a cluster fit takes no --checkpoint
  iwpfast fit s3://bucket/release/ --out model.json --scheduler tcp://scheduler:8786 \\
      --shards 8 --rounds 4

  # naive SGD on the same release (for comparison)
  iwpfast fit acs_ldp.parquet --correction none --out naive.json

  # the clean baseline: raw, un-noised data scaled and clipped as the release was, no noise
  iwpfast fit acs.parquet --features AGEP SCHL WKHP --ranges AGEP=0:99 SCHL=1:24 WKHP=0:99 \\
      --label y --bound 1 --out clean.json

  # fixed hyper-parameters instead of auto (or a grid to choose from: --alpha 0.1,1,10)
  iwpfast fit acs_ldp.parquet --alpha 0.5 --learning-rate 0.03 --variance-cap 2 --out model.json

  # exactly the settings of an earlier fit ('auto' resolved; iwpfast info MODEL lists them)
  iwpfast fit acs_ldp.parquet --params-from model.json --out again.json
"""


def _average(text: str):
    if text in ("false", "none", "no"):
        return False
    if text in ("true", "all", "yes"):
        return True
    if text in ("tail", "auto"):
        return text
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        import argparse
        raise argparse.ArgumentTypeError(
            f"--average {text!r}: use auto, none, all, tail, a start fraction in [0, 1) or a start "
            "update number") from None


def _truncation(text: str):
    if text == "auto":
        return "auto"
    try:
        return int(text)
    except ValueError:
        import argparse
        raise argparse.ArgumentTypeError(f"--truncation {text!r}: use an integer K (0..20) or auto") from None


def hyper(text: str):
    """--alpha / --learning-rate: auto, a number, or a comma-separated grid to choose from."""
    if text == "auto":
        return "auto"
    try:
        values = [float(x) for x in text.replace(",", " ").split()]
    except ValueError:
        import argparse
        raise argparse.ArgumentTypeError(
            f"{text!r}: use auto (chosen by private validation), a number, or a comma-separated "
            "list of numbers to choose from") from None
    return values[0] if len(values) == 1 else values


def register(subparsers) -> None:
    p = add_subparser(
        subparsers, "fit",
        help="train a linear model on a local-DP release in one pass (IWP-SGD)",
        description="Stream DATA once through IWP-SGD (unbiased gradients from the noisy release) "
                    "and write the model as a small JSON file. The noise parameters come from the "
                    "release metadata; a file without it is treated as clean data.",
        examples=EXAMPLES,
    )
    add_fit_arguments(p)
    p.add_argument("--params-from", default=None, metavar="MODEL.json",
                   help="train with exactly the settings an earlier fit used ('auto' resolved: "
                        "alpha, step, variance cap, averaging, truncation, radius, solver, as "
                        "iwpfast info MODEL lists them); refuses the hyper-parameter options")
    p.set_defaults(handler=run)


def add_fit_arguments(p) -> None:
    """The options of ``fit`` (``tune`` takes the same)."""
    p.add_argument("data", metavar="DATA", help="release: Parquet/IPC/CSV file, directory or glob; "
                                                "- reads an Arrow IPC stream from stdin")
    p.add_argument("--out", required=True, metavar="MODEL.json", help="where to write the model")
    p.add_argument("--task", choices=["auto", "classification", "regression"], default="auto",
                   help="default: the release's task")
    p.add_argument("--loss", default=None,
                   help="exponential (default for classification), logistic, quadratic; "
                        "squared_error for regression")
    p.add_argument("--solver", choices=["auto", "sgd", "moments"], default="auto",
                   help="auto (default: moments for regression unless an SGD-only option such "
                        "as --learning-rate or --checkpoint is given, sgd for classification), "
                        "sgd (one-pass IWP-SGD) or moments: the exact quadratic-loss "
                        "model from the release's debiased second moments, one pass, alpha chosen "
                        "on folds of it (sets --loss quadratic / squared_error)")
    p.add_argument("--correction", choices=["iwp", "none"], default="iwp",
                   help="iwp (debiased, default) or none (naive SGD on the noisy data)")
    p.add_argument("--alpha", type=hyper, default="auto",
                   help="l2 strength lambda: auto (default: chosen by private validation), a number, "
                        "or a comma-separated grid to choose from")
    p.add_argument("--learning-rate", type=hyper, default="auto",
                   help="step gamma0: auto (default: chosen with --alpha), a number, or a grid")
    p.add_argument("--validation", default=None, metavar="RELEASE",
                   help="with auto: a separate private release to choose on (default: hold out "
                        "--validation-fraction of DATA)")
    p.add_argument("--validation-fraction", type=float, default=0.1,
                   help="with auto: share of DATA's rows held out, in blocks over the file (0.1); "
                        "a file of at most 400,000 rows is cross-validated over 1/share folds")
    p.add_argument("--n-rows-total", type=int, default=None, metavar="N",
                   help="with auto on - (stdin) or CSV: DATA's exact number of rows, so that the "
                        "split, tail average and halving are a file's of N rows (default: rows "
                        "are read ahead until the stream ends or 20 validation blocks of 8192 "
                        "rows are known; docs/streaming.md)")
    p.add_argument("--ranges", nargs="+", default=None, metavar="NAME=LO:HI",
                   help="DATA is raw clean data: scale each feature from its declared range and clip "
                        "at --bound as a release would, add no noise (the clean baseline)")
    p.add_argument("--bound", type=float, default=None,
                   help="with --ranges: the L2 bound of the scaled feature vector (default 1, as a "
                        "release's)")
    p.add_argument("--categories", action="append", default=[], metavar="NAME=A,B,C",
                   help="DATA is raw clean data with this categorical feature (repeatable): one-hot "
                        "over its declared categories, as `iwpfast release --categories` maps it "
                        "(the clean baseline; the other features take --ranges)")
    p.add_argument("--categories-file", default=None, metavar="F.json",
                   help='with raw clean data: categories as JSON {"NAME": ["A", "B"], ...}')
    p.add_argument("--unknown-category", default=None, metavar="NAME",
                   help="with --categories: catch-all category for values outside the declared "
                        "ones (without it such a value stops the fit naming column, value and row)")
    p.add_argument("--schedule", default="constant", help="constant (default), inverse or paper")
    p.add_argument("--mu", type=float, default=None, help="mu of the inverse schedule (default: alpha)")
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--radius", type=float, default=None,
                   help="projection radius on theta (default: bound * |f'(0)| / alpha)")
    p.add_argument("--variance-cap", type=float, default=None,
                   help="cap on sigma^2 |theta|^2 (keeps large steps stable; default none)")
    p.add_argument("--average", type=_average, default="auto",
                   help="auto (default: tail when --alpha/--learning-rate are auto, else none), none, "
                        "all, tail (last half), a start fraction or a start update")
    p.add_argument("--no-intercept", action="store_true", help="do not learn an intercept")
    p.add_argument("--truncation", type=_truncation, default=2,
                   help="K of the logistic IWP series, or auto (MSE-optimal); default 2")
    p.add_argument("--features", nargs="+", default=None, metavar="NAME[=LO:HI]",
                   help="feature columns (default: the release's); NAME=LO:HI also declares the "
                        "range of raw clean data, as --ranges NAME=LO:HI (the clean baseline)")
    p.add_argument("--label", default=None, help="label column (default: the release's)")
    p.add_argument("--sample-weight", default=None, metavar="COLUMN",
                   help="column of public per-row weights >= 0: minimize the weighted risk "
                        "(never a weight computed from the private data; see docs/usage.md)")
    p.add_argument("--class-weight", default=None, metavar="balanced|CLASS=W,...",
                   help="weigh the classes (classifier): 'balanced' = n / (k n_c) with "
                        "the class shares estimated from the released labels (unbiased inverse of "
                        "randomized response), or CLASS=WEIGHT pairs such as 1=3,0=1; raises "
                        "balanced accuracy at a cost in accuracy (docs/usage.md)")
    p.add_argument("--noise-var", type=float, default=None,
                   help="feature noise variance sigma^2 for data without release metadata")
    p.add_argument("--epsilon-y", type=float, default=None,
                   help="label budget for data without release metadata")
    p.add_argument("--classes", nargs="+", default=None, metavar="CLASS",
                   help="the label's classes for data without release metadata: k > 2 classes train "
                        "k one-vs-rest heads in one scan (a release written with --classes carries them)")
    p.add_argument("--override", action="store_true",
                   help="let --noise-var/--epsilon-y override a release's metadata")
    p.add_argument("--chunk-rows", type=int, default=None, help="rows per kernel call (default: automatic)")
    p.add_argument("--checkpoint", default=None, metavar="PATH", help="checkpoint file")
    p.add_argument("--checkpoint-every", type=int, default=None, metavar="ROWS")
    p.add_argument("--resume", action="store_true", help="continue from --checkpoint")
    p.add_argument("--keep-checkpoint", action="store_true",
                   help="keep the --checkpoint file after the fit succeeds (by default it is "
                        "removed then: the model holds the pass's result)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing --out file (and --checkpoint file when not resuming); "
                        "without it they are refused. Input files are never overwritten")
    add_progress_arguments(p)
    add_cluster_arguments(p)
    p.add_argument("--shards", type=int, default=None, metavar="K",
                   help="with --scheduler/--workers: shards of about equal rows, one SGD pass each, "
                        "averaged (default: one per worker)")
    p.add_argument("--rounds", type=int, default=1, metavar="R",
                   help="with --scheduler/--workers: merge the shards R times (periodic averaging; "
                        "default 1)")


def _class_weight(text, task: str):
    """--class-weight: None, 'balanced', or CLASS=WEIGHT pairs (a class that reads as a number
    is that number, as the label column's values); classification only."""
    from ..exceptions import InvalidInputError
    if text is not None and task == "regression":
        raise InvalidInputError("--class-weight is for classification; drop it for a regression fit")
    if text is None or text == "balanced":
        return text
    out: dict = {}
    for pair in text.split(","):
        key, sep, value = pair.partition("=")
        try:
            weight = float(value)
        except ValueError:
            weight = None
        if not sep or not key.strip() or weight is None:
            raise InvalidInputError(f"--class-weight {text!r}: give 'balanced' or CLASS=WEIGHT pairs "
                                    "separated by commas, e.g. --class-weight 1=3,0=1")
        name: object = key.strip()
        try:
            number = float(str(name))
            name = int(number) if number.is_integer() else number
        except ValueError:
            pass
        if name in out:         # "0=1,0=2" (or 0 and 0.0): which weight was meant is unknown
            raise InvalidInputError(f"--class-weight {text!r} gives class {name!r} twice; give "
                                    "each class one weight")
        out[name] = weight
    return out


#: what the refusal of an existing checkpoint offers besides another path
CHECKPOINT_REMEDY = "pass --resume to continue from it, or --overwrite to start the pass again"


def checkpoint_remedy() -> str:
    """``CHECKPOINT_REMEDY`` with the exact command that resumes (this one with --resume)."""
    from . import rerun_command

    return f"{CHECKPOINT_REMEDY} (to continue: {rerun_command('--resume')})"


def features_and_ranges(args):
    """--features NAME or NAME=LO:HI (as ``release`` takes them): the names, and --ranges with
    the inline ranges added (None when neither gives one)."""
    if not args.features:
        return None, args.ranges
    names, inline = [], []
    for token in split_names(args.features):
        name, sep, _ = token.partition("=")
        names.append(name)
        if sep:
            inline.append(token)
    ranges = list(args.ranges or []) + inline
    return names, (ranges or None)


def class_weight_compile(weights):
    """Around a --class-weight fit: the first one says that it compiles (``announce_...``), and
    the kernel cache remembers that it ran (a marker file)."""
    import contextlib

    @contextlib.contextmanager
    def announced():
        announce_class_weight_compile(weights)
        try:
            yield
        finally:
            class_weight_compiled(weights)

    return announced()


def announce_class_weight_compile(weights) -> None:
    """A first --class-weight fit compiles its kernel specialization (~30 s on a cache that
    holds the others): said once, in a log line (stderr with --progress auto/log); remembered
    in the kernel cache (``class_weight_compiled`` marks it once the fit has run)."""
    marker = _class_weight_marker()
    if weights is None or marker is None or marker.exists():
        return
    from .._kernels._options import cache_is_empty
    from ..progress import logger

    if cache_is_empty():            # every kernel compiles: that is announced already
        return
    logger.info("--class-weight: compiling its kernel specialization, first run only (about 30 s; "
                "cached in %s)", marker.parent)


def class_weight_compiled(weights) -> None:
    marker = _class_weight_marker()
    if weights is not None and marker is not None:
        try:
            marker.touch()
        except OSError:
            pass


def _class_weight_marker():
    import os

    from .._kernels._options import CACHE_FOLDER

    if CACHE_FOLDER is None or os.environ.get("NUMBA_DISABLE_JIT") == "1":
        return None
    return CACHE_FOLDER / "class-weight.compiled"


def run(args) -> int:
    import os
    import warnings

    import numpy as np

    from ..estimators import IWPClassifier, IWPRegressor
    from ..exceptions import InvalidInputError
    from ..io.outputs import check_output_path, source_files
    from ..io.sources import open_source
    from .release import STDIO, stdin_stream
    if args.data == STDIO and (args.scheduler or args.workers):
        raise InvalidInputError("- (stdin) is a stream of this process: a fit on a cluster reads "
                                "files; drop --scheduler/--workers")
    source = open_source(stdin_stream() if args.data == STDIO else args.data)
    data = source if args.data == STDIO else args.data
    # refuse unsafe outputs before the pass, not after it
    check_output_path(args.out, what="model", overwrite=args.overwrite, inputs=source_files(source))
    if args.checkpoint is not None:
        if os.path.abspath(args.checkpoint) == os.path.abspath(args.out):
            raise InvalidInputError(f"--checkpoint and --out are the same file {args.out!r}; give two paths")
        check_output_path(args.checkpoint, what="checkpoint", inputs=source_files(source),
                          overwrite=args.overwrite or (args.resume and os.path.exists(args.checkpoint)),
                          remedy=checkpoint_remedy())
    task = _task(args, source)
    if args.resume and args.checkpoint is None:
        raise InvalidInputError("--resume needs --checkpoint PATH (the file written by the interrupted run)")
    common = dict(correction=args.correction, alpha=args.alpha, learning_rate=args.learning_rate,
                  schedule=args.schedule, mu=args.mu, batch_size=args.batch_size, radius=args.radius,
                  variance_cap=args.variance_cap, average=args.average,
                  fit_intercept=not args.no_intercept, chunk_rows=args.chunk_rows,
                  progress=cli_progress(args), validation_fraction=args.validation_fraction,
                  solver=args.solver)
    weights = _class_weight(args.class_weight, task)
    if task == "regression":
        model: IWPClassifier | IWPRegressor = IWPRegressor(loss=args.loss or "squared_error", **common)
        noise = dict(target_noise_var=None)
    else:
        model = IWPClassifier(loss=args.loss or _default_loss(args), truncation=args.truncation,
                              class_weight=weights, **common)
        noise = dict(epsilon_y=args.epsilon_y)
        if args.classes:
            from .release import parse_classes
            noise["classes"] = parse_classes(args.classes)
    if getattr(args, "params_from", None):
        model = params_from(args, task, cli_progress(args))
    features, ranges = features_and_ranges(args)
    from . import cluster_client

    with warnings.catch_warnings(record=True) as caught, cluster_client(args) as client:
        warnings.simplefilter("always")
        if client is not None:
            if args.checkpoint or args.noise_var is not None or args.override or _clean_baseline(args):
                raise InvalidInputError(
                    "--scheduler/--workers fit a release (its metadata gives the noise) without checkpoints: "
                    "drop --checkpoint/--noise-var/--override/--ranges/--categories, or fit on one machine")
            from ..distributed import fit_files
            fit_files(client, args.data, model, shards=args.shards, rounds=args.rounds,
                      features=features, label=args.label, sample_weight=args.sample_weight)
        else:
            _fit_here(args, model, data, features, ranges, weights, noise)
    from . import print_warnings
    print_warnings(caught)
    model.save(args.out, overwrite=args.overwrite)
    from ..io.filesystem import FINAL_OUTPUT_PUBLISHED

    FINAL_OUTPUT_PUBLISHED.set()            # the model is written: a Ctrl-C now changes nothing
    tel = model.telemetry_
    if model.mode_ == "clean":
        # no noise: nothing is corrected, whatever --correction says
        what = (f"fitted {type(model).__name__}(loss={model.loss!r}) on {model.n_rows_seen_:,} "
                f"rows of {args.data}: the clean baseline (data without noise"
                + _clean_note(args)
                + "; nothing to correct)")
    else:
        what = (f"fitted {type(model).__name__}(loss={model.loss!r}, correction="
                f"{model.correction!r}) on {model.n_rows_seen_:,} rows of {args.data} "
                f"({model.mode_} mode)")
    print(what)
    print(f"features: {', '.join(model.features_)}; label: {model.label_}"
          + (f"; sample weights: {args.sample_weight}" if args.sample_weight else ""))
    if np.ndim(model.coef_) == 2 and model.coef_.shape[0] > 1:     # k one-vs-rest heads
        print(f"{model.coef_.shape[0]} classes, one-vs-rest heads trained in one scan:")
        for cls, coef, intercept in zip(np.asarray(model.classes_).tolist(), model.coef_,
                                           model.intercept_, strict=True):
            print(f"  {cls!r}: coef", " ".join(f"{c:+.5g}" for c in coef),
                  f" intercept: {intercept:+.5g}")
    else:
        coef = model.coef_.reshape(-1)
        intercept = float(np.asarray(model.intercept_).reshape(-1)[0])
        print("coef:", " ".join(f"{c:+.5g}" for c in coef), f" intercept: {intercept:+.5g}")
    chosen = (f" (chosen by {validation_kind(model.mode_)} validation)"
              if getattr(model, "tuning_", None) else "")
    if np.ndim(model.alpha_):           # k classes with "auto": chosen per class
        print("alpha, learning rate per class" + chosen + ": " + ", ".join(
            f"{cls!r}: {a:.4g}, {g:.4g}" for cls, a, g in zip(
                np.asarray(model.classes_).tolist(), model.alpha_, model.learning_rate_, strict=True)))
    elif getattr(model, "solver_", "sgd") == "moments":
        print("solver: moments (the exact solution of the release's debiased second moments, "
              "one pass); " + ("the constant model" if np.isnan(model.alpha_)
                               else f"alpha {model.alpha_:.4g}") + chosen)
    else:
        print(f"alpha {model.alpha_:.4g}, learning rate {model.learning_rate_:.4g}" + chosen
              + settings_note(model, args.out))
    _print_search(model, getattr(args, "table", False))
    # a randomized-response pass (estimators/_rr.py) counts no projection or cap hits; the moment
    # learner makes no update at all
    if getattr(model, "solver_", "sgd") != "moments":
        print(", ".join([f"updates: {tel.get('batches')}"]
                        + [f"{what}: {tel[key]}" for key, what in (
                            ("projection_hits", "projection hits"), ("cap_hits", "cap hits"))
                           if tel.get(key) is not None]
                        + [f"largest sigma^2|theta|^2: {tel.get('max_noise_energy', 0):.3g}"]))
    print(f"model written to {args.out}")
    return 0


#: the hyper-parameter options of fit and their defaults (--params-from refuses the others)
HYPER_DEFAULTS = dict(loss=None, solver="auto", correction="iwp", alpha="auto", learning_rate="auto",
                      schedule="constant", mu=None, batch_size=128, radius=None, variance_cap=None,
                      average="auto", no_intercept=False, truncation=2, validation_fraction=0.1,
                      class_weight=None)


def _print_search(model, table: bool) -> None:
    """The search's lines: the moment learner's table, the SGD search's, and the choice across
    learners (the default: estimators/_across.py)."""
    t = getattr(model, "tuning_", None)
    if t and "heads" not in t and getattr(model, "solver_", "sgd") == "moments":
        print_moment_tuning(t, table=table)     # the moment search's own table
    elif t:
        print_tuning(t, table=table, validation=validation_kind(model.mode_))
    if t and "learners" in t:
        print("learners: " + learners_text(t["learners"]))


def learners_text(learners: dict) -> str:
    """The default's choice across learners in one line (estimators/_across.py)."""
    cands = learners["candidates"]
    chosen = learners["chosen"]
    if chosen not in cands:         # nothing scored: said by the rule
        return f"{chosen} ({learners['rule']})"
    key = "accuracy" if "accuracy" in cands[chosen] else "risk"
    best = cands[chosen][key]
    others = ", ".join(f"{name} {c[key]:.4g} ({c[key] - best:+.3g}, SE {c['stderr']:.2g})"
                       for name, c in cands.items() if name != chosen)
    return (f"{chosen} chosen ({learners['rule']}), {learners['criterion']} {best:.4g}; "
            f"{others}")


def settings_note(model, out) -> str:
    """What else the pass ran with (the cap and averaging 'auto' adds) and where the exact
    values are: the summary's alpha and step are rounded."""
    cfg = model._pass.config if model._pass is not None else None
    if cfg is None:
        return ""
    cap = "none" if math.isinf(cfg.variance_cap) else f"{cfg.variance_cap:g}"
    avg = "none" if cfg.average_start < 0 else f"from update {cfg.average_start}"
    return (f"; variance cap {cap}, averaging {avg} (exact settings: iwpfast info {out}; the "
            f"same fit again: --params-from {out})")


def params_from(args, task: str, progress):
    """The estimator of ``--params-from MODEL``: the model's class with its ``resolved_params_``
    (every setting its fit used, 'auto' resolved), for the same fit again."""
    from ..estimators import load
    from ..exceptions import InvalidInputError
    given = [f"--{k.replace('_', '-')}" for k, default in HYPER_DEFAULTS.items()
             if getattr(args, k, default) != default]
    if given:
        raise InvalidInputError(f"--params-from takes every hyper-parameter from "
                                f"{args.params_from}; drop {', '.join(given)}")
    loaded = load(args.params_from)
    if loaded._task != task:
        raise InvalidInputError(f"--params-from {args.params_from} is a {type(loaded).__name__} "
                                f"({loaded._task}), but DATA is fitted for {task}: give a model "
                                "of the same task (or --task)")
    params = dict(loaded.resolved_params_, progress=progress, chunk_rows=args.chunk_rows,
                  release_spec=None)
    return type(loaded)(**params)


def _task(args, source) -> str:
    """--task, or with auto the release's task (regression for a regression --loss)."""
    if args.task != "auto":
        return args.task
    if args.loss in REGRESSION_LOSSES:
        return "regression"
    return (source.release_metadata or {}).get("task", "classification")


def _clean_baseline(args) -> bool:
    """Whether DATA is raw clean data mapped as a release would (--ranges, ranges inside
    --features, or --categories / --categories-file)."""
    inline = any("=" in token for token in split_names(args.features or []))
    return bool(args.ranges or inline or args.categories or args.categories_file)


def _default_loss(args) -> str:
    """The classifier's loss when --loss is not given: the logistic loss for the clean baseline
    (scikit-learn's LogisticRegression's model: bench/clean_categorical.py, where the exponential
    loss's exact minimizer is 0.005 below it), the quadratic with --solver moments, else the
    exponential (the private default)."""
    if args.solver == "moments":
        return "quadratic"
    return "logistic" if _clean_baseline(args) else "exponential"


def _clean_note(args) -> str:
    """How the clean baseline's raw data were mapped (the summary line)."""
    if not _clean_baseline(args):
        return ""
    return ", scaled by the declared ranges" + (
        ", categories one-hot" if args.categories or args.categories_file else "")


def _clean_categories(args, data):
    """--categories / --categories-file / --unknown-category of raw clean data: (categories,
    catch-all) as ``fit(categories=..., unknown_category=...)`` takes them, or (None, None)."""
    from ..exceptions import InvalidInputError
    from ..privacy.feature_map import parse_categories, read_categories_file

    if not (args.categories or args.categories_file):
        if args.unknown_category is not None:
            raise InvalidInputError("--unknown-category goes with --categories (raw clean data "
                                    "with categorical columns); a release carries its own")
        return None, None
    categories: dict = dict(read_categories_file(args.categories_file)) if args.categories_file \
        else {}
    for name, values in parse_categories(args.categories).items():
        if name in categories:
            raise InvalidInputError(f"categories of {name!r} given by --categories and by "
                                    "--categories-file; give them once")
        categories[name] = values
    from ..io.sources import open_source
    from .release import _catch_all

    # integer-code columns stay strict with a catch-all name (as `iwpfast release` reads it)
    return categories, _catch_all(args.unknown_category, categories, open_source(data).full_schema)


def _fit_here(args, model, data, features, ranges, weights, noise) -> None:
    """The fit on this machine (``run``'s, without --scheduler/--workers)."""
    from ..exceptions import InvalidInputError

    categories, unknown = _clean_categories(args, data)
    if args.bound is not None and ranges is None and categories is None:
        raise InvalidInputError("--bound goes with --ranges (raw clean data); a release "
                                "carries its own bound")
    with resume_named(args), class_weight_compile(weights):
        model.fit(data, sample_weight=args.sample_weight, noise_var=args.noise_var,
                  features=features, label=args.label,
                  override=args.override, checkpoint=args.checkpoint,
                  checkpoint_every=args.checkpoint_every, resume=args.resume,
                  overwrite=args.overwrite, ranges=ranges, feature_bound=args.bound,
                  validation=args.validation, n_rows_total=args.n_rows_total,
                  keep_checkpoint=args.keep_checkpoint, categories=categories,
                  unknown_category=unknown, **noise)


def resume_named(args):
    """A fit with --checkpoint stopped by a signal: the checkpoint holds the pass so far, and a
    line names the command that continues it."""
    import contextlib

    @contextlib.contextmanager
    def named():
        import os
        import sys

        try:
            yield
        except (KeyboardInterrupt, SystemExit) as exc:
            # (the pass's guard re-raises SIGTERM and SIGHUP as SystemExit(128 + n))
            code = getattr(exc, "code", None)
            stopped = isinstance(exc, KeyboardInterrupt) or (isinstance(code, int) and code > 128)
            if stopped and args.checkpoint and os.path.exists(args.checkpoint):
                from . import rerun_command

                print(f"iwpfast: the checkpoint {args.checkpoint!r} holds the pass so far; to "
                      f"continue: {rerun_command('--resume')}", file=sys.stderr)
            raise

    return named()


def validation_kind(mode: str) -> str:
    """How the hold-out that chose the hyper-parameters is described: 'clean' rows for the clean
    baseline, 'private' (released, noisy) rows otherwise."""
    return "clean" if mode == "clean" else "private"


def print_moment_tuning(t: dict, table: bool = False) -> None:
    """The moment learner's choice (``iwpfast.moment_learner``): its candidates, the guard, the
    rule (and with ``table`` every candidate's validation risk)."""
    import math
    n = len(t["alpha"]) - 1
    guarded = sum(bool(r) for r in t["reliable"][:n])
    guard = t.get("guard") or {}
    print(f"tuning: {n} alphas and the constant model, cross-validated over {int(t['folds'])} "
          f"folds of {int(t['n_train']):,} rows in {int(t['passes'])} read (each alpha solved on "
          f"the other folds' moments, its quadratic risk measured on its own); {guarded} pass the "
          f"positive-definite guard (floor {float(guard.get('floor', math.nan)):.3g}, smallest "
          f"eigenvalue {float(guard.get('min_eigenvalue', math.nan)):.3g}); rule: {t['rule']}")
    if table:
        print("      alpha   validation risk +- se   guarded")
        for i in range(n + 1):
            name = "constant" if i == n else f"{float(t['alpha'][i]):9.4g}"
            mark = "  <- chosen" if t["chosen"][i] else ""
            print(f"  {name:>9}   {float(t['risk'][i]):10.5f} +- {float(t['stderr'][i]):8.5f}   "
                  f"{str(bool(t['reliable'][i])):>7}{mark}")
    for note in t.get("notes") or []:
        print(f"tuning note: {note}")


def print_tuning(t: dict, table: bool = False, validation: str = "private") -> None:
    """The tuning summary (and with ``table`` every head's validation risk).  The counts are
    those of the table (one row per head: k classes x grid points), so they agree with the notes
    printed below it."""
    import math
    k = int(t["heads"])
    n_heads = len(t["alpha"])
    reliable = sum(bool(r) for r in t["reliable"])
    pruned_at = t.get("pruned_at_row") or [None] * n_heads      # models saved before pruning
    pruned = sum(r is not None for r in pruned_at)
    per = f" x {len(set(t['class']))} classes" if t.get("class") else ""
    # a randomized-response release's grid also has the cap on its blocks (estimators/_rr.py)
    caps = t.get("block_cap")
    per = (" x block cap" if caps else "") + per
    dropped = (f", {n_heads - reliable - pruned} discarded (unreliable or diverged)"
               if reliable + pruned < n_heads else "")
    if pruned:
        dropped += f", {pruned} pruned early"
    updates = f"{k} head updates per training row"
    if pruned:
        # a head stopped after r of the n training rows made r of its n updates
        n_train = max(int(t["n_train"]), 1)
        made = sum(n_train if r is None else int(r) for r in pruned_at) / n_train
        updates = f"{made:.3g} head updates per training row ({k} without pruning)"
    folds = int(t.get("folds") or 0)
    how = (f"cross-validated over {folds} folds of {int(t['n_train']):,} rows (each fold's "
           "heads trained on the other rows and scored on its own: every row scored once; the "
           "chosen head then trained on all of them)" if folds else
           f"in one scan of {int(t['n_train']):,} rows, scored on {int(t['n_validation']):,} "
           f"{validation} validation rows")
    print(f"tuning: {n_heads} heads (alpha x learning rate{per}) {how}; {reliable} "
          f"reliable{dropped}; rule: {t['rule']}; cost: {float(t['passes']):.3g} reads of the "
          f"data (diverged heads included), {updates}")
    if t.get("edge"):
        print(f"tuning: the chosen head sits on the grid's edge ({t['edge']}): the best value may "
              "lie beyond it (see the note below)")
    if table:
        # k classes: one row per (class, grid point) head, the class first
        classes = t.get("class")
        print(("  class " if classes else "") + "    alpha   learning_rate"
              + ("  block cap" if caps else "")
              + "   private risk +- se    reliable  sigma^2|theta|^2  capped")
        for i in range(len(t["alpha"])):
            risk, se = float(t["risk"][i]), float(t["stderr"][i])
            mark = "  <- chosen" if t["chosen"][i] else ""
            risk_text = (f"{risk:9.5f} +- {se:7.5f}" if math.isfinite(risk)
                         else f"{'pruned at row ' + format(pruned_at[i], ','):>20}"
                         if pruned_at[i] is not None else f"{'nan':>20}")
            print((f"  {str(classes[i]):>5} " if classes else "") +
                  f"  {float(t['alpha'][i]):7.4g}   {float(t['learning_rate'][i]):13.4g}   "
                  + (f"{float(caps[i]):9.3g}   " if caps else "")
                  + f"{risk_text}   {str(bool(t['reliable'][i])):>8}  "
                  f"{float(t['noise_energy'][i]):16.3g}  {str(bool(t['capped'][i])):>6}{mark}")
    for note in t.get("notes") or []:
        print(f"tuning note: {note}")
