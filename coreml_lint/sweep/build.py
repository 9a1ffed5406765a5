"""Turn case specs into one exportable module and its inputs.

Several cases share a program when the runner groups them: each case is its own submodule
``c<i>`` with its own inputs and outputs, so nothing flows between cases. Inside a case,
operands made in the program come from a ``prefix`` submodule (a cast, or a comparison for
bool), and a context consumer is a ``context`` submodule; the op itself is called by the
case module, so ``nn_module_stack`` tells apart which node belongs to which case and role.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from coreml_lint.measured.key import INSIDE as CONSUMED
from coreml_lint.sweep.values import decode, flat_outputs, make_tensor, seed_of, torch_dtype

# Where an operand made in the program comes from: the source dtype of its input.
MADE_FROM = {
    "bool": "float32",
    "float16": "float32",
    "bfloat16": "float32",
    "int64": "int32",
    "int16": "int32",
    "int8": "int32",
    "uint8": "int32",
    "int32": "int64",
    "float32": "float32",
}
CONTEXT_OPS = {
    "linear": "aten.linear.default",
    "addmm": "aten.addmm.default",
    "matmul": "aten.matmul.default",
}


@dataclass
class Built:
    module: Any
    inputs: list[Any]  # typical values
    extreme: list[Any]  # the same inputs with extreme values
    owners: list[int]  # the case index of each input


def _source_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """The input an operand made in the program is computed from, with values in the
    range of the operand's dtype (an out-of-range cast is the cast's behaviour, not the
    op's)."""
    made = dict(spec, dtype=MADE_FROM[spec["dtype"]], origin="in", range=spec["dtype"])
    if spec["dtype"] == "bool":
        made["values"] = "typical"
    return made


def build(cases: list[dict[str, Any]]) -> Built:

    modules, inputs, extreme, owners = [], [], [], []
    for index, case in enumerate(cases):
        module = _case_module(case)
        modules.append(module)
        for j, spec in enumerate(case["tensors"]):
            if spec.get("origin") == "const":
                continue
            source = _source_spec(spec) if spec.get("origin") == "op" else spec
            seed = seed_of(case, j)
            inputs.append(make_tensor(source, seed))
            extreme.append(make_tensor(source, seed, extreme=True))
            owners.append(index)
        if not any(t.get("origin") != "const" for t in case["tensors"]):
            anchor = {"shape": [2], "dtype": "float32", "values": "typical"}
            inputs.append(make_tensor(anchor, seed_of(case, 99)))
            extreme.append(make_tensor(anchor, seed_of(case, 99)))
            owners.append(index)
    group = _Group(modules)
    group.eval()  # exported, lowered and run under torch.no_grad() by the caller (measure)
    return Built(group, inputs, extreme, owners)


def _case_module(case: dict[str, Any]) -> Any:
    import torch
    from torch import nn

    class Prefix(nn.Module):
        """Makes an operand inside the program: a comparison for bool, else a cast."""

        def forward(self, x: Any, dtype: Any) -> Any:
            if dtype == torch.bool:
                return torch.ops.aten.gt.Scalar(x, 0.0)
            return x.to(dtype)

    class Context(nn.Module):
        def __init__(self, kind: str, dtype: Any) -> None:
            super().__init__()
            self.kind = kind
            self.register_buffer("w", torch.randn(4, 4).to(dtype) * 0.5)
            self.register_buffer("b", torch.randn(4).to(dtype) * 0.5)

        def forward(self, x: Any) -> Any:
            aten = torch.ops.aten
            if self.kind == "linear":
                return aten.linear.default(x, self.w, self.b)
            if self.kind == "addmm":
                return aten.addmm.default(self.b, x, self.w)
            return aten.matmul.default(x, self.w)

    class Suffix(nn.Module):
        """What the program does after the op that is not the op's: an int8 result is
        consumed in Core ML (ExecuTorch's Core ML runtime has no int8 output type: that is
        CML102's boundary failure, not the op's), and the anchor input is returned."""

        def forward(self, out: list[Any], anchor: Any) -> tuple[Any, ...]:
            kept = [t.to(torch.int32) if t.dtype == torch.int8 else t for t in out]
            return (*kept, anchor * 2.0) if anchor is not None else tuple(kept)

    return _CaseModule(case, Prefix, Context, Suffix)


def _op(name: str) -> Any:
    import torch

    base, _, overload = name.partition(".")
    return getattr(getattr(torch.ops.aten, base), overload or "default")


def _make_case_class() -> Any:
    from torch import nn

    class CaseModule(nn.Module):
        def __init__(self, case: dict[str, Any], prefix: Any, context: Any, suffix: Any) -> None:
            super().__init__()
            self.case = case
            self.op = _op(case["op"])
            self.prefix = prefix()
            self.suffix = suffix()
            self.consts = []
            for j, spec in enumerate(case["tensors"]):
                if spec.get("origin") == "const":
                    name = f"k{j}"
                    self.register_buffer(name, make_tensor(spec, seed_of(case, j)))
                    self.consts.append(name)
            self.anchored = all(t.get("origin") == "const" for t in case["tensors"])
            self.context = None
            self.consumed = case.get("context") == CONSUMED
            if self.consumed:  # a submodule: its nodes are told apart from the op's
                self.consumer = _Consumer()
            if case.get("context") and not self.consumed:
                dtype = torch_dtype(_output_dtype(case))
                self.context = context(case["context"], dtype)

        def inputs_needed(self) -> int:
            """At least one: an op without tensor operands (a fill) gets an anchor input,
            so its partition has an input (an input-less partition fails below iOS18 for
            any op: CML602, not the op's behaviour)."""
            return max(1, sum(1 for t in self.case["tensors"] if t.get("origin") != "const"))

        def forward(self, *xs: Any) -> tuple[Any, ...]:
            given = iter(xs)
            tensors = []
            for j, spec in enumerate(self.case["tensors"]):
                origin = spec.get("origin")
                if origin == "const":
                    tensors.append(getattr(self, f"k{j}"))
                elif origin == "op":
                    tensors.append(self.prefix(next(given), torch_dtype(spec["dtype"])))
                else:
                    tensors.append(next(given))
            args = [decode(a, tensors) for a in self.case["args"]]
            kwargs = {k: decode(v, tensors) for k, v in self.case["kwargs"].items()}
            out = flat_outputs(self.op(*args, **kwargs))
            if "returns" in self.case:  # the outputs a model reads (``check --measure``)
                out = [out[i] for i in self.case["returns"]]
            if self.context is not None:
                out = [self.context(out[0])]
            if self.consumed:
                out = [self.consumer(o) for o in out]
            return self.suffix(out, xs[0] if self.anchored else None)

    return CaseModule


def _Consumer() -> Any:
    import torch
    from torch import nn

    class Consumer(nn.Module):
        """A use of an op's output inside the partition (the ``inside`` axis): the program
        then returns the consumer's output, not the op's."""

        def forward(self, value: Any) -> Any:
            if value.dtype == torch.bool:
                return torch.logical_not(value)
            return value * 2 if value.is_floating_point() else value + 1

    return Consumer()


def _output_dtype(case: dict[str, Any]) -> str:
    floats = [t["dtype"] for t in case["tensors"] if t["dtype"].startswith(("float", "bfloat"))]
    return floats[0] if floats else "float32"


_CASE_CLASS: Any = None


def _CaseModule(case: dict[str, Any], prefix: Any, context: Any, suffix: Any) -> Any:
    global _CASE_CLASS
    if _CASE_CLASS is None:
        _CASE_CLASS = _make_case_class()
    return _CASE_CLASS(case, prefix, context, suffix)


def _Group(modules: list[Any]) -> Any:
    from torch import nn

    class Group(nn.Module):
        def __init__(self, cases: list[Any]) -> None:
            super().__init__()
            for i, module in enumerate(cases):
                self.add_module(f"c{i}", module)
            self.count = len(cases)

        def forward(self, *xs: Any) -> tuple[Any, ...]:
            outs: list[Any] = []
            at = 0
            for i in range(self.count):
                module = getattr(self, f"c{i}")
                n = module.inputs_needed()
                outs.extend(module(*xs[at : at + n]))
                at += n
            return tuple(outs)

    return Group(modules)
