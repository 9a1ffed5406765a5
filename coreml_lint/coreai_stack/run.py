"""Compile and execute a converted Core AI program on this machine (Linux: CPU only).

The runtime is asynchronous (``async with asset.executable() as model``); :func:`run_program`
hides that behind one call that converts, compiles, and runs the function ``main`` once per
set of inputs, with the program's mutable buffers as state arrays the runtime updates in place
(their values carry from one call to the next, as on device).

Inputs are fed with their own dtypes: an int64 array is *not* narrowed here, because Core AI
declares int64 inputs as int32 and refuses an int64 array at run time; ``narrow_int64=True``
feeds int32 instead (what an app has to do) and says so in ``notes``.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from coreml_lint.core.stages import stage
from coreml_lint.coreai_stack.convert import Conversion, convert_program

LOAD_STAGE = "load"
RUN_STAGE = "run"


@dataclass
class CoreAIRun:
    """What converting and running a program on Core AI did: per call, the user outputs (in
    the program's order, as numpy arrays), and each buffer's state after the last call."""

    conversion: Conversion = field(default_factory=Conversion)
    calls: list[list[Any]] = field(default_factory=list)
    states: dict[str, Any] = field(default_factory=dict)  # buffer target -> array after
    output_dtypes: list[str] = field(default_factory=list)
    error: BaseException | None = None
    stage: str = ""
    timings: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def message(self) -> str:
        return f"{type(self.error).__name__}: {self.error}" if self.error else ""

    @property
    def outputs(self) -> list[Any]:
        """The outputs of the last call."""
        return self.calls[-1] if self.calls else []


def run_program(
    ep: Any,
    calls: Sequence[Sequence[Any]],
    *,
    directory: Path | None = None,
    narrow_int64: bool = False,
) -> CoreAIRun:
    """Convert ``ep``, compile it and call ``main`` once per entry of ``calls`` (each the
    program's user inputs, flat, as tensors or arrays). The asset is written under
    ``directory`` (a temporary directory by default, removed afterwards)."""
    if directory is not None:
        return _run_in(ep, calls, Path(directory), narrow_int64)
    with tempfile.TemporaryDirectory(prefix="coreml-lint-coreai-") as tmp:
        return _run_in(ep, calls, Path(tmp), narrow_int64)


def _run_in(ep: Any, calls: Sequence[Sequence[Any]], directory: Path, narrow: bool) -> CoreAIRun:
    result = CoreAIRun(conversion=convert_program(ep, directory))
    result.timings.update(result.conversion.timings)
    if not result.conversion.ok:
        result.error, result.stage = result.conversion.error, result.conversion.stage
        return result
    states = _initial_states(ep, result.conversion)
    try:
        asyncio.run(_execute(result, [list(c) for c in calls], states, narrow))
    except Exception as exc:  # outside the stages (closing the compiled program)
        result.error = exc
    for name, target in result.conversion.states.items():
        if name in states:
            result.states[target] = states[name].copy()
    return result


async def _execute(result: CoreAIRun, calls: list[list[Any]], states: dict, narrow: bool) -> None:
    from coreai.runtime import NDArray

    conversion = result.conversion
    async with contextlib.AsyncExitStack() as compiled:
        with stage(result, LOAD_STAGE):
            model = await compiled.enter_async_context(conversion.asset.executable())
            with _runtime_log_quieted():
                function = model.load_function("main")
            state = {name: NDArray(array) for name, array in states.items()}
        if not result.ok:
            return
        with stage(result, RUN_STAGE):
            for inputs in calls:
                arrays = [_array(value, narrow, result.notes) for value in inputs]
                feed = {n: NDArray(a) for n, a in zip(conversion.input_names, arrays, strict=True)}
                out = await function(feed, state=state)
                result.calls.append([out[name].numpy().copy() for name in conversion.output_names])
                result.output_dtypes = [str(out[name].dtype) for name in conversion.output_names]
            for name, array in state.items():
                states[name] = array.numpy().copy()


@contextlib.contextmanager
def _runtime_log_quieted() -> Iterator[None]:
    """coreai-core's runtime logs ``ODIE [default]: Loading function 'main'`` on the
    process's standard error from native code, past Python's ``sys.stderr``. When the
    caller has quieted the libraries' logging (the commands do, unless ``--verbose``), that
    line is dropped too: file descriptor 2 points at the null device while the function
    loads. A failure to load is still the exception's to say."""
    import logging
    import os
    import sys

    if logging.root.manager.disable < logging.WARNING:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 2)
        os.close(null)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _initial_states(ep: Any, conversion: Conversion) -> dict[str, Any]:
    """Each state's starting value: the buffer's value in the program, as the runtime holds
    it (int64 narrowed to int32 and float64 to float32, as the converter declares them)."""
    import numpy as np

    states = {}
    for name, target in conversion.states.items():
        value = ep.state_dict.get(target)
        if value is None:
            value = ep.constants.get(target)
        array = _numpy(value)
        narrowed = {np.dtype("int64"): np.int32, np.dtype("float64"): np.float32}
        states[name] = np.ascontiguousarray(array.astype(narrowed.get(array.dtype, array.dtype)))
    return states


def _array(value: Any, narrow: bool, notes: list[str]) -> Any:
    import numpy as np

    array = np.ascontiguousarray(_numpy(value))
    if narrow and array.dtype == np.int64:
        note = "int64 inputs fed as int32 (Core AI declares them int32)"
        if note not in notes:
            notes.append(note)
        array = array.astype(np.int32)
    return array


def _numpy(value: Any) -> Any:
    import numpy as np

    if hasattr(value, "detach"):
        value = value.detach().cpu()
        if str(value.dtype) == "torch.bfloat16":  # numpy has none: ml_dtypes' (coreai-core's)
            import ml_dtypes

            return value.float().numpy().astype(ml_dtypes.bfloat16)
        return value.numpy()
    return np.asarray(value)
