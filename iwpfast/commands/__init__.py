"""Subcommands of the ``iwpfast`` CLI: one module per command, each with ``register(subparsers)``.

Keep module-level imports light (argparse, the standard library): heavy imports go inside the
handler so that ``iwpfast --help`` does not load numba or pyarrow.
"""
import argparse

#: the command line being run, set by ``iwpfast.cli.main`` (``rerun_command`` repeats it)
COMMAND_LINE: list[str] = []


def rerun_command(*extra: str) -> str:
    """The command line being run, as a shell would take it, with ``extra`` options added (those
    already there are not repeated): the exact command a refusal tells the user to run."""
    import shlex

    argv = list(COMMAND_LINE) + [x for x in extra if x not in COMMAND_LINE]
    return "iwpfast " + shlex.join(argv)


def add_subparser(subparsers, name: str, *, help: str, description: str, examples: str):
    """A subparser whose epilog shows ``examples`` verbatim, with the common ``--memory-map``."""
    parser = subparsers.add_parser(
        name,
        help=help,
        description=description,
        epilog="examples:\n" + examples,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        # a prefix must never select another option (`--public` read as `--public-labels`): in a
        # privacy tool that silently changes what is released
        allow_abbrev=False,
    )
    parser.add_argument("--memory-map", action=_MemoryMap, nargs=0, default=False,
                        help="read local Parquet and Arrow IPC files through a memory map: less "
                             "CPU, but resident memory (VmRSS) grows to the files' size; "
                             "default: buffered reads, memory bounded by the chunk (same as "
                             "IWPFAST_MEMORY_MAP=1)")
    return parser


class _MemoryMap(argparse.Action):
    """``--memory-map``: sets ``IWPFAST_MEMORY_MAP=1`` for this process and the Dask workers it
    starts (``iwpfast.settings``, where the readers look)."""

    def __call__(self, parser, namespace, values, option_string=None):
        import os
        os.environ["IWPFAST_MEMORY_MAP"] = "1"
        setattr(namespace, self.dest, True)


def feature_delta(args) -> float:
    """``--delta``, or its mechanism's default (``iwpfast.noise_registry``): 1e-5, and 0 with
    ``--mechanism laplace`` (pure epsilon)."""
    if args.delta is not None:
        return args.delta
    from ..noise_registry import mechanism_record

    return mechanism_record(args.mechanism).default_delta


def split_names(values) -> list[str]:
    """Names given as ``A B`` or ``A,B`` (or both) -> ``[A, B]``."""
    out: list[str] = []
    for v in values or []:
        out.extend(x for x in v.replace(",", " ").split() if x)
    return out


def add_cluster_arguments(parser) -> None:
    """``--scheduler ADDRESS`` / ``--workers N``: run the command on a Dask cluster."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--scheduler", metavar="ADDRESS",
                       help="run on the Dask cluster of this scheduler (e.g. tcp://host:8786; "
                            "needs pip install iwpfast[dask])")
    group.add_argument("--workers", type=int, metavar="N",
                       help="run on a local Dask cluster of N worker processes started for this "
                            "command")
    parser.add_argument("--dashboard", action="store_true",
                        help="with --scheduler/--workers: print the Dask dashboard's address "
                             "(--workers starts one on a free port; off by default)")


def cluster_client(args):
    """A Dask client for ``--scheduler``/``--workers`` (closed, with its local cluster, when the
    context exits), or None when neither was given."""
    import contextlib

    @contextlib.contextmanager
    def managed():
        from ..distributed import close_client, connect, local_client

        dashboard = bool(getattr(args, "dashboard", False))
        client = (connect(args.scheduler) if args.scheduler
                  else local_client(args.workers, dashboard=dashboard))
        if dashboard:
            import sys
            print(f"iwpfast: Dask dashboard: {client.dashboard_link}", file=sys.stderr)
        try:
            yield client
        finally:
            close_client(client)

    if args.scheduler is None and args.workers is None:
        return contextlib.nullcontext(None)
    return managed()


def print_warnings(caught) -> None:
    """The warnings a command caught, on stderr, each text once (a pass with k one-vs-rest heads
    can raise the same sentence k times), as ``iwpfast: warning: ...``."""
    import sys

    seen = set()
    for w in caught:
        if issubclass(w.category, ResourceWarning):
            continue            # the interpreter's or Dask's (an unclosed socket): not iwpfast's
        text = str(w.message)
        if text not in seen:
            seen.add(text)
            print(f"iwpfast: warning: {text}", file=sys.stderr)
