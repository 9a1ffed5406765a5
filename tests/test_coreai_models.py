"""No false alarm on clean models under ``--target coreai``: transformers' small Llama, Qwen2
and ViT (built from configs, nothing downloaded), a ConvNeXt and a MobileNetV2-style net get
no Core AI error from the lint, and ``verify --target coreai`` finds them in agreement with
eager on Core AI's real runtime. The decoders' int64 token ids are CAI101 warnings: true
(Core AI refuses an int64 array), and not errors."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import groundtruth_models  # noqa: E402
from test_transformers import ARCHITECTURES, _FirstOutput  # noqa: E402

from coreml_lint.core.config import LintConfig  # noqa: E402
from coreml_lint.core.findings import Severity  # noqa: E402
from coreml_lint.engine.exported import lint_exported_program  # noqa: E402

MODELS = {"llama": {"CAI101"}, "qwen2": {"CAI101"}, "vit": set()}
MODELS |= {"convnext": set(), "mobilenet_v2": set()}


def _export(name):
    torch.manual_seed(0)
    if name in ARCHITECTURES:
        model, inputs, kwargs = ARCHITECTURES[name][0]()
        return torch.export.export(_FirstOutput(model.eval(), kwargs), inputs)
    model, inputs = getattr(groundtruth_models, name)()
    return torch.export.export(model.eval(), inputs)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_no_core_ai_error_on_a_clean_model(name):
    findings = lint_exported_program(_export(name), LintConfig(target="coreai")).findings
    assert not [f.message for f in findings if f.severity is Severity.ERROR]
    assert {f.code for f in findings} == MODELS[name]


@pytest.mark.oracle
@pytest.mark.parametrize("name", sorted(MODELS))
def test_clean_model_agrees_on_core_ai(name):
    pytest.importorskip("coreai_torch", reason="needs coreai-torch (coreml-lint[coreai])")
    pytest.importorskip("coreai.runtime", reason="needs coreai-core (coreml-lint[coreai])")
    from coreml_lint.verifier.coreai import verify_coreai

    report = verify_coreai(_export(name))
    assert report.status == "agree", report.summary()
    assert report.inputs and report.inputs[0].startswith("example ")
