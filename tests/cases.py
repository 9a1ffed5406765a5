"""Pitfall models and their fixed twins, with what the stock partitioner really does.

Each :class:`Case` says which error codes coreml-lint must report (``expect``; empty means
"no error") and what the oracle must observe when the model is lowered with the stock
``CoreMLPartitioner``: a crash whose message matches ``crash``, or a successful lowering
whose MIL shows the wrong-value signature ``silent`` (a predicate on the lowering), or a
clean lowering (``expect`` empty). The same table drives the fast lint tests and the slow
oracle tests, so a rule cannot pass its lint test while its oracle says otherwise.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class Case:
    id: str
    make: Callable[[], tuple[nn.Module, tuple[Any, ...]]]
    expect: frozenset[str] = frozenset()
    settings: dict[str, Any] = field(default_factory=dict)
    crash: str | None = None  # regex the lowering error must match
    silent: Callable[[Any], bool] | None = None  # MIL evidence of a wrong-value lowering
    clean: Callable[[Any], bool] | None = None  # extra evidence that the fixed form is right
    runs_on_portable: bool | None = None  # load+run the .pte on the pip portable runtime
    warnings: frozenset[str] | None = None  # warning codes, when the case is about one


CASES: list[Case] = []


def case(id: str, *, expect: set[str] | frozenset[str] = frozenset(), **kw: Any):
    def register(make: Callable[[], tuple[nn.Module, tuple[Any, ...]]]):
        CASES.append(Case(id, make, frozenset(expect), **kw))
        return make

    return register


def module(forward: Callable[..., Any], **buffers: torch.Tensor) -> nn.Module:
    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            for name, value in buffers.items():
                self.register_buffer(name, value)

        def forward(self, *args: Any) -> Any:
            return forward(self, *args)

    return M()


def frame(dtype: torch.dtype = torch.uint8) -> torch.Tensor:
    return torch.randint(0, 100, (1, 3, 8, 8)).to(dtype)


def returns(pattern: str) -> Callable[[Any], bool]:
    return lambda lowered: re.search(pattern, lowered.mil) is not None


# ---------------------------------------------------------------- CML101 / CML102 (pitfall 1)
@case("uint8-input", expect={"CML101"}, crash=r"KeyError: torch\.uint8")
def _():
    return module(lambda s, f: f.float() / 255), (frame(),)


@case("int8-input-permute", expect={"CML101"}, crash=r"KeyError: torch\.int8")
def _():
    return module(lambda s, f: f.permute(0, 2, 3, 1).float() * 0.05), (frame(torch.int8),)


@case("int32-input", expect=set())
def _():
    return module(lambda s, f: f.float() / 255), (frame(torch.int32),)


@case(
    "uint8-made-on-cpu",
    expect={"CML101", "CML102"},
    settings={"skip": ["dim_order_ops._to_dim_order_copy.default"]},
    crash=r"KeyError: torch\.uint8",
)
def _():
    def forward(s, x):
        q = torch.clamp(x * 255, 0, 255).to(torch.uint8)
        return q.permute(0, 2, 3, 1).float()

    return module(forward), (torch.rand(1, 3, 4, 4),)


@case("uint8-inside-one-partition", expect=set())
def _():
    def forward(s, x):
        q = torch.clamp(x * 255, 0, 255).to(torch.uint8)
        return q.permute(0, 2, 3, 1).float()

    return module(forward), (torch.rand(1, 3, 4, 4),)


@case(
    "int8-output",
    expect={"CML102"},
    silent=lambda lowered: any(
        dtype == "INT32" for d in lowered.delegates for _, dtype in d.outputs
    ),
)
def _():
    return module(lambda s, x: (x * 10).to(torch.int8)), (torch.randn(2, 4),)


@case(
    "int8-output-cast-on-cpu",
    expect=set(),
    settings={"skip": ["dim_order_ops._to_dim_order_copy.default"]},
)
def _():
    return module(lambda s, x: (x * 10).to(torch.int8)), (torch.randn(2, 4),)


# ---------------------------------------------------------------- CML103 (pitfall 2)
MASK = torch.tensor([[0, 1, 200, 255, 3, 0, 7, 9]], dtype=torch.uint8)


@case("uint8-buffer", expect={"CML103"}, crash=r"type domain .*but got tensor\[1,8,uint8\]")
def _():
    return module(lambda s, x: x * s.mask.float(), mask=MASK), (torch.randn(1, 8),)


@case("uint8-buffer-ios17", expect=set(), settings={"ios": 17})
def _():
    return module(lambda s, x: x * s.mask.float(), mask=MASK), (torch.randn(1, 8),)


@case(
    "uint8-buffer-not-taken-over",
    expect={"CML101"},
    settings={"take_over_constant_data": False},
    crash=r"KeyError: torch\.uint8",
)
def _():
    return module(lambda s, x: x * s.mask.float(), mask=MASK), (torch.randn(1, 8),)


@case("int32-buffer", expect=set())
def _():
    return module(lambda s, x: x * s.mask.float(), mask=MASK.to(torch.int32)), (torch.randn(1, 8),)


@case("uint8-lut-sliced", expect={"CML103"}, crash=r"slice_by_index.*but got tensor\[256,uint8\]")
def _():
    lut = torch.arange(256).to(torch.uint8)
    return module(lambda s, x: x + s.lut[:8].float(), lut=lut), (torch.randn(8),)


@case("float16-lut", expect=set())
def _():
    lut = torch.arange(256).to(torch.float16)
    return module(lambda s, x: x + s.lut[:8].float(), lut=lut), (torch.randn(8),)


def int8_weight_linear() -> tuple[nn.Module, tuple[Any, ...]]:
    import torch.ao.quantization.fx._decomposed  # registers quantized_decomposed ops

    def forward(s, x):
        w = torch.ops.quantized_decomposed.dequantize_per_channel(
            s.w, s.scale, s.zp, 0, -128, 127, torch.int8
        )
        return F.linear(x, w)

    torch.manual_seed(0)
    weight = torch.randint(-100, 100, (8, 16), dtype=torch.int8)
    zero_points = torch.zeros(8, dtype=torch.int64)
    return module(forward, w=weight, scale=torch.full((8,), 0.01), zp=zero_points), (
        torch.randn(2, 16),
    )


@case("int8-weight-dequantize", expect={"CML103"}, crash=r"Provided int8")
def _():
    return int8_weight_linear()


@case("int8-weight-dequantize-ios17", expect=set(), settings={"ios": 17})
def _():
    return int8_weight_linear()


# ---------------------------------------------------------------- CML106 (pitfalls 2, 7)
@case("fp16-input", expect={"CML106"}, crash=r"To use fp16 input, please set minimum deployment")
def _():
    return module(lambda s, x: x * 2 + 1), (torch.randn(2, 8).half(),)


@case("fp16-input-ios16", expect=set(), settings={"ios": 16})
def _():
    return module(lambda s, x: x * 2 + 1), (torch.randn(2, 8).half(),)


@case(
    "layernorm-fp16-ios16",
    expect={"CML304"},
    settings={"ios": 16},
    crash=r"epsilon has dtype fp32 whereas x has dtype fp16",
)
def _():
    return module(lambda s, x: F.layer_norm(x, (8,)) * 2), (torch.randn(2, 8).half(),)


@case("fp16-model-fp32-input", expect=set())
def _():
    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(8, 8).half()

        def forward(self, x):
            return self.lin(x.half()).float()

    return M(), (torch.randn(2, 8),)


@case("unfold-on-cpu", expect=set())
def _():
    return module(lambda s, x: x.unfold(1, 2, 2) * 2), (torch.randn(2, 8),)


# ---------------------------------------------------------------- CML104 (pitfall 5)
@case("bfloat16-cast", expect={"CML104"}, crash=r"KeyError: torch\.bfloat16")
def _():
    return module(lambda s, x: (x.to(torch.bfloat16) + 1).float()), (torch.randn(2, 4),)


@case("bfloat16-linear", expect={"CML104"}, crash=r"KeyError: torch\.bfloat16")
def _():
    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(8, 8).to(torch.bfloat16)

        def forward(self, x, y):
            return torch.matmul(self.lin(x.to(torch.bfloat16)).float(), y)

    return M(), (torch.randn(1, 2, 8), torch.randn(8, 3))


@case("float16-cast", expect=set())
def _():
    return module(lambda s, x: (x.to(torch.float16) + 1).float()), (torch.randn(2, 4),)


# ---------------------------------------------------------------- CML105 (pitfall 4)
def _bool_case(id: str, op: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], bad: bool):
    @case(id, expect={"CML105"} if bad else set(), crash=r"type domain" if bad else None)
    def _():
        return module(lambda s, a, b: op(a > 0, b > 0).float()), (
            torch.randn(2, 6),
            torch.randn(2, 6),
        )


_bool_case("bool-amax", lambda m, n: m.amax(dim=1), True)
_bool_case("bool-max-all", lambda m, n: torch.max(m), True)
_bool_case("bool-min-dim", lambda m, n: m.min(dim=1).values, True)
_bool_case("bool-maximum", lambda m, n: torch.maximum(m, n), True)
_bool_case("bool-minimum", lambda m, n: torch.minimum(m, n), True)
_bool_case("bool-any", lambda m, n: m.any(dim=1), False)
_bool_case("bool-logical-or", lambda m, n: torch.logical_or(m, n), False)
_bool_case("float-amax", lambda m, n: m.float().amax(dim=1), False)


# ---------------------------------------------------------------- CML2xx (pitfall 3)
def counter(dtype: torch.dtype = torch.float32) -> nn.Module:
    def forward(s, x):
        s.count.add_(1)
        return x + s.count

    return module(forward, count=torch.zeros(1, 4, dtype=dtype))


@case("state-default-target", expect={"CML201"}, crash=r"State model is supported only >= iOS18")
def _():
    return counter(), (torch.randn(1, 4),)


@case("state-not-taken-over", expect=set(), settings={"take_over_mutable_buffer": False})
def _():
    return counter(), (torch.randn(1, 4),)


@case("state-ios18", expect=set(), settings={"ios": 18}, clean=returns(r"read_state"))
def _():
    return counter(), (torch.randn(1, 4),)


@case("kv-cache-slice-ios18", expect=set(), settings={"ios": 18})
def _():
    def forward(s, x):
        s.cache[:, 2:3] = x
        return s.cache * 2

    return module(forward, cache=torch.zeros(1, 8, 4)), (torch.randn(1, 1, 4),)


@case(
    "state-cpu-reader-ios18",
    expect={"CML202"},
    settings={"ios": 18, "skip": ["aten.mul.tensor"]},
    crash=r"Tried to erase Node|no outputs",
)
def _():
    def forward(s, x):
        s.count.add_(1)
        return torch.sin(x) * s.count

    return module(forward, count=torch.zeros(1, 4)), (torch.randn(1, 4),)


@case(
    "state-cpu-reader-copy-ios18",
    expect=set(),
    settings={"ios": 18, "skip": ["aten.mul.tensor"]},
)
def _():
    def forward(s, x):
        s.count.add_(1)
        return torch.sin(x) * (s.count + 0.0)

    return module(forward, count=torch.zeros(1, 4)), (torch.randn(1, 4),)


@case(
    "int-state-ios18",
    expect={"CML203"},
    settings={"ios": 18},
    silent=returns(r"%count: \(1, 4, ?fp16\)\(State\)|%count: \(1,4,fp16\)\(State\)"),
)
def _():
    return counter(torch.int32), (torch.randn(1, 4),)


def position_counters(count: int, then_add: bool) -> nn.Module:
    """transformers' static cache: each layer sets an int64 0-d ``cumulative_length`` from
    ``cache_position[0]`` and then adds the new tokens' length."""

    def forward(s, x, cache_position):
        for i in range(count):
            length = getattr(s, f"length{i}")
            length.copy_(cache_position[0])
            if then_add:
                length += x.shape[0]
        return x * 2

    buffers = {f"length{i}": torch.zeros((), dtype=torch.int64) for i in range(count)}
    return module(forward, **buffers)


@case(
    "int-states-same-value-ios18",
    expect={"CML203"},
    settings={"ios": 18},
    crash=r"KeyError:.*coreml_update_state",
)
def _():
    return position_counters(2, then_add=True), (torch.randn(2, 3), torch.tensor([5]))


@case("int-state-one-value-ios18", expect={"CML203"}, settings={"ios": 18})
def _():
    return position_counters(1, then_add=True), (torch.randn(2, 3), torch.tensor([5]))


@case("buffer-only-copied-into", expect=set())
def _():
    """``copy_`` into a buffer nothing reads: torch's run_decompositions writes the source
    straight back (``_remove_unnecessary_copy_op_pass``), so there is no Core ML state and
    even the default target lowers."""
    return position_counters(2, then_add=False), (torch.randn(2, 3), torch.tensor([5]))


# ---------------------------------------------------------------- CML301 (pitfall 6)
XI = (torch.full((1, 4), 1, dtype=torch.int32),)


@case("full-int-no-dtype", expect={"CML301"}, silent=returns(r"3000\.0"))
def _():
    return module(lambda s, xi: torch.full((1, 4), 3001) + xi), XI


@case("full-int-dtype", expect=set(), clean=returns(r"3001"))
def _():
    return module(lambda s, xi: torch.full((1, 4), 3001, dtype=torch.int32) + xi), XI


@case("zeros-int-dtype", expect={"CML301"}, silent=returns(r"3000\.0"))
def _():
    return module(lambda s, xi: torch.zeros((1, 4), dtype=torch.int32) + xi + 3001), XI


@case("new-zeros-int", expect={"CML301"}, silent=returns(r"3000\.0"))
def _():
    return module(lambda s, xi: xi.new_zeros((1, 4)) + xi + 3001), XI


@case("zeros-like-int", expect=set(), clean=returns(r"3001"))
def _():
    return module(lambda s, xi: torch.zeros_like(xi) + xi + 3001), XI


@case("full-int-float-use", expect=set(), clean=returns(r"mul\(x=\[\[2\.0"))
def _():
    """An integer fill only used in float arithmetic: torch promotes it to float as well."""
    return module(lambda s, x: torch.full((1, 4), 2) * x), (torch.randn(1, 4),)


@case("float-zeros", expect=set())
def _():
    return module(lambda s, x: torch.zeros(1, 4) + x), (torch.randn(1, 4),)


@case(
    "full-index-gather",
    expect={"CML301"},
    crash=r"gather_along_axis.*\['int32'\] but got",
)
def _():
    def forward(s, x):
        return torch.gather(x, 1, torch.full((4, 16), 0) + torch.arange(16))

    return module(forward), (torch.randn(4, 16),)


# ---------------------------------------------------------------- CML302 (pitfall 11)
def mha(mask: torch.Tensor, need_weights: bool = False) -> nn.Module:
    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.mha = nn.MultiheadAttention(16, 2, batch_first=True)
            self.register_buffer("mask", mask)

        def forward(self, q):
            return self.mha(q, q, q, attn_mask=self.mask, need_weights=need_weights)[0]

    return M().eval()


CAUSAL = torch.triu(torch.ones(5, 5, dtype=torch.bool), 1)


def causal_mask_row0(lowered: Any) -> list[float] | None:
    """Row 0 of the additive attention mask folded into a MIL constant, if any."""
    for delegate in lowered.delegates:
        for value in delegate.consts.values():
            shape = getattr(value, "shape", ())
            if len(shape) >= 2 and shape[-2:] == (5, 5):
                return [float(v) for v in value.reshape(-1, 5, 5)[0, 0]]
    return None


def inverted_mask(lowered: Any) -> bool:
    row = causal_mask_row0(lowered)
    return row is not None and row[0] < -1000 and all(v == 0 for v in row[1:])


def causal_row0(lowered: Any) -> bool:
    row = causal_mask_row0(lowered)
    return row is not None and row[0] == 0 and all(v < -1000 for v in row[1:])


@case("mha-bool-mask", expect={"CML302"}, silent=inverted_mask)
def _():
    return mha(CAUSAL), (torch.randn(1, 5, 16),)


@case("mha-bool-mask-need-weights", expect={"CML302"}, crash=r"whereas x has dtype bool")
def _():
    return mha(CAUSAL, need_weights=True), (torch.randn(1, 5, 16),)


@case(
    "mha-bool-key-padding-mask",
    expect={"CML302"},
    silent=returns(r"\(1, 5, bool\)\(Tensor\) = select"),
)
def _():
    attention = nn.MultiheadAttention(16, 2, batch_first=True).eval()
    forward = lambda s, q, pad: attention(q, q, q, key_padding_mask=pad, need_weights=False)[0]  # noqa: E731
    return module(forward), (
        torch.randn(1, 5, 16),
        torch.tensor([[False, False, False, True, True]]),
    )


@case("mha-float-mask", expect=set(), clean=causal_row0)
def _():
    return mha(torch.zeros(5, 5).masked_fill(CAUSAL, float("-inf"))), (torch.randn(1, 5, 16),)


def like_masked_fill(like: Callable[..., torch.Tensor]) -> tuple[nn.Module, tuple[Any, ...]]:
    def forward(s, x):
        m = x > 0
        return like(m, dtype=torch.float32).masked_fill(m, 0.25) * x

    return module(forward), (torch.randn(2, 4),)


@case("zeros-like-masked-fill", expect={"CML302"}, silent=returns(r"\(2, 4, bool\)[^\n]*= select"))
def _():
    return like_masked_fill(torch.zeros_like)


@case("empty-like-masked-fill", expect={"CML302"}, silent=returns(r"\(2, 4, bool\)[^\n]*= select"))
def _():
    return like_masked_fill(torch.empty_like)


@case(
    "full-like-int-masked-fill", expect={"CML302"}, silent=returns(r"\(2, 4, int32\)[^\n]*= select")
)
def _():
    return like_masked_fill(lambda m, dtype: torch.full_like(m, 0, dtype=dtype))


@case("full-like-float-masked-fill", expect=set(), clean=returns(r"\(2, 4, fp16\)[^\n]*= select"))
def _():
    return like_masked_fill(lambda m, dtype: torch.full_like(m, 0.0, dtype=dtype))


@case("ones-like-masked-fill", expect=set(), clean=returns(r"\(2, 4, fp16\)[^\n]*= select"))
def _():
    return like_masked_fill(torch.ones_like)


@case("ones-like-other-dtype-arithmetic", expect=set())
def _():
    # The kept int32 dtype does not change this result: coremltools folds 1 * 0.5 to 0.5.
    return module(lambda s, xi, x: torch.ones_like(xi, dtype=torch.float32) * 0.5 + x), (
        torch.ones(2, 4, dtype=torch.int32),
        torch.randn(2, 4),
    )


# ---------------------------------------------------------------- CML303 / CML304 (pitfall 7)
def norm(m: nn.Module, dtype: torch.dtype = torch.float32) -> tuple[nn.Module, tuple[Any, ...]]:
    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.n = m

        def forward(self, x):
            return self.n(x)

    return M().to(dtype), (torch.randn(2, 5, 16, dtype=dtype),)


@case("rmsnorm-no-eps", expect={"CML303"}, crash=r"got 3 input\(s\), expected \[4\]")
def _():
    return norm(nn.RMSNorm(16))


@case("rmsnorm-no-eps-no-affine", expect={"CML303"}, crash=r"got 2 input\(s\), expected \[4\]")
def _():
    return norm(nn.RMSNorm(16, elementwise_affine=False))


@case("rmsnorm-eps", expect=set())
def _():
    return norm(nn.RMSNorm(16, eps=1e-6))


@case("rmsnorm-no-eps-aten-skip", expect=set(), settings={"skip": ["rms_norm.default"]})
def _():
    return norm(nn.RMSNorm(16))


@case(
    "rmsnorm-fp16-ios16",
    expect={"CML304"},
    settings={"ios": 16},
    crash=r"y has dtype fp32 whereas x has dtype fp16",
)
def _():
    return norm(nn.RMSNorm(16, eps=1e-6), torch.float16)


# ---------------------------------------------------------------- CML305 (pitfall 9)
@case("gelu-tanh", expect={"CML305"}, silent=returns(r'gelu\(x=[^)]*mode="EXACT"'))
def _():
    return module(lambda s, x: F.gelu(x, approximate="tanh")), (torch.randn(2, 8),)


@case("gelu-tanh-module", expect={"CML305"}, silent=returns(r'mode="EXACT"'))
def _():
    return norm(nn.GELU(approximate="tanh"))


@case("gelu-exact", expect=set())
def _():
    return module(lambda s, x: F.gelu(x)), (torch.randn(2, 8),)


@case(
    "gelu-tanh-formula",
    expect=set(),
    clean=lambda lowered: 'mode="EXACT"' not in lowered.mil,
)
def _():
    def forward(s, x):
        return 0.5 * x * (1 + torch.tanh(0.7978845608 * (x + 0.044715 * x.pow(3))))

    return module(forward), (torch.randn(2, 8),)


@case("gelu-tanh-skipped", expect=set(), settings={"skip": ["aten.gelu.default"]})
def _():
    return module(lambda s, x: F.gelu(x, approximate="tanh")), (torch.randn(2, 8),)


# ---------------------------------------------------------------- CML306 (G2)
@case("maxpool-no-stride", expect={"CML306"}, crash=r"expected minimum 3 inputs")
def _():
    return module(lambda s, x: F.max_pool2d(x, 2)), (torch.randn(1, 3, 8, 8),)


@case("maxpool-module", expect=set())
def _():
    return norm(nn.MaxPool2d(2))[0], (torch.randn(1, 3, 8, 8),)


# ---------------------------------------------------------------- CML307 (found by probing)
def attention(dtype: torch.dtype, mask: str, scale: float | None = None) -> nn.Module:
    """Self-attention on ``x`` cast to ``dtype``, masked the way decoders mask it, with the
    explicit ``scale=`` transformers passes when ``scale`` is given."""

    def forward(s, x):
        q = x.to(dtype)
        n = q.shape[-2]
        causal = torch.tril(torch.ones(n, n, dtype=torch.bool))
        kw: dict[str, Any] = {} if scale is None else {"scale": scale}
        if mask == "causal":
            kw["is_causal"] = True
        elif mask == "bool":
            kw["attn_mask"] = causal
        elif mask == "float":
            kw["attn_mask"] = torch.zeros(n, n, dtype=dtype).masked_fill(~causal, float("-inf"))
        return F.scaled_dot_product_attention(q, q, q, **kw).float()

    return module(forward)


HEADS = (torch.randn(1, 2, 6, 8),)
SDPA_FP16_CRASH = r"In op, of type (sub|add|mul), named (sub|add|mul)_\d+.*dtype fp\d+ whereas"
for _mask in ("causal", "bool", "float"):
    case(f"fp16-sdpa-{_mask}-mask", expect={"CML307"}, crash=SDPA_FP16_CRASH)(
        lambda m=_mask: (attention(torch.float16, m), HEADS)
    )
case("fp16-sdpa-causal-ios18", expect=set(), settings={"ios": 18})(
    lambda: (attention(torch.float16, "causal"), HEADS)
)
case("fp16-sdpa-unmasked", expect=set())(lambda: (attention(torch.float16, "none"), HEADS))
case("fp32-sdpa-causal", expect=set())(lambda: (attention(torch.float32, "causal"), HEADS))
case("fp16-sdpa-scale", expect={"CML307"}, crash=r"In op, of type mul, named mul_\d+.*dtype fp")(
    lambda: (attention(torch.float16, "none", scale=0.25), HEADS)
)
case(
    "fp16-sdpa-scale-causal-ios18",
    expect={"CML307"},
    settings={"ios": 18},
    crash=SDPA_FP16_CRASH,
)(lambda: (attention(torch.float16, "causal", scale=0.25), HEADS))
case("fp32-sdpa-scale", expect=set())(lambda: (attention(torch.float32, "bool", 0.25), HEADS))


# ---------------------------------------------------------------- CML308 (found by probing)
def powered(exponent: float | int, consumer: str) -> nn.Module:
    """float16 ``pow`` feeding a product with weights, as GPT-2's tanh GELU feeds Conv1D."""

    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.randn(8, 8) * 0.1)
            self.b = nn.Parameter(torch.zeros(8))
            self.linear = nn.Linear(8, 8)

        def forward(self, x):
            h = x.half()
            p = torch.tanh(torch.pow(h, exponent) * 0.5 + h)
            if consumer == "addmm":
                out = torch.addmm(self.b, p, self.w)
            elif consumer == "matmul":
                out = p @ self.w.t()
            else:
                out = self.linear(p)
            return out.float()

    return M().half()


ROWS = (torch.randn(4, 8),)
SAME_DTYPE = r"must have the same data type as the named input"
case("fp16-pow-float-addmm", expect={"CML308"}, crash=SAME_DTYPE)(
    lambda: (powered(3.0, "addmm"), ROWS)
)
case("fp16-pow-float-addmm-ios18", expect={"CML308"}, settings={"ios": 18}, crash=SAME_DTYPE)(
    lambda: (powered(3.0, "addmm"), ROWS)
)
case("fp16-pow-fractional-matmul", expect={"CML308"}, crash=SAME_DTYPE)(
    lambda: (powered(2.5, "matmul"), ROWS)
)
case("fp16-pow-float-matmul-ios18", expect=set(), settings={"ios": 18})(
    lambda: (powered(3.0, "matmul"), ROWS)
)
case("fp16-pow-int-addmm", expect=set())(lambda: (powered(3, "addmm"), ROWS))
case("fp16-pow-float-linear", expect=set())(lambda: (powered(3.0, "linear"), ROWS))


# ---------------------------------------------------------------- CML401 (pitfall 8)
def assign(index: Callable[[torch.Tensor, torch.Tensor], None], v_shape: tuple[int, ...]):
    def forward(s, x, v):
        y = x.clone()
        index(y, v)
        return y

    return module(forward), (torch.randn(2, 4, 3), torch.randn(*v_shape))


def _set(y, key, v):
    y[key] = v


@case("index-put-slice-multi", expect={"CML401"}, crash=r"rank 1 != other inputs rank 0")
def _():
    return assign(lambda y, v: _set(y, (slice(None), torch.tensor([0, 2])), v), (2, 2, 3))


@case("index-put-slice-single", expect=set())
def _():
    return assign(lambda y, v: _set(y, (slice(None), torch.tensor([1])), v), (2, 1, 3))


@case("index-put-broadcast", expect={"CML401"}, crash=r"Component tensor")
def _():
    i0, i1 = torch.tensor([[0], [1]]), torch.tensor([[0, 2, 3]])
    return assign(lambda y, v: _set(y, (i0, i1), v), (2, 3, 3))


@case("index-put-same-shape", expect=set())
def _():
    i0, i1 = torch.tensor([0, 1]), torch.tensor([3, 0])
    return assign(lambda y, v: _set(y, (i0, i1), v), (2, 3))


@case(
    "index-put-accumulate-slice",
    expect={"CML401"},
    crash=r"only torch.index_put\(\.\.\., accumulate=False\)",
)
def _():
    idx = torch.tensor([1, 1])
    return assign(lambda y, v: torch.ops.aten.index_put_(y, [None, idx], v, True), (2, 2, 3))


@case("index-put-bool-mask", expect=set())
def _():
    def forward(s, x, v):
        y = x.clone()
        y[x > 0] = 0.5
        return y + v

    return module(forward), (torch.randn(2, 4, 3), torch.randn(2, 4, 3))


# ---------------------------------------------------------------- CML501 (pitfall 10)
@case(
    "output-clone-of-input",
    expect={"CML501"},
    silent=lambda lowered: any(d.returns_an_input for d in lowered.delegates),
)
def _():
    return module(lambda s, x: (x.clone(), x * 2)), (torch.randn(2, 4),)


@case(
    "output-clone-of-output",
    expect={"CML501"},
    silent=lambda lowered: any(d.duplicate_outputs for d in lowered.delegates),
)
def _():
    def forward(s, x):
        y = x * 2
        return y, y.clone()

    return module(forward), (torch.randn(2, 4),)


@case(
    "output-mul-one",
    expect=set(),
    clean=lambda lowered: not any(d.returns_an_input for d in lowered.delegates),
)
def _():
    return module(lambda s, x: (x * 1.0, x * 2)), (torch.randn(2, 4),)


@case("output-clone-inside", expect=set())
def _():
    return module(lambda s, x: (x * 3).clone() + 1), (torch.randn(2, 4),)


# ---------------------------------------------------------------- CML601 (pitfall 12)
@case("rank6-sum", expect={"CML601"}, crash=r"rank <= 5")
def _():
    return module(lambda s, t: t.reshape(1, 2, 3, 2, 2, 5).sum(0).sum(0)), (torch.randn(120),)


@case("rank6-reshape-permute", expect=set())
def _():
    def forward(s, t):
        return t.reshape(1, 2, 3, 2, 2, 5).permute(5, 4, 3, 2, 1, 0).reshape(-1)

    return module(forward), (torch.randn(120),)


@case("rank5-sum", expect=set())
def _():
    return module(lambda s, t: t.reshape(2, 3, 2, 2, 5).sum(0)), (torch.randn(120),)


# ---------------------------------------------------------------- CML602 (pitfall 13)
def constant_plus(s, x):
    c = torch.arange(4).float() * 2
    return x + c


@case(
    "input-less-partition",
    expect={"CML602"},
    settings={"skip": ["aten.add.tensor"]},
    crash=r"no inputs in CoreML requires",
)
def _():
    return module(constant_plus), (torch.randn(4),)


@case(
    "input-less-partition-ios18",
    expect=set(),
    settings={"skip": ["aten.add.tensor"], "ios": 18},
)
def _():
    return module(constant_plus), (torch.randn(4),)


@case("constant-merged-with-input", expect=set())
def _():
    return module(lambda s, x: (torch.arange(4).float().exp(), x * 2)), (torch.randn(4),)


# ---------------------------------------------------------------- CML603 / CML604 (G1)
@case(
    "rmsnorm-edge-skip",
    expect={"CML603"},
    settings={"skip": ["aten.rms_norm.default"]},
    crash=r"Missing out variants: \{'aten::rms_norm'\}",
)
def _():
    return norm(nn.RMSNorm(16, eps=1e-6))


@case(
    "matmul-edge-skip",
    expect={"CML603"},
    settings={"skip": ["aten.matmul.default"]},
    runs_on_portable=False,
)
def _():
    return module(lambda s, x, y: torch.matmul(x, y)), (torch.randn(2, 3, 4), torch.randn(4, 5))


@case(
    "matmul-aten-skip",
    expect=set(),
    settings={"skip": ["matmul.default"]},
)
def _():
    return module(lambda s, x, y: torch.matmul(x, y)), (torch.randn(2, 3, 4), torch.randn(4, 5))


@case(
    "full-graph-acosh",
    expect={"CML604"},
    settings={"lower_full_graph": True},
    crash=r"CoreML does not support the op",
)
def _():
    return module(lambda s, x: torch.acosh(x + 2)), (torch.rand(4),)


@case(
    "skip-entry-without-effect",
    expect=set(),
    settings={"skip": ["gelu.default", "aten.div.Tensor"]},
    warnings=frozenset({"CML605"}),
    # The oracle's placement check sees gelu and div still delegated: the entries did nothing.
)
def _():
    return module(lambda s, x: F.gelu(x) / 3), (torch.randn(2, 8),)


@case("acosh-on-cpu", expect=set())
def _():
    return module(lambda s, x: torch.acosh(x + 2) * 3), (torch.rand(4),)


@case("argmax-flat-on-cpu", expect=set())
def _():
    return module(lambda s, x: torch.argmax(x * 2)), (torch.rand(3, 4),)


@case("add-alpha-on-cpu", expect=set())
def _():
    return module(lambda s, x, y: torch.add(x, y, alpha=2) * 2), (torch.rand(4), torch.rand(4))


# ---------------------------------------------------------------- clean models
@case("small-cnn", expect=set())
def _():
    net = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(16, 10),
    ).eval()
    return net, (torch.randn(1, 3, 16, 16),)


class Block(nn.Module):
    """A pre-norm transformer block, the kind users write: RMSNorm with eps, SDPA, GELU."""

    def __init__(self, d: int = 64, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.n1 = nn.RMSNorm(d, eps=1e-6)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.n2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.n1(x)).chunk(3, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.n2(x))


@case("transformer-block", expect=set())
def _():
    return Block().eval(), (torch.randn(1, 16, 64),)


@case("encoder-layer", expect=set())
def _():
    layer = nn.TransformerEncoderLayer(64, 4, dim_feedforward=128, dropout=0.0, batch_first=True)
    return layer.eval(), (torch.randn(1, 16, 64),)


CASE_IDS = [c.id for c in CASES]
BY_ID = {c.id: c for c in CASES}
