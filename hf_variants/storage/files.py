"""The one checked writer: every file the package writes, appends to, copies or moves, and every folder it
removes, goes through this module.

* **A write names its owner.** Every function here that writes, copies, renames, appends to, creates or removes
  takes ``within``: the folder the command owns (its ``--output_dir``, an export folder, a local hub), with no
  default and no opt-out. The target's folder is resolved and refused unless it lies inside ``within`` resolved,
  so ``..``, an absolute path and a symlink that leads out are all the same case. ``tests/test_layout.py`` walks
  every call of such a function in the package and fails on one without its owner.
* **Names from user input are one path component.** :func:`path_component` checks a name built from a model
  spec, a pair, a task, a condition or a study before it becomes part of a path: no separator, no ``..``.
* **Containment of what is read back.** :func:`inside` resolves a path the package is about to read as a
  record or remove — a manifest entry, a checkpoint name, a repository id under a local hub — and refuses it
  unless it lies inside the *resolved* folder the package owns. :func:`target_inside` is the same check for a
  file about to be written: its folder is resolved, its own name is not (a link there is replaced, never
  followed).
* **No write through a link.** New files are created with ``O_CREAT | O_EXCL | O_NOFOLLOW`` and renamed
  over their target (``os.replace`` replaces a symbolic link itself, never the file it points to); the
  lock is opened with ``O_NOFOLLOW``, so a planted link is refused; a copy reads its source with
  ``O_NOFOLLOW`` too.
* **Atomic bookkeeping.** :func:`write_bytes_atomic` writes a temporary file beside the target, flushes it to
  disk and renames it over the target, as checkpoints are written: a kill at any instant leaves the old
  file or the new one, never an empty or half-written one.

``tests/test_layout.py`` keeps the rule: no other module of the package opens a file for writing,
copies, renames or writes text itself.
"""

from __future__ import annotations

import contextlib
import errno
import glob
import json
import os
import shutil
import signal
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

#: Temporary files of :func:`write_bytes_atomic`: ``.<name>.<pid>.tmp`` beside the target.
TEMPORARY_SUFFIX = ".tmp"
FAILPOINT_ENV = "HF_VARIANTS_FAILPOINT"
#: The folder a library's own writer (``save_pretrained``) writes into before :func:`staged_into` moves each file
#: into place; its presence marks a folder as the package's (a run or an export killed while staging).
STAGING_FOLDER = ".hf_variants_staging.partial"
#: ``os.open`` flags of a new file that is never a link's target (``O_NOFOLLOW`` does not exist on Windows).
NO_FOLLOW = getattr(os, "O_NOFOLLOW", 0)
CREATE_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | NO_FOLLOW | getattr(os, "O_CLOEXEC", 0)


class CheckpointError(ValueError):
    """A checkpoint or run folder cannot be used as it is; the message names the file and why."""


def failpoint(name: str, where: int | str) -> None:
    """SIGKILL this process when ``$HF_VARIANTS_FAILPOINT`` is ``name@where`` (a step, or a file's name), or
    send it another signal with ``name@where:SIGTERM`` (tests only: how they interrupt runs at exact places)."""
    point, _, signal_name = os.environ.get(FAILPOINT_ENV, "").rpartition(":")
    if not signal_name.startswith("SIG"):  # no signal named (a point's name may hold colons)
        point, signal_name = os.environ.get(FAILPOINT_ENV, ""), "SIGKILL"
    if point == f"{name}@{where}":
        os.kill(os.getpid(), getattr(signal, signal_name))


# ------------------------------------------------------------------------------------------------
# Containment
# ------------------------------------------------------------------------------------------------
def at_or_below(path: Path, root: Path) -> bool:
    """Whether the resolved ``path`` is the resolved folder ``root`` or lies below it."""
    return path == root or root in path.parents


def inside(folder: Path | str, entry: Path | str, what: str) -> Path:
    """``folder / entry`` resolved (symlinks followed), or a :class:`CheckpointError` naming ``what`` and
    ``entry`` when it is not strictly inside ``folder`` resolved (``..``, an absolute path, a symlink
    that leads out, or the folder itself)."""
    if "\0" in str(entry):
        raise CheckpointError(f"{what} {str(entry)!r} holds a NUL byte: it names no file.")
    root = Path(folder).resolve()
    resolved = (root / entry).resolve()
    if root not in resolved.parents:
        raise CheckpointError(
            f"{what} {str(entry)!r} lies outside {root} (it resolves to {resolved}): hf-variants writes and removes "
            "files only inside the folder it owns, so it refuses this entry."
        )
    return resolved


def target_inside(folder: Path | str, entry: Path | str, what: str) -> Path:
    """Where the package writes or removes ``folder / entry``: its parent resolved and checked to lie inside
    ``folder`` resolved (or to be it), its own name kept as it is — so that a symbolic link there is
    replaced or removed itself, never the file it points to. ``entry`` may not end in ``..`` or ``.``."""
    if "\0" in str(entry):
        raise CheckpointError(f"{what} {str(entry)!r} holds a NUL byte: it names no file.")
    root = Path(folder).resolve()
    path = root / entry
    if path.name in ("", ".", "..") or Path(entry).is_absolute():
        raise CheckpointError(f"{what} {str(entry)!r} names no file inside {root}.")
    parent = path.parent.resolve()
    if not at_or_below(parent, root):
        raise CheckpointError(
            f"{what} {str(entry)!r} lies outside {root} (its folder resolves to {parent}): hf-variants writes and "
            "removes files only inside the folder it owns, so it refuses this entry."
        )
    return parent / path.name


#: The longest name of one file or folder most file systems take (bytes, UTF-8).
LONGEST_COMPONENT = 255


def path_component(name: str, what: str) -> str:
    """``name`` when it can be one file or folder name inside a folder the package owns — not empty, not ``.`` or
    ``..``, no ``/`` or ``\\``, no NUL, at most :data:`LONGEST_COMPONENT` bytes; else a ``ValueError`` naming
    ``what`` (e.g. ``"pair 'bert_control:a/..'"``). Checked where a name from user input becomes a path."""
    problem = ("is empty" if not name else "is '.' or '..'" if name in (".", "..") else
               "holds a path separator" if "/" in name or "\\" in name else "holds a NUL byte" if "\0" in name else
               f"is longer than {LONGEST_COMPONENT} bytes" if len(name.encode("utf-8")) > LONGEST_COMPONENT else None)
    if problem is not None:
        raise ValueError(f"{what} {problem}: it cannot name a folder inside the one hf-variants writes to.")
    return name


def owned_folder(folder: Path | str, what: str, *, within: Path | str) -> Path:
    """``folder`` resolved, when it is ``within`` resolved or lies below it; else a :class:`CheckpointError` naming
    ``what``. The one containment check of a folder the package writes into, creates or removes."""
    root, resolved = Path(within).resolve(), Path(folder).resolve()
    if not at_or_below(resolved, root):
        raise CheckpointError(f"{what} {folder} lies outside {root} (it resolves to {resolved}): hf-variants writes, "
                              "creates and removes only inside the folder it owns.")  # fmt: skip
    return resolved


def owned_path(path: Path, what: str, *, within: Path | str) -> Path:
    """``path`` as :func:`target_inside` gives it, its folder checked to lie inside ``within`` (or to be it)."""
    path = Path(path)
    parent = owned_folder(path.parent, f"the folder of {what}", within=within)
    return target_inside(parent, path.name, what)


def is_link(path: Path) -> bool:
    """Whether ``path`` itself is a symbolic link (or a Windows junction)."""
    return path.is_symlink() or (hasattr(path, "is_junction") and path.is_junction())


def is_regular_file(path: Path) -> bool:
    """Whether ``path`` itself (not what a link points to) is a regular file."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def require_regular_file(path: Path, what: str) -> None:
    """Refuse an input that is not a regular file (a link to one is fine), naming ``what`` and what it is:
    missing, a directory, or a FIFO, device or socket (which would block or never end)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise FileNotFoundError(f"{what} {path} does not exist.") from None
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(f"{what} {path} is a directory, not a file.")
    if not stat.S_ISREG(mode):
        raise CheckpointError(f"{what} {path} is not a regular file (a FIFO, device or socket): hf-variants reads "
                              "regular files only.")  # fmt: skip


# ------------------------------------------------------------------------------------------------
# Writing
# ------------------------------------------------------------------------------------------------
def create_new(path: Path) -> int:
    """A descriptor of ``path`` created anew for writing (``O_EXCL | O_NOFOLLOW``): an existing file or link
    there is an error, so nothing is ever written through a link."""
    try:
        return os.open(path, CREATE_NEW, 0o644)
    except FileExistsError:
        raise CheckpointError(f"{path} exists already: hf-variants creates its temporary files anew.") from None


def _temporary(path: Path) -> Path:
    temporary = path.with_name(f".{path.name}.{os.getpid()}{TEMPORARY_SUFFIX}")
    if temporary.is_symlink() or temporary.exists():  # left by a killed write of this PID's namesake
        if temporary.is_dir() and not temporary.is_symlink():
            raise CheckpointError(f"{temporary} is a folder: hf-variants cannot write {path.name} beside it.")
        temporary.unlink()
    return temporary


def make_folder(path: Path, *, within: Path | str) -> Path:
    """Create the folder ``path`` (and its missing parents) after checking that it resolves inside ``within``, or
    is it (the owned folder itself); returns it. An existing folder is kept."""
    owned_folder(path, "the folder", within=within).mkdir(parents=True, exist_ok=True)
    return Path(path)


def write_bytes_atomic(path: Path, data: bytes, *, within: Path | str) -> None:
    """Replace ``path`` by ``data`` in one rename, after flushing the new content to disk. ``path``'s folder is
    checked to lie inside ``within`` (the folder the command owns); a link at ``path`` is replaced itself,
    never written through."""
    path = owned_path(Path(path), "the file", within=within)
    if path.is_dir() and not path.is_symlink():
        raise IsADirectoryError(f"{path} is a directory: hf-variants cannot write a file in its place.")
    temporary = _temporary(path)
    try:
        descriptor = create_new(temporary)
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        failpoint("atomic_write", path.name)
        os.replace(temporary, path)
    finally:
        if temporary.exists() and not temporary.is_symlink():
            temporary.unlink()
    fsync_directory(path.parent)
    for stale in path.parent.glob(f".{glob.escape(path.name)}.*{TEMPORARY_SUFFIX}"):  # left by a killed write
        if stale.name[len(path.name) + 2 : -len(TEMPORARY_SUFFIX)].isdigit():
            stale.unlink(missing_ok=True)


def write_text_atomic(path: Path, text: str, *, within: Path | str) -> None:
    """:func:`write_bytes_atomic` of ``text`` in UTF-8."""
    write_bytes_atomic(path, text.encode("utf-8"), within=within)


def write_json(path: Path, value: Any, *, within: Path | str) -> None:
    """``value`` as JSON (NaN and infinity refused: they are not JSON), written atomically."""
    write_text_atomic(path, json.dumps(value, indent=1, allow_nan=False) + "\n", within=within)


def copy_file(source: Path, target: Path, *, within: Path | str) -> None:
    """Copy the regular file ``source`` (a link there is refused, never read through) to ``target`` inside
    ``within``, by a temporary file renamed over the target: a link at ``target`` is replaced itself."""
    target = owned_path(Path(target), "the copy", within=within)
    try:
        reading = os.open(source, os.O_RDONLY | NO_FOLLOW)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise CheckpointError(f"{source} is a symbolic link: hf-variants copies regular files only.") from None
        raise
    with os.fdopen(reading, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise CheckpointError(f"{source} is not a regular file: hf-variants copies regular files only.")
        temporary = _temporary(target)
        try:
            with os.fdopen(create_new(temporary), "wb") as out:
                shutil.copyfileobj(handle, out, 1 << 20)
                out.flush()
                os.fsync(out.fileno())
            shutil.copystat(source, temporary, follow_symlinks=False)
            os.replace(temporary, target)
        finally:
            if temporary.exists() and not temporary.is_symlink():
                temporary.unlink()


def move_into(source: Path, target: Path, *, within: Path | str) -> None:
    """Rename ``source`` (a file the package wrote in a folder of its own) to ``target`` inside ``within``;
    a link at ``target`` is replaced itself, a folder there is an error."""
    target = owned_path(Path(target), "the file", within=within)
    if target.is_dir() and not target.is_symlink():
        raise IsADirectoryError(f"{target} is a directory: hf-variants cannot move a file in its place.")
    make_folder(target.parent, within=within)
    os.replace(source, target)


@contextlib.contextmanager
def open_for_append(path: Path, *, within: Path | str) -> Iterator[IO[str]]:
    """``path`` opened to append text (created if missing), never through a link."""
    path = owned_path(Path(path), "the log", within=within)
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | NO_FOLLOW, 0o644)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise CheckpointError(f"{path} is a symbolic link: hf-variants never writes through a link.") from None
        raise
    with os.fdopen(descriptor, "a", encoding="utf-8") as handle:
        yield handle


def open_lock_file(path: Path) -> IO[str]:
    """The lock file ``path`` opened for reading and writing (created if missing), never through a link: a
    link there would make the lock write its PID into the file it points to."""
    try:
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT | NO_FOLLOW | getattr(os, "O_CLOEXEC", 0), 0o644)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise CheckpointError(
                f"{path} is a symbolic link: hf-variants never writes through a link (the lock would change the file "
                "it points to). Remove the link, or give another --output_dir."
            ) from None
        raise
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        os.close(descriptor)
        raise CheckpointError(f"{path} is not a regular file: it cannot be this folder's lock. Remove it.")
    return os.fdopen(descriptor, "r+")


# ------------------------------------------------------------------------------------------------
# Removing
# ------------------------------------------------------------------------------------------------
def remove_path(path: Path, *, within: Path | str) -> None:
    """Remove ``path`` inside ``within``: a link is removed itself (never what it points to), a folder with
    everything below it (``shutil.rmtree`` does not follow links inside it), a missing one is skipped."""
    path = owned_path(Path(path), "the entry", within=within)
    if is_link(path):
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()


def remove_empty_folder(folder: Path, *, within: Path | str) -> bool:
    """Remove ``folder`` — ``within`` itself or a folder inside it — when it is empty (a folder the command created
    and wrote nothing into); returns whether it was removed. A folder with anything in it is kept."""
    resolved = owned_folder(folder, "the folder", within=within)
    try:
        resolved.rmdir()
    except OSError:
        return False
    return True


@contextlib.contextmanager
def staged_into(folder: Path) -> Iterator[Path]:
    """A fresh folder inside ``folder`` for a library's own writer (``save_pretrained``, which opens its files
    with ``open(..., "w")`` and would write through a link): on leaving, each regular file written there is
    moved into ``folder`` (a link at its name is replaced, never written through) and the staging folder is
    removed. An error inside leaves ``folder`` as it was (the staging folder is removed by the next use)."""
    staging = Path(folder) / STAGING_FOLDER
    remove_path(staging, within=folder)  # left by a killed write
    make_folder(staging, within=folder)
    yield staging
    for path in regular_files(staging):
        move_into(path, Path(folder) / path.relative_to(staging), within=folder)
    remove_path(staging, within=folder)


def regular_files(folder: Path) -> list[Path]:
    """The regular files below ``folder``, sorted, without following a link to a file or a folder."""
    found = []
    for root, folders, files in os.walk(folder, followlinks=False):
        folders.sort()
        found += [Path(root, name) for name in files if is_regular_file(Path(root, name))]
    return sorted(found)


def rename_folder(source: Path, target: Path, *, within: Path | str) -> None:
    """Rename a folder the package wrote to ``target`` beside it, inside ``within`` (the one rename of a
    checkpoint)."""
    owned_path(Path(target), "the folder", within=within)
    if Path(source).parent.resolve() != Path(target).parent.resolve():
        raise CheckpointError(f"{target} is not beside {source}: a checkpoint is renamed in its own folder.")
    os.replace(source, target)


def is_temporary(name: str) -> bool:
    """Whether ``name`` is a temporary file of :func:`write_bytes_atomic` (left only by a kill)."""
    return name.startswith(".") and name.endswith(TEMPORARY_SUFFIX)


def fsync_directory(folder: Path) -> None:
    """Flush a folder's entries (a rename in it) to disk; a no-op where folders cannot be opened (Windows)."""
    try:
        descriptor = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
