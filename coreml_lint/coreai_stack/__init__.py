"""The one room that touches the Core AI stack: ``coreai-torch`` (the converter) and
``coreai-core`` (the compiler and runtime, which executes on Linux, CPU only).

Core AI is Core ML's successor (models carry compatibility version 27.0). This room converts
an ``ExportedProgram`` the way Apple documents it (``run_decompositions`` with
``coreai_torch.get_decomp_table()``, then ``TorchConverter().add_exported_program(...)
.to_coreai()``), saves the ``.aimodel`` asset, compiles and runs it, and returns what happened
as data: a crash is a result with its stage, as in ``coreml_lint.stack``.

It imports only ``core``, like ``stack``; nothing here imports a heavy package at module
level, so importing ``coreml_lint.coreai_stack`` is free and the light lint path never pays.
"""

from coreml_lint.coreai_stack.convert import (
    CONVERT_STAGE,
    Conversion,
    convert_program,
    coreai_missing,
)
from coreml_lint.coreai_stack.run import LOAD_STAGE, RUN_STAGE, CoreAIRun, run_program

__all__ = [
    "CONVERT_STAGE",
    "LOAD_STAGE",
    "RUN_STAGE",
    "Conversion",
    "CoreAIRun",
    "convert_program",
    "coreai_missing",
    "run_program",
]
