"""``ExportedProgram`` -> Core AI program and ``.aimodel`` asset, the documented way.

The converter names the graph's inputs, outputs and states; this module names them itself
(user inputs by their placeholder names, outputs ``output_0``...; each state keeps its
placeholder's name: the runtime binds state by that name even when ``state_names`` renames
it) and keeps the map back to the program's buffers, so a run can be compared with
eager without guessing. A conversion failure is kept with its message, never raised.
"""

from __future__ import annotations

import importlib.util
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from coreml_lint.core.stages import stage

CONVERT_STAGE = "convert"
SAVE_STAGE = "save_asset"
PACKAGES = ("coreai_torch", "coreai")  # coreai-torch, coreai-core


def coreai_missing() -> str | None:
    """The Core AI distribution that is not installed (None when both are)."""
    names = {"coreai_torch": "coreai-torch", "coreai": "coreai-core"}
    missing = [names[m] for m in PACKAGES if importlib.util.find_spec(m) is None]
    return ", ".join(missing) or None


@dataclass
class Conversion:
    """A converted program: the asset on disk and how its I/O maps to the program's."""

    asset: Any = None  # coreai.authoring.AIModelAsset
    path: Path | None = None
    input_names: list[str] = field(default_factory=list)  # user inputs, in order
    output_names: list[str] = field(default_factory=list)  # user outputs, in order
    states: dict[str, str] = field(default_factory=dict)  # state name -> buffer target
    error: BaseException | None = None
    stage: str = ""
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def message(self) -> str:
        return f"{type(self.error).__name__}: {self.error}" if self.error else ""


def convert_program(ep: Any, directory: Path) -> Conversion:
    """Convert ``ep`` and save it as ``directory/model.aimodel``. ``ep`` is not changed
    (``run_decompositions`` returns a new program)."""
    result = Conversion()
    level = logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        with stage(result, CONVERT_STAGE):
            program = _convert(ep, result)
        if not result.ok:
            return result
        with stage(result, SAVE_STAGE):
            result.path = Path(directory) / "model.aimodel"
            result.asset = program.save_asset(result.path)
        return result
    finally:
        logging.disable(level)


def _convert(ep: Any, result: Conversion) -> Any:
    import contextlib
    import io

    import coreai_torch

    decomposed = ep.run_decompositions(coreai_torch.get_decomp_table())
    # the functional program: only after decomposing does the signature list mutations
    result.input_names, result.output_names, result.states = _io_names(decomposed)
    converter = coreai_torch.TorchConverter().add_exported_program(
        decomposed,
        input_names=result.input_names,
        output_names=result.output_names,
    )
    with contextlib.redirect_stdout(io.StringIO()):  # its progress bar
        return converter.to_coreai()


def _io_names(ep: Any) -> tuple[list[str], list[str], dict[str, str]]:
    """User input names, output names and state name -> buffer target, in the orders the
    converter uses (states: mutated buffers first, then mutated user inputs)."""
    signature = ep.graph_signature
    mutated = set(signature.buffers_to_mutate.values())
    inputs, states = [], {}
    for spec in signature.input_specs:
        if spec.kind.name == "USER_INPUT":
            inputs.append(spec.arg.name)
        elif spec.kind.name == "BUFFER" and spec.target in mutated:
            states[spec.arg.name] = spec.target
    outputs = [
        f"output_{i}"
        for i, spec in enumerate(s for s in signature.output_specs if s.kind.name == "USER_OUTPUT")
    ]
    return inputs, outputs, states
