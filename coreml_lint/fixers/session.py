"""A fixing run over many files: lint, apply the selected fixes in one pass, write, relint.

Each file is read, linted, fixed (one libcst parse, one render) and relinted once, however
many findings point into it: the source rules' own findings and the lines ``.pt2``
findings point to are merged first. Files are fixed on every core when there are enough
of them; Ctrl-C stops the workers at once, and since every write is a single rename, each
file is old or new, never half-written (a cut-short write leaves only its temporary file,
which is removed; another run's are left alone). A file that changed on disk after it was
read is not written: the fix was computed from the old text.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from coreml_lint.core.config import LintConfig
from coreml_lint.core.errors import InputError
from coreml_lint.core.files import TEMP_SUFFIX, run_tag, write_atomically
from coreml_lint.core.findings import Finding, SourceFix
from coreml_lint.core.parallel import PARALLEL_THRESHOLD, parallel_map
from coreml_lint.engine.source import lint_source, lint_source_context, read_source
from coreml_lint.fixers.apply import FixResult, compute_fix, selected_edits
from coreml_lint.fixers.guided import place
from coreml_lint.program.gcpause import gc_paused

_BOM = b"\xef\xbb\xbf"
# Program-driven targets of one file: (code, line) pairs a fix may touch; None = any finding.
Targets = set[tuple[str, int]] | None


@dataclass
class FileOutcome:
    path: str
    findings: list[Finding] = field(default_factory=list)  # after fixing (or not)
    result: FixResult | None = None
    error: str | None = None
    # For each program finding the job carried: "fixed", why it was not, or None (the rule
    # has no guided fix; the source check at its line decided).
    guided: list[str | None] = field(default_factory=list)


@dataclass
class FixSession:
    """``unsafe`` adds the unsafe fixes; ``write`` is off for ``--diff``."""

    config: LintConfig
    unsafe: bool = False
    write: bool = True
    # The run's tag, taken in the process that starts it: its workers' temporary files carry
    # it, and Ctrl-C removes those and no other run's.
    tag: str = field(default_factory=run_tag)

    def fix_file(
        self, path: Path, targets: Targets = None, guided: tuple[Finding, ...] = ()
    ) -> FileOutcome:
        """Lint and fix one file; ``targets`` restricts the fixes to the (code, line) pairs
        a program's findings point to, and ``guided`` are those program findings, whose
        rules may place a fix with what the program knows."""
        with gc_paused():  # the parsed file is acyclic: no collections while it lives
            return self._fix_file(path, targets, guided)

    def _fix_file(self, path: Path, targets: Targets, guided: tuple[Finding, ...]) -> FileOutcome:
        outcome = FileOutcome(str(path))
        try:
            text = read_source(path)
            outcome.findings, parsed = lint_source_context(text, str(path), self.config)
            chosen = [
                f
                for f in outcome.findings
                if targets is None or (f.code, f.location.line) in targets
            ]
            edits = selected_edits(chosen, self.unsafe)
            placed = place(list(guided), text, str(path), self.config) if guided else []
            edits += [p for p in placed if isinstance(p, SourceFix) and (p.safe or self.unsafe)]
            outcome.guided = [_guided_state(p, self.unsafe) for p in placed]
            if not edits:
                return outcome
            result = compute_fix(str(path), text, edits, parsed)
            tree, result.tree = result.tree, None  # never sent back from a worker: it is large
            if result.error:
                outcome.error = result.error
                return outcome
            if not result.changed:
                return outcome
            on_disk = path.read_bytes() if self.write else b""  # one read: change and BOM
            if self.write and on_disk.decode("utf-8-sig", errors="replace") != text:
                outcome.error = f"{path}: changed while it was being fixed: not written"
                return outcome
            outcome.result = result
            outcome.guided = [
                "fixed" if isinstance(p, SourceFix) and p in result.applied else state
                for p, state in zip(placed, outcome.guided, strict=True)
            ]
            if self.write:
                bom = "\ufeff" if on_disk.startswith(_BOM) else ""
                write_atomically(path, bom + result.fixed, tag=self.tag)
                outcome.findings = lint_source(result.fixed, str(path), self.config, tree)
            else:  # --diff: what the fix would leave (and no findings sent back to undo)
                applied = {id(fix) for fix in result.applied}
                outcome.findings = [f for f in outcome.findings if id(f.edit) not in applied]
        except InputError as exc:
            outcome.error = str(exc)
        except Exception as exc:  # one bad file must not stop the run
            outcome.error = f"{path}: internal error: {type(exc).__name__}: {exc}"
        return outcome

    def fix_files(self, jobs: list[tuple[Any, ...]]) -> list[FileOutcome]:
        """Fix many files, in parallel when there are enough to pay for the workers."""
        folders = {job[0].parent for job in jobs}
        if len(jobs) >= PARALLEL_THRESHOLD:
            import libcst  # noqa: F401  (once, before the workers fork, not once in each)
        return parallel_map(
            self._fix_job, jobs, on_interrupt=lambda: _remove_temporary_files(folders, self.tag)
        )

    def _fix_job(self, job: tuple[Any, ...]) -> FileOutcome:
        return self.fix_file(*job)


def _guided_state(placed: Any, unsafe: bool) -> str | None:
    if isinstance(placed, SourceFix):
        return None if placed.safe or unsafe else "the fix may change numerics: --unsafe-fixes"
    return placed


def _remove_temporary_files(folders: set[Path], tag: str) -> None:
    """A write cut short by Ctrl-C leaves only its temporary file: the target is old.
    Removed: this run's, and those of runs whose process is gone (killed, crashed); a
    running one's are left to it."""
    for folder in folders:
        for stray in folder.glob(f".*{TEMP_SUFFIX}"):
            owner = re.search(r"\.run(\d+)\.[^.]*" + re.escape(TEMP_SUFFIX) + "$", stray.name)
            if owner is None:
                continue  # not named by a run of this version: leave it
            if f"run{owner.group(1)}" == tag or not _alive(int(owner.group(1))):
                stray.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # it exists, owned by somebody else
        return True
    return True
