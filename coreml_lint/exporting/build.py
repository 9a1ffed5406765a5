"""Build a declared program and export it with ``torch.export`` (imports torch and the
project's model code: only called when the cache cannot answer).

Programs are exported under ``torch.no_grad()``, as an export for inference is: exported
with grad, parameters and buffers keep ``requires_grad``, and the program would get CML204
for how ``--export`` exported it rather than for the model (a ``.pt2`` the project exports
itself is linted as it was exported).

Every failure, from importing the declaring file to ``torch.export.export`` itself, comes
back as data (the stage, torch's message, the project line it came through), never as an
exception: it becomes one CML002 finding.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import io
import logging
import sys
import traceback
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from coreml_lint.core.errors import InputError
from coreml_lint.core.programs import ProgramDecl
from coreml_lint.core.version import HEAVY_INSTALL

MESSAGE_CHARS = 400
NEEDS_TORCH = f"--export needs torch to export the declared programs: {HEAVY_INSTALL}"


@dataclass
class Failure:
    program: str
    stage: str  # "building" or "exporting"
    error: str
    path: str | None = None
    line: int | None = None
    source_line: str | None = None
    frames: list[str] = field(default_factory=list)  # project files the error came through


@dataclass
class Exported:
    name: str
    archive: bytes
    grad: dict[str, bool]


def imported_project_files(root: Path) -> set[str]:
    """The project's own Python files loaded in this process: building a program may read
    constants or helpers from files no node's stack trace names, and a change there must
    export it again too."""
    found = set()
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if isinstance(path, str) and is_project_file(path, root):
            found.add(str(Path(path).resolve()))
    return found


def imported_distributions() -> list[str]:
    """The installed distributions this process has imported modules of (torch,
    transformers, ...): a program built from a library's model code changes with the
    library's version, and no project file says so."""
    from importlib import metadata

    owners = metadata.packages_distributions()
    tops = {name.split(".")[0] for name in list(sys.modules)}
    return sorted({dist for top in tops for dist in owners.get(top, ())})


def require_torch() -> Any:
    try:
        import torch
    except ImportError:
        raise InputError(NEEDS_TORCH) from None
    return torch


def export_declared(decl: ProgramDecl) -> tuple[list[Exported], Failure | None]:
    """The declaration's programs, exported and saved; the first failure stops it."""
    torch = require_torch()
    try:
        built = _build(decl, torch)
    except Exception as exc:
        return [], _failure(decl.label, "building", exc, decl.root)
    done = []
    for name, (module, args, dynamic) in built.items():
        try:
            if isinstance(module, torch.export.ExportedProgram):
                program = module  # the factory exported it itself
            else:
                with _quiet(), torch.no_grad():
                    program = torch.export.export(module, args, dynamic_shapes=dynamic)
            buffer = io.BytesIO()
            torch.export.save(program, buffer)
        except Exception as exc:
            return done, _failure(name, "torch.export", exc, decl.root)
        done.append(Exported(name, buffer.getvalue(), _leaf_grad(program, torch)))
    return done, None


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """torch.export logs warnings and graph dumps on stderr on its way to an error; the
    error is the finding, the rest is noise in a hook's output (it prints the graph to
    sys.stderr itself)."""
    logger = logging.getLogger("torch")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            yield
    finally:
        logger.setLevel(level)


def _build(decl: ProgramDecl, torch: Any) -> dict[str, tuple[Any, tuple[Any, ...], Any]]:
    """{name: (module, example args, dynamic shapes or None)} for one declaration."""
    target = load_attribute(decl.path, decl.attr, decl.root)
    if decl.kind == "module":
        is_module = isinstance(target, torch.nn.Module)
        module = target() if callable(target) and not is_module else target
        if not isinstance(module, torch.nn.Module):
            raise TypeError(f"{decl.spelling} did not give a torch.nn.Module")
        args = tuple(
            torch.zeros(spec.shape, dtype=getattr(torch, spec.dtype)) for spec in decl.inputs
        )
        return {decl.label: (module.eval(), args, _dims(decl, torch))}
    made = target()
    if not isinstance(made, dict) or not made:
        raise TypeError(f"{decl.spelling} must return {{name: (module, example_inputs)}}")
    built = {}
    for name, value in made.items():
        if isinstance(value, torch.export.ExportedProgram):
            built[str(name)] = (value, (), None)
            continue
        if not isinstance(value, tuple) or len(value) not in (2, 3):
            raise TypeError(
                f"{decl.spelling}: {name!r} must be (module, example_inputs[, dynamic_shapes]) "
                "or an ExportedProgram"
            )
        args = value[1] if isinstance(value[1], tuple) else (value[1],)
        built[str(name)] = (value[0], args, value[2] if len(value) == 3 else None)
    return built


def _dims(decl: ProgramDecl, torch: Any) -> Any:
    if not decl.dynamic_shapes:
        return None
    return tuple(
        {d: torch.export.Dim(f"in{i}_dim{d}", min=lo, max=hi) for d, lo, hi in dims} or None
        for i, dims in enumerate(decl.dynamic_shapes)
    )


def load_attribute(path: Path, attr: str, root: Path) -> Any:
    """``attr`` of the Python file ``path``, imported as the project would import it (the
    project root on ``sys.path``, a dotted name when the file is inside it)."""
    for folder in (str(root), str(path.parent)):
        if folder not in sys.path:
            sys.path.insert(0, folder)
    try:
        parts = path.with_suffix("").relative_to(root).parts
    except ValueError:
        parts = ()
    if parts and all(p.isidentifier() for p in parts):
        module = importlib.import_module(".".join(parts))
    else:
        spec = importlib.util.spec_from_file_location(f"_coreml_lint_{path.stem}", path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot import {path}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    value: Any = module
    for name in attr.split("."):
        value = getattr(value, name)
    return value


def _leaf_grad(program: Any, torch: Any) -> dict[str, bool]:
    """Which placeholders are leaves that require grad (an archive does not keep it;
    engine/exported.py explains why CML204 needs it)."""
    return {
        node.name: bool(value.requires_grad and value.is_leaf)
        for node in program.graph.nodes
        if node.op == "placeholder" and isinstance(value := node.meta.get("val"), torch.Tensor)
    }


def _failure(program: str, stage: str, exc: BaseException, root: Path) -> Failure:
    """torch's message and the innermost frame in the project's own files."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = " ".join(lines[:2]) or "(no message)"
    if len(text) > MESSAGE_CHARS:
        text = text[: MESSAGE_CHARS - 3] + "..."
    failure = Failure(program, stage, f"{type(exc).__name__}: {text}")
    for frame in traceback.extract_tb(exc.__traceback__):
        if is_project_file(frame.filename, root):
            failure.frames.append(str(Path(frame.filename).resolve()))
            failure.path, failure.line = frame.filename, frame.lineno
            failure.source_line = (frame.line or "").strip() or None
    return failure


def is_project_file(path: str, root: Path) -> bool:
    """A file of the project itself, not of an installed package or a virtualenv."""
    if not Path(path).is_absolute() or not Path(path).is_file():
        return False  # "<string>", or a name relative to a folder we do not know
    try:
        relative = Path(path).resolve().relative_to(root.resolve())
    except (ValueError, OSError):
        return False
    skip = {".venv", "venv", "site-packages", ".tox", "__pycache__"}
    return path.endswith(".py") and not skip.intersection(relative.parts)
