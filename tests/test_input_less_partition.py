"""CML602's ``refuse_partition``: which proposed partitions read no run-time input, judged
on the edge program's signature as the stock partitioner tags constants (no lowering: the
oracle case ``refusal-leaves-an-input-less-partition`` lowers one)."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

from coreml_lint.core.settings import PartitionerSettings
from coreml_lint.rules.cml602_input_less_partition import InputLessPartition


@dataclass(eq=False)
class _Node:
    """What the hook reads of a ``torch.fx.Node`` (hashed by identity, as fx nodes are)."""

    name: str
    op: str
    all_input_nodes: list[_Node] = field(default_factory=list)


def _node(name: str, op: str = "call_function", *inputs: _Node) -> _Node:
    return _Node(name, op, list(inputs))


def _program(**signature: dict) -> SimpleNamespace:
    fields = {
        "inputs_to_parameters": {},
        "inputs_to_buffers": {},
        "inputs_to_lifted_tensor_constants": {},
        "buffers_to_mutate": {},
        **signature,
    }
    return SimpleNamespace(graph_signature=SimpleNamespace(**fields))


def _refused(nodes, program, **settings) -> bool:
    settings = PartitionerSettings(**settings)
    return InputLessPartition().refuse_partition(nodes, program, settings) is not None


def test_a_partition_of_constants_only_stays_on_the_cpu_below_ios18():
    constant = _node("c_lifted_tensor_0", "placeholder")
    inverted = _node("bitwise_not", "call_function", constant)
    program = _program(inputs_to_lifted_tensor_constants={"c_lifted_tensor_0": "lifted_0"})
    assert _refused([inverted], program)
    assert not _refused([inverted], program, minimum_deployment_target=18)
    # without take_over_constant_data the constant is the delegate's input
    assert not _refused([inverted], program, take_over_constant_data=False)


def test_a_written_buffer_or_a_node_outside_is_an_input():
    count = _node("b_cnt", "placeholder")
    add = _node("add", "call_function", count)
    written = _program(inputs_to_buffers={"b_cnt": "cnt"}, buffers_to_mutate={"add": "cnt"})
    assert not _refused([add], written)
    never_written = _program(inputs_to_buffers={"b_cnt": "cnt"})
    assert _refused([add], never_written)
    weight = _node("p_w", "placeholder")
    cpu = _node("acosh", "call_function")
    mul = _node("mul", "call_function", weight, cpu)
    assert not _refused([mul], _program(inputs_to_parameters={"p_w": "w"}))
    assert _refused([mul, cpu], _program(inputs_to_parameters={"p_w": "w"}))
