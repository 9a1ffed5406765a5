"""``program/maskrows.py``: which rows of an attention mask its inputs can mask whole, by
evaluating the mask on padding patterns and lengths (pure Python, no torch). CML310's
oracle cases show what the verdicts mean on the real stack (a warning where only an empty
sequence loses its rows, an error where a sequence with tokens does)."""

from __future__ import annotations

from coreml_lint.program.graph import DType, Graph, InputSpec, Node, TensorInfo, TensorRef
from coreml_lint.program.maskrows import NEVER, PARTIAL, WHOLE, masked_rows

T = 6


def _graph(inputs: dict[str, TensorInfo], *nodes: tuple[str, str, list, dict, TensorInfo]):
    tensors = dict(inputs)
    built = []
    for name, target, args, kwargs, info in nodes:
        args = [_ref(a) for a in args]
        built.append(Node(name, target, args, kwargs, [name]))
        tensors[name] = info
    specs = [InputSpec(name, "user_input") for name in inputs]
    return Graph(specs, built, [], tensors)


def _ref(arg):
    """``"%name"`` -> a reference to that value, inside lists too (``index``'s indices)."""
    if isinstance(arg, list):
        return [_ref(a) for a in arg]
    return TensorRef(arg[1:]) if isinstance(arg, str) and arg.startswith("%") else arg


def _bool(*shape: int) -> TensorInfo:
    return TensorInfo("bool", shape)


def _int(*shape: int) -> TensorInfo:
    return TensorInfo("int64", shape)


CAUSAL = (
    ("i", "aten.arange.default", [T], {}, _int(T)),
    ("rows", "aten.view.default", ["%i", [T, 1]], {}, _int(T, 1)),
    ("cols", "aten.view.default", ["%i", [1, T]], {}, _int(1, T)),
    ("causal", "aten.le.Tensor", ["%cols", "%rows"], {}, _bool(T, T)),
)


def test_a_causal_mask_with_right_padded_lengths_masks_whole_rows_only_when_empty():
    graph = _graph(
        {"lengths": _int(2)},
        *CAUSAL,
        ("len", "aten.unsqueeze.default", ["%lengths", 1], {}, _int(2, 1)),
        ("keys", "aten.lt.Tensor", ["%cols", "%len"], {}, _bool(2, T)),
        ("k3", "aten.unsqueeze.default", ["%keys", 1], {}, _bool(2, 1, T)),
        ("keep", "aten.__and__.Tensor", ["%causal", "%k3"], {}, _bool(2, T, T)),
        ("masked", "aten.bitwise_not.default", ["%keep"], {}, _bool(2, T, T)),
    )
    assert masked_rows(graph, "masked", masked_when=True) == WHOLE
    # the same mask read the other way (where(keep, x, value)): the same rows
    assert masked_rows(graph, "keep", masked_when=False) == WHOLE


def test_a_causal_mask_with_a_padding_mask_input_masks_rows_of_a_left_padded_sequence():
    graph = _graph(
        {"attention_mask": _int(2, T)},
        *CAUSAL,
        (
            "pad",
            "aten._to_copy.default",
            ["%attention_mask"],
            {"dtype": DType("bool")},
            _bool(2, T),
        ),
        ("p3", "aten.unsqueeze.default", ["%pad", 1], {}, _bool(2, 1, T)),
        ("keep", "aten.__and__.Tensor", ["%causal", "%p3"], {}, _bool(2, T, T)),
        ("masked", "aten.bitwise_not.default", ["%keep"], {}, _bool(2, T, T)),
    )
    assert masked_rows(graph, "masked", masked_when=True) == PARTIAL


def test_padding_applied_to_the_query_rows_masks_rows_of_a_sequence_with_tokens():
    graph = _graph(
        {"pad": _bool(2, T)},
        ("q", "aten.unsqueeze.default", ["%pad", 2], {}, _bool(2, T, 1)),
        ("k", "aten.unsqueeze.default", ["%pad", 1], {}, _bool(2, 1, T)),
        ("keep", "aten.logical_and.default", ["%q", "%k"], {}, _bool(2, T, T)),
    )
    assert masked_rows(graph, "keep", masked_when=False) == PARTIAL


def test_a_key_padding_mask_alone_masks_whole_rows_only_when_empty():
    graph = _graph(
        {"pad": _int(2, T)},
        ("zero", "aten.eq.Scalar", ["%pad", 0], {}, _bool(2, T)),
        ("m", "aten.view.default", ["%zero", [2, 1, 1, T]], {}, _bool(2, 1, 1, T)),
    )
    assert masked_rows(graph, "m", masked_when=True) == WHOLE


def test_a_mask_that_always_keeps_the_diagonal_never_masks_a_row():
    graph = _graph(
        {"pad": _bool(2, T)},
        *CAUSAL,
        ("eye", "aten.eq.Tensor", ["%cols", "%rows"], {}, _bool(T, T)),
        ("p3", "aten.unsqueeze.default", ["%pad", 1], {}, _bool(2, 1, T)),
        ("keep", "aten.__or__.Tensor", ["%eye", "%p3"], {}, _bool(2, T, T)),
    )
    assert masked_rows(graph, "keep", masked_when=False) == NEVER


def test_what_it_cannot_evaluate_it_does_not_judge():
    unknown_op = _graph(
        {"pad": _bool(2, T)},
        ("s", "aten.cumsum.default", ["%pad", -1], {}, _int(2, T)),
        ("m", "aten.eq.Scalar", ["%s", 0], {}, _bool(2, T)),
    )
    assert masked_rows(unknown_op, "m", masked_when=True) is None
    float_input = _graph(
        {"scores": TensorInfo("float32", (2, T))},
        ("m", "aten.lt.Scalar", ["%scores", 0.0], {}, _bool(2, T)),
    )
    assert masked_rows(float_input, "m", masked_when=True) is None
    constant_only = _graph({}, *CAUSAL)
    assert masked_rows(constant_only, "causal", masked_when=False) is None


def test_a_padding_mask_or_the_identity_never_masks_a_row():
    """SASRec's ``causal & keys | eye(L)``: the diagonal is always kept."""
    graph = _graph(
        {"seq": _int(2, T)},
        *CAUSAL,
        ("keys", "aten.ne.Scalar", ["%seq", 0], {}, _bool(2, T)),
        ("k3", "aten.unsqueeze.default", ["%keys", 1], {}, _bool(2, 1, T)),
        ("both", "aten.__and__.Tensor", ["%causal", "%k3"], {}, _bool(2, T, T)),
        ("eye", "aten.eye.default", [T], {"dtype": DType("bool")}, _bool(T, T)),
        ("keep", "aten.__or__.Tensor", ["%both", "%eye"], {}, _bool(2, T, T)),
    )
    assert masked_rows(graph, "keep", masked_when=False) == NEVER
    assert masked_rows(graph, "both", masked_when=False) == PARTIAL


def test_a_pad_id_other_than_0_is_probed():
    """``ids != 50256`` under a causal mask: left padding with GPT-2's pad id."""
    graph = _graph(
        {"ids": _int(2, T)},
        *CAUSAL,
        ("keys", "aten.ne.Scalar", ["%ids", 50256], {}, _bool(2, T)),
        ("k3", "aten.unsqueeze.default", ["%keys", 1], {}, _bool(2, 1, T)),
        ("keep", "aten.__and__.Tensor", ["%causal", "%k3"], {}, _bool(2, T, T)),
    )
    assert masked_rows(graph, "keep", masked_when=False) == PARTIAL


def test_a_mask_input_with_its_own_query_axis_can_mask_some_rows():
    """A precomputed (B, T, T) mask (causal and left padding, made outside the model)."""
    graph = _graph(
        {"mask": _bool(2, T, T)},
        ("m4", "aten.unsqueeze.default", ["%mask", 1], {}, _bool(2, 1, T, T)),
    )
    assert masked_rows(graph, "m4", masked_when=False) == PARTIAL


def test_three_inputs_are_not_judged():
    graph = _graph(
        {"a": _int(2, T), "b": _int(2, T), "c": _int(2, T)},
        ("x", "aten.ne.Scalar", ["%a", 0], {}, _bool(2, T)),
        ("y", "aten.eq.Scalar", ["%b", 0], {}, _bool(2, T)),
        ("z", "aten.gt.Scalar", ["%c", 100], {}, _bool(2, T)),
        ("xy", "aten.__or__.Tensor", ["%x", "%y"], {}, _bool(2, T)),
        ("keep", "aten.__or__.Tensor", ["%xy", "%z"], {}, _bool(2, T)),
    )
    assert masked_rows(graph, "keep", masked_when=False) is None


def test_an_input_too_large_or_empty_is_not_judged():
    long = _graph(
        {"ids": _int(2, 20000)},
        ("head", "aten.slice.Tensor", ["%ids", 1, 0, T], {}, _int(2, T)),
        ("m", "aten.eq.Scalar", ["%head", 0], {}, _bool(2, T)),
    )
    assert masked_rows(long, "m", masked_when=True) is None
    empty = _graph({"ids": _int(2, 0)}, ("m", "aten.eq.Scalar", ["%ids", 0], {}, _bool(2, 0)))
    assert masked_rows(empty, "m", masked_when=True) is None


def test_a_padding_mask_indexed_as_transformers_builds_it():
    """``padding_mask[batch_idx, kv_idx]`` (aten.index.Tensor) beside ``new_ones``: a key
    padding mask alone masks whole rows only for an empty sequence."""
    graph = _graph(
        {"mask": _int(2, T)},
        ("b", "aten.arange.default", [2], {}, _int(2)),
        ("b4", "aten.view.default", ["%b", [2, 1, 1, 1]], {}, _int(2, 1, 1, 1)),
        ("k", "aten.arange.default", [T], {}, _int(T)),
        ("k4", "aten.view.default", ["%k", [1, 1, 1, T]], {}, _int(1, 1, 1, T)),
        ("pad", "aten._to_copy.default", ["%mask"], {"dtype": DType("bool")}, _bool(2, T)),
        ("keys", "aten.index.Tensor", ["%pad", ["%b4", "%k4"]], {}, _bool(2, 1, 1, T)),
        ("ones", "aten.new_ones.default", ["%keys", []], {}, _bool()),
        ("keep", "aten.__and__.Tensor", ["%ones", "%keys"], {}, _bool(2, 1, 1, T)),
    )
    assert masked_rows(graph, "keep", masked_when=False) == WHOLE
