"""Several exported methods read as one program's (``coreml-lint a.pt2 b.pt2 --methods``).

ExecuTorch lowers the methods of one program together (``to_edge_transform_and_lower(
{"prefill": ep1, "decode": ep2}, ...)``) and its Core ML backend then builds one
multifunction model per partition position. Users save each method with
``torch.export.save`` (one file each), or all in one archive (torch's ``package_pt2``
with a dict of programs). A method is named after its file's stem when the file holds
one program, after the program's name inside the archive otherwise.
"""

from __future__ import annotations

from pathlib import Path

from coreml_lint.core.errors import InputError
from coreml_lint.program.graph import Graph
from coreml_lint.program.pt2 import read_pt2


def method_names(path: Path, graphs: list[Graph]) -> list[str]:
    """The method name of each program of one archive."""
    if len(graphs) == 1:
        return [path.stem]
    return [graph.method for graph in graphs]


def read_methods(paths: list[Path]) -> list[Graph]:
    """Every program of every archive, each named as a method; two with one name are an
    error (ExecuTorch needs one name per method)."""
    graphs: list[Graph] = []
    seen: dict[str, Path] = {}
    for path in paths:
        found = read_pt2(path)
        for graph, name in zip(found, method_names(path, found), strict=True):
            if name in seen:
                raise InputError(
                    f"{path}: method {name!r} is also in {seen[name]}: rename one file "
                    "(a method is named after its .pt2)"
                )
            seen[name] = path
            graph.method = name
            graphs.append(graph)
    if not graphs:
        raise InputError("--methods: no .pt2 program given")
    return graphs
