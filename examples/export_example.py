"""Export the bundled example model to a .pt2 archive: ``python examples/export_example.py OUT``."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from pitfall_model import CaptionModel, example_inputs


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "examples/build/pitfall_model.pt2")
    out.parent.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    program = torch.export.export(CaptionModel().eval(), example_inputs())
    torch.export.save(program, out)
    print(f"exported {out}")


if __name__ == "__main__":
    main()
