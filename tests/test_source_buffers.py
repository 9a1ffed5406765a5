"""CML201 on model source: what runs only in training is not state in an exported model."""

from __future__ import annotations

from pathlib import Path

from coreml_lint.core.config import LintConfig
from coreml_lint.engine.source import lint_source_file

HEAD = (
    "import torch\nfrom torch import nn\n\n\n"
    "class Norm(nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    '        self.register_buffer("mean", torch.zeros(4))\n'
)


def _cml201_lines(tmp_path: Path, body: str) -> list[int]:
    path = tmp_path / "model.py"
    path.write_text(HEAD + body)
    return [f.location.line for f in lint_source_file(path, LintConfig()) if f.code == "CML201"]


def test_method_called_only_in_training_is_not_state(tmp_path: Path) -> None:
    body = (
        "    def forward(self, x):\n"
        "        if self.training:\n"
        "            self._update(x)\n"
        "        return x - self.mean\n"
        "    def _update(self, x):\n"
        "        self.mean.mul_(0.9).add_(0.1 * x.mean(0))\n"
    )
    assert _cml201_lines(tmp_path, body) == []


def test_writes_after_an_eval_early_return_are_training_only(tmp_path: Path) -> None:
    body = (
        "    def forward(self, x):\n"
        "        if not self.training:\n"
        "            return x - self.mean\n"
        "        self.mean.mul_(0.9)\n"
        "        return x\n"
    )
    assert _cml201_lines(tmp_path, body) == []


def test_writes_after_a_training_early_return_are_eval_and_flagged(tmp_path: Path) -> None:
    body = (
        "    def forward(self, x):\n"
        "        if self.training:\n"
        "            return x\n"
        "        self.mean.add_(1)\n"
        "        return x - self.mean\n"
    )
    assert _cml201_lines(tmp_path, body) == [12]
