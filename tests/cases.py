"""Every program case the tests run: the ones each rule declares beside itself (collected
from the rule registry) and the clean models below, which span rules.

Each case says which error codes coreml-lint must report (``expect``; empty means "no
error") and what the oracle must observe when the model is lowered with the stock
``CoreMLPartitioner``: a crash whose message matches ``crash``, or a successful lowering
whose MIL shows the wrong-value signature ``silent`` (a predicate on the lowering), or a
clean lowering. The same table drives the fast lint tests and the slow oracle tests, so a
rule cannot pass its lint test while its oracle says otherwise.
"""

from __future__ import annotations

from coreml_lint.rulekit.examples import (
    F,
    ProgramCase,
    case,
    cases_of,
    module,
    nn,
    torch,
)
from coreml_lint.rules import all_rules


# ---------------------------------------------------------------- clean models
@case("small-cnn", expect=set())
def _():
    net = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(16, 10),
    ).eval()
    return net, (torch.randn(1, 3, 16, 16),)


class Block(nn.Module):
    """A pre-norm transformer block, the kind users write: RMSNorm with eps, SDPA, GELU."""

    def __init__(self, d: int = 64, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.n1 = nn.RMSNorm(d, eps=1e-6)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.n2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.n1(x)).chunk(3, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.n2(x))


@case("transformer-block", expect=set())
def _():
    return Block().eval(), (torch.randn(1, 16, 64),)


@case("encoder-layer", expect=set())
def _():
    layer = nn.TransformerEncoderLayer(64, 4, dim_feedforward=128, dropout=0.0, batch_first=True)
    return layer.eval(), (torch.randn(1, 16, 64),)


# -- program cases: what the stock CoreMLPartitioner really does (the oracle lowers each) --


@case("acosh-on-cpu", expect=set())
def _():
    return module(lambda s, x: torch.acosh(x + 2) * 3), (torch.rand(4),)


@case("argmax-flat-on-cpu", expect=set())
def _():
    return module(lambda s, x: torch.argmax(x * 2)), (torch.rand(3, 4),)


@case("add-alpha-on-cpu", expect=set())
def _():
    return module(lambda s, x, y: torch.add(x, y, alpha=2) * 2), (torch.rand(4), torch.rand(4))


CASES: list[ProgramCase] = [c for rule in all_rules() for c in rule.program_cases()]
CASES += cases_of(__name__)
CASE_IDS = [c.id for c in CASES]
BY_ID = {c.id: c for c in CASES}
assert len(BY_ID) == len(CASES), "duplicate case ids"
