"""``source/sites.py``: the call that builds the module a program names, however the model
lays it out. Pure ``ast``: each case is a class, the owner's path to the module, and the
callee of the call expected (or none: a key that cannot be followed places nothing)."""

from __future__ import annotations

import ast
import textwrap

import pytest

from coreml_lint.source.context import SourceContext
from coreml_lint.source.sites import constructor_calls, module_site, owner_stack, shown

HEADER = "from collections import OrderedDict\nimport torch\nfrom torch import nn\n\n"


def _built(body: str, relative: str, owner: str = "M") -> list[str]:
    text = HEADER + textwrap.dedent(body)
    ctx = SourceContext("m.py", text, ast.parse(text))
    return [ast.unparse(call) for _, call in constructor_calls(ctx, owner, relative)]


CASES = {
    "attribute": (
        """
        class M(nn.Module):
            def __init__(self):
                self.norm = nn.RMSNorm(8)
        """,
        "norm",
        ["nn.RMSNorm(8)"],
    ),
    "list comprehension": (
        """
        class M(nn.Module):
            def __init__(self, n):
                self.n1 = nn.ModuleList([nn.RMSNorm(8) for _ in range(n)])
        """,
        "n1.3",
        ["nn.RMSNorm(8)"],
    ),
    "generator of user blocks": (
        """
        class M(nn.Module):
            def __init__(self, cfg):
                self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n))
        """,
        "blocks.0",
        ["Block(cfg)"],
    ),
    "sequential argument": (
        """
        class M(nn.Module):
            def __init__(self, d):
                self.mlp = nn.Sequential(nn.Linear(d, 4), nn.GELU("tanh"), nn.Linear(4, d))
        """,
        "mlp.1",
        ["nn.GELU('tanh')"],
    ),
    "sequential of a starred comprehension after a stem": (
        """
        class M(nn.Module):
            def __init__(self, d):
                self.body = nn.Sequential(nn.Linear(d, d), *[nn.RMSNorm(d) for _ in range(3)])
        """,
        "body.2",
        ["nn.RMSNorm(d)"],
    ),
    "ordered dict sequential by key": (
        """
        class M(nn.Module):
            def __init__(self, d):
                self.ffn = nn.Sequential(OrderedDict([("up", nn.Linear(d, d)), ("act", nn.GELU())]))
        """,
        "ffn.act",
        ["nn.GELU()"],
    ),
    "module dict literal": (
        """
        class M(nn.Module):
            def __init__(self, d):
                self.heads = nn.ModuleDict({"cls": nn.RMSNorm(d), "box": nn.LayerNorm(d)})
        """,
        "heads.box",
        ["nn.LayerNorm(d)"],
    ),
    "appended to self in a loop": (
        """
        class M(nn.Module):
            def __init__(self, d):
                self.layers = nn.ModuleList()
                for _ in range(4):
                    self.layers.append(nn.RMSNorm(d))
        """,
        "layers.2",
        ["nn.RMSNorm(d)"],
    ),
    "helper method filling a list": (
        """
        class M(nn.Module):
            def __init__(self, d):
                self.stage = self._make(d, 3)

            def _make(self, d, n):
                layers = [nn.Linear(d, d)]
                for _ in range(n):
                    layers.append(nn.RMSNorm(d))
                return nn.Sequential(*layers)
        """,
        "stage.3",
        ["nn.RMSNorm(d)"],
    ),
    "module-level builder function": (
        """
        def make(d):
            return nn.Sequential(nn.Linear(d, d), nn.GELU())

        class M(nn.Module):
            def __init__(self, d):
                self.mlp = make(d)
        """,
        "mlp.1",
        ["nn.GELU()"],
    ),
    "attribute of a base class": (
        """
        class Base(nn.Module):
            def __init__(self, d):
                self.norm = nn.RMSNorm(d)

        class M(Base):
            pass
        """,
        "norm",
        ["nn.RMSNorm(d)"],
    ),
    "add_module with an f-string name in a loop": (
        """
        class M(nn.Module):
            def __init__(self, d, n):
                for i in range(n):
                    layer = nn.RMSNorm(d)
                    self.add_module(f"norm{i}", layer)
        """,
        "norm1",
        ["nn.RMSNorm(d)"],
    ),
    "setattr with a %-formatted name": (
        """
        class M(nn.Module):
            def __init__(self, d, n):
                for i in range(n):
                    setattr(self, "act%d" % i, nn.GELU())
        """,
        "act0",
        ["nn.GELU()"],
    ),
    "a Sequential subclass passing its layers up": (
        """
        class M(nn.Sequential):
            def __init__(self, d, h):
                super().__init__(nn.Linear(d, h), nn.GELU("tanh"), nn.Linear(h, d))
        """,
        "1",
        ["nn.GELU('tanh')"],
    ),
    "a helper method of a base class": (
        """
        class Base(nn.Module):
            def make_norm(self, d):
                return nn.RMSNorm(d)

        class M(Base):
            def __init__(self, d):
                self.norm = self.make_norm(d)
        """,
        "norm",
        ["nn.RMSNorm(d)"],
    ),
    "an append that may not run": (
        """
        class M(nn.Module):
            def __init__(self, d, gated):
                self.layers = nn.ModuleList()
                if gated:
                    self.layers.append(nn.Linear(d, d))
                self.layers.append(nn.RMSNorm(d))
        """,
        "layers.0",
        [],
    ),
    "index past a list of unknown length": (
        """
        class M(nn.Module):
            def __init__(self, d, extra):
                self.body = nn.Sequential(*extra, nn.RMSNorm(d))
        """,
        "body.3",
        [],
    ),
    "list changed other than by append": (
        """
        class M(nn.Module):
            def __init__(self, d):
                layers = [nn.Linear(d, d)]
                layers.insert(0, nn.RMSNorm(d))
                self.body = nn.Sequential(*layers)
        """,
        "body.0",
        [],
    ),
    "append in a loop followed by another": (
        """
        class M(nn.Module):
            def __init__(self, d, n):
                self.layers = nn.ModuleList()
                for _ in range(n):
                    self.layers.append(nn.Linear(d, d))
                self.layers.append(nn.RMSNorm(d))
        """,
        "layers.1",
        [],
    ),
    "dict keywords of a ModuleDict appended in a loop (issue 32)": (
        """
        class M(nn.Module):
            def __init__(self, d, depth):
                self.blocks = nn.ModuleList()
                for _ in range(depth):
                    self.blocks.append(nn.ModuleDict(dict(
                        norm=nn.LayerNorm(d),
                        mlp=nn.Sequential(nn.Linear(d, d), nn.GELU(approximate="tanh")),
                    )))
        """,
        "blocks.5.mlp.1",
        ["nn.GELU(approximate='tanh')"],
    ),
    "a dict literal of a ModuleDict in a local list filled in a loop": (
        """
        class M(nn.Module):
            def __init__(self, d, depth):
                blocks = []
                for _ in range(depth):
                    blocks.append(nn.ModuleDict({"act": nn.GELU("tanh")}))
                self.blocks = nn.ModuleList(blocks)
        """,
        "blocks.1.act",
        ["nn.GELU('tanh')"],
    ),
    "a loop of stated count, then another append": (
        """
        class M(nn.Module):
            def __init__(self, d):
                self.layers = nn.ModuleList()
                for _ in range(2):
                    self.layers.append(nn.GELU("tanh"))
                self.layers.append(nn.RMSNorm(d))
        """,
        "layers.1",
        ["nn.GELU('tanh')"],
    ),
    "the append after a loop of stated count": (
        """
        class M(nn.Module):
            def __init__(self, d):
                self.layers = nn.ModuleList()
                for _ in range(1, 3):
                    for _ in ("a", "b"):
                        self.layers.append(nn.GELU("tanh"))
                self.layers.append(nn.RMSNorm(d))
        """,
        "layers.4",
        ["nn.RMSNorm(d)"],
    ),
    "a loop of stated count that may stop early": (
        """
        class M(nn.Module):
            def __init__(self, d, stop):
                self.layers = nn.ModuleList()
                for i in range(2):
                    self.layers.append(nn.GELU("tanh"))
                    if i == stop:
                        break
                self.layers.append(nn.RMSNorm(d))
        """,
        "layers.2",
        [],
    ),
    "a dict spread after the key may replace it": (
        """
        class M(nn.Module):
            def __init__(self, d, extra):
                self.heads = nn.ModuleDict({"act": nn.GELU("tanh"), **extra})
        """,
        "heads.act",
        [],
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_constructor_calls(name):
    body, relative, expected = CASES[name]
    assert _built(body, relative) == expected


def test_the_owner_is_the_nearest_module_that_is_not_a_torch_container():
    stack = [
        ("", "m.Model"),
        ("blocks.0", "m.Block"),
        ("blocks.0.mlp", "torch.nn.modules.container.Sequential"),
        ("blocks.0.mlp.1", "torch.nn.modules.activation.GELU"),
    ]
    assert owner_stack(stack) == stack[1:]
    assert module_site(owner_stack(stack)) == ("Block", "mlp.1")
    assert module_site(stack[-1:]) is None
    assert shown("mlp.1") == "self.mlp[1]"
    assert shown("heads.cls") == 'self.heads["cls"]'
