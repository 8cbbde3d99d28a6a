"""Subcommands of the ``iwpfast`` CLI: one module per command, each with ``register(subparsers)``.

Keep module-level imports light (argparse, the standard library): heavy imports go inside the
handler so that ``iwpfast --help`` does not load numba or pyarrow.
"""
import argparse


def add_subparser(subparsers, name: str, *, help: str, description: str, examples: str):
    """A subparser whose epilog shows ``examples`` verbatim."""
    return subparsers.add_parser(
        name,
        help=help,
        description=description,
        epilog="examples:\n" + examples,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def split_names(values) -> list[str]:
    """Names given as ``A B`` or ``A,B`` (or both) -> ``[A, B]``."""
    out = []
    for v in values or []:
        out.extend(x for x in v.replace(",", " ").split() if x)
    return out
