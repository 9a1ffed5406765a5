"""Acceptance of the export-backed pre-commit hook: on a scratch git repository with a
declared program, ``pre-commit run`` with the hook as ``.pre-commit-hooks.yaml`` defines it
flags a KV-cache decoder's crash at its model line, the second run is answered by the cache,
a commit touching no model source is a no-op, and the stock lowering really crashes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("pre_commit")

REPO = Path(__file__).parents[1]
LM = textwrap.dedent(
    """
    import torch
    from torch import nn


    class Attention(nn.Module):
        def __init__(self, dim=16, heads=2, max_len=8):
            super().__init__()
            self.heads = heads
            self.qkv = nn.Linear(dim, 3 * dim)
            self.register_buffer("k_cache", torch.zeros(1, heads, max_len, dim // heads))
            self.register_buffer("v_cache", torch.zeros(1, heads, max_len, dim // heads))

        def forward(self, x, pos):
            b, t, d = x.shape
            q, k, v = self.qkv(x).view(b, t, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
            self.k_cache.index_copy_(2, pos, k)
            self.v_cache.index_copy_(2, pos, v)
            y = nn.functional.scaled_dot_product_attention(q, self.k_cache, self.v_cache)
            return y.transpose(1, 2).reshape(b, t, d)


    class TinyLM(nn.Module):
        def __init__(self, vocab=32, dim=16):
            super().__init__()
            self.emb = nn.Embedding(vocab, dim)
            self.attn = Attention(dim)
            self.head = nn.Linear(dim, vocab)

        def forward(self, tokens, pos):
            return self.head(self.attn(self.emb(tokens), pos))
    """
)
EXPORT = textwrap.dedent(
    """
    import torch

    from models.lm import TinyLM


    def make_programs():
        with torch.no_grad():
            model = TinyLM().eval()
            return {"lm": (model, (torch.zeros(1, 1, dtype=torch.long), torch.tensor([0])))}
    """
)


def _hook_entry() -> str:
    """The hook's entry as published, run with this venv's coreml-lint."""
    hooks = (REPO / ".pre-commit-hooks.yaml").read_text()
    block = hooks[hooks.index("- id: coreml-lint-export") :]
    entry = re.search(r"entry: (.+)", block).group(1).strip()
    assert entry.startswith("coreml-lint ")
    return str(Path(sys.executable).parent / "coreml-lint") + entry[len("coreml-lint") :]


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


def _scratch_repo(root: Path) -> None:
    (root / "models").mkdir()
    (root / "models" / "__init__.py").write_text("")
    (root / "models" / "lm.py").write_text(LM)
    (root / "models" / "export.py").write_text(EXPORT)
    (root / "tools.py").write_text("def helper():\n    return 1\n")
    (root / "pyproject.toml").write_text(
        '[tool.coreml-lint]\nprograms = ["models/export.py:make_programs"]\n'
    )
    (root / ".gitignore").write_text(".coreml-lint-cache/\n")
    config = {
        "repos": [
            {
                "repo": "local",
                "hooks": [
                    {
                        "id": "coreml-lint-export",
                        "name": "coreml-lint-export",
                        "entry": _hook_entry(),
                        "language": "system",
                        "types": ["python"],
                        "require_serial": True,
                    }
                ],
            }
        ]
    }
    (root / ".pre-commit-config.yaml").write_text(json.dumps(config))  # JSON is YAML
    _git(root, "init", "-q")
    _git(root, "add", "-A")


def _pre_commit(root: Path) -> tuple[subprocess.CompletedProcess, float]:
    env = {**os.environ, "PRE_COMMIT_HOME": str(root.parent / "pre-commit-home")}
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pre_commit", "run", "coreml-lint-export", "--color", "never"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return done, time.perf_counter() - start


@pytest.mark.oracle
def test_the_export_hook_flags_the_kv_cache_crash_and_then_hits_the_cache(tmp_path):
    root = tmp_path / "project"
    root.mkdir()
    _scratch_repo(root)
    first, _ = _pre_commit(root)
    line = 1 + LM.splitlines().index("        self.k_cache.index_copy_(2, pos, k)")
    assert first.returncode == 1, first.stdout + first.stderr
    assert f"models/lm.py:{line}: CML201" in first.stdout
    assert "--export: exported models/export.py:make_programs" in first.stdout

    second, seconds = _pre_commit(root)
    assert second.returncode == 1 and f"models/lm.py:{line}: CML201" in second.stdout
    assert "unchanged, from the cache: models/export.py:make_programs" in second.stdout
    print(f"second hook run on an unchanged tree: {seconds:.2f} s")

    # A commit that touches no file the program was built from does not export or report.
    _git(root, "reset", "-q")
    _git(root, "add", "tools.py", ".pre-commit-config.yaml")
    unrelated, _ = _pre_commit(root)
    assert unrelated.returncode == 0, unrelated.stdout

    # The finding is a promise: the stock lowering of that very program crashes as it says.
    from coreml_lint.core.settings import PartitionerSettings
    from coreml_lint.lowering.check import lower_with_stock_partitioner

    index = json.loads((root / ".coreml-lint-cache/export/index.json").read_text())
    (entry,) = index["entries"].values()
    archive = root / ".coreml-lint-cache/export" / entry["programs"][0]["file"]
    outcome = lower_with_stock_partitioner(archive, PartitionerSettings())
    assert not outcome["lowers"] and "State model is supported only >= iOS18" in outcome["outcome"]
