"""Program-guided fixes reach the way model code is laid out (issue 25): modules built in
comprehensions, generators, ``ModuleDict``s, helper methods and functions, ``add_module``;
a norm layer a builder passes down (fixed where it is chosen); members of an
``nn.Sequential`` (positional, ``OrderedDict``, a subclass passing its layers to
``super().__init__``); blocks appended in a loop as ``ModuleDict(dict(key=...))`` (issue
32); an ``F.gelu`` in a helper function the forward calls; and bool
attention masks whose type only the program knows. Each layout is a model file in
``tests/fixtures/guided``: exported, its stock lowering really fails (a crash, or
``verify`` sees Core ML diverge from eager), fixed with ``coreml-lint its.pt2 --fix
--unsafe-fixes`` in its folder, exported again: it lints clean, computes what it computed,
lowers with the stock partitioner, and ``verify`` agrees."""

from __future__ import annotations

import importlib.util
import re
import shutil
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from coreml_lint import lint_program  # noqa: E402
from coreml_lint.cli.main import main  # noqa: E402
from coreml_lint.core.findings import Severity  # noqa: E402

MODELS = Path(__file__).parent / "fixtures" / "guided"

# model file -> (its error code, what the stock lowering shows, edits the fix must write)
LAYOUTS = {
    "layout_modulelist": (
        "CML303",
        ("lowering_crash", r"expected \[4\]"),
        [
            "nn.ModuleList([nn.RMSNorm(dim, eps=torch.finfo(torch.float32).eps) for _ in",
            "nn.RMSNorm(dim, elementwise_affine=False, eps=torch.finfo(torch.float32).eps) for",
            "{name: nn.RMSNorm(dim, eps=torch.finfo(torch.float32).eps) for name in",
            "layers.append(nn.RMSNorm(dim, eps=torch.finfo(torch.float32).eps))",
            "self.norm = nn.RMSNorm(dim, eps=torch.finfo(torch.float32).eps)",
            'self.add_module(f"post{i}", nn.RMSNorm(dim, eps=torch.finfo(torch.float32).eps))',
        ],
    ),
    "layout_norm_passed_down": (
        "CML303",
        ("lowering_crash", r"expected \[4\]"),
        ["norm_layer=functools.partial(nn.RMSNorm, eps=torch.finfo(torch.float32).eps)):"],
    ),
    "layout_sequential": (
        "CML305",
        ("diverge", None),
        [
            "nn.Linear(dim, hidden), ExportableGELU(approximate=approximate), nn.Linear(",
            '("act", TanhGELU()),',
            "super().__init__(nn.Linear(dim, dim), TanhGELU())",
            "def gelu_tanh(x):\n    return tanh_gelu(x)",
        ],
    ),
    "layout_vit_blocks": (
        "CML305",
        ("diverge", None),
        [
            "nn.Linear(dim, hidden),\n                            TanhGELU(),\n",
            'self.heads.append(nn.ModuleDict({"act": TanhGELU()}))',
            'self.heads.append(nn.ModuleDict({"act": nn.Identity()}))',
        ],
    ),
    "layout_mha_mask": (
        "CML302",
        ("diverge", None),
        [
            "attn_mask=additive_mask(torch.triu(torch.ones(T, T), 1).bool())",
            "attn_mask=torch.zeros(mask.shape, device=mask.device).masked_fill(mask, ",
            "self.cross(z, x, x, None, False, additive_mask(self.causal[:T, :T]))[0]",
            "attn_mask=additive_mask(self.square), need_weights=False)[0]",
        ],
    ),
}


def _load(path: Path, tag: str):
    spec = importlib.util.spec_from_file_location(f"{path.stem}_{tag}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    torch.manual_seed(0)
    return module.Model().eval(), module.example_inputs()


def _verify(model, inputs):
    from coreml_lint.verifier import verify

    return verify(torch.export.export(model, inputs), inputs=inputs)


@pytest.mark.oracle
@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_a_layout_fixed_from_its_program_lowers_and_verifies(name, tmp_path, capsys, monkeypatch):
    code, (broken, evidence), edits = LAYOUTS[name]
    source = tmp_path / f"{name}.py"
    shutil.copy(MODELS / source.name, source)
    model_a, inputs = _load(source, "a")
    program = torch.export.export(model_a, inputs)
    assert code in {f.code for f in lint_program(program).findings if f.severity is Severity.ERROR}
    torch.export.save(program, tmp_path / f"{name}.pt2")

    before = _verify(model_a, inputs)  # the stock lowering really goes wrong
    assert before.status == broken, before.summary()
    if evidence:
        assert re.search(evidence, before.lowering_error or ""), before.lowering_error

    monkeypatch.chdir(tmp_path)
    assert main([f"{name}.pt2", "--fix", "--unsafe-fixes", "--output-format", "concise"]) == 0
    fixed_text = source.read_text()
    for edit in edits:
        assert edit in fixed_text, fixed_text
    main([f"{name}.pt2", "--fix", "--unsafe-fixes"])  # fixing twice changes nothing
    assert source.read_text() == fixed_text
    capsys.readouterr()

    model_b, _ = _load(source, "b")
    model_b.load_state_dict(model_a.state_dict())
    with torch.no_grad():
        torch.testing.assert_close(model_b(*inputs), model_a(*inputs), rtol=1e-6, atol=1e-6)
    again = torch.export.export(model_b, inputs)
    assert not [f for f in lint_program(again).findings if f.severity is Severity.ERROR]
    after = _verify(model_b, inputs)
    assert after.status == "agree", after.summary()


UNPLACEABLE = """
import torch
from torch import nn


class Model(nn.Module):
    def __init__(self, extra=(nn.Identity(), nn.Identity())):
        super().__init__()
        self.body = nn.Sequential(*extra, nn.RMSNorm(16))
        self.norm = nn.RMSNorm(16)

    def forward(self, x):
        return self.norm(x) + self.body(x)


def example_inputs():
    return (torch.randn(2, 16),)
"""


def test_a_node_whose_fix_cannot_be_placed_keeps_its_finding_and_says_why(
    tmp_path, capsys, monkeypatch
):
    """Two norms called on one line make one (merged) finding: the one built by its own
    line is fixed; the Sequential's member after a list of unknown length is not guessed,
    so the finding stays with the reason."""
    source = tmp_path / "model.py"
    source.write_text(UNPLACEABLE)
    model, inputs = _load(source, "unplaceable")
    torch.export.save(torch.export.export(model, inputs), tmp_path / "model.pt2")
    monkeypatch.chdir(tmp_path)
    assert main(["model.pt2", "--fix", "--unsafe-fixes"]) == 1
    out = capsys.readouterr().out
    assert "self.norm = nn.RMSNorm(16, eps=torch.finfo(torch.float32).eps)" in source.read_text()
    assert "self.body = nn.Sequential(*extra, nn.RMSNorm(16))" in source.read_text()
    assert "not fixed: no call in a class Model of this file builds `self.body[2]`" in out


OWN_RMSNORM = """
import torch
from torch import nn
from torch.nn import functional as F


class RMSNorm(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return F.rms_norm(x, self.weight.shape, self.weight)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = RMSNorm(16)

    def forward(self, x):
        return self.norm(x)


def example_inputs():
    return (torch.randn(2, 16),)
"""


def test_a_model_s_own_rmsnorm_class_is_fixed_at_its_functional_call(tmp_path, capsys, monkeypatch):
    """A class of the model called RMSNorm is not torch's: its constructor is left alone
    (no guided placement is tried on it), and the ``F.rms_norm`` call its forward makes
    gets eps."""
    source = tmp_path / "model.py"
    source.write_text(OWN_RMSNORM)
    model, inputs = _load(source, "own")
    torch.export.save(torch.export.export(model, inputs), tmp_path / "model.pt2")
    monkeypatch.chdir(tmp_path)
    assert main(["model.pt2", "--fix", "--unsafe-fixes"]) == 0, capsys.readouterr().out
    text = source.read_text()
    assert "F.rms_norm(x, self.weight.shape, self.weight, eps=torch.finfo(" in text
    assert "self.norm = RMSNorm(16)\n" in text
    fixed, _ = _load(source, "own_fixed")
    again = torch.export.export(fixed, inputs)
    assert not [f for f in lint_program(again).findings if f.severity is Severity.ERROR]


GELU_HELPER = """
import torch
from torch import nn
from torch.nn import functional as F


def act(x):
    return F.gelu(x, approximate="tanh")


class Model(nn.Module):
    def forward(self, x):
        return act(x)


def example_inputs():
    return (torch.randn(2, 8),)
"""


def test_when_program_and_source_disagree_nothing_is_fixed(tmp_path, capsys, monkeypatch):
    """The source was edited after the export: the helper's GELU is exact now, the program's
    is tanh. The fix is not placed, and the finding says why."""
    source = tmp_path / "model.py"
    source.write_text(GELU_HELPER)
    model, inputs = _load(source, "disagree")
    torch.export.save(torch.export.export(model, inputs), tmp_path / "model.pt2")
    edited = GELU_HELPER.replace('approximate="tanh"', 'approximate="none"')
    source.write_text(edited)
    monkeypatch.chdir(tmp_path)
    assert main(["model.pt2", "--fix", "--unsafe-fixes"]) == 1
    assert source.read_text() == edited
    out = capsys.readouterr().out
    assert 'not fixed: the source says approximate="none" where the program has tanh' in out
