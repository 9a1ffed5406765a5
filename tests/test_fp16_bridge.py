"""CML106's ``bridge_partitions``: which float16 values crossing into a Core ML partition get
a float32 cast on the CPU, judged on a real edge program with a given placement (no Core ML
conversion: the oracle cases ``fp16-value-made-on-the-cpu`` and
``fp16-output-of-another-partition`` lower the real thing)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
exir = pytest.importorskip("executorch.exir")

from coreml_lint.core.settings import PartitionerSettings  # noqa: E402
from coreml_lint.rulekit.fx import is_cast, val  # noqa: E402
from coreml_lint.rules.cml106_fp16_input_below_ios16 import Fp16InputBelowIOS16  # noqa: E402


class _Model(torch.nn.Module):
    """A float16 weight read only by Core ML, one read by the CPU too, and a CPU op."""

    def __init__(self) -> None:
        super().__init__()
        self.own = torch.nn.Parameter(torch.randn(8).half())
        self.shared = torch.nn.Parameter(torch.randn(8).half())

    def forward(self, x):
        on_cpu = torch.sin(x * self.shared)
        return torch.cos(on_cpu) + self.own + self.shared


def _edge():
    ep = torch.export.export(_Model(), (torch.randn(8).half(),))
    return exir.to_edge(ep).exported_program()


def _bridge(program, on_cpu: set[str], **settings):
    """Bridge with every call_function node in partition 0 except ``on_cpu`` (op names)."""
    where = {
        n: None if any(op in str(n.target) for op in on_cpu) else 0
        for n in program.graph.nodes
        if n.op == "call_function"
    }
    rule = Fp16InputBelowIOS16()
    return rule.bridge_partitions(program, where.get, PartitionerSettings(**settings))


def _crossings(program) -> dict[str, str]:
    """Each new float32 cast back to float16: the value it carries -> what reads the cast."""
    found = {}
    for node in program.graph.nodes:
        if is_cast(node) and val(node).dtype == torch.float16 and is_cast(node.args[0]):
            up = node.args[0]
            if val(up).dtype == torch.float32 and val(up.args[0]).dtype == torch.float16:
                found[up.args[0].name] = ",".join(sorted(u.name for u in node.users))
    return found


def test_float16_values_entering_core_ml_are_cast_where_they_cross():
    program = _edge()
    done = _bridge(program, {"aten.mul.", "aten.sin."})
    crossings = _crossings(program)
    # the CPU's sin result crosses, and so does the weight the CPU reads too (the delegate
    # does not own it); the weight only Core ML reads is its own constant, and the input
    # only the CPU reads never enters Core ML
    assert set(crossings) == {"p_shared", "aten_sin_default"}, crossings
    assert len(done) == 2
    program.graph.lint()
    refuse = Fp16InputBelowIOS16().refuse
    ups = [n.args[0] for n in program.graph.nodes if is_cast(n) and is_cast(n.args[0])]
    assert all(refuse(up, PartitionerSettings()) for up in ups)


def test_nothing_crosses_from_iOS16_or_where_core_ml_computes_everything():
    program = _edge()
    assert not _bridge(program, {"aten.mul.", "aten.sin."}, minimum_deployment_target=16)
    assert not _crossings(program)
    program = _edge()
    _bridge(program, set())
    assert set(_crossings(program)) == {"x"}


def test_without_take_over_constant_data_every_weight_is_an_input():
    program = _edge()
    _bridge(program, set(), take_over_constant_data=False)
    assert set(_crossings(program)) == {"x", "p_own", "p_shared"}
