"""A small camera-to-caption model with several Core ML pitfalls buried in ordinary code.

Each one lowers or crashes differently with the stock ``CoreMLPartitioner``:

- the camera frame arrives as uint8 and the first op is a normalisation (CML101);
- the MLP uses tanh GELU, as GPT-2 and Gemma do (CML305: silently exact GELU);
- ``nn.RMSNorm`` without eps (CML303: crash);
- positions are made with ``torch.full`` and no dtype (CML301: fp16 positions);
- a step counter lives in an int32 buffer (CML201 below iOS18);
- the features are also returned as ``clone()`` of an input (CML501).

Export it with ``python examples/export_example.py OUT.pt2``.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


class PatchEmbed(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.proj = nn.Conv2d(3, dim, kernel_size=4, stride=4)

    def forward(self, frame: torch.Tensor) -> torch.Tensor:
        x = frame.float() / 255.0
        return self.proj(x).flatten(2).transpose(1, 2)


class Mlp(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x), approximate="tanh"))


class CaptionModel(nn.Module):
    def __init__(self, dim: int = 32, vocab: int = 100) -> None:
        super().__init__()
        self.embed = PatchEmbed(dim)
        self.norm = nn.RMSNorm(dim)
        self.mlp = Mlp(dim)
        self.pos = nn.Embedding(64, dim)
        self.head = nn.Linear(dim, vocab)
        self.register_buffer("step", torch.zeros(1, dtype=torch.int32))

    def forward(self, frame: torch.Tensor, tokens: torch.Tensor):
        self.step.add_(1)
        x = self.embed(frame)
        positions = torch.full((1, x.shape[1]), 3) + torch.arange(x.shape[1])
        x = x + self.pos(positions)
        x = x + self.mlp(self.norm(x))
        logits = self.head(x) + tokens.float().mean()
        return logits, tokens.clone()


def example_inputs() -> tuple[torch.Tensor, torch.Tensor]:
    frame = torch.randint(0, 256, (1, 3, 16, 16), dtype=torch.uint8)
    tokens = torch.randint(0, 100, (1, 8), dtype=torch.int32)
    return frame, tokens
