"""Writing files so that a crash or Ctrl-C never leaves one half-written."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from coreml_lint.core.errors import InputError

TEMP_SUFFIX = ".coreml-lint"  # temporary files are ".<name>.<run>.<random>.coreml-lint"


def run_tag() -> str:
    """A tag for this run's temporary files (its process id), so that cleaning up after
    Ctrl-C removes only this run's, not those of another run writing in the same folder."""
    return f"run{os.getpid()}"


def write_atomically(
    path: str | Path, data: str | bytes, *, keep_mode: bool = True, tag: str | None = None
) -> None:
    """Replace (or create) ``path`` in one rename: readers see the old file or the new one.

    A replaced file keeps its permissions; a new one gets the umask's. Text is written as
    UTF-8 without newline translation. The temporary file's name carries ``tag`` (this
    process's :func:`run_tag` by default).
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        mode = path.stat().st_mode & 0o7777 if keep_mode and path.exists() else None
        prefix = f".{path.name}.{tag or run_tag()}."
        fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=TEMP_SUFFIX, dir=path.parent)
    except OSError as exc:  # the user's path, in one line: not an internal error
        blocked = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
        why = f"{blocked} is not a folder" if blocked else (exc.strerror or str(exc))
        raise InputError(f"{path}: cannot write: {why}") from None
    if mode is None:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data.encode("utf-8") if isinstance(data, str) else data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise InputError(f"{path}: cannot write: {exc.strerror or exc}") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def unwritable(path: Path) -> str | None:
    """Why the user's output ``path`` cannot be written, or None: its folder does not exist
    (a typo in an output folder is refused, never created), is a file, or is read-only.
    Asked before a run that may take minutes."""
    parent = Path(os.path.abspath(path)).parent
    folder = parent
    while not folder.exists():
        folder = folder.parent
    if not folder.is_dir():
        return f"{path}: cannot write: {folder} is not a folder"
    if folder != parent:
        return f"{path}: cannot write: no such folder {parent}"
    if not os.access(folder, os.W_OK):
        return f"{path}: cannot write: {folder} is not writable"
    return None


def project_root(start: Path | None = None) -> Path:
    """The git top level of ``start`` (the working directory by default), else ``start``:
    the folder a fix may write in and that output paths are shown relative to."""
    start = (start or Path.cwd()).resolve()
    for folder in [start, *start.parents]:
        if (folder / ".git").exists():
            return folder
    return start


def display_path(path: str, root: Path) -> str:
    """``path`` relative to ``root`` when it lies inside it (forward slashes), else as is."""
    try:
        return Path(path).resolve().relative_to(root).as_posix()
    except (ValueError, OSError):
        return path


def is_within(path: str | Path, roots: list[Path]) -> bool:
    """Whether ``path`` lies inside one of ``roots`` (a root may be a file itself)."""
    resolved = Path(path).resolve()
    return any(resolved == root or root in resolved.parents for root in roots)


def regenerate(argv: list[str] | None, doc: str, default: Path, make: Callable[[], str]) -> int:
    """The command line of a checked-in generated file (an op table read from an installed
    library): write ``make()``'s text to ``--output``, or with ``--check`` exit 1 when the
    file differs from what would be written."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare, do not write")
    parser.add_argument("--output", type=Path, default=default)
    args = parser.parse_args(argv)
    text = make()
    if args.check:
        current = args.output.read_text() if args.output.exists() else ""
        if current != text:
            print(f"{args.output} is stale: regenerate it", file=sys.stderr)
            return 1
        return 0
    write_atomically(args.output, text)
    print(f"wrote {args.output}")
    return 0
