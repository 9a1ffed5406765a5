"""Graph rewrites applied to the functional ExportedProgram before lowering.

Each rewrite answers one rule's finding with the catalogue's verified "(c)" workaround and
reports what it changed; ``apply_checked`` keeps a rewrite only when the rewritten program
computes what the original computed on random inputs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import TensorArgument

aten = torch.ops.aten
FLOATS = {torch.float16, torch.float32, torch.float64, torch.bfloat16}
EIGHT_BIT = {torch.uint8, torch.int8}


@dataclass
class Rewrite:
    code: str  # the rule whose finding it answers
    name: str
    apply: Callable[[ExportedProgram], tuple[ExportedProgram, list[str]]]
    tolerance: float = 0.0  # allowed max abs difference to the original program in eager


def _val(node: Any) -> Any:
    return node.meta.get("val") if isinstance(node, torch.fx.Node) else None


def _finish(ep: ExportedProgram) -> ExportedProgram:
    ep.graph.eliminate_dead_code()
    ep.graph_module.recompile()
    return ep


def tanh_gelu(ep: ExportedProgram) -> tuple[ExportedProgram, list[str]]:
    nodes = [
        n
        for n in ep.graph.nodes
        if n.target == aten.gelu.default and n.kwargs.get("approximate") == "tanh"
    ]
    if not nodes:
        return ep, []
    table = {aten.gelu.default: torch._decomp.decomposition_table[aten.gelu.default]}
    return ep.run_decompositions(table), [f"{n.name}: tanh GELU decomposed" for n in nodes]


def _attention_written_out(
    q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False
):
    """``scaled_dot_product_attention`` as the math torch documents for it (inference:
    no dropout). coremltools converts these ops in fp16 without fp32 mask constants."""
    scale = q.size(-1) ** -0.5 if scale is None else scale
    if enable_gqa:
        k = k.repeat_interleave(q.size(-3) // k.size(-3), -3)
        v = v.repeat_interleave(q.size(-3) // v.size(-3), -3)
    scores = (q @ k.transpose(-2, -1)) * scale
    if is_causal:
        keep = torch.ones(q.size(-2), k.size(-2), dtype=torch.bool, device=q.device).tril()
        scores = scores.masked_fill(~keep, float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        else:
            scores = scores + attn_mask
    out = scores.softmax(-1) @ v
    if out.dim() == 4:  # the fused kernel's layout, (B, L, H, E) in memory, which later
        # views of the exported graph rely on (attn.transpose(1, 2).view(B, L, -1))
        out = out.transpose(1, 2).contiguous().transpose(1, 2)
    return out


def attention_written_out(ep: ExportedProgram) -> tuple[ExportedProgram, list[str]]:
    nodes = [n for n in ep.graph.nodes if n.target == aten.scaled_dot_product_attention.default]
    if not nodes:
        return ep, []
    table = {aten.scaled_dot_product_attention.default: _attention_written_out}
    return ep.run_decompositions(table), [f"{n.name}: attention written out" for n in nodes]


def fp16_float_pows(ep: ExportedProgram) -> tuple[ExportedProgram, list[str]]:
    """A float16 ``pow`` with a float exponent that coremltools would compute in fp32 and
    then pair with fp16 weights: a whole exponent becomes an int (``pow(x, 3)``: the same
    values, kept in fp16); a fractional one is computed in float32 and cast back, so the
    MIL holds an explicit cast instead of an fp32 value flowing on."""
    done = []
    for node in list(ep.graph.nodes):
        if node.target != aten.pow.Tensor_Scalar or len(node.args) < 2:
            continue
        base, exponent = node.args[0], node.args[1]
        val = _val(node)
        if not isinstance(exponent, float) or getattr(val, "dtype", None) != torch.float16:
            continue
        if exponent.is_integer():
            node.args = (base, int(exponent))
            done.append(f"{node.name}: exponent {exponent!r} written as {int(exponent)}")
            continue
        _in_float32(ep, node)
        done.append(f"{node.name}: pow(x, {exponent!r}) computed in float32")
    return _finish(ep), done


def _cast(ep: ExportedProgram, value: torch.fx.Node, dtype: torch.dtype) -> torch.fx.Node:
    cast = ep.graph.call_function(aten._to_copy.default, (value,), {"dtype": dtype})
    cast.meta = {**value.meta, "val": _val(value).to(dtype)}
    return cast


_NORMS = (aten.layer_norm.default, aten.rms_norm.default)


def fp16_norms_in_fp32(ep: ExportedProgram) -> tuple[ExportedProgram, list[str]]:
    """A float16 layer_norm/rms_norm computed in float32 and cast back: coremltools then
    pairs its fp32 eps with an fp32 tensor, and the norm stays on Core ML (refusing it
    would split the partition around every norm). The original node becomes the cast
    back, so its name, users and any output spec stay as they were."""
    done = []
    for node in list(ep.graph.nodes):
        val = _val(node)
        if node.target not in _NORMS or getattr(val, "dtype", None) != torch.float16:
            continue
        norm = _in_float32(ep, node)
        done.append(f"{node.name}: float16 {norm.target.__name__.split('.')[0]} run in float32")
    return _finish(ep), done


def _in_float32(ep: ExportedProgram, node: torch.fx.Node) -> torch.fx.Node:
    """Compute ``node`` on float32 copies of its float16 inputs, and make ``node`` itself the
    cast back to float16, so its name, users and any output spec stay as they were."""
    with ep.graph.inserting_before(node):
        args = tuple(_cast(ep, a, torch.float32) if _is_fp16(a) else a for a in node.args)
        wide = ep.graph.call_function(node.target, args, dict(node.kwargs))
    wide.meta = {**node.meta, "val": _val(node).float()}
    node.target, node.args, node.kwargs = aten._to_copy.default, (wide,), {"dtype": torch.float16}
    return wide


def _is_fp16(value: Any) -> bool:
    return getattr(_val(value), "dtype", None) == torch.float16


def rms_norm_eps(ep: ExportedProgram) -> tuple[ExportedProgram, list[str]]:
    done = []
    for node in ep.graph.nodes:
        if node.target == aten.rms_norm.default and len(node.args) < 4:
            x = _val(node.args[0])
            eps = torch.finfo(x.dtype if x is not None else torch.float32).eps
            weight = node.args[2] if len(node.args) > 2 else node.kwargs.get("weight")
            node.args = (node.args[0], node.args[1], weight, eps)
            node.kwargs = {}
            done.append(f"{node.name}: eps={eps:g} passed positionally")
    return _finish(ep), done


def pool_stride(ep: ExportedProgram) -> tuple[ExportedProgram, list[str]]:
    done = []
    for node in ep.graph.nodes:
        pool = node.target in (aten.max_pool2d.default, aten.max_pool1d.default)
        if pool and len(node.args) < 3 and not node.kwargs.get("stride"):
            node.args = (*node.args[:2], node.args[1])
            done.append(f"{node.name}: stride=kernel_size passed")
    return _finish(ep), done


_BOOL_REPLACEMENTS = {
    aten.amax.default: aten.any.dims,
    aten.amin.default: aten.all.dims,
    aten.max.default: aten.any.default,
    aten.min.default: aten.all.default,
    aten.maximum.default: aten.logical_or.default,
    aten.minimum.default: aten.logical_and.default,
    aten.max.other: aten.logical_or.default,
    aten.min.other: aten.logical_and.default,
}


def bool_min_max(ep: ExportedProgram) -> tuple[ExportedProgram, list[str]]:
    done = []
    for node in ep.graph.nodes:
        replacement = _BOOL_REPLACEMENTS.get(node.target)
        if replacement is None:
            continue
        inputs = [_val(a) for a in node.args if isinstance(a, torch.fx.Node)]
        if not inputs or not all(v is not None and v.dtype == torch.bool for v in inputs):
            continue
        if replacement in (aten.any.dims, aten.all.dims):
            dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", [])
            keepdim = node.args[2] if len(node.args) > 2 else node.kwargs.get("keepdim", False)
            node.args, node.kwargs = (node.args[0], list(dim) or None, keepdim), {}
        node.target = replacement
        done.append(f"{node.name}: bool {node.name.split('_')[0]} -> {replacement.__name__}")
    return _finish(ep), done


_ZERO_FILLS = (aten.zeros.default, aten.new_zeros.default, aten.new_empty.default)


def integer_fills(ep: ExportedProgram) -> tuple[ExportedProgram, list[str]]:
    """Integer fills and ``*_like(dtype=...)`` that coremltools would make as float, and the
    like ops whose dtype differs from their input: ``aten.full(size, value, dtype=...)``."""
    done = []
    for node in list(ep.graph.nodes):
        val = _val(node)
        if not isinstance(val, torch.Tensor) or not all(isinstance(d, int) for d in val.shape):
            continue
        target, value = node.target, None
        if target == aten.full.default and "dtype" not in node.kwargs and val.dtype not in FLOATS:
            value = node.args[1]
        elif target in _ZERO_FILLS and val.dtype not in FLOATS:
            value = 0
        elif target in (aten.zeros_like.default, aten.empty_like.default, aten.full_like.default):
            source = _val(node.args[0])
            if "dtype" in node.kwargs and source is not None and source.dtype != val.dtype:
                value = node.args[1] if target == aten.full_like.default else 0
        if value is None:
            continue
        with ep.graph.inserting_before(node):
            full = ep.graph.call_function(
                aten.full.default, (list(val.shape), value), {"dtype": val.dtype}
            )
        full.meta = dict(node.meta)
        node.replace_all_uses_with(full)
        ep.graph.erase_node(node)
        done.append(f"{node.name}: made as aten.full(..., dtype={val.dtype})")
    return _finish(ep), done


def internal_clones(ep: ExportedProgram) -> tuple[ExportedProgram, list[str]]:
    """In a functional graph a clone that is not an output copies nothing anyone could tell
    apart; ExecuTorch's Core ML clone is a no-op anyway, and a delegate that ends up holding
    only such a clone returns its input var (pitfalls.md §10)."""
    output = next(n for n in ep.graph.nodes if n.op == "output")
    done = []
    for node in list(ep.graph.nodes):
        if node.target != aten.clone.default or output in node.users:
            continue
        node.replace_all_uses_with(node.args[0])
        ep.graph.erase_node(node)
        done.append(f"{node.name}: internal clone dropped")
    return _finish(ep), done


def output_clones(ep: ExportedProgram) -> tuple[ExportedProgram, list[str]]:
    """An output that is a clone of an input or of another output returns its source."""
    output = next(n for n in ep.graph.nodes if n.op == "output")
    values = list(output.args[0])
    user_outputs = {
        spec.arg.name for spec in ep.graph_signature.output_specs if spec.kind.name == "USER_OUTPUT"
    }
    names = [getattr(v, "name", None) for v in values]
    done = []
    for i, value in enumerate(values):
        if not (
            isinstance(value, torch.fx.Node)
            and value.target == aten.clone.default
            and value.name in user_outputs
        ):
            continue
        source = value.args[0]
        if source.op == "placeholder" or source.name in names[:i] + names[i + 1 :]:
            values[i] = source
            for spec in ep.graph_signature.output_specs:
                if spec.arg.name == value.name:
                    spec.arg = TensorArgument(name=source.name)
            done.append(f"{value.name}: output returns {source.name} itself")
    output.args = (tuple(values),)
    return _finish(ep), done


def widen_eight_bit_buffers(ep: ExportedProgram) -> tuple[ExportedProgram, list[str]]:
    """uint8/int8 parameters and buffers stored as int32, their dtype guards dropped."""
    done = []
    targets = {**ep.graph_signature.inputs_to_buffers, **ep.graph_signature.inputs_to_parameters}
    for node in list(ep.graph.nodes):
        if node.op != "placeholder" or node.name not in targets:
            continue
        val = _val(node)
        if val is None or val.dtype not in EIGHT_BIT:
            continue
        key = targets[node.name]
        if key not in ep.state_dict:
            continue
        ep.state_dict[key] = ep.state_dict[key].to(torch.int32)
        with val.fake_mode:
            node.meta["val"] = torch.empty_strided(val.shape, val.stride(), dtype=torch.int32)
        done.append(f"{key}: {val.dtype} stored as int32")
    if not done:
        return ep, []
    # The dtype guards export inserted would fail on the widened buffers (pitfalls.md §2).
    for node in list(ep.graph.nodes):
        if node.target == aten._assert_tensor_metadata.default:
            ep.graph.erase_node(node)
    _finish(ep)
    return ep.run_decompositions({}), done  # re-derives every node's metadata


def constant_prop(ep: ExportedProgram) -> tuple[ExportedProgram, list[str]]:
    from executorch.exir.passes.constant_prop_pass import constant_prop_pass

    before = sum(1 for n in ep.graph.nodes if n.op == "call_function")
    ep = constant_prop_pass(ep)
    after = sum(1 for n in ep.graph.nodes if n.op == "call_function")
    return ep, [
        f"constant_prop_pass folded {before - after} constant op(s)"
    ] if after < before else []


REWRITES = {
    "CML305": Rewrite("CML305", "decompose tanh GELU", tanh_gelu, tolerance=1e-5),
    "CML303": Rewrite("CML303", "rms_norm eps", rms_norm_eps),
    "CML306": Rewrite("CML306", "max_pool stride", pool_stride),
    # float32 arithmetic inside the norm instead of float16: closer to exact, not equal.
    "CML304": Rewrite("CML304", "float16 norms in float32", fp16_norms_in_fp32, tolerance=1e-2),
    # A fractional exponent computed in float32 rounds once instead of in fp16 steps.
    "CML308": Rewrite("CML308", "float16 pow exponents", fp16_float_pows, tolerance=1e-2),
    # Unfused fp16 attention rounds differently from torch's fused kernel: about 2e-3 seen.
    "CML307": Rewrite("CML307", "write fp16 attention out", attention_written_out, tolerance=1e-2),
    "CML105": Rewrite("CML105", "bool min/max to any/all/logical ops", bool_min_max),
    "CML301": Rewrite("CML301", "integer fills to aten.full(dtype=)", integer_fills),
    "CML302": Rewrite("CML302", "*_like(dtype=) to aten.full(dtype=)", integer_fills),
    "CML501": Rewrite("CML501", "output clones to their source", output_clones),
    "CML103": Rewrite("CML103", "widen 8-bit buffers", widen_eight_bit_buffers),
    "CML602": Rewrite("CML602", "fold input-less constant subgraphs", constant_prop),
    "CML401": Rewrite("CML401", "drop internal clones before CPU index_put", internal_clones),
}


Inputs = tuple[tuple[Any, ...], dict[str, Any]]


def random_inputs(ep: ExportedProgram, seed: int = 0) -> Inputs | None:
    """Positional and keyword inputs shaped like the program's: its example inputs, else
    random ones arranged by the program's own input spec (a program exported with keyword
    inputs, such as transformers' static-cache wrapper, is called with keywords)."""
    examples = getattr(ep, "example_inputs", None)
    if examples:
        args, kwargs = examples
        return tuple(args), dict(kwargs)
    generator = torch.Generator().manual_seed(seed)
    inputs = []
    for spec in ep.graph_signature.input_specs:
        if spec.kind.name != "USER_INPUT":
            continue
        node = next(n for n in ep.graph.nodes if n.name == spec.arg.name)
        val = _val(node)
        if not isinstance(val, torch.Tensor) or not all(isinstance(d, int) for d in val.shape):
            return None
        if val.dtype in FLOATS:
            inputs.append(torch.randn(val.shape, generator=generator).to(val.dtype))
        elif val.dtype == torch.bool:
            inputs.append(torch.randint(0, 2, val.shape, generator=generator).bool())
        else:
            inputs.append(torch.randint(0, 4, val.shape, generator=generator).to(val.dtype))
    in_spec = ep.call_spec.in_spec if ep.call_spec else None
    if in_spec is None:
        return tuple(inputs), {}
    args, kwargs = torch.utils._pytree.tree_unflatten(inputs, in_spec)
    return tuple(args), dict(kwargs)


@contextmanager
def _mutable_buffers_restored(*programs: ExportedProgram) -> Iterator[None]:
    """``ep.module()`` runs on the program's own buffer tensors, so an eager run would leave
    a KV cache or a counter changed in the caller's program; put every mutated buffer back."""
    saved = []
    for ep in programs:
        for name in set(ep.graph_signature.buffers_to_mutate.values()):
            tensor = ep.state_dict.get(name, ep.constants.get(name))
            if isinstance(tensor, torch.Tensor):
                saved.append((tensor, tensor.clone()))
    try:
        yield
    finally:
        with torch.no_grad():
            for tensor, before in saved:
                tensor.copy_(before)


_UNDEFINED_VALUES = {aten.empty_like.default, aten.empty.memory_format, aten.new_empty.default}


def outputs_match(a: ExportedProgram, b: ExportedProgram, inputs: Inputs, tol: float) -> bool:
    """Same outputs in eager, from the same buffer state, which is restored afterwards. A
    program that reads ``empty*`` memory has undefined values, so for it only shapes and
    dtypes are compared."""
    shapes_only = any(n.target in _UNDEFINED_VALUES for n in a.graph.nodes)
    args, kwargs = inputs
    with torch.no_grad(), _mutable_buffers_restored(a, b):
        left = torch.utils._pytree.tree_leaves(a.module()(*args, **kwargs))
        right = torch.utils._pytree.tree_leaves(b.module()(*args, **kwargs))
    if len(left) != len(right):
        return False
    for x, y in zip(left, right, strict=True):
        if not isinstance(x, torch.Tensor):
            if x != y:
                return False
            continue
        if x.shape != y.shape:
            return False
        if x.dtype != y.dtype and not (x.dtype in FLOATS and y.dtype in FLOATS):
            return False
        if shapes_only:
            continue
        if not torch.allclose(x.double(), y.double(), atol=tol, rtol=0, equal_nan=True):
            return False
    return True
