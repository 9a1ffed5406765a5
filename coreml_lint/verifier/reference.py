"""The float64 reference a float32 value is judged against.

Eager float32 is not the truth: it rounds too, and where a value is ill-conditioned (a sum
that cancels, a cumulative product, a difference of nearly equal values) its own error can
exceed any fixed tolerance while Core ML's different but equally good order of operations
lands elsewhere. So each partition's eager module runs twice more in float64:

- *exact*: the float32 inputs, weights and buffers widened to float64 (exactly), every op
  computed in float64. This is the value the float32 computation approximates.
- *perturbed* (:data:`SAMPLES` runs, seeded): the same float64 run, with every float value
  an op produces (and every input and weight) multiplied by ``1 +- 2**-24`` (a random sign
  per element): a float32 rounding of full size at each op (Monte Carlo arithmetic). How
  far a perturbed run lands from the exact one says how hard the element is for float32
  arithmetic on this graph, whatever order a kernel sums in. In every other run, from the
  first, the size is fixed, not uniform: where one rounding dominates an element
  (``1 - exp(-t)`` for a tiny ``t``) the spread is then that rounding's full effect, not a
  lucky small draw. In the others it is uniform in ``[-2**-24, 2**-24]``: where two
  roundings of one size meet (``1 - (1 - e)``: the propagated one and the result's own),
  fixed sizes of opposite signs cancel exactly, in a quarter of the elements over two fixed
  runs, and an element whose float32 error is real then looked exact. Uniform sizes cancel
  that closely almost never.
  A normalization is perturbed at the ops it is made of (a group norm is a mean, a
  difference, a scale and a shift): it runs as torch's decomposition, so a rounding
  inside it is perturbed too. Core ML computes such an op in those pieces, and an output
  near zero that an affine shift made by cancelling (``x * gamma + beta`` of opposite signs)
  carries the rounding of the terms, not of the result. Perturbing only its output would
  judge that element as strictly as a well-conditioned one. The normalizations only
  (:data:`DECOMPOSED`). A view, or an op writing into its input, rounds nothing and is not
  perturbed.

Discrete decisions are eager float32's: every integer or bool value a node produces (a
comparison, an argmax, a float cast to an index) is taken from the float32 run, so the
float64 run follows the same branch and a float32 value near a rounding boundary is not
judged against a value float64 computed along another path.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from coreml_lint.verifier.eager import lifted_arguments

# Perturbed runs (fixed sizes, then uniform ones, alternately): with eager float32 itself, five
# samples of float32's error. Where a few roundings dominate an element they cancel often
# (a group norm's element near zero: 3e-10, 5e-10, 1.5e-8 and 6e-9 over four runs), and two
# runs judged 11 of a clean GroupNorm's 16,384 elements wrong.
SAMPLES = 4
UNIT_ROUNDOFF = 2.0**-24  # float32's relative rounding error bound (half an ulp)
SEED = 20261201


@dataclass
class Reference:
    """Float64 values of a partition's nodes, and how far float32-sized rounding moves them."""

    exact: dict[str, Any] = field(default_factory=dict)  # node name -> float64 tensor
    spread: dict[str, Any] = field(default_factory=dict)  # node name -> max |perturbed - exact|
    failure: str | None = None  # why there is no reference (the float64 run failed)

    def of(self, node: str | None) -> tuple[Any, Any] | None:
        """(exact, spread) of a node's float value, or None when there is none."""
        if node is None:
            return None
        exact, spread = self.exact.get(node), self.spread.get(node)
        if not isinstance(exact, torch.Tensor) or not isinstance(spread, torch.Tensor):
            return None
        return exact, spread


def float64_reference(ep: Any, user_inputs: list[Any], eager: dict[str, Any]) -> Reference:
    """The exact and perturbed float64 runs of the partition ``ep`` on ``user_inputs``,
    pinned to the float32 run's discrete values ``eager`` (node name -> value)."""
    reference = Reference()
    try:
        reference.exact = _run(ep, user_inputs, eager, None)
        generator = torch.Generator().manual_seed(SEED)
        for sample in range(SAMPLES):
            draws = _Draws(generator, uniform=sample % 2 == 1)
            perturbed = _run(ep, user_inputs, eager, draws)
            _widen_spread(reference, perturbed)
    except Exception as exc:  # an op without a float64 kernel: judged as before, and said
        reference.exact, reference.spread = {}, {}
        reference.failure = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:200]}"
    return reference


def _widen_spread(reference: Reference, perturbed: dict[str, Any]) -> None:
    for name, exact in reference.exact.items():
        other = perturbed.get(name)
        if not (_is_wide(exact) and isinstance(other, torch.Tensor)):
            continue
        if other.shape != exact.shape:
            continue
        gap = torch.nan_to_num((other - exact).abs(), nan=0.0, posinf=0.0)
        held = reference.spread.get(name)
        reference.spread[name] = gap if held is None else torch.maximum(held, gap)


def _is_wide(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.dtype == torch.float64


def _run(ep: Any, user_inputs: list[Any], eager: dict[str, Any], draws: _Draws | None) -> dict:
    args, _ = lifted_arguments(ep, user_inputs)
    runner = _Float64Runner(ep.graph_module, eager, draws)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)  # factories without a dtype (scalar_tensor, ...)
    try:
        with torch.no_grad():
            runner.run(*args)
    finally:
        torch.set_default_dtype(previous)
    return runner.values


class _Float64Runner(torch.fx.Interpreter):
    def __init__(self, gm: Any, eager: dict[str, Any], draws: _Draws | None) -> None:
        super().__init__(gm)
        self.eager = eager
        self.draws = draws
        self.values: dict[str, Any] = {}

    def run_node(self, n: torch.fx.Node) -> Any:
        out = super().run_node(n)
        # a call's own ops are perturbed as they run (_Rounding); its output is their output
        perturb = self.draws is not None and n.op == "placeholder"
        out = self._settle(out, self.eager.get(n.name), perturb)
        self.values[n.name] = out
        return out

    def call_function(self, target: Any, args: Any, kwargs: Any) -> Any:
        try:
            return self._call(target, _widened(args), _widened(kwargs))
        except Exception:  # an op that takes float32 only (quantize): it computes in float32
            return self._call(target, _narrowed(args), _narrowed(kwargs))

    def _call(self, target: Any, args: Any, kwargs: Any) -> Any:
        if self.draws is None:
            return super().call_function(target, args, kwargs)
        # whatever the target (an ATen op, an edge op wrapping one, a Python function), the
        # ATen ops it runs are rounded as they run, each once; ``getitem`` runs none
        with _Rounding(self.draws):
            return super().call_function(target, args, kwargs)

    def _settle(self, out: Any, pinned: Any, perturb: bool) -> Any:
        if isinstance(out, (tuple, list)):
            pins = pinned if isinstance(pinned, (tuple, list)) else [None] * len(out)
            pins = list(pins) + [None] * (len(out) - len(pins))
            return type(out)(self._settle(o, p, perturb) for o, p in zip(out, pins, strict=False))
        if not isinstance(out, torch.Tensor):
            return out
        if not out.is_floating_point():
            same = isinstance(pinned, torch.Tensor) and pinned.shape == out.shape
            return pinned if same and not pinned.is_floating_point() else out
        if out.dtype == torch.float32:
            out = out.double()
        return _perturbed(out, self.draws) if perturb else out


@dataclass
class _Draws:
    """The roundings of one perturbed run: ``+-UNIT_ROUNDOFF`` with a random sign, or
    (``uniform``) a random size up to it (module docstring)."""

    generator: Any
    uniform: bool = False

    def sizes(self, shape: Any) -> Any:
        if self.uniform:
            return torch.rand(shape, generator=self.generator, dtype=torch.float64) * 2 - 1
        signs = torch.randint(0, 2, shape, generator=self.generator) * 2 - 1
        return signs.to(torch.float64)


def _perturbed(value: Any, draws: _Draws) -> Any:
    """``value``'s float64 tensors, each element times ``1 + UNIT_ROUNDOFF * size``."""
    if isinstance(value, (tuple, list)):
        return type(value)(_perturbed(v, draws) for v in value)
    if isinstance(value, torch.Tensor) and value.dtype == torch.float64 and value.numel():
        return value * (1.0 + UNIT_ROUNDOFF * draws.sizes(value.shape))
    return value


# The ops run as their pieces: a normalization, which Core ML computes as a mean, a
# difference, a scale and an affine shift, so an output near zero carries the roundings of
# its terms. Only these: another op's reference decomposition can cost far more than the op
# (torch's ``cumsum`` builds an n x n mask).
DECOMPOSED = frozenset(
    {
        "aten::native_group_norm",
        "aten::native_layer_norm",
        "aten::native_batch_norm",
        "aten::_native_batch_norm_legit",
        "aten::_native_batch_norm_legit_no_training",
        "aten::_native_batch_norm_legit_functional",
    }
)


def _decomposition(func: Any) -> Any:
    """torch's decomposition of ``func`` when it is one of :data:`DECOMPOSED`, else None."""
    if func._schema.name not in DECOMPOSED:
        return None
    from torch._decomp import decomposition_table

    return decomposition_table.get(func)


def _rounds(func: Any) -> bool:
    """Whether ``func`` makes a new value (counted as one float32 rounding), rather than a
    view of its input (or an edge program's copy of one, ``slice_copy``), or a write into
    one (a pad copies its input into a view of its output: a perturbed copy of that view
    would leave the output unwritten)."""
    schema = func._schema
    aliases = func.is_view or schema.is_mutable or any(r.alias_info for r in schema.returns)
    return not (aliases or torch.Tag.view_copy in func.tags)


class _Rounding(TorchDispatchMode):
    """Every float64 value an ATen op makes is rounded once (perturbed) as float32 would
    round it; a normalization runs as its pieces, each rounded (module docstring)."""

    def __init__(self, draws: _Draws) -> None:
        super().__init__()
        self.draws = draws

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        decomposition = _decomposition(func)
        if decomposition is not None:
            with self:  # its pieces dispatch here again (a handler runs outside the mode)
                out = decomposition(*args, **kwargs)
            if out is not NotImplemented:
                return out
        out = func(*args, **kwargs)
        return _perturbed(out, self.draws) if _rounds(func) else out


def _narrowed(value: Any) -> Any:
    """Arguments with float64 tensors as float32 (for an op without a float64 kernel)."""
    if isinstance(value, torch.Tensor):
        return value.float() if value.dtype == torch.float64 else value
    if isinstance(value, list):
        return [_narrowed(v) for v in value]
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return type(value)(_narrowed(v) for v in value)
    if isinstance(value, dict):
        return {k: _narrowed(v) for k, v in value.items()}
    return value


def _widened(value: Any) -> Any:
    """Arguments with float32 tensors as float64 and a float32 dtype argument as float64."""
    if isinstance(value, torch.Tensor):
        return value.double() if value.dtype == torch.float32 else value
    if value is torch.float32:
        return torch.float64
    if isinstance(value, list):
        return [_widened(v) for v in value]
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return type(value)(_widened(v) for v in value)
    if isinstance(value, dict):
        return {k: _widened(v) for k, v in value.items()}
    return value
