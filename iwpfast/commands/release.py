"""``iwpfast release``: the data holder's one-time local-DP release of a dataset."""
from __future__ import annotations

import argparse
import contextlib

from ..io.formats import output_formats
from ..noise_registry import mechanism_choices, mechanism_help, noise_choices, noise_help
from ..progress import add_progress_arguments, cli_progress
from . import add_cluster_arguments, add_subparser, split_names

EXAMPLES = """\
  # ACSIncome: 4 features with their public ranges, (1, 1e-5) on features + 1 on labels
  iwpfast release acs.parquet acs_ldp.parquet --label y \\
      --features AGEP SCHL WKHP SEX --ranges AGEP=0:99 SCHL=1:24 WKHP=0:99 SEX=1:2 \\
      --epsilon-x 1 --epsilon-y 1 --delta 1e-5 --bound 1

  # the same, ranges written inline, Arrow IPC output, rows with missing values dropped
  iwpfast release acs.parquet acs_ldp.arrow --features AGEP=0:99,SCHL=1:24,WKHP=0:99,SEX=1:2 \\
      --epsilon-x 1 --epsilon-y 1 --on-invalid drop

  # regression target PINCP scaled from its declared range, Gaussian noise on it too
  iwpfast release acs.parquet inc_ldp.parquet --task regression --label PINCP \\
      --target-range 0:200000 --features AGEP=0:99,SCHL=1:24 --epsilon-x 1 --epsilon-y 1

  # two public columns (scaled and clipped, never noised; NOT protected): the L2 bound, its
  # clipping and the noise cover the private AGEP and WKHP only
  iwpfast release acs.parquet acs_ldp.parquet --features AGEP SCHL WKHP SEX --public SCHL SEX \\
      --ranges AGEP=0:99 SCHL=1:24 WKHP=0:99 SEX=1:2 --epsilon-x 1 --epsilon-y 1

  # categorical columns, one-hot: declared categories (never read from the data), public here;
  # values outside them go to the catch-all "Other"
  iwpfast release adult.parquet adult_ldp.parquet --features age=17:90,hours=1:99,workclass \\
      --categories workclass=Private,Self-emp-inc,State-gov --unknown-category Other \\
      --public workclass --epsilon-x 4 --epsilon-y 2 --bound 1

  # label-only: every feature public, no --epsilon-x; the label by randomized response
  iwpfast release acs.parquet labels_ldp.parquet --features AGEP SCHL WKHP SEX --public all \\
      --ranges AGEP=0:99 SCHL=1:24 WKHP=0:99 SEX=1:2 --epsilon-y 1

  # a bucket of files, one part per file, on a Dask cluster (or --workers 8 on this machine)
  iwpfast release s3://bucket/raw/ s3://bucket/release/ --features AGEP=0:99,SCHL=1:24 \\
      --epsilon-x 1 --epsilon-y 1 --scheduler tcp://scheduler:8786

A destination ending in / (or an existing folder) makes a multi-part release: one part per input
file and a manifest written last; it reads back as one release. Paths may be URIs of any pyarrow
filesystem (s3://, gs://, abfs://, hdfs://, file://; query options such as
?endpoint_override=HOST:PORT&scheme=http) or fsspec URLs.

A seed (--seed) makes the noise reproducible: use it for simulations only, never for a real
release (whoever knows the seed can remove the noise). It is never written to the file; the file
records "seeded": true and `iwpfast info` shows it.
"""


OUT_HELP = ("output file: *.parquet, or *.arrow/*.feather/*.ipc; or a folder / prefix ending in / "
            "for a multi-part release (one part per input file); - writes to stdout (an Arrow IPC "
            "stream, or Parquet with --format parquet; the summary then goes to stderr). A "
            "release to stdout that fails exits non-zero: Parquet then has no footer (no "
            "readable file), but an IPC stream cannot be retracted (a reader takes the batches "
            "sent before the failure): discard the output of a failed run, never publish it")


def register(subparsers) -> None:
    p = add_subparser(
        subparsers, "release",
        help="release a dataset under local differential privacy (Parquet/IPC out)",
        description="Scale features from declared public ranges into [-1, 1], clip each feature "
                    "vector to the L2 ball of radius --bound, snap it to a power-of-two grid and add "
                    "exact discrete Gaussian noise from a cryptographic keystream (--noise float: "
                    "floating-point Gaussian noise); randomized response on binary labels. The "
                    "privacy parameters are stored in the file.",
        examples=EXAMPLES,
    )
    p.add_argument("source", metavar="IN",
                   help="Parquet/IPC/CSV file, directory or glob; - reads an Arrow IPC stream from "
                        "stdin")
    p.add_argument("destination", metavar="OUT", help=OUT_HELP)
    p.add_argument("--features", nargs="+", required=True, metavar="NAME[=LO:HI]",
                   help="feature columns (space or comma separated), optionally with their range")
    p.add_argument("--ranges", nargs="+", default=[], metavar="NAME=LO:HI",
                   help="declared public range of each feature, e.g. AGEP=0:99")
    p.add_argument("--ranges-from-data", action="store_true",
                   help="compute missing ranges from the data (LEAKS PRIVACY: the min/max are not protected)")
    p.add_argument("--categories", action="append", default=[], metavar="NAME=A,B,C",
                   help="a categorical feature and its declared public categories (repeatable), "
                        "e.g. workclass=Private,Self-emp-inc; released one-hot (columns "
                        "NAME=A, NAME=B, ...: 0/1, no range); integer codes work too (SCHL=1,2,3)")
    p.add_argument("--categories-file", default=None, metavar="F.json",
                   help='categories as JSON {"NAME": ["A", "B"], ...} (values with spaces or commas)')
    p.add_argument("--unknown-category", default=None, metavar="NAME",
                   help="catch-all category for values outside the declared ones (added when not "
                        "declared); without it such a value stops the release naming column, value "
                        "and row")
    p.add_argument("--categorical-mechanism", choices=("gaussian", "rr"), default="gaussian",
                   help="private categorical columns: 'gaussian' (default: one-hot blocks noised "
                        "with the numeric part at sensitivity sqrt(4B^2+2m)) or 'rr' (one uint8 "
                        "code per column by k-ary randomized response at --epsilon-cat each; the "
                        "numeric part keeps sensitivity 2B; total epsilon_x + m epsilon_cat + "
                        "epsilon_y; learned with --loss exponential). docs/release.md")
    p.add_argument("--epsilon-cat", type=float, default=None, metavar="E",
                   help="with --categorical-mechanism rr: each private categorical column's budget")
    p.add_argument("--categories-from-data", nargs="+", default=None, metavar="NAME",
                   help="read these columns' categories from the data (LEAKS PRIVACY: which values "
                        "occur is not protected)")
    label = p.add_mutually_exclusive_group()
    label.add_argument("--label", default="y", help="label (or regression target) column (default: y)")
    label.add_argument("--no-label", action="store_true", help="release the features only")
    p.add_argument("--public", nargs="+", default=None, metavar="NAME",
                   help="public features (among --features; 'all' for every one): scaled by their "
                        "declared ranges and clipped to them, released WITHOUT noise and NOT "
                        "protected; the L2 bound, the clipping and the noise cover the others. "
                        "Every feature public and no --epsilon-x: a label-only release")
    p.add_argument("--epsilon-x", type=float, default=None,
                   help="privacy budget of the (private) feature vector; required unless every "
                        "feature is --public")
    ey = p.add_mutually_exclusive_group()
    ey.add_argument("--epsilon-y", type=float, help="privacy budget of the label / target")
    ey.add_argument("--public-labels", action="store_true",
                    help="release the labels WITHOUT noise (they are then not protected)")
    p.add_argument("--classes", nargs="+", metavar="CLASS",
                   help="the label's classes (its values, numbers or strings, in order; one per argument: "
                        "quote a name with spaces, \"no diploma\"): k >= 3 classes go "
                        "through k-ary randomized response and are written as their index 0..k-1; "
                        "values outside them are an error (or dropped with --on-invalid drop)")
    p.add_argument("--mechanism", choices=mechanism_choices(), default="gaussian",
                   help="feature mechanism: " + mechanism_help())
    p.add_argument("--delta", type=float, default=None,
                   help="delta of the feature mechanism (default 1e-5; 0 with --mechanism laplace)")
    p.add_argument("--bound", type=float, default=1.0,
                   help="norm bound of the scaled feature vector: L2 (L1 with --mechanism laplace); "
                        "default 1")
    p.add_argument("--calibration", choices=["analytic", "classic"], default="analytic",
                   help="Gaussian noise calibration (default analytic; classic = the paper's formula)")
    p.add_argument("--noise", choices=noise_choices(), default="discrete",
                   help="noise law: " + noise_help())
    p.add_argument("--task", choices=["classification", "regression"], default="classification")
    p.add_argument("--target-range", metavar="LO:HI",
                   help="declared range of the regression target (write --target-range=LO:HI when "
                        "LO < 0)")
    p.add_argument("--target-bound", type=float, default=1.0,
                   help="clip the scaled regression target to [-B, B] (default 1)")
    p.add_argument("--delta-y", type=float,
                   help="delta of the target mechanism (default: --delta, or 1e-5)")
    p.add_argument("--feature-dtype", choices=["float32", "float64"], default="float32")
    p.add_argument("--on-invalid", choices=["error", "drop"], default="error",
                   help="rows with null/NaN/inf: stop with an error (default) or drop and count them")
    p.add_argument("--format", choices=output_formats(),
                   help="output format (default: from the extension)")
    p.add_argument("--compression", default="auto",
                   help="auto (default: noisy features uncompressed, labels snappy), snappy, zstd, lz4, none")
    p.add_argument("--overwrite", action="store_true",
                   help="replace OUT if it exists (a folder: an unfinished run's parts are "
                        "deleted before any new part is written; to continue that run instead, "
                        "--resume)")
    p.add_argument("--resume", action="store_true",
                   help="multi-part release (OUT/): continue an unfinished run of the same "
                        "plan (killed, or failed with --resume): its finished parts are kept and "
                        "only the missing ones released; refused if an input changed since (size, "
                        "modification time, Parquet footer, sampled bytes, a kept part's rows); "
                        "if this run fails too, its finished "
                        "parts are kept for the next --resume")
    p.add_argument("--part-retries", type=int, default=None, metavar="N",
                   help="multi-part release: tries of a part after a transient (I/O) error "
                        "(default 2)")
    p.add_argument("--shuffle", action="store_true",
                   help="write the rows in a random order (a source sorted or clustered by the "
                        "label leaks it through position; in memory when it fits, else a two-pass "
                        "bucket shuffle through temporary files)")
    p.add_argument("--seed", type=int, help="seed of the noise: for simulations only, never for real data")
    p.add_argument("--record-batch-rows", type=int, default=1 << 18,
                   help="rows per Arrow record batch read and written (memory bound; default 262144)")
    # the option's old name, kept working (hidden from --help)
    p.add_argument("--batch-rows", type=int, dest="record_batch_rows", help=argparse.SUPPRESS)
    p.add_argument("--threads", type=int, help="noise threads (default: min(2, cores))")
    add_progress_arguments(p)
    add_cluster_arguments(p)
    p.add_argument("--part-rows", type=int, default=None, metavar="N",
                   help="with a folder destination: split Parquet/IPC inputs of more than N rows "
                        "into parts of whole row groups (default: one part per input file)")
    p.set_defaults(handler=run)


def parse_classes(tokens):
    """--classes tokens: one class per argument (``"no diploma"`` is one class: its space is part
    of its name), or several in one argument separated by commas (``c0,c1,c2``).  Integers and
    decimal numbers become numbers, anything else stays a string; one non-number makes them all
    names."""
    if tokens is None:
        return None
    names = [piece.strip() for token in tokens for piece in token.split(",") if piece.strip()]
    values = []
    for token in names:
        for convert in (int, float):
            try:
                values.append(convert(token))
                break
            except ValueError:
                continue
        else:
            values.append(token)
    if any(isinstance(v, str) for v in values):       # one non-number: all are names
        values = names
    return values


def _target_range(text):
    from ..exceptions import InvalidInputError
    from ..privacy.scaling import check_range

    if text is None:
        return None
    parts = text.split(":")
    if len(parts) != 2:
        raise InvalidInputError(f"--target-range {text!r}: write LO:HI, e.g. 0:200000")
    return check_range("--target-range", parts)


def _categories(args) -> dict:
    """The declared categories of the command line: --categories-file, then --categories (a
    column in both is an error), then --categories-from-data for the columns left (a read of the
    source, with its PrivacyLeakWarning)."""
    import warnings

    from ..exceptions import InvalidInputError
    from ..privacy.feature_map import (
        categories_from_source,
        parse_categories,
        read_categories_file,
    )
    categories: dict = {}
    if args.categories_file:
        categories.update(read_categories_file(args.categories_file))
    for name, values in parse_categories(args.categories).items():
        if name in categories:
            raise InvalidInputError(f"categories of {name!r} given by --categories and by "
                                    "--categories-file; give them once")
        categories[name] = values
    if args.categories_from_data:
        if args.source == "-":
            # reading the values is a pass of its own: stdin would be used up before the release
            raise InvalidInputError("--categories-from-data reads the source twice and stdin "
                                    "(-) can be read once: declare the categories "
                                    "(--categories NAME=A,B or --categories-file F.json)")
        from_data = split_names(args.categories_from_data)
        both = [c for c in from_data if c in categories]
        if both:
            # a scan whose values are then dropped would still warn of a leak that never happened
            raise InvalidInputError(
                f"categories of {', '.join(map(repr, both))} given by --categories-from-data and "
                "by --categories/--categories-file; give them once (declared: drop it from "
                "--categories-from-data)")
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.showwarning = _show_warning
            categories.update(categories_from_source(args.source, from_data))
    return categories


def _catch_all(value, categories: dict, source) -> dict | None:
    """--unknown-category as ``{column: catch-all}``: integer codes stay strict (docs/release.md
    "Categorical columns"), so a catch-all that is not an integer goes to the columns that hold
    strings only.  The source's schema (``source``: a path, or stdin's schema) says which; where
    it cannot be read, a column whose declared categories are all integers holds codes.  An
    integer catch-all goes to every categorical column."""
    if value is None:
        return None
    import pyarrow as pa

    schema = source if isinstance(source, pa.Schema) else _schema_of(source)
    code = _as_code(value)
    out = {}
    for name, cats in categories.items():
        cats = list(cats)
        field = None if schema is None or name not in schema.names else schema.field(name)
        if field is not None:
            t = field.type.value_type if pa.types.is_dictionary(field.type) else field.type
            holds_codes = _is_code_type(t)
        else:
            holds_codes = all(_as_code(v) is not None for v in cats)
        if code is not None:
            # declared as numbers (--categories-file): the catch-all as a number too
            numbers = bool(cats) and all(isinstance(v, int) and not isinstance(v, bool)
                                         for v in cats)
            out[name] = code if numbers else value
        elif not holds_codes:
            out[name] = value
    return out or None


def _is_code_type(t) -> bool:
    import pyarrow as pa

    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)


def _as_code(value) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    try:
        return int(str(value))
    except ValueError:
        return None


def _schema_of(source):
    """The schema of a source path, or None when it cannot be read here (the release says why)."""
    import pyarrow as pa

    from ..exceptions import IWPError
    from ..io.sources import open_source

    try:
        return open_source(source).full_schema
    except (IWPError, OSError, pa.ArrowException):
        return None


def run(args) -> int:
    import warnings

    from ..exceptions import InvalidInputError
    from ..io.filesystem import is_uri
    from ..io.outputs import refuse_file_in_the_way
    from ..privacy import ReleaseSpec, parse_ranges
    from ..privacy.options import release_options
    from ..privacy.release import run_release

    if STDIO in (args.source, args.destination) and (args.scheduler or args.workers):
        raise InvalidInputError("- (stdin/stdout) is a stream of this process: a release on a "
                                "cluster reads and writes files; drop --scheduler/--workers")
    features, inline = [], []
    for token in split_names(args.features):
        if "=" in token:
            inline.append(token)
            features.append(token.split("=", 1)[0])
        else:
            features.append(token)
    ranges = {**parse_ranges(inline), **parse_ranges(args.ranges)}
    categories = _categories(args)
    # stdin's schema is read here, before the spec: --unknown-category looks at the column types
    stdin = stdin_stream() if args.source == STDIO else None
    label = None if args.no_label else args.label
    if label is not None and args.epsilon_y is None and not args.public_labels:
        raise InvalidInputError(
            f"the label {label!r} needs a privacy budget: give --epsilon-y EPS, or --public-labels "
            "to release it without noise, or --no-label to leave it out"
        )
    import math
    if args.epsilon_x is not None and math.isinf(args.epsilon_x):
        raise InvalidInputError(
            "--epsilon-x inf means no noise, which is not a private release. For the clean "
            "baseline fit the raw file directly, scaled and clipped as a release would be: "
            "iwpfast fit RAW --features ... --ranges NAME=LO:HI ... --label y --bound B --out clean.json")
    public = split_names(args.public) if args.public else []
    if public == ["all"]:
        public = list(features)
    from ..privacy.spec_rules import release_deltas
    spec = ReleaseSpec(
        epsilon_x=args.epsilon_x,
        # label-only (every feature public, no --epsilon-x): no feature delta nor bound; the
        # defaults of --delta and --delta-y (privacy/spec_rules.py)
        **release_deltas(epsilon_x=args.epsilon_x, features=features, public_features=public,
                         task=args.task, delta=args.delta, bound=args.bound,
                         delta_y=args.delta_y, mechanism=args.mechanism),
        public_features=tuple(public), mechanism=args.mechanism,
        epsilon_y=None if label is None else args.epsilon_y,
        features=tuple(features), ranges=ranges, label=label, task=args.task,
        calibration=args.calibration, feature_dtype=args.feature_dtype,
        ranges_from_data=args.ranges_from_data, target_range=_target_range(args.target_range),
        target_bound=args.target_bound,
        noise=args.noise,
        classes=parse_classes(args.classes),
        categories=categories,
        unknown_category=_catch_all(args.unknown_category, categories,
                                    stdin.schema if stdin is not None else args.source),
        categorical_mechanism=args.categorical_mechanism,
        epsilon_categorical=args.epsilon_cat,
        categories_from_data=tuple(split_names(args.categories_from_data or [])),
    )
    with warnings.catch_warnings():
        # Show each warning once, as one plain line (not Python's file:line form).
        warnings.simplefilter("always")
        # the interpreter's and Dask's own (an unclosed socket or file): not iwpfast's to print
        warnings.simplefilter("ignore", ResourceWarning)
        warnings.showwarning = _show_warning
        from . import cluster_client

        with cluster_client(args) as client:
            parts_runner = None
            destination = args.destination
            source = args.source
            if client is not None:
                from ..distributed import DaskPartsRunner, client_path

                parts_runner = DaskPartsRunner(client)
                destination = _as_folder(destination)
                # the workers' working directory is not this one: absolute paths, checked here
                source = client_path(source)
                destination = client_path(destination, what="destination", must_exist=False)
            elif args.part_rows is not None:
                destination = _as_folder(destination, "--part-rows")
            elif args.resume:
                destination = _as_folder(destination, "--resume")
            if destination != STDIO and not is_uri(destination):
                refuse_file_in_the_way(destination, what="destination")
            threads = args.threads
            if client is not None and threads is None:
                threads = 1                 # per Dask task: the workers are the parallelism
            options = release_options(
                label=label, seed=args.seed, overwrite=args.overwrite, on_invalid=args.on_invalid,
                format=args.format, compression=None if args.compression == "none" else args.compression,
                record_batch_rows=args.record_batch_rows, threads=threads,
                progress=cli_progress(args),
                shuffle=args.shuffle, max_part_rows=args.part_rows, resume=args.resume,
                part_retries=args.part_retries)
            if source == STDIO:
                source = stdin
            if destination == STDIO:
                destination = stdout_sink()
            with stdout_failures(destination, args.format), summary_printed_once(), \
                    resume_named(args, destination):
                result = run_release(source, destination, spec, options, parts_runner=parts_runner)
    import sys
    report = sys.stderr if args.destination == STDIO else sys.stdout
    print(result.summary(), file=report)
    print(result.spec.guarantee().statement, file=report)
    return 0


#: the path that names stdin (IN) or stdout (OUT)
STDIO = "-"


@contextlib.contextmanager
def summary_printed_once():
    """The library logs a release's summary ("released N rows to ..."); the command prints it
    (with the guarantee) itself: the logged copy is left out, so that it is shown once."""
    import logging

    from ..progress import logger

    class Printed(logging.Filter):
        def filter(self, record) -> bool:
            return not str(record.msg).startswith("released ")

    printed = Printed()
    logger.addFilter(printed)
    try:
        yield
    finally:
        logger.removeFilter(printed)


@contextlib.contextmanager
def resume_named(args, destination):
    """A multi-part release refused because an unfinished run of it is in the folder (killed,
    or stopped by a signal with --resume): the refusal ends with the exact command that resumes
    it (this one with --resume)."""
    from ..exceptions import InvalidInputError

    try:
        yield
    except InvalidInputError as exc:
        if args.resume or args.overwrite or not isinstance(destination, str) \
                or not _holds_unfinished_plan(destination):
            raise
        from . import rerun_command

        raise type(exc)(f"{exc}. The command that resumes it: "
                        f"{rerun_command('--resume')}") from None


def _holds_unfinished_plan(destination: str) -> bool:
    from ..io.filesystem import resolve
    from ..io.parts import MANIFEST_NAME, PLAN_NAME

    try:
        folder = resolve(destination)
        names = {e.name for e in folder.listdir()} if folder.kind() == "dir" else set()
    except (OSError, ValueError):
        return False
    return PLAN_NAME in names and MANIFEST_NAME not in names


def stdin_stream():
    """stdin as an Arrow IPC stream (a RecordBatchReader, read once)."""
    import sys

    import pyarrow as pa

    from ..exceptions import InvalidInputError
    try:
        return pa.ipc.open_stream(sys.stdin.buffer)
    except (pa.ArrowInvalid, OSError) as exc:
        raise InvalidInputError(
            f"stdin (-) is not an Arrow IPC stream ({' '.join(str(exc).split())}); pipe one in, "
            "e.g. from pyarrow.ipc.new_stream, polars' write_ipc_stream or duckdb") from None


def stdout_sink():
    """stdout's binary stream, for a release written to it (counting the bytes written)."""
    import sys

    return StdoutSink(sys.stdout.buffer)


class StdoutSink:
    """stdout's binary stream, counting what was written: a failed release says how much of it
    went out (the reader must discard it)."""

    def __init__(self, raw):
        self.raw = raw
        self.name = getattr(raw, "name", "<stdout>")
        self.written = 0

    def write(self, data) -> int:
        written = self.raw.write(data)
        self.written += memoryview(data).nbytes if written is None else written
        return written

    def flush(self) -> None:
        self.raw.flush()


@contextlib.contextmanager
def stdout_failures(destination, format: str | None):
    """A release to stdout that fails once bytes went out: one error that says they are a noisy
    copy to discard (a rerun that is published next to them gives two noisy copies of the same
    rows, whose average has less noise).  A broken pipe (the reader closed stdout) is such a
    failure too, never a quiet end."""
    import errno
    import sys

    from ..exceptions import InvalidInputError, IWPError

    try:
        yield
    except (IWPError, OSError) as exc:
        if not isinstance(destination, StdoutSink) or not destination.written:
            raise
        if isinstance(exc, OSError) and exc.errno == errno.EPIPE:
            cause = "stdout was closed by its reader (broken pipe) before the release finished"
        else:
            cause = str(exc)
        raise InvalidInputError(f"{cause}; {_discard_note(destination, format)}") from None
    except KeyboardInterrupt:
        if isinstance(destination, StdoutSink) and destination.written:
            print(f"iwpfast: {_discard_note(destination, format)}", file=sys.stderr)
        raise


def _discard_note(sink: StdoutSink, format: str | None) -> str:
    if format == "parquet":
        what = ("have no Parquet footer (no readable file) but hold noisy rows of this data")
    else:
        what = ("are an Arrow IPC stream that cannot be retracted: a reader takes each complete "
                "batch in them, noisy rows of this data")
    return (f"the {sink.written:,} bytes already written to stdout {what}: discard them; never "
            "publish them, alone or next to a rerun's output (two noisy copies of the same rows "
            "average the noise away)")


def _as_folder(destination: str, why: str = "--scheduler/--workers") -> str:
    """A multi-part release needs a folder / prefix as destination."""
    from ..exceptions import InvalidInputError
    from ..io.filesystem import resolve

    loc = resolve(destination)
    if loc.trailing_slash or loc.kind() == "dir":
        return destination
    raise InvalidInputError(
        f"{why} write(s) a multi-part release: give a folder / prefix as OUT, ending in / "
        f"(e.g. {destination.split('?', 1)[0].rstrip('/')}/)")


def _show_warning(message, category, filename, lineno, file=None, line=None):
    import sys

    print(f"iwpfast: warning ({category.__name__}): {message}", file=sys.stderr)
