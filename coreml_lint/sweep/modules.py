"""The calls ``torch.nn``'s own modules make: the sweep's *module* axis.

A model's ops mostly come from ``torch.nn`` layers, and a layer passes the values its
constructor defaults to (``nn.InstanceNorm2d``: ``momentum=0.1, eps=1e-5``; ``nn.GELU``:
``approximate='none'``) with its parameters and buffers as constants, on a batched image
or sequence. The generic search around one legal call reaches those values only one or
two at a time, so the call a layer makes can stay unmeasured while its neighbours are
(``InstanceNorm2d(track_running_stats=True)``: ``use_input_stats=False`` beside the
default ``eps`` on a 4-d input).

So each module class ``torch.nn`` exports whose required arguments ``SIZES`` names is
built (then each bool flag flipped, every two flipped together, and a few common settings
changed one at a time), run on one input, a batch of one and of two at the first rank its
forward takes, and exported (a layer of several inputs is left out; a recurrent layer,
whose constructor takes ``*args``, is built from ``RNNBase``'s arguments, each setting
also beside each flag, and a time-major one takes its batch second); each op node whose
operands are the module's input, parameters, buffers or (a recurrent layer's) a state it
starts at zero (``nn.LSTM``'s ``h0`` and ``c0``) becomes a case with exactly the arguments
export recorded. ``collect`` does this once per torch release and
writes ``data/module_calls.json`` (``python -m coreml_lint.sweep.modules``); the
generator reads it (``module_calls``), so a worker never builds modules.
"""

from __future__ import annotations

import inspect
import itertools
import json
import logging
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

from coreml_lint.sweep.legal import Call, is_legal
from coreml_lint.sweep.schema import OpInfo

DATA = Path(__file__).parent / "data" / "module_calls.json"

# Required constructor arguments, by name: small sizes every layer accepts together (4
# channels, a 3-wide kernel, 2 groups or heads).
SIZES: dict[str, Any] = {
    "in_channels": 4,
    "out_channels": 4,
    "num_features": 4,
    "num_channels": 4,
    "in_features": 4,
    "out_features": 4,
    "in1_features": 4,
    "in2_features": 4,
    "normalized_shape": 4,
    "embed_dim": 4,
    "d_model": 4,
    "input_size": 4,
    "hidden_size": 4,
    "num_groups": 2,
    "num_heads": 2,
    "nhead": 2,
    "kernel_size": 3,
    "output_size": 2,
    "upscale_factor": 2,
    "downscale_factor": 2,
    "num_embeddings": 10,
    "embedding_dim": 4,
    "groups": 2,
    "padding": 1,
    "size": 2,
    "norm_type": 2.0,
    "lambd": 0.5,
    "threshold": 0.1,
    "value": 0.0,
    "dim": 1,
    "unflattened_size": (2, 2),
}
# Settings changed one at a time beside the defaults, where the constructor takes them.
SETTINGS: dict[str, tuple[Any, ...]] = {
    "stride": (2,),
    "padding": (1, "same"),
    "dilation": (2,),
    "groups": (2, 4),
    "padding_mode": ("reflect", "replicate", "circular"),
    "scale_factor": (2.0, 0.5),
    "mode": ("nearest", "bilinear", "bicubic", "linear", "trilinear", "nearest-exact"),
    "approximate": ("tanh",),
    "negative_slope": (0.2,),
    "alpha": (0.5,),
    "beta": (2.0,),
    "min_val": (0.0,),
    "max_val": (6.0,),
    "output_padding": (1,),
    "eps": (1e-6,),
    "num_layers": (2,),
    "nonlinearity": ("relu",),
    "proj_size": (2,),
}
# Containers: they make no call of their own. (A layer whose forward takes more than one
# tensor, a loss or ``Transformer``, fails on one input and is left out there.)
SKIPPED = {"Module", "Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict"}
# The input a layer's forward takes, behind the batch: an image first, then a sequence (of
# channels, then of features), a volume, features. A layer named for its dims takes its
# batched rank first (``Conv3d`` also takes an unbatched 4-d volume, which models rarely
# pass).
FLOAT_SHAPES = ((4, 8, 8), (4, 8), (8, 4), (4, 4, 8, 8), (4,))
BATCHED_RANK = {"1d": 3, "2d": 4, "3d": 5}
BATCHES = (1, 2)


@cache
def _calls() -> dict[str, list[dict[str, Any]]]:
    if not DATA.exists():
        return {}
    return json.loads(DATA.read_text())["calls"]


def module_calls(info: OpInfo) -> Iterator[tuple[str, Call]]:
    """The legal calls of ``info``'s op that ``torch.nn``'s modules make, labelled by the
    layer that makes them."""
    for made in _calls().get(info.name, ()):
        call = Call([dict(t) for t in made["tensors"]], made["args"], made["kwargs"])
        if is_legal(info, call):
            yield f"module {made['module']}", call


def collect(names: list[str] | None = None) -> dict[str, list[dict[str, Any]]]:
    """Every op call the module classes of ``torch.nn`` (or those ``names``) make, by op
    (``amax.default``)."""
    import torch

    found: dict[str, dict[str, dict[str, Any]]] = {}
    for name in sorted(dir(torch.nn)) if names is None else names:
        cls = getattr(torch.nn, name)
        if not (isinstance(cls, type) and issubclass(cls, torch.nn.Module)):
            continue
        if name in SKIPPED or name.startswith("Lazy") or name.endswith("Loss"):
            continue
        for label, module in _built(cls):
            for batch in BATCHES:
                for op, call in _exported(module, batch):
                    key = json.dumps([call["args"], call["kwargs"], call["tensors"]])
                    found.setdefault(op, {}).setdefault(key, dict(call, module=label))
    return {op: list(calls.values()) for op, calls in sorted(found.items())}


def _built(cls: type) -> Iterator[tuple[str, Any]]:
    """The layer at its defaults, then with each bool flag flipped, every two flipped
    together, and each of ``SETTINGS`` changed alone; constructions the layer refuses are
    left out. A resize layer gets a scale factor: with neither a size nor a scale it
    constructs but cannot run."""
    params = _parameters(cls)
    if params is None:
        return
    required: dict[str, Any] = {}
    for pname, param in list(params.items())[1:]:
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        if param.default is inspect.Parameter.empty:
            if pname not in SIZES:
                return
            required[pname] = SIZES[pname]
    if cls.__name__ in ("Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d"):
        required["scale_factor"] = 2.0
    flags = [{n: not p.default} for n, p in params.items() if isinstance(p.default, bool)]
    changes: list[dict[str, Any]] = [{}, *flags]
    changes += [{**a, **b} for a, b in itertools.combinations(flags, 2)]  # affine and stats
    settings = [
        {pname: value}
        for pname, param in list(params.items())[1:]
        for value in SETTINGS.get(pname, ())
        if value != param.default and value != required.get(pname)
    ]
    changes += settings
    if _recurrent(cls):  # a stacked bidirectional layer: each setting beside each flag
        changes += [{**flag, **setting} for flag in flags for setting in settings]
    for change in changes:
        kwargs = {**required, **change}
        try:
            module = cls(**kwargs).eval()
        except Exception:
            continue
        words = ", ".join(f"{k}={v!r}" for k, v in change.items())
        yield f"{cls.__name__}({words})", module


def _recurrent(cls: type) -> bool:
    import torch

    return issubclass(cls, (torch.nn.RNNBase, torch.nn.RNNCellBase))


def _parameters(cls: type) -> dict[str, inspect.Parameter] | None:
    """The constructor's parameters, ``self`` first. A recurrent layer (``nn.LSTM``) takes
    ``*args, **kwargs`` and passes them to ``RNNBase``, whose signature names them (its
    ``mode`` is the layer's own; ``nn.RNN`` takes a ``nonlinearity`` besides)."""
    import torch

    try:
        params = dict(inspect.signature(cls.__init__).parameters)
        if issubclass(cls, torch.nn.RNNBase) and cls is not torch.nn.RNNBase:
            params = dict(inspect.signature(torch.nn.RNNBase.__init__).parameters)
            params.pop("mode")
            if cls is torch.nn.RNN:
                params["nonlinearity"] = inspect.Parameter(
                    "nonlinearity", inspect.Parameter.KEYWORD_ONLY, default="tanh"
                )
    except (TypeError, ValueError):
        return None
    return params


def _exported(module: Any, batch: int) -> Iterator[tuple[str, dict[str, Any]]]:
    """The op calls of ``module``'s exported forward at the first input it takes, each
    whose tensor operands are all the input, a parameter, a buffer or (a recurrent
    layer's) a state it starts at zero."""
    import torch

    for x in _inputs(module, batch):
        try:
            with torch.no_grad():
                module(x)
                ep = torch.export.export(module, (x,), strict=False)
        except Exception:
            continue
        yield from _op_calls(ep, zero_states=_recurrent(type(module)))
        return


def _inputs(module: Any, batch: int) -> Iterator[Any]:
    """Inputs of each shape the layer might take, the batch first; a time-major recurrent
    layer (``nn.LSTM()``: ``batch_first=False``) takes its batch second, behind the
    sequence."""
    import torch

    if isinstance(module, (torch.nn.Embedding, torch.nn.EmbeddingBag)):
        yield torch.randint(0, module.num_embeddings, (batch, 4))
        return
    rank = BATCHED_RANK.get(type(module).__name__[-2:].lower())
    shapes = sorted(FLOAT_SHAPES, key=lambda s: len(s) + 1 != rank)  # stable: others keep order
    time_major = isinstance(module, torch.nn.RNNBase) and not module.batch_first
    for shape in shapes:
        if time_major and shape:
            yield torch.randn(shape[0], batch, *shape[1:])
        else:
            yield torch.randn(batch, *shape)


def _op_calls(ep: Any, zero_states: bool = False) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each aten call whose tensor operands are the program's inputs, parameters or
    buffers, or (``zero_states``) a float32 ``zeros`` state, which becomes an input."""
    import torch

    signature = ep.graph_signature
    constants = {**signature.inputs_to_parameters, **signature.inputs_to_buffers}
    for node in ep.graph.nodes:
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
            continue
        if node.target.namespace != "aten":
            continue
        tensors: list[dict[str, Any]] = []
        try:
            args = [_encoded(a, tensors, constants, zero_states) for a in node.args]
            kwargs = {
                k: _encoded(v, tensors, constants, zero_states) for k, v in node.kwargs.items()
            }
        except _NotAnOperand:
            continue
        name = f"{node.target._schema.name.split('::')[1]}.{node.target._overloadname}"
        yield name, {"args": args, "kwargs": kwargs, "tensors": tensors}


def _encoded(
    value: Any, tensors: list[dict[str, Any]], constants: dict[str, str], zero_states: bool
) -> Any:
    """An argument as a case holds it; a tensor operand is appended to ``tensors``."""
    import torch

    if isinstance(value, torch.fx.Node):
        spec = _spec(value, constants, zero_states)
        if spec is None:
            raise _NotAnOperand
        tensors.append(spec)
        return {"t": len(tensors) - 1}
    if isinstance(value, (list, tuple)):
        return [_encoded(v, tensors, constants, zero_states) for v in value]
    if isinstance(value, torch.dtype):
        return {"dtype": str(value).removeprefix("torch.")}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise _NotAnOperand


class _NotAnOperand(Exception):
    """An operand made by another node, or an argument a case cannot encode."""


# Ops a layer makes its initial state with (``nn.GRU``'s ``h0``, ``nn.LSTMCell``'s ``hx``).
# The key reads a float32 value made inside Core ML as a partition input (``key.py``), so
# the case takes the state as an input, with typical values: a model that carries its
# state across calls passes one.
ZERO_STATES = ("aten.zeros.default", "aten.zeros_like.default", "aten.new_zeros.default")


def _spec(node: Any, constants: dict[str, str], zero_states: bool) -> dict[str, Any] | None:
    import torch

    value = node.meta.get("val")
    if not isinstance(value, torch.Tensor):
        return None
    if zero_states and node.op == "call_function" and str(node.target) in ZERO_STATES:
        if value.dtype != torch.float32:
            return None
        return {"shape": list(value.shape), "dtype": "float32", "values": "typical", "origin": "in"}
    if node.op != "placeholder":
        return None
    dtype = str(value.dtype).removeprefix("torch.")
    spec: dict[str, Any] = {"shape": list(value.shape), "dtype": dtype, "values": "typical"}
    if dtype == "int64":  # an embedding's ids: indices below the table's size
        spec.update(values="index", high=SIZES["num_embeddings"])
    target = constants.get(node.name)
    spec["origin"] = "in" if target is None else "const"
    if target is not None and target.endswith("running_var"):
        spec["sign"] = "+"  # a variance: the layer's eps is the only guard below zero
    return spec


def render(calls: dict[str, list[dict[str, Any]]]) -> str:
    import torch

    return json.dumps({"torch": torch.__version__, "calls": calls}, indent=0, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    from coreml_lint.core.files import regenerate

    logging.disable(logging.WARNING)
    return regenerate(argv, __doc__ or "", DATA, lambda: render(collect()))


if __name__ == "__main__":
    raise SystemExit(main())
