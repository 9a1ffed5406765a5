"""Models `verify` is held to as ground truth (tests/test_verify_ground_truth.py and
benchmarks/verify_ground_truth.py): clean real-world-style models it must not flag, and
small models with a silent wrong value of a class the interpreter can see, each with a
clean twin that differs only in the value range or argument that triggers it.

Every builder returns ``(module, example_inputs)``; nothing is downloaded, weights are
random (seeded by the caller).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

Builder = Callable[[], tuple[nn.Module, tuple[Any, ...]]]


class Fn(nn.Module):
    """A module around a function of its inputs (the held-out op-level models)."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *args: Any) -> Any:
        return self.fn(*args)


class FirstOutput(nn.Module):
    """A transformers model's first output (logits or last hidden state)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.model(x)
        return out[0] if isinstance(out, tuple) else out.logits


# ------------------------------------------------------------------ clean models


def convnext() -> tuple[nn.Module, tuple[Any, ...]]:
    """16 channels at 16x16 in stage 0: the residual add has the same shape in NCHW and in
    the NHWC layout a MIL pass moves it to."""
    import transformers

    config = transformers.ConvNextConfig(
        num_channels=3, hidden_sizes=[16, 32], depths=[1, 1], num_stages=2, num_labels=10
    )
    model = transformers.ConvNextForImageClassification(config)
    return FirstOutput(model), (torch.randn(1, 3, 64, 64),)


def mobilevit() -> tuple[nn.Module, tuple[Any, ...]]:
    import transformers

    config = transformers.MobileViTConfig(
        image_size=32,
        hidden_sizes=[16, 24, 32],
        neck_hidden_sizes=[8, 8, 16, 16, 24, 32, 64],
        num_attention_heads=2,
        num_labels=10,
    )
    return FirstOutput(transformers.MobileViTForImageClassification(config)), (
        torch.randn(1, 3, 32, 32),
    )


def _torchvision_init(model: nn.Module) -> nn.Module:
    """torchvision's initialisation of MobileNetV2 / EfficientNet (random weights)."""
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out")
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, 0, 0.01)
            nn.init.zeros_(m.bias)
    return model


def _conv_bn(cin: int, cout: int, k: int, stride: int, groups: int, act: Any) -> nn.Module:
    layers = [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False)]
    layers.append(nn.BatchNorm2d(cout))
    if act is not None:
        layers.append(act())
    return nn.Sequential(*layers)


class InvertedResidual(nn.Module):
    """MobileNetV2's block (ReLU6), or EfficientNet's MBConv (SiLU, squeeze-excitation)."""

    def __init__(self, cin: int, cout: int, stride: int, expand: int, efficient: bool) -> None:
        super().__init__()
        act = nn.SiLU if efficient else nn.ReLU6
        hidden = cin * expand
        self.use_res = stride == 1 and cin == cout
        self.expand = _conv_bn(cin, hidden, 1, 1, 1, act)
        self.dw = _conv_bn(hidden, hidden, 3, stride, hidden, act)
        self.se = (
            nn.Sequential(
                nn.AdaptiveAvgPool2d(1),
                nn.Conv2d(hidden, max(1, cin // 4), 1),
                nn.SiLU(),
                nn.Conv2d(max(1, cin // 4), hidden, 1),
                nn.Sigmoid(),
            )
            if efficient
            else None
        )
        self.project = _conv_bn(hidden, cout, 1, 1, 1, None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.dw(self.expand(x))
        if self.se is not None:
            y = y * self.se(y)
        y = self.project(y)
        return x + y if self.use_res else y


def _mobile_net(efficient: bool) -> tuple[nn.Module, tuple[Any, ...]]:
    act = nn.SiLU if efficient else nn.ReLU6
    blocks = [_conv_bn(3, 16, 3, 2, 1, act)]
    for cin, cout, stride in ((16, 16, 1), (16, 24, 2), (24, 24, 1), (24, 32, 2)):
        blocks.append(InvertedResidual(cin, cout, stride, 4, efficient))
    blocks += [_conv_bn(32, 64, 1, 1, 1, act), nn.AdaptiveAvgPool2d(1), nn.Flatten()]
    blocks += [nn.Dropout(0.2), nn.Linear(64, 10)]
    return _torchvision_init(nn.Sequential(*blocks)), (torch.randn(1, 3, 32, 32),)


def mobilenet_v2() -> tuple[nn.Module, tuple[Any, ...]]:
    return _mobile_net(efficient=False)


def efficientnet_b0() -> tuple[nn.Module, tuple[Any, ...]]:
    return _mobile_net(efficient=True)


def tiny_logits() -> tuple[nn.Module, tuple[Any, ...]]:
    """A conv net whose outputs are far below float16's normal range (1e-9): fp16 holds
    them as zero or subnormals, which is not a divergence."""
    net = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten()
    )
    head = nn.Linear(8, 10)
    with torch.no_grad():
        head.weight.mul_(1e-8)
        head.bias.zero_()
    return nn.Sequential(net, head), (torch.randn(1, 3, 16, 16),)


class GroupedQueryAttention(nn.Module):
    """Grouped-query attention (8 query heads share 2 key/value heads), rotary-free."""

    def __init__(self, d: int = 64, heads: int = 8, kv_heads: int = 2) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, d // heads
        self.q = nn.Linear(d, d)
        self.kv = nn.Linear(d, 2 * kv_heads * self.head_dim)
        self.o = nn.Linear(d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q = self.q(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k, v = self.kv(x).view(b, t, 2 * self.kv_heads, self.head_dim).transpose(1, 2).chunk(2, 1)
        repeat = self.heads // self.kv_heads
        k, v = (z.repeat_interleave(repeat, dim=1) for z in (k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o(a.transpose(1, 2).reshape(b, t, d))


def gqa_attention() -> tuple[nn.Module, tuple[Any, ...]]:
    return GroupedQueryAttention(), (torch.randn(1, 10, 64),)


class MaskDownsample(nn.Module):
    """DETR's backbone mask: the pixel mask resized to the feature map (64x64 -> 2x2,
    nearest), then used to mask features."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 32, stride=32)

    def forward(self, pixels: torch.Tensor, pixel_mask: torch.Tensor) -> torch.Tensor:
        features = self.conv(pixels)
        mask = F.interpolate(pixel_mask[None].float(), size=features.shape[-2:])[0]
        return features * mask[:, None]


def detr_mask() -> tuple[nn.Module, tuple[Any, ...]]:
    return MaskDownsample(), (torch.randn(1, 3, 64, 64), torch.ones(1, 64, 64))


class DetrOutputs(nn.Module):
    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, pixels: torch.Tensor, pixel_mask: torch.Tensor) -> Any:
        out = self.model(pixel_values=pixels, pixel_mask=pixel_mask)
        return out.logits, out.pred_boxes


def detr() -> tuple[nn.Module, tuple[Any, ...]]:
    """transformers' DETR with a tiny ResNet backbone (a minute to verify: benchmark only)."""
    import transformers

    backbone = transformers.ResNetConfig(
        embedding_size=16, hidden_sizes=[16, 32, 32, 64], depths=[1, 1, 1, 1],
        out_features=["stage4"],
    )  # fmt: skip
    config = transformers.DetrConfig(
        use_timm_backbone=False,
        backbone_config=backbone,
        use_pretrained_backbone=False,
        d_model=32,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        num_queries=4,
        num_labels=5,
    )
    model = DetrOutputs(transformers.DetrForObjectDetection(config))
    return model, (torch.randn(1, 3, 64, 64), torch.ones(1, 64, 64, dtype=torch.long))


def _nerf_transmittance(sigma: torch.Tensor, delta: torch.Tensor) -> Any:
    """NeRF's volume rendering: transmittance is the cumulative product of ``1 - alpha``
    along each ray (as ``exp(cumsum(log(.)))``, the exported form), weights summed."""
    alpha = 1 - torch.exp(-torch.relu(sigma) * delta)
    survive = torch.exp(torch.cumsum(torch.log(1 - alpha + 1e-10), dim=-1))
    transmittance = torch.cat([torch.ones_like(survive[..., :1]), survive[..., :-1]], -1)
    weights = alpha * transmittance
    return weights.sum(-1), weights


def nerf_transmittance() -> tuple[nn.Module, tuple[Any, ...]]:
    g = torch.Generator().manual_seed(3)
    sigma = torch.rand(32, 128, generator=g) * 0.1  # thin media: weights of about 2e-3
    return Fn(_nerf_transmittance), (sigma, torch.full((32, 128), 0.05))


def rms_norm_tiny_eps() -> tuple[nn.Module, tuple[Any, ...]]:
    """RMSNorm (eps 1e-6) over rows where one feature dominates (max^2 = 64 x mean square).
    coremltools scales a row by its max before the root mean square, so eps acts as
    eps * max^2: 3e-5 of each value here, float32-visible, but not a digit a user reads."""
    norm = nn.RMSNorm(64, eps=1e-6)
    g = torch.Generator().manual_seed(4)
    x = torch.randn(1, 10, 64, generator=g) * 0.05
    x[..., 0] = 8.0
    return Fn(norm), (x,)


def nearest_resize_fractional() -> tuple[nn.Module, tuple[Any, ...]]:
    """A nearest resize at scale 1.5 (it lowers, and Core ML computes it as torch does)."""
    return Fn(lambda x: F.interpolate(x, scale_factor=1.5, mode="nearest")), (
        torch.randn(1, 3, 8, 6),
    )


class Recurrent(nn.Module):
    """A two-layer bidirectional LSTM over a batch-first sequence, then an RNN."""

    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(6, 8, num_layers=2, batch_first=True, bidirectional=True)
        self.rnn = nn.RNN(16, 5, batch_first=True)

    def forward(self, x: torch.Tensor) -> Any:
        y, (h, c) = self.lstm(x)
        z, _ = self.rnn(y)
        return z, h, c


def recurrent() -> tuple[nn.Module, tuple[Any, ...]]:
    return Recurrent(), (torch.randn(2, 7, 6),)


def grid_sample() -> tuple[nn.Module, tuple[Any, ...]]:
    """Sampling a feature map at coordinates the model computes (spatial transformers,
    deformable attention): ``grid_sample`` with border padding."""
    conv = nn.Conv2d(3, 2, 3, padding=1)

    def fn(x: torch.Tensor) -> torch.Tensor:
        offsets = torch.tanh(conv(x)).permute(0, 2, 3, 1)
        return F.grid_sample(x, offsets * 1.2, padding_mode="border", align_corners=False)

    return Fn(fn), (torch.randn(1, 3, 6, 5),)


CLEAN: dict[str, Builder] = {
    "convnext": convnext,
    "mobilevit": mobilevit,
    "mobilenet_v2": mobilenet_v2,
    "efficientnet_b0": efficientnet_b0,
    "tiny_logits": tiny_logits,
    "gqa_attention": gqa_attention,
    "detr_mask": detr_mask,
    "nerf_transmittance": nerf_transmittance,
    "rms_norm_tiny_eps": rms_norm_tiny_eps,
    "nearest_resize_fractional": nearest_resize_fractional,
    "recurrent": recurrent,
    "grid_sample": grid_sample,
}
SLOW_CLEAN: dict[str, Builder] = {"detr": detr}  # measured by the benchmark, not tested


# ------------------------------------------- silent wrong values, each with a clean twin


def _fn(fn: Callable[..., Any], *inputs: Any) -> Builder:
    return lambda: (Fn(fn), inputs)


def _unit_rows(scale: float) -> Callable[[torch.Tensor], torch.Tensor]:
    """Rows scaled to unit length after a scaling the model does itself."""

    def fn(x: torch.Tensor) -> torch.Tensor:
        y = x * scale
        return y / (y * y).sum(-1, keepdim=True).sqrt()

    return fn


def _peak_normalised(scale: float) -> Callable[[torch.Tensor], torch.Tensor]:
    def fn(x: torch.Tensor) -> torch.Tensor:
        y = x * scale
        return y / y.abs().amax(-1, keepdim=True)

    return fn


class HalfPositions(nn.Module):
    """Rows looked up at positions computed as floats (``pos * 0.5``) and cast to int."""

    def __init__(self) -> None:
        super().__init__()
        self.table = nn.Embedding(4096, 8)

    def forward(self, positions: torch.Tensor) -> torch.Tensor:
        return self.table((positions.float() * 0.5).long())


def _positions(low: int, high: int) -> Builder:
    return lambda: (HalfPositions(), (torch.randint(low, high, (1, 16)),))


_X = torch.Generator().manual_seed(1)
_FLOATS = torch.randn(2, 16, generator=_X) * 2
_IDS = torch.randint(0, 10000, (2, 8), generator=_X)
# returns spread over magnitudes 3e-6 .. 0.3 (log returns of prices), random signs
_SIGNS = torch.randn(4, 64, generator=_X).sign()
_RETURNS = _SIGNS * 10 ** (torch.rand(4, 64, generator=_X) * 5 - 5.5)

# name -> (the model with a silent wrong value, its clean twin)
HELDOUT: dict[str, tuple[Builder, Builder]] = {
    # |x * 300|^2 passes 65504 inside the norm: fp16 inf, the rows come back 0
    "fp16-overflow-inside": (_fn(_unit_rows(300.0), _FLOATS), _fn(_unit_rows(0.3), _FLOATS)),
    # x * 1e-7 is a float16 subnormal with 1-3 significant bits: the ratios are coarse
    "fp16-underflow-inside": (
        _fn(_peak_normalised(1e-7), _FLOATS),
        _fn(_peak_normalised(1e-3), _FLOATS),
    ),
    # int64 ids * 1000003 leave int32 (Core ML has no int64 arithmetic): wrapped
    "int32-wrap": (
        _fn(lambda i: (i * 1000003) % 1000, _IDS),
        _fn(lambda i: (i * 31) % 1000, _IDS),
    ),
    # the same wrap where the output hides it (2**32 is a multiple of 65536): the wrapped
    # integer intermediate is the finding
    "int32-wrap-hidden": (
        _fn(lambda i: (i * 1000003) % 65536, _IDS),
        _fn(lambda i: (i * 31) % 65536, _IDS),
    ),
    # positions above 2048 held as fp16 floats before the cast back to an index
    "float-rounded-index": (_positions(2049, 8000), _positions(0, 2000)),
    # softplus' threshold argument is never read by the converter
    "unread-argument": (
        _fn(lambda x: F.softplus(x, threshold=2.0), _FLOATS),
        _fn(lambda x: F.softplus(x), _FLOATS),
    ),
    # log1p becomes log(x, epsilon=1): 1 + x is rounded to float32 before the log, so
    # returns of 1e-5 keep 3 digits; they are small next to the largest output (issue 30).
    # Its twin writes log(1 + x) itself: eager computes the same thing
    "log1p-as-log": (_fn(torch.log1p, _RETURNS), _fn(lambda x: torch.log(1 + x), _RETURNS)),
    # floor division by 1 is removed as a no-op by a conversion pass: the floor is lost
    "no-op-removed": (
        _fn(lambda x: x // 1.0 + x, _FLOATS),
        _fn(lambda x: torch.floor(x) + x, _FLOATS),
    ),
}
