"""Base calls for ops whose operands must fit together in ways the generic search does not
try: ``legal.find_base`` starts from one cube shape and changes one operand's form at a
time, and these ops need two operands shaped for each other (``index_fill``'s int64 index
beside a 0-d value; ``affine_grid``'s ``[N, 2, 3]`` matrices beside a size list starting
at ``N``). A recurrent layer's op
(``lstm.input``: a state per layer and four weights per layer and direction, in order) is
based on the first call ``torch.nn``'s own layer makes (``modules.py``).

Each seed is one call as a model makes it, at the shapes the generic search uses (a side
of ``legal.SIDE``); the generator varies it on every axis but the shape and rank axes
(which reshape one operand at a time), and keeps only the legal variations. A recurrent
op's cases are its layers' calls alone (``generate._recurrent_cases``); its base here is
what ``edges.py`` would lower. (``_weight_norm`` has none: eager torch 2.13 crashes the
process on some of its reshaped calls, which would end a sweep worker's generation.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from coreml_lint.sweep.legal import SIDE, Call, is_legal, tensor_spec
from coreml_lint.sweep.modules import module_calls
from coreml_lint.sweep.schema import OpInfo

BATCH = 2


def _index_fill() -> tuple[Call, tuple[int, ...]]:
    cube = (SIDE, SIDE)
    index = dict(tensor_spec((2,), "int64", "index"), high=SIDE)
    tensors = [tensor_spec(cube), index, tensor_spec(())]
    return Call(tensors, [{"t": 0}, 1, {"t": 1}, {"t": 2}]), cube


def _affine_grid() -> tuple[Call, tuple[int, ...]]:
    theta = (BATCH, 2, 3)
    return Call([tensor_spec(theta)], [{"t": 0}, [BATCH, 3, SIDE, SIDE], False]), theta


SEEDS: dict[str, Callable[[], tuple[Call, tuple[int, ...]]]] = {
    "index_fill.int_Tensor": _index_fill,
    "affine_grid_generator.default": _affine_grid,
}


# Eager torch does not check these ops' weights against their sizes (it reads past a
# weight too small), so the generic search's first call that runs is no call a layer
# makes; their base is the first call their ``torch.nn`` layer makes.
RECURRENT = frozenset(
    {"lstm.input", "gru.input", "rnn_tanh.input", "lstm_cell.default", "gru_cell.default"}
)


def seeded_base(info: OpInfo) -> tuple[Call, tuple[int, ...], dict[str, Any]] | None:
    """A legal base call from ``SEEDS``, or for a ``RECURRENT`` op the first call its
    ``torch.nn`` layer makes; None for every other op (the generic search finds theirs).
    The shape is the first operand's."""
    if info.name in SEEDS:
        call, cube = SEEDS[info.name]()
        return (call, cube, {}) if is_legal(info, call) else None
    if info.name in RECURRENT:
        for _, call in module_calls(info):
            return call, tuple(call.tensors[0]["shape"]), {}
    return None
