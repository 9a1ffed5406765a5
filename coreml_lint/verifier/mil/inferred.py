"""Run coremltools' own ``value_inference`` on runtime values.

coremltools implements ``value_inference`` for constant folding: it reads ``self.x.val``
and friends. We call it on a shallow copy of the op whose inputs are replaced by stand-in
vars holding our numpy values, so the real program is never touched. Only the op types in
:data:`TRUSTED_OPS` go this way; each was read (mil-oracle.md lists the wrong ones, which
are replaced in the kernel modules) and each has a conformance test against torch.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from coreml_lint.verifier.mil.registry import TRUSTED, kernel


def _names(text: str) -> list[str]:
    return text.split()


ELEMENTWISE_BINARY = _names(
    "add sub mul real_div floor_div mod pow maximum minimum equal not_equal greater "
    "greater_equal less less_equal logical_and logical_or logical_xor"
)
ELEMENTWISE_UNARY = _names(
    "abs acos asin atan atanh ceil clip cos cosh exp exp2 floor inverse log logical_not "
    "round rsqrt sign sin sinh sqrt square tan tanh threshold cast"
)
ACTIVATIONS = _names(
    "relu relu6 leaky_relu elu linear_activation prelu sigmoid sigmoid_hard softmax "
    "softsign scaled_tanh clamped_relu"
)
REDUCTIONS = _names(
    "reduce_sum reduce_mean reduce_max reduce_min reduce_prod reduce_argmax reduce_argmin "
    "reduce_l1_norm reduce_l2_norm reduce_log_sum reduce_log_sum_exp reduce_sum_square"
)
TENSOR = _names(
    "reshape transpose expand_dims slice_by_index split stack tile pad gather "
    "gather_along_axis select fill fill_like shape identity topk argsort non_zero "
    "flatten2d reverse slice_update"
)
LINEAR = _names("linear matmul einsum layer_norm l2_norm")
TRUSTED_OPS = ELEMENTWISE_BINARY + ELEMENTWISE_UNARY + ACTIVATIONS + REDUCTIONS + TENSOR + LINEAR


class _Held:
    """Stands in for a MIL ``Var`` inside ``value_inference``: same type, our value."""

    __slots__ = ("_var", "sym_val", "val")

    def __init__(self, var: Any, value: Any) -> None:
        self._var = var
        self.val = value
        self.sym_val = value

    def __getattr__(self, name: str) -> Any:  # dtype, sym_type, name, op, ...
        return getattr(self._var, name)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(np.shape(self.val))

    @property
    def rank(self) -> int:
        return np.ndim(self.val)


def run_value_inference(op: Any, args: dict[str, Any]) -> Any:
    """``op.value_inference()`` computed on ``args`` instead of the op's compile-time values."""
    shadow = object.__new__(type(op))
    shadow.__dict__.update(op.__dict__)
    held: dict[str, Any] = {}
    for name, var in op._input_vars.items():
        if var is None:
            held[name] = None
        elif isinstance(var, (list, tuple)):
            held[name] = tuple(_Held(v, a) for v, a in zip(var, args[name], strict=True))
        else:
            held[name] = _Held(var, args[name])
        setattr(shadow, name, held[name])
    shadow._input_vars = held
    return type(op).value_inference(shadow)


kernel(*TRUSTED_OPS, how=TRUSTED)(run_value_inference)
