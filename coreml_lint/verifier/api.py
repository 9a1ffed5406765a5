"""``verify``: lower with the stock partitioner and check every Core ML partition;
``verify_lowered``: check an already-lowered program (``lower --verify`` uses it on its own
output, without lowering twice)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from coreml_lint.core.settings import PartitionerSettings
from coreml_lint.verifier.report import ERROR, VerifyReport

Progress = Callable[[str], None] | None
Explain = Callable[[str], str | None] | None


def verify(
    exported_program: Any,
    *,
    settings: PartitionerSettings | None = None,
    inputs: Any = None,
    progress: Progress = None,
    explain: Explain = None,
    **partitioner: Any,
) -> VerifyReport:
    """Lower ``exported_program`` with the stock ``CoreMLPartitioner`` and verify every Core
    ML partition against its eager module. Pass the partitioner's settings as ``settings`` or
    as keyword arguments (``minimum_deployment_target=17``, ``skip_ops_for_coreml_delegation=
    [...]``, ...; None means the default), as :func:`coreml_lint.lower` takes them.

    ``inputs``: a tuple of tensors (the program's user inputs, flat, in order), a path to a
    ``torch.save``-d tuple (loaded with ``weights_only=True``), or None for the program's own
    example inputs (seeded random ones when it has none). ``explain(node_name)`` may name a
    lint rule that explains a diverging node.
    Note that lowering consumes ``exported_program`` (pass a fresh copy if you reuse it).
    """
    from coreml_lint.stack import lower_stock

    say = progress or (lambda message: None)
    settings = (settings or PartitionerSettings()).changed(
        **{k: v for k, v in partitioner.items() if v is not None}
    )
    report = VerifyReport(settings=settings.to_json())
    start = time.perf_counter()
    try:
        user_inputs, described = _resolve_inputs(exported_program, inputs)
    except Exception as exc:
        report.not_verified.append(f"inputs: {type(exc).__name__}: {exc}")
        return report.finish()
    report.inputs = described
    say("lowering with the stock CoreMLPartitioner")
    lowering = lower_stock(exported_program, settings)
    report.timings.update(lowering.timings)
    if lowering.error is not None:
        report.lowering_error, report.lowering_stage = lowering.message, lowering.stage
        report.timings["total"] = time.perf_counter() - start
        return report.finish()
    verify_lowered(
        lowering.edge,
        lowering.mlmodels,
        inputs=user_inputs,
        progress=progress,
        explain=explain,
        report=report,
    )
    report.timings["total"] = time.perf_counter() - start
    return report


def verify_lowered(
    edge_program: Any,
    mlmodels: list[Any],
    *,
    inputs: Any = None,
    progress: Progress = None,
    explain: Explain = None,
    report: VerifyReport | None = None,
) -> VerifyReport:
    """Verify an already-lowered program: ``edge_program`` is the ``EdgeProgramManager``
    ``to_edge_transform_and_lower`` returned (or its ``exported_program()``), ``mlmodels``
    the MlModels ``CoreMLBackend._convert_to_mlmodel`` produced, in order (see
    :func:`coreml_lint.stack.capture_mlmodels`)."""
    from coreml_lint.verifier.eager import run_lowered

    say = progress or (lambda message: None)
    report = report if report is not None else VerifyReport()
    ep = (
        edge_program.exported_program()
        if hasattr(edge_program, "exported_program")
        else edge_program
    )
    delegates = coreml_delegates(ep)
    if not delegates:
        report.notes.append("no Core ML partition: nothing runs on Core ML, nothing to verify")
    if len(delegates) != len(mlmodels):
        report.not_verified.append(
            f"{len(delegates)} Core ML delegates but {len(mlmodels)} captured MlModels"
        )
        return report.finish()
    try:
        user_inputs, described = _resolve_inputs(ep, inputs)
    except Exception as exc:
        report.not_verified.append(f"inputs: {type(exc).__name__}: {exc}")
        return report.finish()
    report.inputs = report.inputs or described
    start = time.perf_counter()
    say("running the program in eager (delegates as their partitions' eager modules)")
    try:
        runs = run_lowered(ep, user_inputs)
    except Exception as exc:
        report.not_verified.append(f"eager run failed: {type(exc).__name__}: {exc}")
        return report.finish()
    report.timings["eager"] = time.perf_counter() - start
    for index, (name, lowered) in enumerate(delegates):
        if name not in runs:
            report.notes.append(f"{name} is never called")
            continue
        _verify_one(index, name, lowered, mlmodels[index], runs[name], report, say, explain)
    return report.finish()


def _verify_one(index, name, lowered, mlmodel, run, report, say, explain) -> None:
    from coreml_lint.stack import convert_float32
    from coreml_lint.verifier.partition import Partition, verify_partition

    partition = Partition(index, name, lowered, mlmodel, run)
    _reference(partition, report, say)
    say(f"partition {index}: converting at float32 compute precision")
    start = time.perf_counter()
    float32, failure = None, None
    try:
        float32 = convert_float32(lowered.original_module, lowered.compile_specs)
    except Exception as exc:
        failure = f"float32 conversion failed: {type(exc).__name__}: {exc}"
    _add_time(report, "float32_conversion", time.perf_counter() - start)
    say(f"partition {index}: executing the MIL (semantic and float16 passes)")
    start = time.perf_counter()
    result, divergences = verify_partition(partition, float32, explain)
    _add_time(report, "interpreter", time.perf_counter() - start)
    if failure is not None:
        result.semantic.status, result.semantic.message = ERROR, failure
    report.partitions.append(result)
    report.divergences += divergences
    for check in (result.semantic, result.float16):
        for op in check.not_verified_ops:
            item = f"op {op}" if " " not in op else op
            if item not in report.not_verified:
                report.not_verified.append(item)


def _reference(partition: Any, report: VerifyReport, say: Any) -> None:
    """The float64 reference the semantic pass judges against (not for a partition that
    computes in float16: its eager module is the reference, as it computes)."""
    from coreml_lint.verifier.partition import computes_in_half
    from coreml_lint.verifier.reference import float64_reference

    ep = partition.lowered.original_module
    if computes_in_half(partition.run, ep.graph_module):
        return
    say(f"partition {partition.index}: running its eager module in float64")
    start = time.perf_counter()
    reference = float64_reference(ep, partition.run.inputs, partition.run.values)
    _add_time(report, "float64_reference", time.perf_counter() - start)
    if reference.failure is not None:
        report.notes.append(
            f"partition {partition.index}: no float64 reference ({reference.failure}); "
            "its float32 values are judged against eager float32 within 1e-5"
        )
        return
    partition.reference = reference


def _add_time(report: VerifyReport, key: str, seconds: float) -> None:
    report.timings[key] = report.timings.get(key, 0.0) + seconds


def coreml_delegates(ep: Any) -> list[tuple[str, Any]]:
    """(attribute name, LoweredBackendModule) of every Core ML delegate, in partition order."""
    from executorch.exir.lowered_backend_module import LoweredBackendModule

    found = [
        (name, module)
        for name, module in ep.graph_module.named_children()
        if isinstance(module, LoweredBackendModule) and module.backend_id == "CoreMLBackend"
    ]
    return sorted(found, key=lambda item: _suffix(item[0]))


def _suffix(name: str) -> int:
    digits = name.rsplit("_", 1)[-1]
    return int(digits) if digits.isdigit() else 0


def _resolve_inputs(ep: Any, inputs: Any) -> tuple[list[Any], list[str]]:
    from coreml_lint.verifier.inputs import check_given_inputs, default_inputs, load_inputs

    if inputs is None:
        made, how = default_inputs(ep)
        return made, [_describe(v, h) for v, h in zip(made, how, strict=True)]
    if isinstance(inputs, (str, Path)):
        inputs = load_inputs(inputs)
    made = list(inputs)
    check_given_inputs(ep, made)
    return made, [_describe(v, "given") for v in made]


def _describe(value: Any, how: str) -> str:
    dtype = str(getattr(value, "dtype", type(value).__name__)).replace("torch.", "")
    return f"{how} {dtype}{list(getattr(value, 'shape', ()))}"
