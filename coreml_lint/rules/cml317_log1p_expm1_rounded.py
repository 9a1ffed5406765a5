"""CML317 log1p-expm1-rounded: ``log1p(x)`` runs as ``log(1 + x)``, ``expm1(x)`` as ``exp(x) - 1``.

What it does
    Warns on a delegated ``aten.log1p`` or ``aten.expm1`` of a float value other than a
    weight itself (a parameter, buffer or constant operand is the model's own value, about
    which nothing is claimed). A warning, not an error: what it costs depends on how close to 0 the
    values come, which only the model's data knows (``coreml-lint verify`` on inputs of
    your own proves it either way). A value cast from integers (``log1p(count.float())``)
    is not flagged: ``1 + x`` is exact there.

Why it breaks
    The two functions exist to keep the digits of a small ``x``, and coremltools drops
    exactly that: ``log1p`` becomes MIL ``log(x, epsilon=1)``, which rounds ``1 + x``
    before the log, and ``expm1`` becomes ``exp(x)`` then ``sub(1)``, which rounds ``exp(x)``
    next to 1 before the subtraction. The result is off by about ``u / |x|`` relative, with
    ``u`` the rounding unit next to 1: at Core ML's default float16 compute precision
    (``u`` = 4.9e-4) 5 % at ``|x|`` = 0.01, and 0 instead of ``x`` below ``|x|`` = 2.4e-4;
    at float32 (``u`` = 6e-8) 1e-4 relative at ``|x|`` = 6e-4. It lowers without a word.
    Found by ``coreml-lint verify``.

Example
    ``log_survival = torch.log1p(-p)`` with ``p`` a small probability

Fix
    Write the function so that the rounding cancels (Goldberg's and Kahan's forms, which
    Core ML computes to its own precision: ``coreml-lint verify`` agrees)::

        u = 1 + x                                      # log1p(x)
        near = torch.where(u == 1, x, torch.log(u) * (x / (u - 1)))
        torch.where(x.abs() < 0.5, near, torch.log(u))
        e = torch.exp(x)                               # expm1(x)
        near = torch.where(e == 1, x, (e - 1) * (x / torch.log(e)))
        torch.where(x.abs() < 0.5, near, e - 1)

    or keep the op on the CPU (``skip_ops_for_coreml_delegation``). ``coreml-lint lower``
    writes these forms.

References
    None found: apple/coremltools and pytorch/executorch issues and pull requests were
    searched (2026-12) without one that reports or fixes this pitfall.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from coreml_lint.core.findings import Finding, Outcome, Severity
from coreml_lint.core.settings import PartitionerSettings
from coreml_lint.program.graph import INTEGER_DTYPES
from coreml_lint.rulekit.context import ProgramContext
from coreml_lint.rulekit.examples import case, module, torch
from coreml_lint.rulekit.rule import Rule

# What Core ML computes for each, as the finding words it.
LOWERED = {
    "aten.log1p.default": "log1p(x) is delegated as log(1 + x) (MIL log with epsilon=1)",
    "aten.expm1.default": "expm1(x) is delegated as exp(x) - 1 (MIL exp, then sub)",
}
# The form whose rounding cancels, as the fix words it (the rule's doc writes both out).
FORMS = {
    "aten.log1p.default": "Goldberg's log1p (`coreml-lint rule CML317`): u = 1 + x; "
    "torch.where(x.abs() < 0.5, torch.where(u == 1, x, torch.log(u) * (x / (u - 1))), "
    "torch.log(u))",
    "aten.expm1.default": "Kahan's expm1 (`coreml-lint rule CML317`): e = torch.exp(x); "
    "torch.where(x.abs() < 0.5, torch.where(e == 1, x, (e - 1) * (x / torch.log(e))), e - 1)",
}
# |x| below which the forms are used; past it log(1 + x) and exp(x) - 1 lose no digits
# (|exp(x) - 1| is at least 0.39 there, so the rounding of exp(x) is at most 2.5 units of
# the result; 1 + x is exact or at least 1.5), and the forms' ratios could be inf / inf.
NEAR = 0.5


class Log1pExpm1Rounded(Rule):
    code = "CML317"
    severity = Severity.WARNING
    name = "log1p-expm1-rounded"
    outcome = Outcome.SILENT
    summary = "log1p and expm1 run as log(1 + x) and exp(x) - 1: small x loses its digits"
    # Kahan's forms agree with torch's own functions to a few float32 units
    rewrite_tolerance = 1e-5

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        for node in ctx.coreml_nodes():
            if node.target not in LOWERED or not node.tensor_inputs():
                continue
            operand = node.tensor_inputs()[0]
            if ctx.input_kinds.get(operand) in ("parameter", "buffer", "constant"):
                continue  # a constant's value is the model's: no claim about it
            if ctx.dtype(operand) in INTEGER_DTYPES | {"bool"} or ctx.integer_source(operand):
                continue  # whole numbers: 1 + x and exp(x) keep them
            yield ctx.finding(
                node,
                f"{LOWERED[node.target]}, which rounds next to 1 first: small x loses its "
                "digits, off by about 5e-4/|x| relative at Core ML's default float16 compute "
                "precision (5% at |x| = 0.01, 0 below |x| = 2.4e-4) and 6e-8/|x| at float32; "
                "how much that costs depends on how close to 0 your values come",
                fix=f"write {FORMS[node.target]}, or keep the op on the CPU",
                partitioner=ctx.skip_advice(node),
                rewrite_as_warning=True,  # the forms lose no digit in eager: lower writes them
            )

    def rewrite(self, ep: Any, settings: PartitionerSettings) -> tuple[Any, list[str]]:
        """Each float ``log1p`` and ``expm1`` in the form whose rounding cancels: the node
        itself becomes the form's final ``where``, so a program output keeps its name."""
        from coreml_lint.rulekit.fx import aten, fake_mode, finish, val

        forms = {aten.log1p.default: _goldberg_log1p, aten.expm1.default: _kahan_expm1}
        kept = set(settings.skip_ops_for_coreml_delegation)  # on the CPU: torch's own
        done = []
        mode = None
        for node in list(ep.graph.nodes):
            form = forms.get(node.target)
            if form is None or f"aten.{node.target.__name__}" in kept:
                continue
            if not val(node.args[0]).dtype.is_floating_point:
                continue
            mode = mode or fake_mode(ep)
            with ep.graph.inserting_before(node):
                args, words = form(_Emitter(ep, mode), node.args[0])
            node.target, node.args, node.kwargs = aten.where.self, args, {}
            done.append(f"{node.name}: {words}")
        return finish(ep), done


class _Emitter:
    """``emit`` bound to one program: ``op(aten.add.Scalar, x, 1.0)``."""

    def __init__(self, ep: Any, mode: Any) -> None:
        self.ep, self.mode = ep, mode

    def __call__(self, target: Any, *args: Any) -> Any:
        from coreml_lint.rulekit.fx import emit

        return emit(self.ep, self.mode, target, args)


def _goldberg_log1p(op: _Emitter, x: Any) -> tuple[tuple[Any, ...], str]:
    """``where(|x| < 0.5, where(u - 1 == 0, x, log(u) * (x / (u - 1))), log(u))``,
    ``u = 1 + x``: the log of the rounded ``u``, scaled by how much the rounding moved it;
    past 0.5 ``log(u)`` loses nothing, and ``x / (u - 1)`` there could be inf / inf
    (``log1p(exp(x))`` of a large ``x``)."""
    from coreml_lint.rulekit.fx import aten

    u = op(aten.add.Scalar, x, 1.0)
    d = op(aten.sub.Scalar, u, 1.0)
    log = op(aten.log.default, u)
    scaled = op(aten.mul.Tensor, log, op(aten.div.Tensor, x, d))
    near = op(aten.where.self, op(aten.eq.Scalar, d, 0.0), x, scaled)
    small = op(aten.lt.Scalar, op(aten.abs.default, x), NEAR)
    return (small, near, log), f"log1p as log(u) * x / (u - 1), u = 1 + x, for |x| < {NEAR}"


def _kahan_expm1(op: _Emitter, x: Any) -> tuple[tuple[Any, ...], str]:
    """``where(|x| < 0.5, where(e == 1, x, (e - 1) * (x / log(e))), e - 1)``,
    ``e = exp(x)``: past 0.5 ``e - 1`` loses nothing, and ``log(e)`` there could be
    infinite."""
    from coreml_lint.rulekit.fx import aten

    e = op(aten.exp.default, x)
    em = op(aten.sub.Scalar, e, 1.0)
    ratio = op(aten.div.Tensor, x, op(aten.log.default, e))
    near = op(aten.where.self, op(aten.eq.Scalar, e, 1.0), x, op(aten.mul.Tensor, em, ratio))
    small = op(aten.lt.Scalar, op(aten.abs.default, x), NEAR)
    return (small, near, em), f"expm1 as (e - 1) * x / log(e), e = exp(x), for |x| < {NEAR}"


# -- program cases: what the stock CoreMLPartitioner really does (the oracle lowers each) --
# Inputs away from 0, where the rounding stays within what verify allows: the finding is a
# warning, and tests/test_log1p_rounded.py shows the divergence at small inputs.
@case("log1p-of-input", expect=set(), warnings={"CML317"})
def _() -> Any:
    return module(lambda s, x: torch.log1p(x)), (torch.rand(2, 16) + 0.5,)


@case("expm1-of-input", expect=set(), warnings={"CML317"})
def _() -> Any:
    return module(lambda s, x: torch.expm1(x) * 2), (torch.rand(2, 16) + 0.5,)


@case("log1p-of-a-count", expect=set(), warnings=set())
def _() -> Any:
    """Counts as features (``log1p(clicks.float())``): 1 + x is exact."""
    return module(lambda s, x: torch.log1p((x > 0).sum(-1).float())), (torch.randn(2, 16),)
