"""``coreml-lint lower``: lint, rewrite, refuse, lower with the real partitioner, prove it.

The step answers findings only: a program the linter finds nothing in is lowered with
exactly the stock ``CoreMLPartitioner``'s placement.
"""

from __future__ import annotations

import io
import logging
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.export import ExportedProgram

from coreml_lint.lint.config import LintConfig
from coreml_lint.lint.findings import Finding, Severity
from coreml_lint.lowering.rewrites import REWRITES, outputs_match, random_inputs

# Node-level refusals, by the finding that calls for them: the node touches such a tensor.
EIGHT_BIT = {torch.uint8, torch.int8}


class LoweringError(Exception):
    """Lowering failed for a reason no rule explains; the message names the stage and error."""


@dataclass
class LowerReport:
    findings_before: list[Finding]
    findings_after: list[Finding] = field(default_factory=list)
    rewrites: list[str] = field(default_factory=list)
    rejected_rewrites: list[str] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)  # node -> reason (moved to CPU)
    returned_buffers: dict[str, str] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    partitions_before: int = 0  # predicted for the stock partitioner
    coreml_ops_before: int = 0
    partitions_after: int = 0  # delegates in the lowered program
    coreml_ops_after: int = 0
    cpu_ops_after: list[str] = field(default_factory=list)
    mil_problems: list[str] = field(default_factory=list)
    suggestions: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        data = dict(vars(self))
        data["findings_before"] = [f.to_json() for f in self.findings_before]
        data["findings_after"] = [f.to_json() for f in self.findings_after]
        for finding in data["findings_before"] + data["findings_after"]:
            finding["extra"] = {k: v for k, v in finding["extra"].items() if k != "edit"}
        return data


@dataclass
class LowerResult:
    program: Any  # ExecutorchProgramManager
    report: LowerReport

    @property
    def buffer(self) -> bytes:
        return self.program.buffer


def _copy(ep: ExportedProgram) -> ExportedProgram:
    buffer = io.BytesIO()
    torch.export.save(ep, buffer)
    buffer.seek(0)
    return torch.export.load(buffer)


def _errors(report: Any) -> set[str]:
    return {f.code for f in report.findings if f.severity is Severity.ERROR}


@contextmanager
def _capture_mil(into: list[Any]) -> Iterator[None]:
    """Record each Core ML model the backend converts (its MIL and I/O names)."""
    from executorch.backends.apple.coreml.compiler import CoreMLBackend

    original = CoreMLBackend._convert_to_mlmodel

    def wrapped(edge_program: Any, compile_specs: Any, skip_model_load: bool = True) -> Any:
        model = original(edge_program, compile_specs, skip_model_load=skip_model_load)
        into.append(model)
        return model

    CoreMLBackend._convert_to_mlmodel = staticmethod(wrapped)
    try:
        yield
    finally:
        CoreMLBackend._convert_to_mlmodel = staticmethod(original)


def lower(
    exported_program: ExportedProgram,
    *,
    minimum_deployment_target: int | None = None,
    skip_ops_for_coreml_delegation: list[str] | None = None,
    take_over_mutable_buffer: bool = True,
    take_over_constant_data: bool = True,
    lower_full_graph: bool = False,
    compute_precision: str = "float16",
    compute_units: str = "all",
    progress: Callable[[str], None] | None = None,
) -> LowerResult:
    """Use instead of ``to_edge_transform_and_lower(ep, partitioner=[CoreMLPartitioner(...)])``
    followed by ``to_executorch()``; the settings are the partitioner's."""
    import coremltools as ct
    from executorch.backends.apple.coreml.compiler import CoreMLBackend
    from executorch.exir import to_edge_transform_and_lower

    from coreml_lint import lint_program
    from coreml_lint.lowering.partitioner import Refusals, SafeCoreMLPartitioner

    say = progress or (lambda message: None)
    ios = minimum_deployment_target or 15
    config = LintConfig().with_partitioner(
        minimum_deployment_target=ios,
        skip_ops_for_coreml_delegation=tuple(skip_ops_for_coreml_delegation or ()),
        take_over_mutable_buffer=take_over_mutable_buffer,
        take_over_constant_data=take_over_constant_data,
        lower_full_graph=lower_full_graph,
    )
    say("linting the program")
    first = lint_program(exported_program, config)
    report = LowerReport(findings_before=first.findings)
    summary = first.placement.summary()
    report.partitions_before = len(first.placement.partitions)
    report.coreml_ops_before = summary["coreml_node_count"]

    say("functionalizing (run_decompositions({}))")
    ep = exported_program.run_decompositions({})
    codes = _errors(first)
    inputs = random_inputs(ep)
    for code in sorted(codes):
        rewrite = REWRITES.get(code)
        if rewrite is None:
            continue
        say(f"rewriting: {rewrite.name}")
        try:
            candidate, changes = rewrite.apply(_copy(ep))
            if not changes:
                continue
            same = inputs is None or outputs_match(ep, candidate, inputs, rewrite.tolerance)
        except Exception as exc:  # a rewrite that does not fit this graph is not applied
            report.rejected_rewrites.append(
                f"{code} {rewrite.name}: not applied ({type(exc).__name__}: {str(exc)[:120]})"
            )
            continue
        if not same:
            report.rejected_rewrites.append(
                f"{code} {rewrite.name}: outputs differ from the original program in eager, "
                "not applied"
            )
            continue
        unchecked = " (not checked in eager: no concrete inputs)" if inputs is None else ""
        report.rewrites.extend(f"{code}: {c}{unchecked}" for c in changes)
        ep = candidate

    say("linting the rewritten program")
    second = lint_program(ep, config)
    codes = _errors(second)
    refusals = Refusals()
    if codes & {"CML101", "CML102", "CML103"}:
        refusals.predicates["touches a uint8/int8 tensor (CML101-103)"] = lambda n: any(
            t.dtype in EIGHT_BIT for t in _tensors(n)
        )
    if "CML104" in codes:
        refusals.predicates["touches a bfloat16 tensor (CML104)"] = lambda n: any(
            t.dtype == torch.bfloat16 for t in _tensors(n)
        )
    if "CML304" in codes:  # the float32 rewrite was not applied. rms_norm: refused in the
        # ATen graph, so torch decomposes it; layer_norm decomposes to native_layer_norm,
        # which fails alike: both on the CPU.
        refusals.predicates["float16 norm with an fp32 eps in Core ML (CML304)"] = lambda n: (
            _op_base(n) in ("rms_norm", "layer_norm", "native_layer_norm")
            and any(t.dtype == torch.float16 for t in _tensors(n))
        )
    if "CML302" in codes:  # a like-op the rewrite could not replace: zeros_like on the CPU
        refusals.predicates["*_like with a dtype coremltools ignores (CML302)"] = lambda n: (
            _op_base(n) in ("zeros_like", "empty_like", "full_like") and "dtype" in n.kwargs
        )
    if "CML601" in codes:
        refusals.predicates["touches a tensor of rank > 5 (CML601)"] = lambda n: any(
            t.dim() > 5 for t in _tensors(n)
        )
    if "CML105" in codes:  # bool max(dim)/min(dim): no drop-in bool op, the CPU has a kernel
        refusals.predicates["bool max/min with dim (CML105)"] = lambda n: (
            getattr(n.target, "__name__", "").endswith(("max.dim", "min.dim"))
            and any(t.dtype == torch.bool for t in _tensors(n))
        )
    if "CML401" in codes:  # every index_put then runs on the CPU (portable index_put.out)
        refusals.predicates["index_put form coremltools cannot convert (CML401)"] = lambda n: (
            _op_base(n) in ("index_put", "_unsafe_index_put")
        )
    mutable = take_over_mutable_buffer
    if "CML201" in codes:
        mutable = False  # no state below iOS18: ExecuTorch keeps the buffers
        report.settings["take_over_mutable_buffer"] = False
    full_graph = lower_full_graph
    if "CML604" in codes:
        full_graph = False
        report.settings["lower_full_graph"] = False

    def return_buffer(node: torch.fx.Node, program: Any) -> str | None:
        tag = node.meta.get("delegation_tag")
        signature = program.graph_signature
        target = signature.inputs_to_buffers.get(node.name)
        written = {name for name, buffer in signature.buffers_to_mutate.items() if buffer == target}
        if target is None or not written:
            return None  # a parameter, a constant or a buffer nobody writes: not state
        readers = list(node.users) + [
            user for n in program.graph.nodes if n.name in written for user in n.users
        ]
        if any(u.op != "output" and u.meta.get("delegation_tag") != tag for u in readers):
            return "read outside its Core ML partition (CML202)"
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor) and not val.is_floating_point():
            return f"{val.dtype} would become an fp16 Core ML state (CML203)"
        return None

    specs = CoreMLBackend.generate_compile_specs(
        minimum_deployment_target=getattr(ct.target, f"iOS{ios}") if ios != 15 else None,
        compute_precision=getattr(ct.precision, compute_precision.upper()),
        compute_unit=getattr(ct.ComputeUnit, compute_units.upper()),
    )
    partitioner = SafeCoreMLPartitioner(
        refusals=refusals,
        return_buffers=return_buffer,
        skip_ops_for_coreml_delegation=list(skip_ops_for_coreml_delegation or []),
        compile_specs=specs,
        take_over_mutable_buffer=mutable,
        take_over_constant_data=take_over_constant_data,
        lower_full_graph=full_graph,
    )
    models: list[Any] = []
    say("lowering (to_edge_transform_and_lower)")
    level = logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        with _capture_mil(models):
            edge = to_edge_transform_and_lower(ep, partitioner=[partitioner])
        _count_placement(edge.exported_program(), report)
        say("building the ExecuTorch program (to_executorch)")
        program = edge.to_executorch()
    except Exception as exc:
        raise LoweringError(_describe_failure(exc, second.findings)) from exc
    finally:
        logging.disable(level)

    report.refused = dict(refusals.refused)
    report.returned_buffers = dict(partitioner.returned_buffers)
    report.mil_problems = _inspect_mil(models, exported_program)
    handled = {code for why in refusals.predicates for code in _CODES_IN.findall(why)}
    handled |= {"CML201"} if not mutable and take_over_mutable_buffer else set()
    handled |= {"CML202", "CML203"} if report.returned_buffers else set()
    handled |= {"CML604"} if "lower_full_graph" in report.settings else set()
    handled |= {"CML603"}  # SafeCoreMLPartitioner decomposes what a skip entry would strand
    report.findings_after = [
        f
        for f in second.findings
        if f.severity is Severity.ERROR and f.code not in _expand(handled)
    ]
    report.suggestions = sorted(
        {f"{f.code}: {f.fix}" for f in first.findings if f.fix and f.code in _errors(first)}
    )
    say("done")
    return LowerResult(program, report)


_CODES_IN = re.compile(r"CML\d{3}(?:-\d{3})?")


def _op_base(node: torch.fx.Node) -> str:
    """``aten.zeros_like.default`` or ``zeros_like.default`` -> ``zeros_like``."""
    parts = getattr(node.target, "__name__", "").split(".")
    return parts[-2] if len(parts) >= 2 else parts[0]


def _expand(codes: set[str]) -> set[str]:
    """``CML101-103`` -> ``{CML101, CML102, CML103}``."""
    out = set()
    for code in codes:
        if "-" in code:
            first, last = code.split("-")
            out.update(f"CML{n}" for n in range(int(first[3:]), int(last) + 1))
        else:
            out.add(code)
    return out


def _tensors(node: torch.fx.Node) -> list[torch.Tensor]:
    from coreml_lint.lowering.partitioner import tensors_of

    return tensors_of(node)


def _count_placement(edge_program: Any, report: LowerReport) -> None:
    for node in edge_program.graph.nodes:
        if node.op != "call_function" or "getitem" in str(node.target):
            continue
        if "executorch_call_delegate" in str(node.target):
            report.partitions_after += 1
            lowered = getattr(edge_program.graph_module, node.args[0].target)
            report.coreml_ops_after += sum(
                1 for n in lowered.original_module.graph.nodes if n.op == "call_function"
            )
        else:
            report.cpu_ops_after.append(getattr(node.target, "__name__", str(node.target)))


def _inspect_mil(models: list[Any], original: ExportedProgram) -> list[str]:
    """The known wrong-value signatures, read off each Core ML model coremltools made."""
    problems = []
    tanh_meant = any(
        n.target == torch.ops.aten.gelu.default and n.kwargs.get("approximate") == "tanh"
        for n in original.graph.nodes
    )
    for i, model in enumerate(models):
        mil = str(model._mil_program)
        spec = model.get_spec()
        inputs = {f.name for f in spec.description.input}
        outputs = [f.name for f in spec.description.output]
        if tanh_meant and 'mode="EXACT"' in mil:
            problems.append(f"delegate {i}: gelu EXACT where tanh GELU was meant")
        if inputs.intersection(outputs):
            problems.append(
                f"delegate {i}: an output is an input var {sorted(inputs & set(outputs))}"
            )
        if len(set(outputs)) < len(outputs):
            problems.append(f"delegate {i}: duplicated output names")
    return problems


def _describe_failure(exc: BaseException, findings: list[Finding]) -> str:
    first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    known = [f for f in findings if f.severity is Severity.ERROR]
    explained = (
        f" (coreml-lint predicted: {', '.join(sorted({f.code for f in known}))})" if known else ""
    )
    return f"lowering failed: {type(exc).__name__}: {first_line[:300]}{explained}"


__all__ = ["LowerReport", "LowerResult", "LoweringError", "lower"]
