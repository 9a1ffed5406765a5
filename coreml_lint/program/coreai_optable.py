"""Which ATen ops coreai-torch converts, read from the generated ``data/coreai_optable.json``.

See ``coreml_lint/coreai_stack/optable_gen.py`` for how the table is made from coreai-torch
itself; this reader imports neither torch nor coreai-torch.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

TABLE_PATH = Path(__file__).with_name("data") / "coreai_optable.json"


@dataclass(frozen=True)
class CoreAIOpTable:
    generated_with: dict[str, str]
    converters: frozenset[str]  # ops coreai-torch has a converter for
    kept_whole: frozenset[str]  # ops get_decomp_table() keeps from decomposition
    decomposed: frozenset[str]  # ops run_decompositions(get_decomp_table()) removes
    stripped: frozenset[str]  # assertion ops the converter drops

    def without_converter(self, target: str) -> bool:
        """Whether the ATen op ``target`` (``aten.remainder.Scalar``) stops coreai-torch's
        conversion: it reaches the converter (neither decomposed nor stripped first) and has
        no converter there. An op the decomposition removes is never said to fail: what it
        becomes depends on its arguments."""
        if target in self.stripped or target in self.converters:
            return False
        return target in self.kept_whole or target not in self.decomposed

    def describe_versions(self) -> str:
        return ", ".join(f"{k} {v}" for k, v in self.generated_with.items() if k != "torch")


@cache
def load_coreai_optable(path: Path = TABLE_PATH) -> CoreAIOpTable:
    data = json.loads(path.read_text())
    return CoreAIOpTable(
        generated_with=dict(data["generated_with"]),
        converters=frozenset(data["converters"]),
        kept_whole=frozenset(data["kept_whole"]),
        decomposed=frozenset(data["decomposed"]),
        stripped=frozenset(data["stripped"]),
    )
