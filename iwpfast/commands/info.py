"""``iwpfast info FILE``: what a file is and what it promises.

Dispatch on the file type: ``INFO_HANDLERS`` is a list of functions ``handler(path, args)`` that
return the text to print, or ``None`` when the file is not theirs; the first that answers wins.
Add a handler (e.g. for model files) by appending to the list or calling ``register_handler``.
"""
from __future__ import annotations

import math

from ..losses import LOSS_RECORDS
from . import add_subparser


def _truncated(loss: str) -> bool:
    record = LOSS_RECORDS.get(loss)
    return record is not None and record.truncated


EXAMPLES = """\
  iwpfast info acs_ldp.parquet          # spec, sigma, keep probability, guarantee
  iwpfast info acs_ldp.parquet --json   # the raw metadata
"""


def register(subparsers) -> None:
    p = add_subparser(
        subparsers, "info",
        help="show the privacy spec and guarantee stored in a release (or what a file is)",
        description="Print the parameters stored in an iwpfast file and what they guarantee.",
        examples=EXAMPLES,
    )
    p.add_argument("file", metavar="FILE")
    p.add_argument("--json", action="store_true", help="print the stored metadata as JSON")
    p.set_defaults(handler=run)


def file_magic(path, size: int = 8) -> bytes:
    from ..io.filesystem import resolve

    return resolve(path).read_bytes(size)


def release_info(path, args) -> str | None:
    """Parquet or Arrow IPC file with ``iwpfast.release`` metadata."""
    import json

    magic = file_magic(path)
    if not (magic.startswith(b"PAR1") or magic.startswith(b"ARROW1") or magic[:4] == b"\xff\xff\xff\xff"):
        return None
    from ..io.sources import open_source
    from ..privacy import ReleaseSpec

    src = open_source(path)
    if src.release_metadata is None:
        kind = "Parquet" if magic.startswith(b"PAR1") else "Arrow IPC"
        return (f"{path}: {kind} file with {src.num_rows} rows and columns {src.schema.names}; "
                "not an iwpfast release (no 'iwpfast.release' metadata)")
    # parsed before --json too: a stored field that its parameters contradict is refused
    spec = ReleaseSpec.from_metadata(src.release_metadata)
    if getattr(args, "json", False):
        return json.dumps(src.release_metadata, indent=2, sort_keys=True)
    return f"{path}: iwpfast release (format version {src.release_metadata['format_version']}, " \
           f"written by iwpfast {src.release_metadata.get('library_version')})\n" + spec.describe()


def model_info(path, args) -> str | None:
    """A model file written by ``iwpfast fit`` / ``model.save`` (JSON with "format": "iwpfast.model")."""
    import json

    if not file_magic(path, 1).lstrip()[:1] == b"{":
        return None
    from ..io.filesystem import resolve
    from ..model_io import FORMAT, read_model_document

    try:
        head = json.loads(resolve(path).read_bytes().decode("utf-8"))
    except ValueError:
        return None
    if not isinstance(head, dict) or head.get("format") != FORMAT:
        return None
    doc = read_model_document(path)  # checks the version and the checksum
    if getattr(args, "json", False):
        return json.dumps({k: v for k, v in doc.items() if k not in ("state", "states")}, indent=2,
                          sort_keys=True)
    f, prm = doc["fitted"], doc["params"]
    alpha = f.get("alpha", prm["alpha"])
    step = f.get("learning_rate", prm["learning_rate"])
    chosen = (f" (chosen by {'clean' if f.get('mode') == 'clean' else 'private'} validation)"
              if f.get("tuning") else "")
    lines = [
        f"{path}: iwpfast model {doc['estimator']} (format version {doc['format_version']}, "
        f"written by iwpfast {doc['library_version']})",
        f"loss {prm['loss']}, correction {prm['correction']} ({f['mode']} mode), alpha {alpha:.4g}, "
        f"learning rate {step:.4g} ({prm['schedule']}){chosen}, batch {prm['batch_size']}, "
        f"average {prm['average']}",
        f"trained on {f['n_rows_seen']:,} rows, {f['n_iter']} updates; radius {f['radius']}"
        + (f"; {prm['loss']} series truncated at K = {f['truncation']}"
           + (" (chosen by truncation='auto')" if prm.get("truncation") == "auto" else "")
           if _truncated(prm["loss"]) and f["mode"] == "iwp" else ""),
    ]
    if f.get("solver") == "moments":        # no step, batch, average, updates or radius
        lines[1:] = [f"loss {prm['loss']}, correction {prm['correction']} ({f['mode']} mode), "
                     f"solver moments{chosen}", f"trained on {f['n_rows_seen']:,} rows, one read"]
    if f.get("class_weight") is not None:
        shares = f.get("class_shares")
        lines.append(f"class_weight {prm.get('class_weight')!r}: weights {f['class_weight']} per class"
                     + ("" if shares is None else
                        f" (shares estimated from the released labels: {shares})"))
    if isinstance(f["intercept"], list):      # k > 2 classes: one-vs-rest heads
        lines.append(f"{len(f['intercept'])} classes, one-vs-rest heads (k-ary label weights "
                     f"{f.get('label_weights')}):")
        for cls, coef, b in zip(f["classes"], f["coef"], f["intercept"], strict=True):
            terms = ", ".join(f"{n}={float(c):+.5g}" for n, c in zip(f["features"], coef, strict=True))
            lines.append(f"  {cls!r}: {terms}; intercept {float(b):+.5g}")
        lines.append(f"label:     {f['label']}")
    else:
        lines += [
            "coef:      " + ", ".join(f"{n}={c:+.5g}" for n, c in zip(f["features"], f["coef"], strict=True))
            + f"; intercept {f['intercept']:+.5g}",
            f"label:     {f['label']}" + (f" (classes {f['classes']})" if f.get("classes") else ""),
        ]
    fmap = f.get("feature_map")
    if fmap is not None and not isinstance(f["intercept"], list):
        # the coefficients by input column: a categorical one's categories side by side
        coef = dict(zip(f["features"], f["coef"], strict=True))
        lines.append("by feature:")
        for c in fmap["inputs"]:
            if c["kind"] == "numeric":
                r = c.get("range")
                lines.append(f"  {c['name']}: {coef[c['name']]:+.5g}"
                             + (f" (range {r[0]:g}:{r[1]:g})" if r else ""))
            else:
                name = c["name"]
                cats = ", ".join(f"{v}={coef[f'{name}={v}']:+.5g}" for v in c["categories"])
                kind = ("randomized response" if c.get("mechanism") == "rr"
                        else "one-hot" + (", public" if c.get("public") else ""))
                lines.append(f"  {c['name']} ({kind}): {cats}")
    if f.get("categorical_mechanism") == "rr":
        lines.append("learned from randomized-response codes by the exponential loss's exact "
                     "inverse: schedule gamma0 / (1 + alpha gamma0 t), variance cap "
                     f"{float(f['variance_cap']):g}, block cap {float(f['block_cap']):g} "
                     "(docs/math.md \"Categorical columns by randomized response\")")
    if fmap is not None:
        lines.append("raw units: raw tables are mapped by the release's feature map (numeric "
                     "columns by their ranges, categorical ones one-hot)")
    public = list((doc.get("release") or {}).get("public_features") or [])
    if f.get("feature_ranges"):
        lines.append("raw units: " + ", ".join(f"{n}={lo:g}:{hi:g}" for n, lo, hi in f["feature_ranges"])
                     + (f", clipped at L2 bound {float(f['feature_bound']):g}"
                        + ("" if not public else f" over the private features (public, clipped to "
                           f"their ranges only: {', '.join(public)})")
                        if math.isfinite(float(f["feature_bound"])) else ", no L2 clip (every "
                        "feature public)"))
    t = f.get("tuning")
    if f.get("solver") == "moments":
        alpha = f.get("alpha")
        lines.append("solver:    moments (the exact quadratic-loss solution of the release's "
                     "debiased second moments, one pass); "
                     + ("the constant model" if (f.get("telemetry") or {}).get("constant_model")
                        else f"alpha {float(alpha):.4g}"))
    if t and f.get("solver") == "moments" and "heads" not in t:
        lines.append(f"tuning:    {len(t['alpha']) - 1} alphas and the constant model over "
                     f"{int(t['folds'])} folds of {int(t['n_train']):,} rows, rule {t['rule']}")
    elif t:
        k = int(t["heads"])
        lines.append(f"tuning:    {k} heads, {int(t['n_train']):,} training / {int(t['n_validation']):,} "
                     f"validation rows, rule {t['rule']}, {sum(map(bool, t['reliable']))} reliable")
    if t and "learners" in t:
        from .fit import learners_text
        lines.append("learners:  " + learners_text(t["learners"]))
    if f.get("categorical_mechanism") != "rr":
        lines.append("settings:  " + settings_text(f, prm, t))
    if doc.get("release") is not None:
        from ..privacy import ReleaseSpec
        lines.append("trained on a release with spec:")
        lines += ["  " + line for line in ReleaseSpec.from_metadata(doc["release"]).describe().splitlines()]
    else:
        lines.append("trained on arrays: noise variances " + str(f["noise_var"])
                     + f", label keep probability {f['label_keep_prob']}")
    return "\n".join(lines)


def settings_text(f: dict, prm: dict, t: dict | None) -> str:
    """Every setting a fit used ('auto' resolved, as the model file records them) and its
    validation, in one line; ``iwpfast fit DATA --params-from MODEL`` trains with them again."""
    def num(v):
        try:
            v = float(v)      # the file writes non-finite numbers as strings
        except (TypeError, ValueError):
            return str(v)
        return "none" if not math.isfinite(v) else f"{v:.6g}"
    if f.get("alpha_per_class") is not None:
        parts = ["alpha " + "/".join(map(num, f["alpha_per_class"])) + " and learning rate "
                 + "/".join(map(num, f["learning_rate_per_class"])) + " per class"]
    elif f.get("solver") == "moments":
        return f"solver moments, alpha {num(f.get('alpha', 'nan'))}" + _split_text(prm, t)
    else:
        parts = [f"alpha {num(f.get('alpha', prm['alpha']))}",
                 f"learning rate {num(f.get('learning_rate', prm['learning_rate']))}"
                 f" ({f.get('schedule', prm['schedule'])})"]
    start = int(f.get("average_start", -1))
    parts += [f"variance cap {num(f.get('variance_cap', 'inf'))}",
              "averaging " + ("none" if start < 0 else f"from update {start}"),
              f"radius {num(f['radius'])}", f"batch {prm['batch_size']}"]
    if "truncation" in prm:
        parts.append(f"truncation K = {f['truncation']}")
    return ", ".join(parts) + ", solver sgd" + _split_text(prm, t)


def _split_text(prm: dict, t: dict | None) -> str:
    if not t:
        split = "none (numbers given)"
    elif t.get("folds"):
        split = (f"{int(t['folds'])} folds of {int(t['n_train']):,} rows, the choice trained "
                 "again on all of them")
    else:
        split = (f"{int(t['n_train']):,} training / {int(t['n_validation']):,} validation rows "
                 f"(validation_fraction {prm.get('validation_fraction')}; the chosen head as "
                 "trained on the training rows)")
    return f"; validation: {split} (fit --params-from MODEL trains with these)"


INFO_HANDLERS = [release_info, model_info]


def register_handler(handler, first: bool = False) -> None:
    """Add ``handler(path, args) -> str | None`` (first=True: try it before the others)."""
    if first:
        INFO_HANDLERS.insert(0, handler)
    else:
        INFO_HANDLERS.append(handler)


def run(args) -> int:
    from ..exceptions import InvalidInputError, MissingInputError
    from ..io.filesystem import resolve

    path = args.file
    kind = resolve(path).kind()
    if kind == "dir":
        return _folder_info(path, args)
    if kind != "file":
        raise MissingInputError(f"{path!r} does not exist or is not a file")
    for handler in INFO_HANDLERS:
        text = handler(path, args)
        if text is not None:
            print(text)
            return 0
    raise InvalidInputError(
        f"{path!r} is not a file iwpfast knows (an iwpfast release in Parquet/Arrow IPC)"
    )


def _folder_info(path, args) -> int:
    """A folder / prefix: a multi-part release (or a folder of files read as one source)."""
    import json

    from ..io.sources import FileSource, open_source
    from ..privacy import ReleaseSpec

    src = open_source(path)
    assert isinstance(src, FileSource)      # a path opens as its files
    if src.release_metadata is None:
        print(f"{path}: {len(src.paths)} {src.format} files with {src.num_rows} rows and columns "
              f"{src.schema.names}; not an iwpfast release (no 'iwpfast.release' metadata)")
        return 0
    spec = ReleaseSpec.from_metadata(src.release_metadata)   # checked before --json too
    if getattr(args, "json", False):
        print(json.dumps(src.release_metadata, indent=2, sort_keys=True))
        return 0
    print(f"{path}: iwpfast release in {len(src.paths)} part(s) (format version "
          f"{src.release_metadata['format_version']}, written by iwpfast "
          f"{src.release_metadata.get('library_version')})\n" + spec.describe())
    return 0
