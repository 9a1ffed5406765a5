"""Export the declared programs (or take them from the cache) and lint them.

A program's findings are the ``.pt2`` path's findings: the same engine, codes, noqa (on the
model source lines the stack traces point to) and configuration. What the run was given
decides which declarations it looks at: with no paths, every one; with paths (the files a
commit changes), only those whose last export went through one of them, and those never
exported yet (their sources are not known until they are), and those whose building failed
(an import error's fix may be in a file no source list names).
"""

from __future__ import annotations

import hashlib
import io
import re
from dataclasses import dataclass, field
from pathlib import Path

from coreml_lint.core.config import LintConfig
from coreml_lint.core.errors import InputError
from coreml_lint.core.findings import Finding, Location
from coreml_lint.core.noqa import file_is_exempt, is_suppressed, line_at
from coreml_lint.core.programs import ProgramDecl
from coreml_lint.engine.program import ProgramReport, lint_graph
from coreml_lint.exporting.build import (
    Failure,
    export_declared,
    imported_distributions,
    imported_project_files,
    is_project_file,
)
from coreml_lint.exporting.cache import CachedProgram, Entry, ExportCache, content_key
from coreml_lint.program.graph import Graph
from coreml_lint.program.pt2 import read_pt2_stream
from coreml_lint.rules.cml002_export_failed import export_failed

_FRAME_PATH = re.compile(r'File "(?P<path>[^"]+)", line (?P<line>\d+)')


@dataclass
class ExportRun:
    """What ``--export`` did: per program its report, and how the cache answered."""

    reports: list[tuple[str, ProgramReport]] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    hits: list[str] = field(default_factory=list)  # declarations answered by the cache
    exported: list[str] = field(default_factory=list)  # declarations exported now
    skipped: list[str] = field(default_factory=list)  # not among the changed files' programs
    archives: dict[str, Path] = field(default_factory=dict)  # label: its .pt2 in the cache
    traced: set[tuple[Path, int]] = field(default_factory=set)  # model lines a node came from


def run_exports(config: LintConfig, changed: list[Path] | None = None) -> ExportRun:
    """Lint every declared program ``changed`` concerns (all when None)."""
    run = ExportRun()
    touched = {p.resolve() for p in changed} if changed is not None else None
    caches: dict[Path, ExportCache] = {}
    for decl in config.programs:
        if not decl.path.is_file():
            raise InputError(f"{decl.spelling}: no such file (declared in [tool.coreml-lint])")
        cache = caches.setdefault(decl.root, ExportCache(decl.root))
        entry = _settled(cache.entry(decl))
        if touched is not None and entry is not None and not touched & _paths(entry):
            run.skipped.append(decl.label)
            continue
        key = content_key(decl, entry.sources, entry.distributions) if entry else None
        blobs = _cached_blobs(cache, entry) if entry is not None and key == entry.key else None
        if blobs is not None and entry is not None:
            run.hits.append(decl.label)
        else:
            entry, blobs = _export(decl, cache)
            run.exported.append(decl.label)
        _lint(decl, entry, blobs, config, run)
        for program in entry.programs:
            run.archives[_label(decl, program)] = cache.folder / program.file
    return run


def _settled(entry: Entry | None) -> Entry | None:
    """The entry, unless building the program failed: the fix for an import that failed can
    be in a file no source list names (a module not found, a syntax error in the module
    being imported) or in the environment (a package installed), so such a declaration is
    built again on every run until it builds."""
    if entry is not None and entry.failure and entry.failure.get("stage") == "building":
        return None
    return entry


def _paths(entry: Entry) -> set[Path]:
    return {Path(s) for s in entry.sources}


def _cached_blobs(cache: ExportCache, entry: Entry) -> dict[str, bytes] | None:
    blobs = {}
    for program in entry.programs:
        data = cache.read(program)
        if data is None:
            return None
        blobs[program.name] = data
    return blobs


def _export(decl: ProgramDecl, cache: ExportCache) -> tuple[Entry, dict[str, bytes]]:
    """Export the declaration now and record it, keyed by the sources it went through."""
    exported, failure = export_declared(decl)
    sources = {str(decl.path), *imported_project_files(decl.root)}
    programs, blobs = [], {}
    for item in exported:
        graph = _graph(item.archive, item.name)
        sources.update(_stack_sources(graph, decl.root))
        digest = hashlib.sha256(item.archive).hexdigest()[:16]
        programs.append(CachedProgram(item.name, f"{digest}.pt2", item.grad))
        blobs[item.name] = item.archive
    if failure is not None:
        sources.update(failure.frames)
    listed, dists = sorted(sources), imported_distributions()
    key = content_key(decl, listed, dists) or ""
    entry = Entry(key, listed, programs, vars(failure) if failure else None, dists)
    cache.store(decl, entry, blobs)
    return entry, blobs


def _graph(archive: bytes, label: str) -> Graph:
    (graph, *_) = read_pt2_stream(io.BytesIO(archive), label)
    return graph


def _stack_sources(graph: Graph, root: Path) -> set[str]:
    """The project files the program's nodes were made in."""
    found = set()
    for node in graph.nodes:
        for match in _FRAME_PATH.finditer(node.stack_trace or ""):
            path = match.group("path")
            if is_project_file(path, root):
                found.add(str(Path(path).resolve()))
    return found


def _lint(
    decl: ProgramDecl,
    entry: Entry,
    blobs: dict[str, bytes],
    config: LintConfig,
    run: ExportRun,
) -> None:
    if decl.ios is not None:
        config = config.with_partitioner(minimum_deployment_target=decl.ios)
    for program in entry.programs:
        label = _label(decl, program)
        for graph in read_pt2_stream(io.BytesIO(blobs[program.name]), label):
            for name, requires_grad in program.grad.items():
                info = graph.tensors.get(name)
                if info is not None:
                    info.requires_grad = requires_grad
            run.traced.update(_traced_lines(graph))
            report = lint_graph(graph, config)
            report.findings = [f for f in report.findings if _selected(f, config, decl.root)]
            run.reports.append((label, report))
            run.findings.extend(report.findings)
    if entry.failure is not None:
        finding = _failure_finding(decl, Failure(**entry.failure))
        if _selected(finding, config, decl.root) and not _suppressed(finding):
            run.findings.append(finding)


def _traced_lines(graph: Graph) -> set[tuple[Path, int]]:
    """Every (file, line) a node's stack trace names: the model lines the program ran."""
    return {
        (Path(match.group("path")).resolve(), int(match.group("line")))
        for node in graph.nodes
        for match in _FRAME_PATH.finditer(node.stack_trace or "")
    }


def _label(decl: ProgramDecl, program: CachedProgram) -> str:
    return program.name if decl.kind == "module" else f"{decl.spelling}[{program.name}]"


def _selected(finding: Finding, config: LintConfig, root: Path) -> bool:
    """``per-file-ignores`` by the model file a finding points to, as the project spells
    it (relative to the pyproject.toml), the way the same file's source findings are."""
    loc = finding.location
    if loc is None:
        return True
    try:
        path = Path(loc.path).resolve().relative_to(root.resolve()).as_posix()
    except (ValueError, OSError):
        path = loc.path
    return config.is_selected(finding.code, path)


def _suppressed(finding: Finding) -> bool:
    """A ``# noqa`` on the model line (or file) of an export failure, as for any finding."""
    loc = finding.location
    try:
        lines = Path(loc.path).read_text(encoding="utf-8", errors="replace").splitlines()
    except (OSError, AttributeError):
        return False
    return file_is_exempt(lines) or is_suppressed(finding.code, line_at(lines, loc.line))


def _failure_finding(decl: ProgramDecl, failure: Failure) -> Finding:
    location = (
        Location(failure.path, failure.line, None, failure.source_line)
        if failure.path and failure.line
        else Location(str(decl.path), 1)
    )
    return export_failed(failure.program, failure.stage, failure.error, location, decl.spelling)
