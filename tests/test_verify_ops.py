"""Op conformance: every kernel of the MIL interpreter against the torch op it comes from.

Each test builds a tiny MIL program with coremltools' builder (``mb.program``), executes it
with the interpreter and compares with torch on the same values, over dtypes and edge
values (zeros, +-1e-3, negatives, halves for rounding, repeated indices). Trusted
``value_inference`` ops are covered the same way: the audit is these tests.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
ct = pytest.importorskip("coremltools")
logging.getLogger("coremltools").setLevel(logging.ERROR)

import torch.nn.functional as F  # noqa: E402
from coremltools.converters.mil import Builder as mb  # noqa: E402
from coremltools.converters.mil.mil import types  # noqa: E402

from coreml_lint.verifier.mil.program import Plan  # noqa: E402
from coreml_lint.verifier.mil.registry import KERNELS, Unsupported, coverage  # noqa: E402

RNG = np.random.default_rng(0)
EDGE = np.array([-3.0, -1.0, -0.5, -1e-3, 0.0, 1e-3, 0.5, 1.0, 2.5, 10.0], dtype=np.float32)
MIL_TYPES = {np.float32: types.fp32, np.int32: types.int32, np.bool_: types.bool}
IOS18 = ct.target.iOS18


def run(build: Callable[..., Any], *inputs: np.ndarray, opset: Any = None) -> list[np.ndarray]:
    """Build ``build(x[, y[, z]])`` as a MIL program over ``inputs`` and execute it."""
    specs = [
        mb.TensorSpec(shape=a.shape, dtype=MIL_TYPES[np.asarray(a).dtype.type]) for a in inputs
    ]
    kwargs = {"input_specs": specs, "opset_version": opset or ct.target.iOS17}
    if len(inputs) == 1:

        @mb.program(**kwargs)
        def prog(x):
            return build(x)
    elif len(inputs) == 2:

        @mb.program(**kwargs)
        def prog(x, y):
            return build(x, y)
    else:

        @mb.program(**kwargs)
        def prog(x, y, z):
            return build(x, y, z)

    plan = Plan.of(prog)
    assert plan.runnable, plan.unknown
    names = list(prog.functions["main"].inputs)
    values = plan.run(dict(zip(names, inputs, strict=True)))
    return [values[v.name] for v in prog.functions["main"].outputs]


def close(actual: Any, expected: Any, tol: float = 1e-5) -> None:
    expected = expected.detach().numpy() if isinstance(expected, torch.Tensor) else expected
    np.testing.assert_allclose(
        np.asarray(actual, dtype=np.float64),
        np.asarray(expected, dtype=np.float64),
        rtol=tol,
        atol=tol,
        equal_nan=True,
    )


def t(a: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.array(a))


def grid(*shape: int) -> np.ndarray:
    """Random float32 values with the edge values in front."""
    values = RNG.standard_normal(shape).astype(np.float32).reshape(-1)
    values[: min(len(EDGE), values.size)] = EDGE[: values.size]
    return values.reshape(shape)


# ------------------------------------------------------------------ elementwise unary
UNARY = {
    "abs": torch.abs,
    "ceil": torch.ceil,
    "cos": torch.cos,
    "cosh": torch.cosh,
    "exp": torch.exp,
    "exp2": torch.exp2,
    "floor": torch.floor,
    "sign": torch.sign,
    "sin": torch.sin,
    "sinh": torch.sinh,
    "square": torch.square,
    "tan": torch.tan,
    "tanh": torch.tanh,
    "atan": torch.atan,
    "erf": torch.erf,
    "round": torch.round,
    "relu": torch.relu,
    "sigmoid": torch.sigmoid,
    "softsign": F.softsign,
    "relu6": F.relu6,
    "silu": F.silu,
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name):
    x = grid(4, 6)
    x[3] = [-2.5, -1.5, 0.5, 1.5, 3.5, -0.5]  # halves: round is half-to-even in both
    (out,) = run(lambda v: getattr(mb, name)(x=v), x)
    close(out, UNARY[name](t(x)), tol=1e-5)


@pytest.mark.parametrize(
    "name, fn",
    [("acos", torch.acos), ("asin", torch.asin), ("atanh", torch.atanh), ("sqrt", torch.sqrt)],
)
def test_unary_restricted_domain(name, fn):
    x = np.clip(np.abs(grid(3, 5)), 0, 0.99).astype(np.float32)
    (out,) = run(lambda v: getattr(mb, name)(x=v), x)
    close(out, fn(t(x)))


@pytest.mark.parametrize(
    "name, fn, eps",
    [
        ("inverse", lambda x, e: 1 / (x + e), 1e-4),
        ("log", lambda x, e: torch.log(x + e), 1e-45),
        ("rsqrt", lambda x, e: torch.rsqrt(x + e), 1e-12),
    ],
)
def test_unary_with_epsilon(name, fn, eps):
    x = np.abs(grid(3, 5)) + np.float32(1e-3)
    (out,) = run(lambda v: getattr(mb, name)(x=v, epsilon=eps), x)
    close(out, fn(t(x).double(), eps), tol=1e-5)


def test_clip_threshold_and_thresholded_relu():
    x = grid(2, 5)
    (c,) = run(lambda v: mb.clip(x=v, alpha=-0.5, beta=1.0), x)
    close(c, torch.clamp(t(x), -0.5, 1.0))
    (th,) = run(lambda v: mb.threshold(x=v, alpha=0.5), x)
    close(th, torch.maximum(t(x), torch.tensor(0.5)))
    before = x.copy()
    (tr,) = run(lambda v: mb.thresholded_relu(x=v, alpha=0.5), x)
    close(tr, torch.where(t(x) < 0.5, 0.0, t(x)))
    np.testing.assert_array_equal(x, before)  # coremltools' value_inference wrote into x


def test_logical_not():
    m = RNG.random((3, 4)) > 0.5
    (out,) = run(lambda v: mb.logical_not(x=v), m)
    np.testing.assert_array_equal(out, ~m)


@pytest.mark.parametrize(
    "dtype, fn",
    [
        ("int32", lambda x: x.to(torch.int32)),
        ("fp16", lambda x: x.half().float()),
        ("bool", lambda x: x != 0),
        ("fp32", lambda x: x),
    ],
)
def test_cast_from_float(dtype, fn):
    x = grid(3, 6) * 3.3
    x[0, :3] = [70000.0, -2.7, 2.7]  # overflows fp16; truncation toward zero for int32
    (out,) = run(lambda v: mb.cast(x=v, dtype=dtype), x)
    expected = fn(t(x))
    np.testing.assert_array_equal(np.asarray(out, np.float64), expected.double().numpy())


def test_cast_from_int_and_bool():
    i = RNG.integers(-3000, 3000, (2, 5)).astype(np.int32)
    i[0, 0] = 3001  # not representable in fp16
    (h,) = run(lambda v: mb.cast(x=v, dtype="fp16"), i)
    close(h, t(i).half().float(), tol=0)
    m = RNG.random((2, 3)) > 0.5
    (f,) = run(lambda v: mb.cast(x=v, dtype="fp32"), m)
    close(f, t(m).float(), tol=0)


# ------------------------------------------------------------------ elementwise binary
BINARY = {
    "add": torch.add,
    "sub": torch.sub,
    "mul": torch.mul,
    "real_div": torch.div,
    "floor_div": torch.floor_divide,
    "mod": torch.remainder,
    "maximum": torch.maximum,
    "minimum": torch.minimum,
    "equal": torch.eq,
    "not_equal": torch.ne,
    "greater": torch.gt,
    "greater_equal": torch.ge,
    "less": torch.lt,
    "less_equal": torch.le,
}


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_binary(name, dtype):
    if dtype == np.int32 and name == "real_div":
        pytest.skip("torch true-divides integers into floats; coremltools casts first")
    x = (grid(3, 4) * 7).astype(dtype)
    y = (grid(1, 4)[:, ::-1] * 3 + 0.25).astype(dtype)  # broadcast along dim 0
    if dtype == np.int32:
        y[y == 0] = 2
    (out,) = run(lambda a, b: getattr(mb, name)(x=a, y=b), x, y)
    close(out, BINARY[name](t(x), t(y)), tol=1e-6)


def test_pow():
    x = np.abs(grid(3, 4)) + np.float32(0.1)
    for exponent in (2.0, 3.0, 0.5, -1.0):
        (out,) = run(lambda a, e=exponent: mb.pow(x=a, y=np.float32(e)), x)
        close(out, torch.pow(t(x), exponent))


@pytest.mark.parametrize(
    "name, fn",
    [
        ("logical_and", torch.logical_and),
        ("logical_or", torch.logical_or),
        ("logical_xor", torch.logical_xor),
    ],
)
def test_logical(name, fn):
    a, b = RNG.random((3, 4)) > 0.5, RNG.random((1, 4)) > 0.5
    (out,) = run(lambda p, q: getattr(mb, name)(x=p, y=q), a, b)
    np.testing.assert_array_equal(out, fn(t(a), t(b)).numpy())


# ------------------------------------------------------------------ activations
def test_parametric_activations():
    x = grid(2, 3, 4, 5)
    cases = [
        (lambda v: mb.leaky_relu(x=v, alpha=0.1), F.leaky_relu(t(x), 0.1)),
        (lambda v: mb.elu(x=v, alpha=0.7), F.elu(t(x), 0.7)),
        (lambda v: mb.linear_activation(x=v, alpha=2.0, beta=-1.0), 2 * t(x) - 1),
        (lambda v: mb.sigmoid_hard(x=v, alpha=1 / 6, beta=0.5), F.hardsigmoid(t(x))),
        (lambda v: mb.scaled_tanh(x=v, alpha=1.5, beta=0.5), 1.5 * torch.tanh(0.5 * t(x))),
        (lambda v: mb.softplus(x=v), F.softplus(t(x))),
        (
            lambda v: mb.clamped_relu(x=v, alpha=0.1, beta=6.0),
            torch.clamp(t(x), max=6.0) * (t(x) > 0)
            + torch.clamp(0.1 * t(x), max=6.0) * (t(x) <= 0),
        ),
    ]
    for build, expected in cases:
        (out,) = run(build, x)
        close(out, expected)
    alpha = np.array([0.1, 0.2, 0.3], dtype=np.float32)
    (prelu,) = run(lambda v: mb.prelu(x=v, alpha=alpha), x)
    close(prelu, F.prelu(t(x), t(alpha)))
    beta = np.array([1.0, 2.0, 0.5], dtype=np.float32)
    (sp,) = run(lambda v: mb.softplus_parametric(x=v, alpha=alpha, beta=beta), x)
    close(sp, t(alpha)[:, None, None] * torch.log1p(torch.exp(t(beta)[:, None, None] * t(x))))


def test_softplus_keeps_its_tail_and_does_not_overflow():
    """coremltools' value_inference computes ``log(1 + e)``: 0 below x = -17, where torch's
    softplus is 4e-8 (a ``log`` of it finite); the kernels keep the tail, relative to it."""
    x = np.array([[[-40.0, -20.0, -17.5, 0.0], [3.0, 20.0, 60.0, 100.0]]], dtype=np.float32)
    (out,) = run(lambda v: mb.softplus(x=v), x)
    expected = F.softplus(t(x).double()).numpy()
    np.testing.assert_allclose(np.asarray(out, dtype=np.float64), expected, rtol=1e-6)
    alpha = np.array([0.5, 0.25], dtype=np.float32)
    beta = np.array([2.0, 4.0], dtype=np.float32)
    (sp,) = run(lambda v: mb.softplus_parametric(x=v, alpha=alpha, beta=beta), x)
    ours = np.asarray(sp, dtype=np.float64)
    torch_form = [
        F.softplus(t(x[:, c]).double(), beta=float(beta[c]), threshold=1e9) for c in (0, 1)
    ]
    np.testing.assert_allclose(ours, torch.stack(torch_form, 1).numpy(), rtol=1e-6)
    assert np.isfinite(ours).all() and (ours > 0).all()


@pytest.mark.parametrize("mode, approximate", [("EXACT", "none"), ("TANH_APPROXIMATION", "tanh")])
def test_gelu(mode, approximate):
    x = grid(4, 8) * 2
    (out,) = run(lambda v: mb.gelu(x=v, mode=mode), x)
    close(out, F.gelu(t(x).double(), approximate=approximate), tol=1e-6)


def test_gelu_sigmoid_approximation():
    x = grid(4, 8)
    (out,) = run(lambda v: mb.gelu(x=v, mode="SIGMOID_APPROXIMATION"), x)
    close(out, t(x) * torch.sigmoid(1.702 * t(x)))


@pytest.mark.parametrize("axis", [-1, 1])
def test_softmax(axis):
    x = grid(2, 5, 7) * 10
    x[0, 0, :] = -3.4e38  # a row of finfo.min: uniform, as in torch
    (out,) = run(lambda v: mb.softmax(x=v, axis=axis), x)
    close(out, torch.softmax(t(x), dim=axis))


# ------------------------------------------------------------------ reductions
REDUCE = {
    "reduce_sum": lambda x, d, k: x.sum(d, keepdim=k),
    "reduce_mean": lambda x, d, k: x.mean(d, keepdim=k),
    "reduce_max": lambda x, d, k: x.amax(d, keepdim=k),
    "reduce_min": lambda x, d, k: x.amin(d, keepdim=k),
    "reduce_prod": lambda x, d, k: x.prod(d[0], keepdim=k) if len(d) == 1 else None,
    "reduce_l1_norm": lambda x, d, k: x.abs().sum(d, keepdim=k),
    "reduce_l2_norm": lambda x, d, k: x.square().sum(d, keepdim=k).sqrt(),
    "reduce_sum_square": lambda x, d, k: x.square().sum(d, keepdim=k),
    "reduce_log_sum": lambda x, d, k: x.sum(d, keepdim=k).log(),
    "reduce_log_sum_exp": lambda x, d, k: torch.logsumexp(x, d, keepdim=k),
}


@pytest.mark.parametrize("name", sorted(REDUCE))
@pytest.mark.parametrize("keep", [True, False])
def test_reductions(name, keep):
    x = np.abs(grid(2, 3, 4)) + np.float32(0.5)
    (out,) = run(lambda v: getattr(mb, name)(x=v, axes=[-1], keep_dims=keep), x)
    close(out, REDUCE[name](t(x), [-1], keep))


@pytest.mark.parametrize(
    "name, fn", [("reduce_argmax", torch.argmax), ("reduce_argmin", torch.argmin)]
)
def test_arg_reductions(name, fn):
    x = grid(3, 5)
    x[1] = [2.0, 7.0, 7.0, 1.0, 7.0]  # ties: the first index, as torch
    for keep in (True, False):
        (out,) = run(lambda v, k=keep: getattr(mb, name)(x=v, axis=1, keep_dims=k), x)
        np.testing.assert_array_equal(out, fn(t(x), dim=1, keepdim=keep).numpy())


def test_reduce_int_sum():
    x = RNG.integers(-50, 50, (3, 4)).astype(np.int32)
    (out,) = run(lambda v: mb.reduce_sum(x=v, axes=[0], keep_dims=False), x)
    np.testing.assert_array_equal(out, t(x).sum(0).numpy())


# ------------------------------------------------------------------ linear algebra & norms
def test_linear_matmul_einsum():
    x, w, b = grid(2, 3, 4), grid(5, 4), grid(5)
    (out,) = run(lambda v: mb.linear(x=v, weight=w, bias=b), x)
    close(out, F.linear(t(x), t(w), t(b)))
    y = grid(2, 5, 4)
    for tx, ty in ((False, True), (True, False)):
        a = x if not tx else np.swapaxes(x, -1, -2).copy()
        b2 = y if ty else np.swapaxes(y, -1, -2).copy()
        (mm,) = run(
            lambda p, q, a=tx, b=ty: mb.matmul(x=p, y=q, transpose_x=a, transpose_y=b), a, b2
        )
        close(mm, torch.matmul(t(x), t(y).transpose(-1, -2)), tol=1e-5)
    q, k = grid(1, 2, 3, 4), grid(1, 4, 3, 5)
    (es,) = run(lambda p, r: mb.einsum(values=(p, r), equation="nchw,nwhu->nchu"), q, k)
    close(es, torch.einsum("nchw,nwhu->nchu", t(q), t(k)))


def test_layer_norm_and_l2_norm():
    x, g, b = grid(2, 3, 8), grid(8), grid(8)
    (ln,) = run(lambda v: mb.layer_norm(x=v, axes=[-1], gamma=g, beta=b, epsilon=1e-5), x)
    close(ln, F.layer_norm(t(x), (8,), t(g), t(b), 1e-5), tol=1e-5)
    x4 = grid(2, 3, 4, 5)
    (l2,) = run(lambda v: mb.l2_norm(x=v, epsilon=1e-12), x4)
    close(l2, t(x4) / t(x4).square().sum((1, 2, 3), keepdim=True).add(1e-12).sqrt())


def test_batch_norm_and_instance_norm():
    x = grid(2, 3, 4, 5)
    mean, var, g, b = grid(3), np.abs(grid(3)) + 0.5, grid(3), grid(3)
    (bn,) = run(
        lambda v: mb.batch_norm(x=v, mean=mean, variance=var, gamma=g, beta=b, epsilon=1e-5), x
    )
    close(bn, F.batch_norm(t(x), t(mean), t(var), t(g), t(b), False, 0.0, 1e-5))
    (inorm,) = run(lambda v: mb.instance_norm(x=v, gamma=g, beta=b, epsilon=1e-5), x)
    close(inorm, F.instance_norm(t(x), weight=t(g), bias=t(b), eps=1e-5), tol=1e-5)


# ------------------------------------------------------------------ conv & pool
@pytest.mark.parametrize(
    "stride, dilation, groups, pad",
    [
        (1, 1, 1, (0, 0, 0, 0)),
        (2, 1, 1, (1, 1, 1, 1)),
        (1, 2, 1, (2, 2, 0, 1)),
        (2, 1, 3, (1, 0, 1, 0)),
        (1, 1, 6, (1, 1, 1, 1)),
    ],
)
def test_conv2d(stride, dilation, groups, pad):
    x, w, b = grid(2, 6, 9, 8), grid(12, 6 // groups, 3, 3), grid(12)
    (out,) = run(
        lambda v: mb.conv(
            x=v,
            weight=w,
            bias=b,
            strides=[stride, stride],
            dilations=[dilation, dilation],
            groups=groups,
            pad_type="custom",
            pad=list(pad),
        ),
        x,
    )
    xp = F.pad(t(x), (pad[2], pad[3], pad[0], pad[1]))
    close(out, F.conv2d(xp, t(w), t(b), stride, 0, dilation, groups), tol=1e-4)


@pytest.mark.parametrize("pad_type", ["same", "same_lower", "valid"])
def test_conv_pad_types_1d_3d(pad_type):
    x1, w1 = grid(1, 2, 10), grid(4, 2, 4)
    (o1,) = run(lambda v: mb.conv(x=v, weight=w1, strides=[2], pad_type=pad_type), x1)
    total = max((5 - 1) * 2 + 4 - 10, 0) if pad_type != "valid" else 0
    low = total // 2 if pad_type == "same" else total - total // 2
    close(o1, F.conv1d(F.pad(t(x1), (low, total - low)), t(w1), stride=2), tol=1e-4)
    x3, w3 = grid(1, 2, 4, 4, 4), grid(3, 2, 2, 2, 2)
    (o3,) = run(lambda v: mb.conv(x=v, weight=w3, pad_type="valid"), x3)
    close(o3, F.conv3d(t(x3), t(w3)), tol=1e-4)


@pytest.mark.parametrize(
    "stride, pad, groups, dilation, output_padding",
    [
        (2, 1, 1, 1, 0),
        (2, 1, 1, 1, 1),
        (3, 0, 2, 1, 0),
        (1, 2, 1, 2, 0),
    ],
)
def test_conv_transpose2d(stride, pad, groups, dilation, output_padding):
    x, w, b = grid(1, 4, 5, 6), grid(4, 6 // groups, 3, 3), grid(6)
    expected = F.conv_transpose2d(t(x), t(w), t(b), stride, pad, output_padding, groups, dilation)
    (out,) = run(
        lambda v: mb.conv_transpose(
            x=v,
            weight=w,
            bias=b,
            strides=[stride] * 2,
            dilations=[dilation] * 2,
            groups=groups,
            pad_type="custom",
            pad=[pad] * 4,
            output_shape=list(expected.shape),
        ),
        x,
    )
    close(out, expected, tol=1e-4)


@pytest.mark.parametrize(
    "kernel, stride, pad, ceil",
    [
        (2, 2, 0, False),
        (3, 2, 1, False),
        (3, 2, 1, True),
        (2, 2, 0, True),
        (3, 1, 1, False),
    ],
)
def test_pools(kernel, stride, pad, ceil):
    x = grid(1, 2, 7, 9)
    common = dict(
        kernel_sizes=[kernel] * 2,
        strides=[stride] * 2,
        pad_type="custom",
        pad=[pad] * 4,
        ceil_mode=ceil,
    )
    (mx,) = run(lambda v: mb.max_pool(x=v, **common), x)
    close(mx, F.max_pool2d(t(x), kernel, stride, pad, ceil_mode=ceil))
    for exclude in (False, True):
        (av,) = run(
            lambda v, e=exclude: mb.avg_pool(x=v, exclude_padding_from_average=e, **common), x
        )
        close(av, F.avg_pool2d(t(x), kernel, stride, pad, ceil, count_include_pad=not exclude))


def test_pool_1d_and_l2():
    x = grid(1, 3, 11)
    (mx,) = run(lambda v: mb.max_pool(x=v, kernel_sizes=[3], strides=[2], pad_type="valid"), x)
    close(mx, F.max_pool1d(t(x), 3, 2))
    x2 = grid(1, 2, 6, 6)
    (l2,) = run(
        lambda v: mb.l2_pool(x=v, kernel_sizes=[2, 2], strides=[2, 2], pad_type="valid"), x2
    )
    close(l2, F.lp_pool2d(t(x2), 2, 2, 2))


# ------------------------------------------------------------------ resize
def test_upsample_nearest_and_bilinear():
    x = grid(1, 2, 3, 4)
    (nn_,) = run(
        lambda v: mb.upsample_nearest_neighbor(x=v, scale_factor_height=2, scale_factor_width=3), x
    )
    close(nn_, F.interpolate(t(x), scale_factor=(2, 3), mode="nearest"))
    for align in (True, False):
        (bl,) = run(
            lambda v, a=align: mb.upsample_bilinear(
                x=v, scale_factor_height=2, scale_factor_width=2, align_corners=a
            ),
            x,
            opset=ct.target.iOS16,
        )
        close(bl, F.interpolate(t(x), scale_factor=2, mode="bilinear", align_corners=align))


def test_resize_bilinear_and_nearest():
    x = grid(1, 2, 4, 5)
    for mode, align in (("STRICT_ALIGN_CORNERS", True), ("UNALIGN_CORNERS", False)):
        (out,) = run(
            lambda v, m=mode: mb.resize_bilinear(
                x=v, target_size_height=7, target_size_width=3, sampling_mode=m
            ),
            x,
        )
        close(out, F.interpolate(t(x), size=(7, 3), mode="bilinear", align_corners=align))
    (rn,) = run(
        lambda v: mb.resize_nearest_neighbor(x=v, target_size_height=8, target_size_width=10), x
    )
    close(rn, F.interpolate(t(x), size=(8, 10), mode="nearest"))


def test_crop():
    x = grid(1, 2, 6, 7)
    (out,) = run(lambda v: mb.crop(x=v, crop_height=[1, 2], crop_width=[0, 3]), x)
    close(out, t(x)[..., 1:4, 0:4], tol=0)


@pytest.mark.parametrize(
    "size, scale",
    [
        ((4, 4), 1.5),
        ((4, 6), 1.5),
        ((5, 3), 2.5),
        ((6, 9), 2 / 3),
        ((64, 64), 1 / 32),
        ((7, 5), 1.25),
    ],
)
def test_fractional_nearest_is_the_scaled_rule_and_matches_torch(size, scale):
    """upsample_nearest_neighbor at a fractional scale reads row floor(i / scale), as its
    specification's scale factor says: torch's nearest rule for a given scale, so eager is
    the check (downsampling scales included)."""
    x = grid(1, 2, *size)
    (out,) = run(
        lambda v: mb.upsample_nearest_neighbor(
            x=v, scale_factor_height=scale, scale_factor_width=scale
        ),
        x,
    )
    expected = F.interpolate(t(x), scale_factor=scale, mode="nearest")
    assert out.shape == tuple(expected.shape)
    close(out, expected, tol=0)


def test_resize_nearest_by_target_size_is_not_guessed():
    """resize_nearest_neighbor has no documented source rule for a fractional ratio: it
    answers only where every convention agrees."""
    x = grid(1, 1, 4, 4)
    with pytest.raises(Unsupported):
        run(lambda v: mb.resize_nearest_neighbor(x=v, target_size_height=6, target_size_width=6), x)


def test_pixel_shuffle_unshuffle():
    x = grid(1, 8, 3, 2)
    (ps,) = run(lambda v: mb.pixel_shuffle(x=v, upscale_factor=2), x)
    close(ps, F.pixel_shuffle(t(x), 2))
    y = grid(1, 2, 4, 6)
    (pu,) = run(
        lambda v: mb.pixel_unshuffle(x=v, downscale_factor=np.uint32(2)), y, opset=ct.target.iOS16
    )
    close(pu, F.pixel_unshuffle(t(y), 2))


# ------------------------------------------------------------------ shape & layout
def test_shape_ops():
    x = grid(2, 1, 3, 4)
    checks = [
        (lambda v: mb.reshape(x=v, shape=[4, 6]), t(x).reshape(4, 6)),
        (lambda v: mb.transpose(x=v, perm=[3, 0, 2, 1]), t(x).permute(3, 0, 2, 1)),
        (lambda v: mb.expand_dims(x=v, axes=[0, -1]), t(x)[None, ..., None]),
        (lambda v: mb.squeeze(x=v, axes=[1]), t(x).squeeze(1)),
        (lambda v: mb.squeeze(x=v), t(x).squeeze()),
        (lambda v: mb.flatten2d(x=v, axis=2), t(x).reshape(2, 12)),
        (lambda v: mb.reverse(x=v, axes=[0, 3]), t(x).flip(0, 3)),
        (lambda v: mb.tile(x=v, reps=[1, 2, 1, 3]), t(x).repeat(1, 2, 1, 3)),
        (lambda v: mb.identity(x=v), t(x)),
        (lambda v: mb.shape(x=v), torch.tensor(x.shape)),
        (
            lambda v: mb.slice_by_size(x=v, begin=[1, 0, 1, 1], size=[1, -1, 2, -1]),
            t(x)[1:2, :, 1:3, 1:],
        ),
        (
            lambda v: mb.slice_by_index(
                x=v,
                begin=[0, 0, 2, 3],
                end=[2, 1, 0, 0],
                stride=[1, 1, -1, -2],
                end_mask=[False, False, True, True],
            ),
            t(x).flip(2, 3)[:, :, 0:, 0::2],
        ),
        (
            lambda v: mb.slice_by_index(
                x=v, begin=[1, 0, 0, 1], end=[2, 1, 3, 3], squeeze_mask=[True, True, False, False]
            ),
            t(x)[1, 0, :, 1:3],
        ),
    ]
    for build, expected in checks:
        (out,) = run(build, x)
        close(out, expected, tol=0)


def test_reshape_like():
    x, r1, r2 = grid(2, 3, 4, 5), grid(2, 3, 4), grid(1, 5, 4)
    (out,) = run(
        lambda v, p, q: mb.reshape_like(
            x=v, ref_tensors=(p, q), begins=(0, 1), ends=(2, 0), end_masks=(False, True)
        ),
        x,
        r1,
        r2,
        opset=ct.target.iOS16,
    )
    close(out, t(x).reshape(2, 3, 5, 4), tol=0)


def test_concat_split_stack():
    a, b = grid(2, 3), grid(2, 3)
    (c,) = run(lambda p, q: mb.concat(values=(p, q), axis=1), a, b)
    close(c, torch.cat([t(a), t(b)], 1), tol=0)
    (ci,) = run(lambda p, q: mb.concat(values=(p, q), axis=1, interleave=True), a, b)
    close(ci, torch.stack([t(a), t(b)], 2).reshape(2, 6), tol=0)
    (s,) = run(lambda p, q: mb.stack(values=(p, q), axis=0), a, b)
    close(s, torch.stack([t(a), t(b)]), tol=0)
    x = grid(7, 2)
    parts = run(lambda v: mb.split(x=v, split_sizes=[2, 5], axis=0), x)
    for part, expected in zip(parts, torch.split(t(x), [2, 5]), strict=True):
        close(part, expected, tol=0)
    halves = run(lambda v: mb.split(x=v, num_splits=2, axis=1), x)
    for part, expected in zip(halves, torch.chunk(t(x), 2, 1), strict=True):
        close(part, expected, tol=0)


@pytest.mark.parametrize(
    "mode, torch_mode",
    [("constant", "constant"), ("reflect", "reflect"), ("replicate", "replicate")],
)
def test_pad(mode, torch_mode):
    x = grid(1, 2, 4, 5)
    (out,) = run(lambda v: mb.pad(x=v, pad=[1, 2, 2, 1], mode=mode, constant_val=0.5), x)
    kwargs = {"value": 0.5} if mode == "constant" else {}
    close(out, F.pad(t(x), (2, 1, 1, 2), mode=torch_mode, **kwargs), tol=0)


def test_select_fill_range_band_part():
    cond, a, b = RNG.random((3, 4)) > 0.5, grid(3, 4), grid(1, 4)
    (sel,) = run(lambda c, p, q: mb.select(cond=c, a=p, b=q), cond, a, b)
    close(sel, torch.where(t(cond), t(a), t(b)), tol=0)
    (fl,) = run(lambda v: mb.add(x=v, y=mb.fill(shape=[3, 4], value=3001.0)), a)
    close(fl, t(a) + 3001.0, tol=0)
    (fll,) = run(lambda v: mb.fill_like(ref_tensor=v, value=2.0), a, opset=ct.target.iOS16)
    close(fll, torch.full_like(t(a), 2.0), tol=0)
    (rg,) = run(lambda v: mb.range_1d(start=0, end=300000, step=1), a)  # > its fold limit
    np.testing.assert_array_equal(rg, torch.arange(300000).numpy())
    x = grid(2, 5, 6)
    for lower, upper, expected in (
        (-1, 0, t(x).tril()),
        (0, -1, t(x).triu()),
        (1, 2, t(x).triu(-1).tril(2)),
    ):
        (bp,) = run(lambda v, lo=lower, up=upper: mb.band_part(x=v, lower=lo, upper=up), x)
        close(bp, expected, tol=0)


def test_cumsum_topk_argsort_nonzero_one_hot():
    x = grid(3, 5)
    for exclusive, reverse in ((False, False), (True, False), (False, True), (True, True)):
        (cs,) = run(
            lambda v, e=exclusive, r=reverse: mb.cumsum(x=v, axis=1, exclusive=e, reverse=r), x
        )
        data = t(x).flip(1) if reverse else t(x)
        expected = data.cumsum(1) - (data if exclusive else 0)
        close(cs, expected.flip(1) if reverse else expected)
    values, indices = run(lambda v: mb.topk(x=v, k=2, axis=1), x)
    top = torch.topk(t(x), 2, dim=1)
    close(values, top.values, tol=0)
    np.testing.assert_array_equal(indices, top.indices.numpy())
    (asc,) = run(lambda v: mb.argsort(x=v, axis=-1, ascending=True), x)
    np.testing.assert_array_equal(asc, torch.argsort(t(x), -1).numpy())
    m = np.array([[0.0, 1.0], [2.0, 0.0]], dtype=np.float32)
    (nz,) = run(lambda v: mb.non_zero(x=v), m)
    np.testing.assert_array_equal(nz, torch.nonzero(t(m)).numpy())
    idx = np.array([0, 3, 1, 3], dtype=np.int32)
    (oh,) = run(lambda v: mb.one_hot(indices=v, one_hot_vector_size=4), idx)
    np.testing.assert_array_equal(oh, F.one_hot(t(idx).long(), 4).numpy())


def test_reverse_sequence_and_sliding_windows():
    x = grid(3, 5, 2)
    lengths = np.array([2, 5, 0], dtype=np.int32)
    (rs,) = run(
        lambda v, n: mb.reverse_sequence(x=v, lengths=n, seq_axis=1, batch_axis=0), x, lengths
    )
    expected = t(x).clone()
    for b, n in enumerate(lengths):
        expected[b, :n] = t(x)[b, :n].flip(0)
    close(rs, expected, tol=0)
    y = grid(2, 9)
    (sw,) = run(lambda v: mb.sliding_windows(x=v, axis=1, size=3, stride=2), y)
    close(sw, t(y).unfold(1, 3, 2), tol=0)


# ------------------------------------------------------------------ gather & scatter
def test_gathers():
    x = grid(5, 4)
    idx = np.array([[4, 0], [0, 3]], dtype=np.int32)  # repeated and extreme rows
    (g,) = run(lambda v, i: mb.gather(x=v, indices=i, axis=0), x, idx)
    close(g, t(x)[t(idx).long()], tol=0)
    ga_idx = RNG.integers(0, 4, (5, 3)).astype(np.int32)
    (ga,) = run(lambda v, i: mb.gather_along_axis(x=v, indices=i, axis=1), x, ga_idx)
    close(ga, torch.gather(t(x), 1, t(ga_idx).long()), tol=0)
    nd_idx = np.array([[[4, 1], [0, 0]], [[2, 3], [4, 3]]], dtype=np.int32)
    (gn,) = run(lambda v, i: mb.gather_nd(x=v, indices=i), x, nd_idx)
    close(gn, t(x)[t(nd_idx[..., 0]).long(), t(nd_idx[..., 1]).long()], tol=0)
    rows = np.array([[3], [1]], dtype=np.int32)
    (gr,) = run(lambda v, i: mb.gather_nd(x=v, indices=i), x, rows)
    close(gr, t(x)[[3, 1]], tol=0)


@pytest.mark.parametrize("mode", ["update", "add", "max"])
def test_scatters(mode):
    data, updates = grid(5, 3), grid(2, 3)
    idx = np.array([4, 1], dtype=np.int32)
    (sc,) = run(
        lambda d, i, u: mb.scatter(data=d, indices=i, updates=u, axis=0, mode=mode),
        data,
        idx,
        updates,
    )
    reduce = {"update": None, "add": "sum", "max": "amax"}[mode]
    index = t(idx).long()[:, None].expand(2, 3)
    expected = (
        torch.scatter(t(data), 0, index, t(updates))
        if reduce is None
        else torch.scatter_reduce(t(data), 0, index, t(updates), reduce)
    )
    close(sc, expected, tol=0)
    along = np.array([[0, 2, 2], [1, 0, 0]], dtype=np.int32)  # repeated targets
    (sa,) = run(
        lambda d, i, u: mb.scatter_along_axis(data=d, indices=i, updates=u, axis=0, mode=mode),
        data,
        along,
        updates,
    )
    index = t(along).long()
    if mode == "update":
        unique = np.array([[0, 2, 1], [1, 0, 0]], dtype=np.int32)  # torch: undefined on repeats
        (sa,) = run(
            lambda d, i, u: mb.scatter_along_axis(data=d, indices=i, updates=u, axis=0, mode=mode),
            data,
            unique,
            updates,
        )
        expected = torch.scatter(t(data), 0, t(unique).long(), t(updates))
    else:
        expected = torch.scatter_reduce(t(data), 0, index, t(updates), reduce)
    close(sa, expected, tol=1e-6)
    nd = np.array([[4, 0], [1, 2], [4, 0]], dtype=np.int32)
    vals = grid(3)
    (sn,) = run(
        lambda d, i, u: mb.scatter_nd(data=d, indices=i, updates=u, mode=mode),
        data,
        nd if mode != "update" else nd[:2],
        vals if mode != "update" else vals[:2],
    )
    target = t(data).clone()
    rows, cols = (
        (t(nd[:, 0]).long(), t(nd[:, 1]).long())
        if mode != "update"
        else (t(nd[:2, 0]).long(), t(nd[:2, 1]).long())
    )
    v = t(vals) if mode != "update" else t(vals[:2])
    if mode == "update":
        target[rows, cols] = v
    elif mode == "add":
        target.index_put_((rows, cols), v, accumulate=True)
    else:
        target[4, 0] = max(target[4, 0], v[0], v[2])
        target[1, 2] = max(target[1, 2], v[1])
    close(sn, target, tol=1e-6)


def test_slice_update():
    x, u = grid(2, 6, 3), grid(2, 2, 3)
    (out,) = run(
        lambda v, w: mb.slice_update(
            x=v, update=w, begin=[0, 1, 0], end=[2, 5, 3], stride=[1, 2, 1]
        ),
        x,
        u,
        opset=IOS18,
    )
    expected = t(x).clone()
    expected[:, 1:5:2] = t(u)
    close(out, expected, tol=0)


# ------------------------------------------------------------------ attention, state, quant
@pytest.mark.parametrize("mask", ["bool", "float", None])
def test_scaled_dot_product_attention(mask):
    q, k, v = grid(1, 2, 4, 8), grid(1, 2, 5, 8), grid(1, 2, 5, 8)
    causal = np.tril(np.ones((4, 5), dtype=bool))
    m = causal if mask == "bool" else np.where(causal, 0.0, -1e4).astype(np.float32)

    def build(a, b, c):
        extra = {} if mask is None else {"attn_mask": m}
        return mb.scaled_dot_product_attention(query=a, key=b, value=c, **extra)

    (out,) = run(build, q, k, v, opset=IOS18)
    kwargs = {} if mask is None else {"attn_mask": t(m)}
    close(out, F.scaled_dot_product_attention(t(q), t(k), t(v), **kwargs), tol=1e-5)


def test_state_read_and_update():
    @mb.program(
        input_specs=[
            mb.StateTensorSpec((2, 3), dtype=types.fp16),
            mb.TensorSpec((2, 3), dtype=types.fp16),
        ],
        opset_version=IOS18,
    )
    def prog(state, x):
        old = mb.read_state(input=state)
        new = mb.add(x=old, y=x)
        mb.coreml_update_state(state=state, value=new)
        return mb.mul(x=mb.read_state(input=state), y=np.float16(2.0))

    plan = Plan.of(prog)
    states = {"state": np.full((2, 3), 1.5, dtype=np.float32)}
    x = grid(2, 3)
    values = plan.run({"x": x}, states)
    expected = (torch.full((2, 3), 1.5).half() + t(x).half()).float()
    close(states["state"], expected, tol=0)
    close(values[prog.functions["main"].outputs[0].name], (expected * 2).half().float(), tol=0)


def test_constexpr_affine_dequantize():
    import torch.ao.quantization.fx._decomposed

    q = RNG.integers(-128, 128, (4, 6)).astype(np.int8)
    scale = np.array([0.1, 0.02, 0.5, 1.0], dtype=np.float32)
    zero = np.array([0, -3, 5, 127], dtype=np.int8)

    @mb.program(input_specs=[mb.TensorSpec((2, 6))], opset_version=ct.target.iOS16)
    def prog(x):
        w = mb.constexpr_affine_dequantize(quantized_data=q, zero_point=zero, scale=scale, axis=0)
        return mb.linear(x=x, weight=w)

    plan = Plan.of(prog)
    weight = torch.ops.quantized_decomposed.dequantize_per_channel(
        t(q), t(scale), t(zero).long(), 0, -128, 127, torch.int8
    )
    x = grid(2, 6)
    values = plan.run({"x": x})
    close(values[prog.functions["main"].outputs[0].name], F.linear(t(x), weight), tol=1e-5)


def test_constexpr_blockwise_shift_scale_and_cast():
    data = RNG.integers(-128, 128, (4, 6)).astype(np.int8)
    scale = np.abs(grid(4, 2)) + np.float32(0.01)  # blocks of 3 along axis 1
    offset = RNG.integers(-5, 5, (4, 2)).astype(np.int8)
    half = grid(6, 4).astype(np.float16)

    @mb.program(input_specs=[mb.TensorSpec((2, 6))], opset_version=IOS18)
    def prog(x):
        w = mb.constexpr_blockwise_shift_scale(data=data, scale=scale, offset=offset)
        h = mb.constexpr_cast(source_val=half, output_dtype="fp32")
        return mb.matmul(x=mb.linear(x=x, weight=w), y=mb.transpose(x=h, perm=[1, 0]))

    expected_w = (t(data).float() - t(offset).float().repeat_interleave(3, 1)) * t(
        scale
    ).repeat_interleave(3, 1)
    x = grid(2, 6)
    values = Plan.of(prog).run({"x": x})
    expected = F.linear(t(x), expected_w) @ t(half.astype(np.float32)).T
    close(values[prog.functions["main"].outputs[0].name], expected, tol=1e-4)


def test_dequantize_quantize_ios17():
    x = grid(3, 4)
    (q,) = run(
        lambda v: mb.quantize(
            input=v, scale=np.float32(0.05), zero_point=np.int8(3), output_dtype="int8"
        ),
        x,
    )
    expected = torch.quantize_per_tensor(t(x), 0.05, 3, torch.qint8)
    np.testing.assert_array_equal(np.asarray(q).astype(np.int32), expected.int_repr().int().numpy())
    (d,) = run(
        lambda v: mb.dequantize(
            input=mb.quantize(
                input=v, scale=np.float32(0.05), zero_point=np.int8(3), output_dtype="int8"
            ),
            scale=np.float32(0.05),
            zero_point=np.int8(3),
        ),
        x,
    )
    close(d, expected.dequantize(), tol=1e-6)


def test_fp16_storage_emulation():
    x = grid(3, 4) * 1000

    def build(v):
        h = mb.cast(x=v, dtype="fp16")
        return mb.cast(x=mb.mul(x=h, y=np.float16(70.0)), dtype="fp32")

    (out,) = run(build, x)
    expected = (t(x).half() * torch.tensor(70.0).half()).float()  # overflow to inf, as fp16
    np.testing.assert_array_equal(np.asarray(out), expected.numpy())


# ------------------------------------------------------------------ the table itself
def test_unknown_op_is_reported_not_guessed():
    @mb.program(input_specs=[mb.TensorSpec((1, 2, 4, 4))])
    def prog(x):
        return mb.depth_to_space(x=x, block_size=2)

    plan = Plan.of(prog)
    assert not plan.runnable and plan.unknown == ["depth_to_space"]


def test_every_op_in_the_table_has_a_kernel_and_a_source():
    table = coverage()
    assert set(table) == set(KERNELS)
    assert set(table.values()) <= {"value_inference", "wrapped", "own"}
    for name in (
        "conv",
        "gather_nd",
        "scatter_along_axis",
        "scaled_dot_product_attention",
        "gelu",
        "squeeze",
        "read_state",
        "silu",
        "upsample_bilinear",
    ):
        assert table[name] in {"wrapped", "own"}, name


@pytest.mark.parametrize("sampling", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [True, False])
def test_resample_is_grid_sample(sampling, padding, align):
    """resample as coremltools converts grid_sampler (reflection without align_corners is
    Core ML's symmetric padding), on coordinates reaching past the image."""
    x = grid(2, 3, 5, 6)
    coords = (RNG.uniform(-1.6, 1.6, size=(2, 4, 7, 2))).astype(np.float32)
    coords[0, 0, :3] = [[-1, -1], [1, 1], [0.0, 0.0]]
    core = {"zeros": "constant", "border": "border", "reflection": "reflection"}[padding]
    if core == "reflection" and not align:
        core = "symmetric"
    (out,) = run(
        lambda v, c: mb.resample(
            x=v,
            coordinates=c,
            sampling_mode=sampling,
            padding_mode=core,
            padding_value=0.0,
            coordinates_mode="normalized_minus_one_to_one",
            align_corners=align,
        ),
        x,
        coords,
    )
    expected = F.grid_sample(
        t(x), t(coords), mode=sampling, padding_mode=padding, align_corners=align
    )
    close(out, expected)


def _ifoz(w: torch.Tensor) -> np.ndarray:
    """torch's LSTM gate order (i, f, g, o) as MIL's (i, f, o, z)."""
    i, f, g, o = w.detach().numpy().reshape(4, -1, *w.shape[1:])
    return np.concatenate([i, f, o, g]).astype(np.float32)


@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
@pytest.mark.parametrize("sequence", [True, False])
def test_lstm_is_torchs_lstm(direction, sequence):
    torch.manual_seed(0)
    both = direction == "bidirectional"
    layer = torch.nn.LSTM(3, 4, bidirectional=both)
    x, h0, c0 = grid(5, 2, 3), grid(2 if both else 1, 2, 4), grid(2 if both else 1, 2, 4)
    p = dict(layer.named_parameters())
    weights = {
        "weight_ih": _ifoz(p["weight_ih_l0"]),
        "weight_hh": _ifoz(p["weight_hh_l0"]),
        "bias": _ifoz(p["bias_ih_l0"] + p["bias_hh_l0"]),
    }
    if both:
        weights.update(
            weight_ih_back=_ifoz(p["weight_ih_l0_reverse"]),
            weight_hh_back=_ifoz(p["weight_hh_l0_reverse"]),
            bias_back=_ifoz(p["bias_ih_l0_reverse"] + p["bias_hh_l0_reverse"]),
        )
    flat_h = np.concatenate(list(h0), -1)
    flat_c = np.concatenate(list(c0), -1)
    seq, h, c = run(
        lambda v, hh, cc: mb.lstm(
            x=v, initial_h=hh, initial_c=cc, direction=direction, output_sequence=sequence,
            **weights,
        ),
        x, flat_h, flat_c,
    )  # fmt: skip
    out, (h_t, c_t) = layer(t(x), (t(h0), t(c0)))
    close(h, torch.cat(list(h_t), -1))
    close(c, torch.cat(list(c_t), -1))
    if sequence:
        close(seq, out)
    else:
        close(seq, torch.cat(list(h_t), -1)[None])


def test_rnn_is_torchs_rnn():
    torch.manual_seed(0)
    layer = torch.nn.RNN(3, 4)
    x, h0 = grid(5, 2, 3), grid(1, 2, 4)
    p = {k: v.detach().numpy() for k, v in layer.named_parameters()}
    seq, h = run(
        lambda v, hh: mb.rnn(
            x=v, initial_h=hh, weight_ih=p["weight_ih_l0"], weight_hh=p["weight_hh_l0"],
            bias=p["bias_ih_l0"] + p["bias_hh_l0"], output_sequence=True,
        ),
        x, h0[0],
    )  # fmt: skip
    out, h_t = layer(t(x), t(h0))
    close(seq, out)
    close(h, h_t[0])


@pytest.mark.parametrize("align", [True, False])
def test_affine_is_affine_grid_then_grid_sample(align):
    x = grid(2, 3, 5, 6)
    theta = RNG.uniform(-1.2, 1.2, size=(2, 2, 3)).astype(np.float32)
    (out,) = run(
        lambda v, m: mb.affine(
            x=v, transform_matrix=mb.reshape(x=m, shape=[2, 6]), output_height=4,
            output_width=7, sampling_mode="bilinear", padding_mode="constant",
            padding_value=0.0, coordinates_mode="normalized_minus_one_to_one",
            align_corners=align,
        ),
        x, theta,
    )  # fmt: skip
    coords = F.affine_grid(t(theta), [2, 3, 4, 7], align_corners=align)
    close(out, F.grid_sample(t(x), coords, align_corners=align))


def test_every_mil_op_a_delegated_program_can_hold_has_a_kernel_or_a_reason():
    """The MIL op types coremltools' torch frontend and its MIL passes can produce (read
    from coremltools' sources: every ``mb.<op>(`` that names a core op), against the
    interpreter's kernels: the ones without a kernel are exactly the documented ones."""
    import os
    import re
    from pathlib import Path

    from coremltools.converters.mil.mil.ops.registry import SSAOpRegistry

    from coreml_lint.verifier.mil.registry import NO_KERNEL

    base = Path(os.path.dirname(ct.__file__)) / "converters" / "mil"
    core = {str(op) for op in SSAOpRegistry.core_ops}
    produced = set()
    for folder in (base / "frontend" / "torch", base / "mil" / "passes"):
        for path in folder.rglob("*.py"):
            if "tests" not in path.parts:
                produced |= set(re.findall(r"\bmb\.([a-z_0-9]+)\(", path.read_text()))
    producible = {o for o in produced & core if o != "const" and not o.startswith("constexpr_")}
    missing = producible - set(coverage())
    assert missing == set(NO_KERNEL), missing ^ set(NO_KERNEL)
    assert len(producible) >= 130 and len(producible - missing) >= 121
