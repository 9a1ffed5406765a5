"""How ``lower`` maps a node the converter or the verifier names back to the ATen node it
keeps on the CPU (``lowering/relower.py``), and when it refuses to move anything."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from coreml_lint.lowering.relower import CRASH, DIVERGENCE, LEARNED, MAX_MOVES, KeptOnCpu, Learned
from coreml_lint.stack.capture import ConversionFailure, lineage


def _source(*names: str) -> list | None:
    """torch's ``from_node`` provenance: a list whose last entry is the newest source."""
    source = None
    for name in reversed(names):  # the oldest first, each made from the one before
        source = [SimpleNamespace(name=name, from_node=source)]
    return source


class EdgeOpOverload:  # what an edge node's target is (matched by type name)
    def __str__(self) -> str:
        return "aten.where.self"


def _edge_node(name: str, *made_from: str) -> SimpleNamespace:
    return SimpleNamespace(
        name=name, target=EdgeOpOverload(), meta={"from_node": _source(*made_from)}
    )


def _learned() -> Learned:
    learned = Learned()
    learned.aten = {
        "conv1d": "aten.conv1d.default",
        "prelu": "aten.prelu.default",
        "add": "aten.add.Tensor",
    }
    return learned


def test_lineage_is_newest_first():
    node = _edge_node("aten_where_self", "prelu", "prelu_export")
    assert lineage(node) == ["prelu", "prelu_export"]
    assert lineage(SimpleNamespace(meta={})) == []


def test_a_converter_crash_maps_to_the_aten_node_it_was_made_from():
    failure = ConversionFailure(
        "aten_prelu_default", "prelu", "aten.prelu.default", ["prelu"], "ValueError: x"
    )
    move = _learned().from_crash([failure])
    assert not isinstance(move, str)
    assert (move.node, move.target, move.kind, move.edge_node) == (
        "prelu",
        "aten.prelu.default",
        CRASH,
        "aten_prelu_default",
    )
    assert failure.located == "converting 'prelu' op (located at: 'aten_prelu_default')"


def test_a_node_renamed_by_passes_maps_through_its_provenance():
    """A dim-order copy ExecuTorch inserted for ``add`` is made from ``add``: it maps there."""
    learned = _learned()
    copy = _edge_node("dim_order_ops__to_dim_order_copy_default", "add", "add")
    assert learned.origin(copy) == "add"
    aten = SimpleNamespace(name="prelu", target="aten.prelu.default", meta={})
    assert learned.origin(aten) == "prelu"  # an ATen node is itself
    stranger = _edge_node("aten_mul_tensor", "mul_from_elsewhere")
    assert learned.origin(stranger) is None


def test_an_unattributable_crash_moves_nothing():
    learned = _learned()
    assert "named no node" in learned.from_crash([])
    unknown = ConversionFailure("aten_x", "x", "aten.x.default", ["not_in_program"], "E: x")
    assert "maps to no node" in learned.from_crash([unknown])
    assert learned.moves == {}


def test_moves_are_bounded_and_never_repeated():
    learned = _learned()
    failure = ConversionFailure("aten_prelu_default", "prelu", "aten.prelu.default", ["prelu"], "E")
    learned.moves["prelu"] = learned.from_crash([failure])
    assert "already on the CPU" in learned.from_crash([failure])
    for index in range(MAX_MOVES):
        learned.moves[f"n{index}"] = learned.moves["prelu"]
    other = ConversionFailure("aten_add_tensor", "add", "aten.add.Tensor", ["add"], "E")
    assert f"already moved {MAX_MOVES}" in learned.from_crash([other])


def test_a_crash_naming_no_node_moves_what_a_rule_had_decomposed_for_core_ml():
    """A group norm of a 5-d input, decomposed for Core ML by CML801's answer, crashes in
    Core ML's backend on its rank-6 pieces, naming no node: the node moves whole, pieces
    and all, once; with nothing decomposed the crash stays unattributable."""
    learned = _learned()
    learned.aten["group_norm"] = "aten.group_norm.default"
    assert "not attributable" in learned.from_crash([])
    move = learned.from_crash([], {"group_norm": "CML801"})
    assert not isinstance(move, str) and (move.node, move.kind) == ("group_norm", CRASH)
    assert "CML801's answer had it decomposed" in move.why
    learned.moves["group_norm"] = move
    assert "not attributable" in learned.from_crash([], {"group_norm": "CML801"})


def test_a_divergence_moves_only_a_located_node():
    learned = _learned()
    unlocated = SimpleNamespace(
        node=None, check="semantic", kind="values", mil_op=None, message="m"
    )
    assert "not attributable" in learned.from_divergence([unlocated], {})
    located = SimpleNamespace(
        node="aten_prelu_default", check="semantic", kind="values", mil_op="prelu", message="off"
    )
    move = learned.from_divergence([unlocated, located], {"aten_prelu_default": ["prelu"]})
    assert not isinstance(move, str) and (move.node, move.kind) == ("prelu", DIVERGENCE)


def test_a_divergence_at_a_value_already_on_the_cpu_moves_its_reader():
    """Raw dollar amounts standardized in the model: with ``x - mean`` moved to the CPU, its
    float32 result (past float16's range) still departs where the partition takes it in,
    located at the moved node's name: what reads it moves next, never the same node again."""
    learned = _learned()
    learned.aten.update(sub="aten.sub.Tensor", div="aten.div.Tensor")
    learned.readers = {"sub": ["div"], "div": ["linear"]}
    at_sub = SimpleNamespace(
        node="aten_sub_tensor", check="float16", kind="nan", mil_op="cast", message="nan"
    )
    lineages = {"aten_sub_tensor": ["sub"]}
    learned.moves["sub"] = learned.from_divergence([at_sub], lineages)
    move = learned.from_divergence([at_sub], lineages)
    assert not isinstance(move, str) and (move.node, move.kind) == ("div", DIVERGENCE)
    assert "departs as Core ML reads it" in move.why
    learned.moves["div"] = move
    learned.readers["sub"] = ["div"]  # every reader moved: nothing left to try
    assert "already on the CPU" in learned.from_divergence([at_sub], lineages)


def test_the_learned_answer_refuses_what_came_from_a_moved_node():
    learned = _learned()
    assert learned.rules() == []  # nothing learned: nothing asked
    failure = ConversionFailure(
        "aten_prelu_default", "prelu", "aten.prelu.default", ["prelu"], "E: boom"
    )
    learned.moves["prelu"] = learned.from_crash([failure])
    (rule,) = learned.rules()
    assert isinstance(rule, KeptOnCpu) and rule.code == LEARNED
    why = rule.refuse(_edge_node("aten_where_self", "prelu"), None)
    assert why == "the crash at aten_prelu_default: E: boom"
    assert rule.refuse(SimpleNamespace(name="prelu", target="aten.prelu.default", meta={}), None)
    assert rule.refuse(_edge_node("aten_add_tensor", "add"), None) is None


def test_every_edge_node_maps_back_through_real_to_edge():
    """On a real ``to_edge`` (no lowering), with the op decomposed as ``lower`` decomposes a
    refused op: every edge node maps to the ATen node it came from, pieces of a decomposed
    op and copies ExecuTorch inserts included."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("executorch")
    from executorch.exir import EdgeCompileConfig, to_edge

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = torch.nn.Conv1d(4, 8, 3)
            self.act = torch.nn.PReLU(8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.act(self.conv(x)) + 1

    ep = torch.export.export(Block().eval(), (torch.randn(2, 4, 10),)).run_decompositions({})
    learned = Learned()
    learned.bind(ep)
    assert set(learned.aten) == {"conv1d", "prelu", "add"}
    edge = to_edge(ep, compile_config=EdgeCompileConfig(_check_ir_validity=False))
    origins = {
        n.name: learned.origin(n)
        for n in edge.exported_program().graph.nodes
        if n.op == "call_function"
    }
    assert origins["aten_add_tensor"] == "add"
    assert origins["aten_convolution_default"] == "conv1d"
    pieces = [name for name, origin in origins.items() if origin == "prelu"]
    assert len(pieces) > 1 and "aten_where_self" in pieces  # prelu, decomposed
    assert None not in origins.values()


def test_the_lowering_report_names_each_moved_node_and_why():
    from coreml_lint.core.settings import PartitionerSettings
    from coreml_lint.lowering.relower import Move
    from coreml_lint.lowering.report import LowerReport

    report = LowerReport([], PartitionerSettings())
    report.moved = [
        Move("prelu", "aten.prelu.default", CRASH, "aten_prelu_default", "ValueError: rank 3"),
        Move("clamp", "aten.clamp.Tensor", DIVERGENCE, "aten_clamp_tensor", "semantic values", "m"),
    ]
    text = report.render("model.pte")
    assert (
        "moved      prelu (aten.prelu.default) moved to the CPU: the converter crashed on "
        "aten_prelu_default: ValueError: rank 3"
    ) in text
    assert "clamp (aten.clamp.Tensor) moved to the CPU: verify located a divergence at" in text
    moved = report.to_json()["moved_to_cpu"]
    assert [m["node"] for m in moved] == ["prelu", "clamp"] and moved[0][
        "why"
    ] == "ValueError: rank 3"


def _job(crashes: list[list[ConversionFailure]]) -> SimpleNamespace:
    """A stand-in for ``run._Job`` whose attempts crash with ``crashes`` in turn, then lower."""
    from coreml_lint.lowering.run import LoweringError

    learned = _learned()
    attempts: list[int] = []

    def attempt(*, without: frozenset) -> str:
        attempts.append(len(learned.moves))
        if len(attempts) <= len(crashes):
            raise LoweringError(
                "lowering failed in x: E: boom", failures=crashes[len(attempts) - 1]
            )
        return "lowered"

    return SimpleNamespace(
        attempt=attempt,
        learned=learned,
        linted=None,
        say=lambda m: None,
        attempts=attempts,
        decomposed={},
    )


def test_lower_learns_a_bounded_number_of_times_and_stops_on_what_names_no_node(monkeypatch):
    pytest.importorskip("torch")
    from coreml_lint.lowering import relower, run

    monkeypatch.setattr(relower, "measure_call", lambda linted, name, say: "not measured")
    prelu = ConversionFailure("aten_prelu_default", "prelu", "aten.prelu.default", ["prelu"], "E")
    add = ConversionFailure("aten_add_tensor", "add", "aten.add.Tensor", ["add"], "E")
    job = _job([[prelu], [add]])
    assert run._lower_learning(job) == "lowered"
    assert list(job.learned.moves) == ["prelu", "add"] and job.attempts == [0, 1, 2]
    job = _job([[prelu], [prelu]])  # the same node again: the move did not help, stop
    with pytest.raises(run.LoweringError, match="already on the CPU, and the failure persists"):
        run._lower_learning(job)
    job = _job([[prelu], []])  # then a crash that names no node: stop, saying what moved
    with pytest.raises(run.LoweringError) as raised:
        run._lower_learning(job)
    assert "nothing moved to the CPU: the converter named no node" in str(raised.value)
    assert "(after moving prelu to the CPU)" in str(raised.value)
    # never loops forever, whatever the crashes name
    crashes = [
        [ConversionFailure(f"e{i}", "x", "aten.x.default", [f"n{i}"], "E")] for i in range(100)
    ]
    job = _job(crashes)
    job.learned.aten.update({f"n{i}": "aten.x.default" for i in range(100)})
    with pytest.raises(run.LoweringError, match=f"already moved {relower.MAX_MOVES} node"):
        run._lower_learning(job)
    assert len(job.attempts) == relower.MAX_MOVES + 1


def test_a_finding_on_nodes_the_lowering_moved_is_answered_and_only_then():
    """A crash or wrong values found on a node ``lower`` moved to the CPU after a crash is
    answered (no rule's hook acted: the crash was the node's pieces'); a finding that stands
    for two nodes of one line, one of them moved, is not; nor is one that the CPU does not
    answer (an op left on the CPU without a kernel)."""
    from coreml_lint.core.findings import Finding, Outcome, Severity
    from coreml_lint.core.settings import PartitionerSettings
    from coreml_lint.lowering.relower import Move
    from coreml_lint.lowering.report import LowerReport

    def finding(node: str, outcome: Outcome = Outcome.CRASH, *others: str) -> Finding:
        found = Finding("CML801", "m", Severity.ERROR, outcome, "msg", "p.pt2", node=node)
        found.merged = [
            Finding("CML801", "m", Severity.ERROR, outcome, "msg", "p.pt2", node=o) for o in others
        ]
        return found

    crash = finding("conv_transpose2d")
    wrong = finding("gelu", Outcome.SILENT)
    two = finding("conv_transpose2d", Outcome.CRASH, "conv_transpose2d_1")
    no_kernel = finding("gelu", Outcome.CPU)
    report = LowerReport([], PartitionerSettings(), findings_after=[crash, wrong, two, no_kernel])
    moves = [Move(n, "aten.x", CRASH, f"aten_{n}", "E") for n in ("conv_transpose2d", "gelu")]
    report.record_moves(moves)
    assert report.moved == moves
    assert report.findings_after == [two, no_kernel]


def test_a_var_the_converter_never_made_names_the_node_that_should_have():
    """``affine_grid_generator``'s converter makes no var (it keeps its arguments for a
    fused grid sampler); the error read later names the var, whose node is the culprit."""
    from coreml_lint.stack.capture import _missing_var

    target = SimpleNamespace(__name__="affine_grid_generator.default")
    node = SimpleNamespace(
        name="aten_affine_grid_generator_default", op="call_function", target=target
    )
    program = SimpleNamespace(graph=SimpleNamespace(nodes=[node]))
    error = ValueError("Torch var aten_affine_grid_generator_default not found in context")
    found = _missing_var(program, error)
    assert (found.name, found.kind) == (node.name, "affine_grid_generator")
    assert _missing_var(program, ValueError("Torch var 0 not found in context")) is None
    assert _missing_var(program, ValueError("another error")) is None
