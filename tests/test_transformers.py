"""Real ``transformers`` architectures, built from config objects with random weights.

Nothing is downloaded. Each model is linted and lowered with the stock partitioner: the
ones that lower with correct MIL must get no error, and Gemma's tanh GELU must be flagged
and really appear as EXACT gelu in the MIL.
"""

from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers")

from coreml_lint import lint_program  # noqa: E402
from coreml_lint.core.findings import Severity  # noqa: E402

# Small enough to lower in seconds, big enough to hold every op the full model has.
SMALL = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4)


def _decoder(config_cls, model_cls, **extra):
    config = config_cls(
        vocab_size=128,
        **SMALL,
        num_key_value_heads=2,
        max_position_embeddings=64,
        **extra,
    )
    return model_cls(config), (torch.randint(0, 128, (1, 8)),), {"use_cache": False}


ARCHITECTURES = {
    "llama": (lambda: _decoder(transformers.LlamaConfig, transformers.LlamaForCausalLM), set()),
    "qwen2": (lambda: _decoder(transformers.Qwen2Config, transformers.Qwen2ForCausalLM), set()),
    "gemma": (
        lambda: _decoder(transformers.GemmaConfig, transformers.GemmaForCausalLM, head_dim=16),
        {"CML305"},
    ),
    "gpt2": (
        lambda: (
            transformers.GPT2LMHeadModel(
                transformers.GPT2Config(
                    vocab_size=128, n_embd=64, n_layer=2, n_head=4, n_positions=64
                )
            ),
            (torch.randint(0, 128, (1, 8)),),
            {"use_cache": False},
        ),
        set(),
    ),
    "bert": (
        lambda: (
            transformers.BertModel(transformers.BertConfig(vocab_size=128, **SMALL)),
            (torch.randint(0, 128, (1, 8)),),
            {},
        ),
        set(),
    ),
    "vit": (
        lambda: (
            transformers.ViTModel(transformers.ViTConfig(image_size=32, patch_size=8, **SMALL)),
            (torch.randn(1, 3, 32, 32),),
            {},
        ),
        set(),
    ),
}


class _FirstOutput(torch.nn.Module):
    def __init__(self, model, kwargs):
        super().__init__()
        self.model, self.kwargs = model, kwargs

    def forward(self, x):
        return self.model(x, **self.kwargs)[0]


def _export(name):
    torch.manual_seed(0)
    model, inputs, kwargs = ARCHITECTURES[name][0]()
    return torch.export.export(_FirstOutput(model.eval(), kwargs), inputs)


@pytest.mark.parametrize("name", sorted(ARCHITECTURES))
def test_architecture_errors(name):
    report = lint_program(_export(name))
    errors = {f.code for f in report.findings if f.severity is Severity.ERROR}
    assert errors == ARCHITECTURES[name][1], [f.message for f in report.findings]
    assert len(report.placement.partitions) == 1


@pytest.mark.oracle
@pytest.mark.parametrize("name", sorted(ARCHITECTURES))
def test_architecture_lowers_as_predicted(name):
    from oracle import lower

    lowered = lower(_export(name))
    assert lowered.ok, lowered.message
    assert lowered.delegate_calls == 1 and not lowered.edge_cpu_ops
    exact_gelu = 'mode="EXACT"' in lowered.mil
    if "CML305" in ARCHITECTURES[name][1]:
        assert exact_gelu, "Gemma's tanh GELU should come out EXACT in the stock MIL"


@pytest.mark.oracle
@pytest.mark.parametrize("name", sorted(ARCHITECTURES))
def test_architecture_lowers_with_coreml_lint(name):
    from oracle import Lowered, _capture

    from coreml_lint import lower

    delegates: list = []
    with _capture(delegates):
        result = lower(_export(name))
    lowered = Lowered(delegates=delegates)
    assert not result.report.mil_problems
    assert result.report.partitions_after == 1 and not result.report.cpu_ops_after
    if "CML305" in ARCHITECTURES[name][1]:
        assert 'mode="EXACT"' not in lowered.mil and "tanh" in lowered.mil


def _gemma3():
    """Gemma 3: hybrid sliding/full attention, tanh GELU."""
    config = transformers.Gemma3TextConfig(
        vocab_size=128,
        **SMALL,
        num_key_value_heads=2,
        max_position_embeddings=64,
        head_dim=16,
        sliding_window=8,
        layer_types=["sliding_attention", "full_attention"],
    )
    return transformers.Gemma3ForCausalLM(config), None, None


def _static_cache_export(arch: str, prefill: int = 1):
    """A decoder exported the way ExecuTorch users export LLMs: transformers' own
    static-cache wrapper, with the KV cache and per-layer ``cumulative_length`` counters as
    buffers and keyword inputs; ``prefill`` tokens at a time (a multi-token prefill writes
    several cache positions at once)."""
    from transformers.integrations.executorch import TorchExportableModuleForDecoderOnlyLM

    torch.manual_seed(0)
    model, _, _ = _gemma3() if arch == "gemma3" else ARCHITECTURES[arch][0]()
    model.generation_config = transformers.GenerationConfig(
        use_cache=True,
        cache_implementation="static",
        max_length=32,
        cache_config={"batch_size": 1, "max_cache_len": 32},
    )
    wrapper = TorchExportableModuleForDecoderOnlyLM(model.eval(), batch_size=1, max_cache_len=32)
    return wrapper.export(
        input_ids=torch.arange(1, prefill + 1, dtype=torch.long)[None],
        cache_position=torch.arange(prefill, dtype=torch.long),
    )


# iOS18: the layers' int64 counters get the same value, and coremltools' merged writes crash
# `canonicalize_inplace_pattern`. Below iOS18: any Core ML state is refused.
# A multi-token prefill writes several cache positions with index_copy: the crash is
# coremltools' index_put (CML401), before any state question.
SQUEEZE = r"Input squeeze_\d+ has rank 1 != other inputs rank 0"
STATIC_CACHE = {
    ("llama", 15, 1): ({"CML201"}, r"iOS18"),
    ("llama", 18, 1): ({"CML203"}, r"KeyError:.*coreml_update_state"),
    ("gemma", 18, 1): ({"CML203", "CML305"}, r"KeyError:.*coreml_update_state"),
    ("llama", 15, 4): ({"CML201", "CML401"}, r"iOS18"),
    ("llama", 18, 4): ({"CML203", "CML401"}, SQUEEZE),
    ("gemma3", 18, 4): ({"CML203", "CML305", "CML401"}, SQUEEZE),
}


@pytest.mark.parametrize("arch,ios,prefill", sorted(STATIC_CACHE))
def test_static_cache_errors(arch, ios, prefill):
    from coreml_lint.core.config import LintConfig
    from coreml_lint.program.placement import PartitionerSettings

    settings = PartitionerSettings(minimum_deployment_target=ios)
    report = lint_program(_static_cache_export(arch, prefill), LintConfig(partitioner=settings))
    errors = {f.code for f in report.findings if f.severity is Severity.ERROR}
    assert errors == STATIC_CACHE[arch, ios, prefill][0], [f.message for f in report.findings]


@pytest.mark.oracle
@pytest.mark.parametrize("arch,ios,prefill", sorted(STATIC_CACHE))
def test_static_cache_stock_crash_and_lower_fix(arch, ios, prefill):
    import re

    from oracle import Lowered, _capture
    from oracle import lower as stock_lower

    from coreml_lint import lower

    expected_codes, crash = STATIC_CACHE[arch, ios, prefill]
    stock = stock_lower(_static_cache_export(arch, prefill), ios=ios)
    assert not stock.ok and re.search(crash, stock.message), stock.message
    delegates: list = []
    with _capture(delegates):
        result = lower(_static_cache_export(arch, prefill), minimum_deployment_target=ios)
    report = result.report
    assert not report.mil_problems and not report.rejected_rewrites and report.partitions_after == 1
    mil = Lowered(delegates=delegates).mil
    states = re.findall(r"%(\w+): \([^)]*\)\(State\)", mil)
    if ios >= 18:  # the fp16 KV cache stays Core ML state; only the counters go back
        assert sorted(states) == ["key_cache_0", "key_cache_1", "value_cache_0", "value_cache_1"]
    else:
        assert not states
    if "CML305" in expected_codes:
        assert 'mode="EXACT"' not in mil and "tanh" in mil
    if "CML401" in expected_codes:  # the prefill's cache write, as Core ML converts it
        assert "scatter_along_axis" in mil and any("CML401" in r for r in report.rewrites)


def _dinov2_at_other_resolution():
    """DINOv2 run below its configured resolution (checkpoints are configured for 518 px
    and run at 224): its position embeddings are interpolated bicubically."""
    config = transformers.Dinov2Config(image_size=64, patch_size=8, **SMALL)
    model = _FirstOutput(transformers.Dinov2Model(config).eval(), {})
    torch.manual_seed(0)
    return torch.export.export(model, (torch.randn(1, 3, 32, 32),))


def test_vision_backbone_at_another_resolution_is_flagged():
    report = lint_program(_dinov2_at_other_resolution())
    errors = {f.code for f in report.findings if f.severity is Severity.ERROR}
    assert errors == {"CML312"}, [f.message for f in report.findings]


@pytest.mark.oracle
def test_vision_backbone_at_another_resolution_crashes_stock_and_lowers():
    from oracle import lower as stock_lower

    from coreml_lint import lower

    stock = stock_lower(_dinov2_at_other_resolution())
    assert not stock.ok and "Only contiguous memory format" in stock.message, stock.message
    result = lower(_dinov2_at_other_resolution())
    report = result.report
    assert not report.findings_after and not report.mil_problems and not report.rejected_rewrites
    assert report.partitions_after == 1 and any(r.startswith("CML312") for r in report.rewrites)
