"""``verify --target coreai``: convert the whole program with coreai-torch, compile and run it
on Linux's Core AI runtime, and compare its outputs and written state with eager.

Core AI runs the program as converted, whole (there are no partitions and no CPU fallback),
so the report holds one "partition", the program. Core AI has no precision setting: a
float32 model computes in float32 and a ``.half()`` model in float16. Hence one run, judged
as ``verify`` judges a Core ML partition: the semantic pass with the float32 tolerance (a
float16 model: the float16-eager tolerance, ``SEMANTIC_HALF``), the float16 pass with the
float16 tolerance on the float16 model's run, and, for a float32 model, the same float32
run (nothing else runs on device). Outputs decide; a written buffer (Core AI state) is
compared as an output.

Core AI declares int64 inputs and outputs as int32 and refuses an int64 array at run time,
so integer inputs are fed as int32 (as an app must) and the report says so; a value that
int32 cannot hold makes the run's outputs what they are, and the comparison shows it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from coreml_lint.verifier.report import (
    AGREE,
    DIVERGE,
    Divergence,
    PartitionResult,
    PassResult,
    VerifyReport,
)

CONVERT_STAGE = "Core AI conversion (coreai-torch)"
RUN_STAGE = "Core AI run (coreai-core)"
TARGET = "coreai"
_DEBUG_INFO = re.compile(r"at #debuginfo\.location<.*?\]>: ")
_LOCATION = re.compile(r'loc\("(?P<path>[^"]+)":(?P<line>\d+):\d+\)')
_SUMMARY_LOCATION = re.compile(r"\(at (?P<path>[^()]+):(?P<line>\d+)\)$")


def verify_coreai(
    exported_program: Any,
    *,
    inputs: Any = None,
    progress: Callable[[str], None] | None = None,
    explain: Callable[[Any], str | None] | None = None,
    reference: Any = None,
    directory: Path | None = None,
) -> VerifyReport:
    """Run ``exported_program`` on Core AI and in eager on the same inputs (None: the
    program's own example inputs, else seeded random ones; a tuple of tensors; or a path to
    a ``torch.save``-d tuple) and judge every output and written buffer.

    ``reference``: the program eager runs instead (``lower --target coreai`` converts a
    rewritten program and judges it against the program as the user gave it; the inputs
    are the reference's). ``directory``: where the asset is kept (``model.aimodel``),
    instead of a temporary directory removed afterwards."""
    from coreml_lint.coreai_stack import run_program
    from coreml_lint.verifier.eager import run_partition

    say = progress or (lambda message: None)
    report = VerifyReport(settings={"target": TARGET})
    start = time.perf_counter()
    given = exported_program if reference is None else reference
    try:
        user_inputs, report.inputs = _inputs(given, inputs)
        functional = exported_program.run_decompositions({})
        say("running the program in eager")
        eager_program = functional if reference is None else given.run_decompositions({})
        eager = run_partition(eager_program, [_clone(v) for v in user_inputs])
    except Exception as exc:
        report.not_verified.append(f"inputs or eager run: {type(exc).__name__}: {exc}")
        return report.finish()
    report.timings["eager"] = time.perf_counter() - start
    say("converting with coreai-torch, compiling and running on Core AI")
    run = run_program(exported_program, [user_inputs], directory=directory, narrow_int64=True)
    report.timings.update({f"coreai_{k}": v for k, v in run.timings.items()})
    report.notes += run.notes
    if not run.ok:
        report.lowering_error = crash_summary(run.message)
        report.lowering_stage = CONVERT_STAGE if run.stage != "run" else RUN_STAGE
        report.timings["total"] = time.perf_counter() - start
        return report.finish()
    _judge(report, functional, eager, run, explain)
    report.timings["total"] = time.perf_counter() - start
    return report.finish()


def summary(report: VerifyReport) -> str:
    """``report.summary()`` in Core AI's words: one program, not Core ML partitions."""
    _, _, rest = report.summary().partition("\n")
    head = f"verify --target coreai: {report.status} (the whole program on Core AI)"
    rest = rest.replace("lowering crashed in", "crashed in")
    return f"{head}\n{rest}" if rest else head


def crash_summary(message: str) -> str:
    """The converter's error without its debug-info preamble (``at #debuginfo.location<...>:
    ``), first line only: what the op got, and where (see :func:`crash_location`)."""
    path, line = crash_location(message)
    text = _DEBUG_INFO.sub("", message).strip().splitlines()[0] if message else ""
    return f"{text} (at {path}:{line})" if path else text


def crash_location(message: str) -> tuple[str | None, int | None]:
    """The model source ``(path, line)`` the converter names in its error, when it does
    (``loc("model.py":12:0)``; "-" when it does not know), in the error itself or in its
    :func:`crash_summary` (``... (at model.py:12)``)."""
    for match in _LOCATION.finditer(message or ""):
        if match.group("path") != "-":
            return match.group("path"), int(match.group("line"))
    summarized = _SUMMARY_LOCATION.search((message or "").strip())
    if summarized:
        return summarized.group("path"), int(summarized.group("line"))
    return None, None


def _judge(report: VerifyReport, functional: Any, eager: Any, run: Any, explain: Any) -> None:
    from coreml_lint.verifier.compare import FLOAT16, SEMANTIC, SEMANTIC_HALF

    nodes = _output_nodes(functional)
    half = _computes_in_half(eager.outputs)
    pairs = zip(nodes, eager.outputs, strict=True)
    named = [(f"output {i} ({n.name})", n, v) for i, (n, v) in enumerate(pairs)]
    values = list(run.outputs)
    writers = _state_writers(functional)
    for target, value in eager.mutations.items():
        named.append((f"state {target}", writers.get(target), value))
        values.append(run.states.get(target))
    result = PartitionResult(0, "program on Core AI")
    result.inputs = list(report.inputs)
    result.outputs = [name for name, _, _ in named if name.startswith("output")]
    result.states = list(eager.mutations)
    result.interface = PassResult(AGREE, _interface_note(run))
    report.partitions.append(result)
    modes = [("semantic", SEMANTIC_HALF if half else SEMANTIC)]
    modes.append(("float16", FLOAT16 if half else SEMANTIC))
    for check, mode in modes:
        passed = _pass(check, mode, named, values, explain, report)
        if check == "float16" and not half:
            passed.message = "the float32 run: Core AI runs a float32 model in float32"
        setattr(result, check, passed)


def _pass(check, mode, named, values, explain, report) -> PassResult:
    from coreml_lint.verifier.compare import compare
    from coreml_lint.verifier.localize import source_of

    passed = PassResult(AGREE)
    for (name, node, expected), actual in zip(named, values, strict=True):
        numbers = compare(actual, expected, mode)
        passed.outputs[name] = {"max_abs": numbers.max_abs, "max_rel": numbers.max_rel}
        if numbers.ok:
            continue
        passed.status = DIVERGE
        if check == "float16" and mode != "float16":
            continue  # the same run as the semantic pass: reported once
        source, code = source_of(node)
        report.divergences.append(
            Divergence(
                partition=0,
                check=check,
                kind=numbers.kind or "values",
                output=name,
                message=numbers.describe().replace(", Core ML ", ", Core AI "),
                numbers={"max_abs": numbers.max_abs, "max_rel": numbers.max_rel},
                node=node.name if node is not None else None,
                target=str(node.target) if node is not None else None,
                source=source,
                code=code,
                rule=explain(node) if (explain and node is not None) else None,
            )
        )
    return passed


def _output_nodes(functional: Any) -> list[Any]:
    """The node producing each user output, in order."""
    (output,) = [n for n in functional.graph.nodes if n.op == "output"]
    specs = functional.graph_signature.output_specs
    return [
        node
        for node, spec in zip(output.args[0], specs, strict=True)
        if spec.kind.name == "USER_OUTPUT"
    ]


def _state_writers(functional: Any) -> dict[str, Any]:
    """The node computing each written buffer's new value (Core AI state), by buffer."""
    (output,) = [n for n in functional.graph.nodes if n.op == "output"]
    specs = functional.graph_signature.output_specs
    return {
        spec.target: node
        for node, spec in zip(output.args[0], specs, strict=True)
        if spec.kind.name in ("BUFFER_MUTATION", "USER_INPUT_MUTATION")
    }


def _computes_in_half(outputs: list[Any]) -> bool:
    import torch

    floats = [o for o in outputs if isinstance(o, torch.Tensor) and o.is_floating_point()]
    return bool(floats) and all(o.dtype in (torch.float16, torch.bfloat16) for o in floats)


def _interface_note(run: Any) -> str:
    narrowed = [d for d in run.output_dtypes if d == "int32"]
    return (
        f"{len(narrowed)} integer output(s) returned as int32 (Core AI narrows int64)"
        if narrowed
        else ""
    )


def _inputs(ep: Any, given: Any) -> tuple[list[Any], list[str]]:
    from coreml_lint.verifier.inputs import check_given_inputs, default_inputs, load_inputs

    if given is None:
        made, how = default_inputs(ep)
    else:
        made = list(load_inputs(given) if isinstance(given, (str, Path)) else given)
        check_given_inputs(ep, made)
        how = ["given"] * len(made)
    described = [
        f"{h} {str(getattr(v, 'dtype', '')).replace('torch.', '')}{list(getattr(v, 'shape', ()))}"
        for v, h in zip(made, how, strict=True)
    ]
    return made, described


def _clone(value: Any) -> Any:
    return value.clone() if hasattr(value, "clone") else value
