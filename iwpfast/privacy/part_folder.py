"""The destination folder of a multi-part release: who may write into it, and what another
run left there.

A multi-part release writes its parts, owner-only, into one folder (or prefix) and publishes
them with the manifest.  Before a run writes anything it takes the folder's lock (local disk:
``io.filesystem.FolderLock``; a folder whose lock another process holds is refused) and looks for
what another run left: staging files and, without a manifest, finished parts, each a noisy copy
of rows under another key.  Those are refused (naming the resume, or the deletion, never a
command that leaves two noisy copies readable), or removed with ``overwrite``; with the lock
taken, no run is alive there, so a refusal still removes the dead run's staging files.
"""
from __future__ import annotations

import os
import warnings

from ..exceptions import InvalidInputError
from ..io.parts import PLAN_NAME


def _take_folder_lock(folder):
    """The local destination folder's lock for this run (None where it cannot be known); a
    folder whose lock another process holds is refused: a release is running into it now."""
    from ..io.filesystem import BUSY, FolderLock

    lock = FolderLock.take(folder.path)
    if lock == BUSY:
        raise InvalidInputError(
            f"a release is running into {folder.display!r} now (another process holds the "
            f"folder's lock): wait for it to end, or stop it, or choose another folder; nothing "
            f"was written")
    return lock


#: what a refusal says about a folder holding an unfinished run's parts: never a command that
#: leaves two noisy copies of rows readable (an overwrite deletes the old parts before it writes)
DELETE_PARTS_HINT = ("delete the unfinished run's parts: overwrite=True (CLI: --overwrite) "
                     "deletes them before any new part is written (a copy someone already read "
                     "cannot be retracted)")
#: ... and about a folder holding a published release
REPLACE_RELEASE_HINT = ("pass overwrite=True (CLI: --overwrite) to replace it with a new release "
                        "of the data (a second release: for whoever read the first one too, the "
                        "two releases' epsilons add up)")


def _leftovers_of_other_runs(folder, published: bool, overwrite: bool,
                             no_run_alive: bool = False) -> None:
    """Temporary files (and, with no manifest, part files) of another run in ``folder``: a run
    that was killed, or one still writing.  Each holds noisy copies of rows under another key, so
    they are never left next to a new release: refused, or (``overwrite``) removed, saying so.
    ``no_run_alive``: this run holds the folder's lock, so no run is writing there; a refusal
    then still removes the dead run's staging files (partial noisy rows, never to be published;
    its finished parts stay, for a resume)."""
    from ..io.parts import is_release_temporary, remove_temporaries, temporary_uploads

    if no_run_alive and not overwrite:
        staged = sorted(e.name for e in folder.listdir() if is_release_temporary(e.name))
        if staged:
            remove_temporaries(folder)
            warnings.warn(f"removed {len(staged)} staging file(s) of a release run that was "
                          f"stopped before it published from {folder.display!r} "
                          f"({', '.join(map(repr, staged[:3]))}{' ...' if len(staged) > 3 else ''})",
                          UserWarning, stacklevel=4)

    found = [e for e in folder.listdir() if is_release_temporary(e.name)
             or (not published and e.name.startswith("part-"))]
    uploads = temporary_uploads(folder)
    if not found and not uploads:
        return
    names = [e.name for e in found] + [u + " (incomplete upload)" for u in uploads]
    shown = ", ".join(repr(n) for n in names[:3]) + (" ..." if len(names) > 3 else "")
    if not overwrite:
        # a resume reuses the finished parts: no second noisy copy of their rows is ever drawn
        resume = ("resume it with resume=True (CLI: --resume), which keeps its finished parts "
                  "and releases only the others, or " if PLAN_NAME in
                  {e.name for e in folder.listdir()} else "")
        raise InvalidInputError(
            f"{folder.display!r} holds {len(names)} file(s) of another release run that did not "
            f"publish ({shown}): " + (
                "a release run was stopped there, " if no_run_alive else
                "a release may still be writing there, or one was stopped, ")
            + "and its files hold noisy copies of rows. "
            + ("" if no_run_alive else "If no release is running into this folder, ")
            + f"{resume}{DELETE_PARTS_HINT}; nothing was written")
    for entry in found:
        entry.delete()
    _abort_uploads(folder, uploads)
    warnings.warn(f"removed {len(names)} file(s) of an earlier release run that did not publish "
                  f"from {folder.display!r} ({shown})", UserWarning, stacklevel=4)


def _abort_uploads(folder, keys) -> None:
    if keys:
        from ..io.filesystem import abort_uploads

        abort_uploads(folder, keys)


def prepare_release_folder(destination, *, overwrite: bool = False, filesystem=None) -> None:
    """Make ``destination`` ready for the parts of a new release written part by part
    (:func:`release_batches`, e.g. the Spark recipe): a folder holding a published release, or
    files of another run, is refused; with ``overwrite`` the old release is replaced whole (its
    manifest first, then every part and temporary file of it), so that the new parts never mix
    with old ones.  Creates a missing local folder."""
    from ..io.filesystem import is_uri, resolve
    from ..io.parts import MANIFEST_NAME, read_manifest

    text = os.fspath(destination)
    folder = resolve(text, None if is_uri(text) else filesystem)
    if parts_folder_kind(folder) == "missing":
        return
    published = read_manifest(folder) is not None
    if published and not overwrite:
        raise InvalidInputError(
            f"{folder.display!r} already holds a release ({MANIFEST_NAME}); choose another "
            f"folder, or {REPLACE_RELEASE_HINT}")
    if published:
        folder.child(MANIFEST_NAME).delete()      # unpublished first: never a mixed release
        for entry in folder.listdir():
            if entry.name.startswith("part-"):
                entry.delete()
    _leftovers_of_other_runs(folder, False, overwrite)


def parts_folder_kind(folder) -> str:
    """``folder.kind()`` of the destination of a release written part by part, refused when it
    is a file; a missing local folder is made (an object-store prefix needs none)."""
    kind = folder.kind()
    if kind == "file":
        raise InvalidInputError(f"destination {folder.display!r} is a file; a multi-part release "
                                f"needs a folder / prefix")
    if kind == "missing" and folder.local:
        os.makedirs(folder.path, exist_ok=True)
    return kind
