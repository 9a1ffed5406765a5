"""Read a `torch.export.save` archive (`.pt2`) without torch.

The archive is a zip; each exported method's graph is the JSON document
``<prefix>/models/<name>.json`` written by torch's own serializer
(``torch._export.serde``). We read only that JSON: never the weights, never
``data/sample_inputs/*.pt`` (a pickle), never anything executable. Sizes are checked
before reading, so a hostile archive cannot make us allocate gigabytes.
"""

from __future__ import annotations

import json
import math
import zipfile
from pathlib import Path
from typing import IO, Any

from coreml_lint.core.errors import InputError
from coreml_lint.program.constants import alike_operands, int64_past_int32, uniform_floats
from coreml_lint.program.gcpause import gc_paused
from coreml_lint.program.graph import (
    DType,
    Graph,
    InputSpec,
    Node,
    Opaque,
    OutputSpec,
    SymRef,
    TensorInfo,
    TensorRef,
)

# torch/_export/serde/schema.py ScalarType, by value.
SCALAR_TYPES = {
    0: "unknown",
    1: "uint8",
    2: "int8",
    3: "int16",
    4: "int32",
    5: "int64",
    6: "float16",
    7: "float32",
    8: "float64",
    9: "complex32",
    10: "complex64",
    11: "complex128",
    12: "bool",
    13: "bfloat16",
    28: "uint16",
    29: "float8_e4m3fn",
    30: "float8_e5m2",
    31: "float8_e4m3fnuz",
    32: "float8_e5m2fnuz",
    33: "float8_e8m0fnu",
    34: "uint32",
    35: "uint64",
}

# The serializer's schema major version we understand (torch 2.13 writes 8.20). A new
# major version may change the meaning of fields, so we refuse it rather than guess.
KNOWN_SCHEMA_MAJOR = 8
MAX_GRAPH_JSON_BYTES = 512 * 1024 * 1024
POSITIONAL = 1


def read_pt2(path: str | Path) -> list[Graph]:
    """Every exported method in the archive, as light graphs."""
    path = Path(path)
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise InputError(f"{path}: cannot open: {exc.strerror or exc}") from None
    with handle:
        return read_pt2_stream(handle, str(path))


def check_integrity(path: str | Path) -> None:
    """Raise :class:`InputError` when a member of the archive fails its CRC check. The lint
    never reads weights, and ``torch.export.load`` does not check CRCs: without this, a
    damaged archive lowers into a ``.pte`` that carries the damaged weights. Reads every
    byte once (what loading reads anyway), so only the commands that load the program ask."""
    import zlib

    read_pt2(path)  # not a file, not a zip, not an exported program: its own line first
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            try:
                with archive.open(info) as member:
                    while member.read(1 << 20):
                        pass
            except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as exc:
                why = "fails its CRC check" if "CRC" in str(exc) else f"is damaged ({exc})"
                raise InputError(
                    f"{path}: corrupted archive: {info.filename} {why}; "
                    "export or copy the .pt2 again"
                ) from None


def read_pt2_stream(stream: IO[bytes], label: str) -> list[Graph]:
    try:
        archive = zipfile.ZipFile(stream)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError):
        # OSError too: a damaged end record makes zipfile seek before the start of the file.
        raise InputError(f"{label}: not a .pt2 archive (not a zip file)") from None
    except Exception as exc:  # NotImplementedError("zip file version 8.4"), struct.error, ...
        raise InputError(f"{label}: damaged .pt2 archive: {exc}") from None
    with archive:
        try:
            members = archive.infolist()
        except Exception as exc:  # a damaged central directory
            raise InputError(f"{label}: damaged .pt2 archive: {exc}") from None
        models = [info for info in members if _is_model_json(info.filename) and not info.is_dir()]
        if not models:
            raise InputError(
                f"{label}: no exported program inside (expected <name>/models/<method>.json)"
            )
        graphs = []
        seen: set[str] = set()
        for info in sorted(models, key=lambda i: i.filename):
            if info.filename in seen:
                raise InputError(f"{label}: duplicated archive member {info.filename!r}")
            seen.add(info.filename)
            method = info.filename.rsplit("/", 1)[-1][: -len(".json")]
            with gc_paused():
                document = _load_json(archive, info, label)
                graphs.append(graph_from_document(document, label, method))
                del document
            prefix = info.filename.split("/", 1)[0]
            # int64 constants past int32, read raw (constants.py): what Core AI wraps
            graphs[-1].meta["int64_past_int32"] = int64_past_int32(archive, prefix, method)
            # small float constants of one repeated value: an untrained layer's (CML801),
            # read only where an op whose converter asks that takes them
            wanted = alike_operands(graphs[-1])
            found = uniform_floats(archive, prefix, method, wanted) if wanted else {}
            graphs[-1].meta["uniform_floats"] = found
        return graphs


def _is_model_json(name: str) -> bool:
    parts = name.split("/")
    return len(parts) == 3 and parts[1] == "models" and parts[2].endswith(".json")


def _load_json(archive: zipfile.ZipFile, info: zipfile.ZipInfo, label: str) -> Any:
    if info.file_size > MAX_GRAPH_JSON_BYTES:
        raise InputError(
            f"{label}: {info.filename} declares {info.file_size} bytes; refusing graphs "
            f"over {MAX_GRAPH_JSON_BYTES} bytes"
        )
    try:
        with archive.open(info) as member:
            raw = member.read(MAX_GRAPH_JSON_BYTES + 1)
    except Exception as exc:  # zlib.error, BadZipFile (CRC), NotImplementedError, ...
        raise InputError(f"{label}: cannot read {info.filename}: {exc}") from None
    if len(raw) > MAX_GRAPH_JSON_BYTES:
        raise InputError(f"{label}: {info.filename} is larger than it declares")
    try:
        return json.loads(raw)
    except RecursionError:
        raise InputError(f"{label}: {info.filename}: JSON nested too deeply") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise InputError(f"{label}: {info.filename} is not valid JSON: {exc}") from None


def graph_from_document(document: Any, label: str, method: str = "forward") -> Graph:
    """Build a :class:`Graph` from the serializer's JSON for one method."""
    try:
        return _GraphBuilder(document, label, method).build()
    except InputError:
        raise
    except RecursionError:
        raise InputError(f"{label}: graph nested too deeply") from None
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise InputError(
            f"{label}: malformed exported program ({type(exc).__name__}: {exc})"
        ) from None


class _GraphBuilder:
    def __init__(self, document: Any, label: str, method: str) -> None:
        if not isinstance(document, dict):
            raise InputError(f"{label}: malformed exported program (top level is not an object)")
        self.doc = document
        self.label = label
        self.method = method
        # symbolic int -> (op, arguments) of the node that computes it (sym_size, a mul)
        self.sym_producers: dict[str, tuple[str, list[Any]]] = {}

    def build(self) -> Graph:
        version = self.doc.get("schema_version") or {}
        major = version.get("major") if isinstance(version, dict) else None
        if major != KNOWN_SCHEMA_MAJOR:
            minor = version.get("minor") if isinstance(version, dict) else None
            raise InputError(
                f"{self.label}: unsupported .pt2 schema version {major}.{minor} "
                f"(coreml-lint reads version {KNOWN_SCHEMA_MAJOR}.x, written by torch 2.6-2.13)"
            )
        module = self.doc["graph_module"]
        graph = module["graph"]
        tensors = {
            str(name): self._tensor_info(meta) for name, meta in graph["tensor_values"].items()
        }
        nodes = [self._node(raw, i) for i, raw in enumerate(graph["nodes"])]
        signature = module["signature"]
        inputs = [self._input_spec(spec) for spec in signature["input_specs"]]
        outputs = [self._output_spec(spec) for spec in signature["output_specs"]]
        self._check_references(nodes, inputs, outputs, tensors)
        return Graph(
            inputs=inputs,
            nodes=nodes,
            outputs=outputs,
            tensors=tensors,
            source=self.label,
            method=self.method,
            meta={
                "torch_version": self.doc.get("torch_version"),
                "schema_version": f"{major}.{version.get('minor')}",
                "verifiers": self.doc.get("verifiers"),
                "range_constraints": _range_constraints(self.doc.get("range_constraints")),
                "sym_values": _sym_values(graph.get("sym_int_values")),
                "sym_producers": self.sym_producers,
            },
        )

    def _tensor_info(self, meta: dict[str, Any]) -> TensorInfo:
        dtype = SCALAR_TYPES.get(meta["dtype"])
        if dtype is None:
            dtype = f"scalar_type_{meta['dtype']}"
        strides = meta.get("strides")
        return TensorInfo(
            dtype,
            self._sym_ints(meta["sizes"]),
            self._sym_ints(strides) if isinstance(strides, list) else None,
            meta.get("requires_grad") is True,
        )

    @staticmethod
    def _sym_ints(values: list[Any]) -> tuple[int | str, ...]:
        try:  # the common case: every size is a plain int
            return tuple([int(value["as_int"]) for value in values])
        except KeyError:
            pass
        out: list[int | str] = []
        for value in values:
            if "as_int" in value:
                out.append(int(value["as_int"]))
            else:
                expr = value.get("as_expr") or {}
                out.append(str(expr.get("expr_str", "?")))
        return tuple(out)

    def _node(self, raw: dict[str, Any], index: int) -> Node:
        target = str(raw["target"])
        if target.startswith("torch.ops."):
            target = target[len("torch.ops.") :]
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        for named in raw["inputs"]:
            value = self._argument(named["arg"])
            if named.get("kind") == POSITIONAL or (named.get("kind") is None and not kwargs):
                args.append(value)
            else:
                kwargs[str(named["name"])] = value
        outputs: list[str] = []
        for out in raw["outputs"]:
            self._output_names(out, outputs)
            sym = out.get("as_sym_int") if isinstance(out, dict) else None
            if isinstance(sym, dict) and isinstance(sym.get("as_name"), str):
                self.sym_producers[sym["as_name"]] = (target, args)
        metadata = raw.get("metadata") or {}
        if not isinstance(metadata, dict):
            metadata = {}
        stack = metadata.get("nn_module_stack")
        return Node(
            name=str(raw.get("name") or (outputs[0] if outputs else f"node_{index}")),
            target=target,
            args=args,
            kwargs=kwargs,
            outputs=outputs,
            stack_trace=metadata.get("stack_trace"),
            module_stack=stack if isinstance(stack, str) else None,
        )

    def _output_names(self, out: dict[str, Any], into: list[str]) -> None:
        if "as_tensor" in out:
            into.append(str(out["as_tensor"]["name"]))
        elif "as_tensors" in out:
            into.extend(str(t["name"]) for t in out["as_tensors"])
        elif "as_optional_tensors" in out:
            for item in out["as_optional_tensors"]:
                if "as_tensor" in item:
                    into.append(str(item["as_tensor"]["name"]))

    def _argument(self, arg: dict[str, Any]) -> Any:
        if not isinstance(arg, dict) or len(arg) != 1:
            raise ValueError(f"argument is not a one-field union: {str(arg)[:80]}")
        ((kind, value),) = arg.items()
        if kind == "as_none":
            return None
        if kind == "as_tensor":
            return TensorRef(str(value["name"]))
        if kind == "as_tensors":
            return [TensorRef(str(v["name"])) for v in value]
        if kind in ("as_optional_tensors",):
            return [
                TensorRef(str(v["as_tensor"]["name"])) if "as_tensor" in v else None for v in value
            ]
        if kind == "as_optional_tensor":
            return TensorRef(str(value["as_tensor"]["name"])) if "as_tensor" in value else None
        if kind == "as_float":
            return _float(value)
        if kind == "as_floats":
            return [_float(v) for v in value]
        if kind in ("as_int", "as_string", "as_bool"):
            return value
        if kind in ("as_ints", "as_strings", "as_bools"):
            return list(value)
        if kind in ("as_sym_int", "as_sym_bool", "as_sym_float"):
            return self._sym(value)
        if kind in ("as_sym_ints", "as_sym_bools", "as_sym_floats"):
            return [self._sym(v) for v in value]
        if kind == "as_scalar_type":
            return DType(SCALAR_TYPES.get(value, f"scalar_type_{value}"))
        return Opaque(kind, value if isinstance(value, (int, str)) else None)

    @staticmethod
    def _sym(value: dict[str, Any]) -> Any:
        if "as_name" in value:
            return SymRef(str(value["as_name"]))
        for key in ("as_int", "as_bool"):
            if key in value:
                return value[key]
        if "as_float" in value:
            return _float(value["as_float"])
        return Opaque("sym")

    def _input_spec(self, spec: dict[str, Any]) -> InputSpec:
        ((kind, body),) = spec.items()
        if kind == "user_input":
            arg = body["arg"]
            name = arg.get("as_tensor", {}).get("name") if isinstance(arg, dict) else None
            return InputSpec(name=str(name or "<non-tensor>"), kind="user_input")
        if kind == "parameter":
            return InputSpec(str(body["arg"]["name"]), "parameter", body.get("parameter_name"))
        if kind == "buffer":
            return InputSpec(
                str(body["arg"]["name"]),
                "buffer",
                body.get("buffer_name"),
                bool(body.get("persistent", True)),
            )
        if kind == "tensor_constant":
            return InputSpec(str(body["arg"]["name"]), "constant", body.get("tensor_constant_name"))
        name = body.get("arg", {}).get("name") if isinstance(body.get("arg"), dict) else None
        return InputSpec(str(name or body.get("name") or kind), kind)

    def _output_spec(self, spec: dict[str, Any]) -> OutputSpec:
        ((kind, body),) = spec.items()
        arg = body.get("arg", {})
        name = None
        if isinstance(arg, dict):
            name = arg.get("as_tensor", {}).get("name") if "as_tensor" in arg else arg.get("name")
        target = (
            body.get("buffer_name") or body.get("user_input_name") or body.get("parameter_name")
        )
        return OutputSpec(name=str(name) if name is not None else None, kind=kind, target=target)

    def _check_references(
        self,
        nodes: list[Node],
        inputs: list[InputSpec],
        outputs: list[OutputSpec],
        tensors: dict[str, TensorInfo],
    ) -> None:
        defined = {spec.name for spec in inputs}
        for node in nodes:
            for name in node.tensor_inputs():
                if name not in defined:
                    raise InputError(
                        f"{self.label}: node {node.name!r} reads {name!r}, which no earlier "
                        "node or input defines"
                    )
            defined.update(node.outputs)
        for out in outputs:
            if out.name is not None and out.name not in defined:
                raise InputError(f"{self.label}: output {out.name!r} is never defined")


def _range_constraints(raw: Any) -> dict[str, tuple[int | None, int | None]]:
    """``{"s0": (min, max), "16*s1": (16, 512)}``: the program's allowed sizes, keyed by the
    symbol or (derived dims) the expression torch wrote. A missing bound is None
    (``Dim("b")`` saves ``max_val: None``)."""
    if not isinstance(raw, dict):
        return {}
    found: dict[str, tuple[int | None, int | None]] = {}
    for key, bounds in raw.items():
        if not isinstance(bounds, dict):
            continue
        low, high = bounds.get("min_val"), bounds.get("max_val")
        found[str(key)] = (
            low if isinstance(low, int) and not isinstance(low, bool) else None,
            high if isinstance(high, int) and not isinstance(high, bool) else None,
        )
    return found


def _sym_values(raw: Any) -> dict[str, tuple[str, int | None]]:
    """Each symbolic int the graph computes (``sym_size_int_3``, a ``mul`` of sizes): its
    expression in the program's symbols and the value it had at export (the hint)."""
    if not isinstance(raw, dict):
        return {}
    found: dict[str, tuple[str, int | None]] = {}
    for name, value in raw.items():
        if not isinstance(value, dict):
            continue
        if "as_int" in value and isinstance(value["as_int"], int):
            found[str(name)] = (str(value["as_int"]), value["as_int"])
            continue
        expr = value.get("as_expr")
        if not isinstance(expr, dict) or not isinstance(expr.get("expr_str"), str):
            continue
        hint = expr.get("hint")
        hint_value = hint.get("as_int") if isinstance(hint, dict) else None
        found[str(name)] = (expr["expr_str"], hint_value if isinstance(hint_value, int) else None)
    return found


# torch's serializer writes a float that JSON cannot hold as a string: what the graph reads
# is the float (``masked_fill(mask, float("-inf"))`` is the number -inf, not a word).
NON_FINITE = {"Infinity": math.inf, "-Infinity": -math.inf, "NaN": math.nan}


def _float(value: Any) -> Any:
    return NON_FINITE.get(value, value) if isinstance(value, str) else value
