"""A fixing run over many files: lint, apply the selected fixes, write, relint."""

from __future__ import annotations

import os
import signal
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from coreml_lint.lint.config import LintConfig
from coreml_lint.lint.errors import InputError
from coreml_lint.lint.findings import Finding

_BOM = b"\xef\xbb\xbf"
PARALLEL_THRESHOLD = 64  # files; below this, starting worker processes costs more than it saves
CHUNK = 16  # files per task: small enough that an interrupt stops the run quickly


class FixSession:
    """Lints source files, applies the selected fixes, and relints what it changed.

    ``apply`` turns fixing on (``--fix`` or ``--diff``), ``unsafe`` adds the unsafe fixes,
    ``write`` is off for ``--diff``. Results and per-file errors are collected for the CLI.
    """

    def __init__(self, config: LintConfig, *, apply: bool, unsafe: bool, write: bool) -> None:
        self.config, self.apply, self.unsafe, self.write = config, apply, unsafe, write
        self.results: list[Any] = []
        self.errors: list[str] = []

    def source_file(self, path: Path, only: set[tuple[str, int]] | None = None) -> list[Finding]:
        """Findings of one file after fixing it; ``only`` restricts the fixes to
        (code, line) pairs (program findings drive fixes this way)."""
        from coreml_lint.fixers.apply import compute_fix, selected_edits, write_atomically
        from coreml_lint.source.engine import lint_source, read_source

        text = read_source(path)
        findings = lint_source(text, str(path), self.config)
        if not self.apply:
            return findings
        chosen = [f for f in findings if only is None or (f.code, f.location.line) in only]
        edits = selected_edits(chosen, self.unsafe)
        if not edits:
            return findings
        result = compute_fix(str(path), text, edits)
        if result.error:
            self.errors.append(result.error)
            return findings
        if not result.changed:
            return findings
        self.results.append(result)
        if not self.write:
            return findings
        bom = "\ufeff" if path.read_bytes().startswith(_BOM) else ""
        write_atomically(path, bom + result.fixed)
        return lint_source(result.fixed, str(path), self.config)

    def source_files(self, paths: list[Path]) -> list[Finding]:
        """Lint (and fix) many files, on every core when there are enough to pay for it."""
        findings: list[Finding] = []
        workers = min(os.cpu_count() or 1, 8)
        if len(paths) < PARALLEL_THRESHOLD or workers < 2:
            outcomes = [_one_file(self, path) for path in paths]
        else:
            outcomes = self._in_parallel(paths, workers)
        for _path, found, results, errors in outcomes:
            findings.extend(found)
            self.results.extend(results)
            self.errors.extend(errors)
        return findings

    def _in_parallel(self, paths: list[Path], workers: int) -> list[Any]:
        """Small chunks on a worker pool. Workers ignore SIGINT, so on Ctrl-C each finishes
        the file it is writing (writes are atomic anyway), pending chunks are cancelled, and
        the interrupt reaches the caller."""
        chunks = [paths[i : i + CHUNK] for i in range(0, len(paths), CHUNK)]
        pool = ProcessPoolExecutor(max_workers=workers, initializer=_ignore_sigint)
        try:
            futures = [pool.submit(_many_files, self, chunk) for chunk in chunks]
            return [outcome for future in futures for outcome in future.result()]
        except KeyboardInterrupt:
            pool.shutdown(wait=True, cancel_futures=True)
            raise
        finally:
            pool.shutdown(wait=True)

    def program_findings(self, findings: list[Finding]) -> list[Finding]:
        """Fix the model source a program finding points to, when that line still holds a
        call the same rule recognises in source; otherwise keep the finding, never guess."""
        if not self.apply:
            return findings
        targets: dict[str, set[tuple[str, int]]] = {}
        for finding in findings:
            loc = finding.location
            if loc and loc.path.endswith(".py") and Path(loc.path).is_file():
                targets.setdefault(loc.path, set()).add((finding.code, loc.line))
        fixed: set[tuple[str, str, int]] = set()
        for path, wanted in targets.items():
            before = len(self.results)
            try:
                self.source_file(Path(path), only=wanted)
            except InputError as exc:
                self.errors.append(str(exc))
                continue
            for result in self.results[before:]:
                fixed.update((path, fix.rule, fix.line) for fix in result.applied)
        if not self.write:
            return findings
        return [
            f
            for f in findings
            if f.location is None or (f.location.path, f.code, f.location.line) not in fixed
        ]


def _one_file(session: FixSession, path: Path) -> tuple[str, list[Finding], list[Any], list[str]]:
    """Lint/fix one file in a fresh session, returning what the caller merges."""
    local = FixSession(
        session.config, apply=session.apply, unsafe=session.unsafe, write=session.write
    )
    try:
        found = local.source_file(path)
    except InputError as exc:
        return str(path), [], [], [str(exc)]
    except Exception as exc:  # one bad file must not stop the run
        return str(path), [], [], [f"{path}: internal error: {type(exc).__name__}: {exc}"]
    return str(path), found, local.results, local.errors


def _many_files(
    session: FixSession, paths: list[Path]
) -> list[tuple[str, list[Finding], list[Any], list[str]]]:
    return [_one_file(session, path) for path in paths]


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
