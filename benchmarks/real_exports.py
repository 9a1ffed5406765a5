"""Real exports, the way ExecuTorch users make them, through the stock lowering and
``coreml-lint lower``: one table.

Rows: transformers' ``TorchExportableModuleForDecoderOnlyLM`` (static KV cache) for Llama,
Qwen2, Qwen3, Gemma 3 (hybrid sliding/full cache), Phi-3 and SmolLM3 with a 1-token and a
4-token prefill; optimum-executorch's ``CausalLMExportableModule`` when it is installed;
vision backbones run at a resolution other than their config's (DINOv2, ViT, SigLIP); and
models in ``.half()``. Columns, per deployment target: what coreml-lint predicts, what the
stock ``CoreMLPartitioner`` does, and what ``coreml-lint lower`` makes (Core ML state kept,
delegates). Every model is built from a config with random weights: nothing is downloaded.

    python benchmarks/real_exports.py [--only NAME ...] [--ios 15 18]

It takes minutes (a lowering each, twice per row and target); it is a command, not a CI step.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import os
import re
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parents[1] / "tests"))
os.environ.setdefault("TQDM_DISABLE", "1")
warnings.filterwarnings("ignore")
logging.disable(logging.WARNING)

import torch  # noqa: E402
import transformers  # noqa: E402

SMALL = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4)
COMMON = dict(vocab_size=128, **SMALL, num_key_value_heads=2, max_position_embeddings=64)
MAX_CACHE = 32


def decoder(arch: str) -> Any:
    t = transformers
    configs: dict[str, Callable[[], Any]] = {
        "llama": lambda: t.LlamaForCausalLM(t.LlamaConfig(**COMMON)),
        "qwen2": lambda: t.Qwen2ForCausalLM(t.Qwen2Config(**COMMON)),
        "qwen3": lambda: t.Qwen3ForCausalLM(t.Qwen3Config(**COMMON, head_dim=16)),
        "gemma3": lambda: t.Gemma3ForCausalLM(
            t.Gemma3TextConfig(
                **COMMON,
                head_dim=16,
                sliding_window=8,
                layer_types=["sliding_attention", "full_attention"],
            )
        ),
        "phi3": lambda: t.Phi3ForCausalLM(t.Phi3Config(**COMMON, pad_token_id=0)),
        "smollm3": lambda: t.SmolLM3ForCausalLM(
            t.SmolLM3Config(**COMMON, pad_token_id=0, no_rope_layers=[1, 0])
        ),
    }
    return configs[arch]()


def static_cache(arch: str, prefill: int) -> Any:
    from transformers.integrations.executorch import TorchExportableModuleForDecoderOnlyLM

    torch.manual_seed(0)
    model = decoder(arch).eval()
    model.generation_config = transformers.GenerationConfig(
        use_cache=True,
        cache_implementation="static",
        max_length=MAX_CACHE,
        cache_config={"batch_size": 1, "max_cache_len": MAX_CACHE},
    )
    wrapper = TorchExportableModuleForDecoderOnlyLM(model, batch_size=1, max_cache_len=MAX_CACHE)
    return wrapper.export(
        input_ids=torch.arange(1, prefill + 1)[None],
        cache_position=torch.arange(prefill),
    )


def optimum(dynamic: bool) -> Any:
    """optimum-executorch's export: a dynamic prefill length by default (example length
    3), or one token at a time."""
    from optimum.exporters.executorch.integrations import CausalLMExportableModule

    torch.manual_seed(0)
    model = decoder("llama").eval()
    model.generation_config = transformers.GenerationConfig(
        use_cache=True,
        cache_implementation="static",
        max_length=MAX_CACHE,
        cache_config={"batch_size": 1, "max_cache_len": MAX_CACHE},
    )
    module = CausalLMExportableModule(
        model, max_seq_len=MAX_CACHE, disable_dynamic_shapes=not dynamic
    )
    programs = module.export()
    return next(iter(programs.values())) if isinstance(programs, dict) else programs


class _First(torch.nn.Module):
    """The model's first output, its input passed as ``input_name`` (positional if None)."""

    def __init__(self, model: Any, input_name: str | None = None, **kwargs: Any) -> None:
        super().__init__()
        self.model, self.input_name, self.kwargs = model, input_name, kwargs

    def forward(self, x: Any) -> Any:
        if self.input_name is None:
            return self.model(x, **self.kwargs)[0]
        return self.model(**{self.input_name: x}, **self.kwargs)[0]


def vision(name: str) -> Any:
    t = transformers
    torch.manual_seed(0)
    if name == "dinov2":
        model = _First(t.Dinov2Model(t.Dinov2Config(image_size=64, patch_size=8, **SMALL)))
    elif name == "vit":
        config = t.ViTConfig(image_size=64, patch_size=8, **SMALL)
        model = _First(t.ViTModel(config), interpolate_pos_encoding=True)
    else:
        config = t.SiglipVisionConfig(image_size=64, patch_size=8, **SMALL)
        model = _First(t.SiglipVisionModel(config), interpolate_pos_encoding=True)
    return torch.export.export(model.eval(), (torch.randn(1, 3, 32, 32),))


def half_llama() -> Any:
    torch.manual_seed(0)
    model = decoder("llama").half().eval()
    embeds = torch.randn(1, 8, 64).half()
    return torch.export.export(
        _First(model, "inputs_embeds", use_cache=False), (embeds,), strict=False
    )


def rows(only: list[str]) -> list[tuple[str, Callable[[], Any]]]:
    found: list[tuple[str, Callable[[], Any]]] = []
    for arch in ("llama", "qwen2", "qwen3", "gemma3", "phi3", "smollm3"):
        for prefill in (1, 4):
            found.append(
                (f"{arch} static cache, prefill {prefill}", _bind(static_cache, arch, prefill))
            )
    if _installed("optimum.exporters.executorch"):
        found += [
            ("optimum llama, 1-token export", _bind(optimum, False)),
            ("optimum llama, dynamic-length prefill", _bind(optimum, True)),
        ]
    else:
        print("(optimum-executorch is not installed: its rows are left out)")
    found += [(f"{v} at another resolution", _bind(vision, v)) for v in ("dinov2", "vit", "siglip")]
    found.append(("llama in .half(), fp16 input", half_llama))
    return [row for row in found if not only or any(word in row[0] for word in only)]


def _installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ImportError:  # a parent package is missing
        return False


def _bind(fn: Callable[..., Any], *args: Any) -> Callable[[], Any]:
    return lambda: fn(*args)


def measure(make: Callable[[], Any], ios: int) -> dict[str, str]:
    from oracle import Lowered, _capture
    from oracle import lower as stock_lower

    import coreml_lint
    from coreml_lint.lowering.run import LoweringError

    lint = coreml_lint.lint_program(make(), minimum_deployment_target=ios)
    codes = sorted({f.code for f in lint.findings if f.severity.value == "error"})
    stock = stock_lower(make(), ios=ios)
    stock_text = "ok" if stock.ok else _first_line(stock.message)
    delegates: list = []
    start = time.perf_counter()
    try:
        with _capture(delegates):
            result = coreml_lint.lower(make(), minimum_deployment_target=ios)
        states = len(re.findall(r"\(State\)", Lowered(delegates=delegates).mil))
        report = result.report
        ours = f".pte, {report.partitions_after} delegate(s), {states} state(s)"
        if report.findings_after or report.mil_problems:
            ours += " (unresolved: " + ", ".join(f.code for f in report.findings_after) + ")"
    except LoweringError as exc:
        ours = "fails: " + _first_line(str(exc))
    return {
        "lint": ", ".join(codes) or "-",
        "stock": stock_text,
        "coreml-lint lower": f"{ours} [{time.perf_counter() - start:.0f} s]",
    }


def _first_line(text: str) -> str:
    return (text.strip().splitlines() or [""])[0][:110]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", default=[], help="rows whose name has a word")
    parser.add_argument("--ios", nargs="*", type=int, default=[15, 18])
    args = parser.parse_args()
    print("| model | iOS | coreml-lint predicts | stock CoreMLPartitioner | coreml-lint lower |")
    print("|---|---|---|---|---|")
    for name, make in rows(args.only):
        for ios in args.ios:
            try:
                cells = measure(make, ios)
            except Exception as exc:  # one model that cannot be built must not stop the table
                cells = {"lint": "-", "stock": "-", "coreml-lint lower": f"not built: {exc}"}
            print(f"| {name} | {ios} | {' | '.join(cells.values())} |", flush=True)


if __name__ == "__main__":
    main()
