"""Which bindings a name sees: an imported name that a function or the module rebinds is
no longer the import (``def full(...)`` after ``from torch import full``; a parameter
called ``F``). Python's rules, simplified to what a linter can know statically:

- inside a function, a name is local when it is a parameter or assigned anywhere in that
  function (``global``/``nonlocal`` names are not; an import inside the function is an
  import like any other); enclosing functions are searched outwards, class bodies are
  skipped, as Python does;
- at module level, the binding that comes last in the file wins, since model code calls
  these names from functions that run after the module has been imported.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_NEW_SCOPES = (*_FUNCTIONS, ast.ClassDef, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


class Scopes:
    def __init__(self, tree: ast.Module, parents: dict[ast.AST, ast.AST]) -> None:
        self.tree = tree
        self.parents = parents
        self._locals: dict[int, frozenset[str]] = {}
        self._module: dict[str, bool] | None = None
        self._constants: dict[str, ast.Constant] | None = None

    def rebinds_import(self, name: ast.Name) -> bool:
        """Whether ``name`` (a use of an imported name) resolves to some other binding."""
        return self._local_in_a_function(name) or self._module_bindings().get(name.id, False)

    def module_constant(self, name: ast.Name) -> ast.Constant | None:
        """The literal a module-level name holds (``APPROX = "tanh"``), when the module binds
        it exactly once, to a literal, and no enclosing function rebinds it."""
        if self._local_in_a_function(name):
            return None
        return self._module_constants().get(name.id)

    def _local_in_a_function(self, name: ast.Name) -> bool:
        scope = self._enclosing_function(name)
        while scope is not None:
            if name.id in self._function_locals(scope):
                return True
            scope = self._enclosing_function(scope)
        return False

    def _module_constants(self) -> dict[str, ast.Constant]:
        if self._constants is None:
            values: dict[str, ast.Constant | None] = {}
            for node in _walk_scope(self.tree.body):
                for bound in _bound_names(node):
                    parent = self.parents.get(node)
                    single = (
                        isinstance(parent, (ast.Assign, ast.AnnAssign))
                        and isinstance(parent.value, ast.Constant)
                        and (isinstance(parent, ast.AnnAssign) or len(parent.targets) == 1)
                    )
                    values[bound] = None if bound in values or not single else parent.value
            self._constants = {k: v for k, v in values.items() if v is not None}
        return self._constants

    def _enclosing_function(self, node: ast.AST) -> ast.AST | None:
        node = self.parents.get(node)
        while node is not None and not isinstance(node, _FUNCTIONS):
            node = self.parents.get(node)
        return node

    def _function_locals(self, function: ast.AST) -> frozenset[str]:
        key = id(function)
        if key not in self._locals:
            args = function.args  # type: ignore[attr-defined]
            names = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
            names.update(a.arg for a in (args.vararg, args.kwarg) if a is not None)
            declared: set[str] = set()
            body = function.body if isinstance(function.body, list) else [function.body]
            for node in _walk_scope(body):
                if isinstance(node, (ast.Global, ast.Nonlocal)):
                    declared.update(node.names)
                elif not isinstance(node, (ast.Import, ast.ImportFrom)):  # imports: see imports
                    names.update(_bound_names(node))
            self._locals[key] = frozenset(names - declared)
        return self._locals[key]

    def _module_bindings(self) -> dict[str, bool]:
        """Module-level name -> whether its last binding is something other than an import."""
        if self._module is None:
            last: dict[str, tuple[int, bool]] = {}
            for node in _walk_scope(self.tree.body):
                is_import = isinstance(node, (ast.Import, ast.ImportFrom))
                for bound in _bound_names(node):
                    line = getattr(node, "lineno", 0)
                    if bound not in last or line >= last[bound][0]:
                        last[bound] = (line, not is_import)
            self._module = {name: other for name, (_, other) in last.items()}
        return self._module


def _walk_scope(body: list[ast.AST]) -> Iterator[ast.AST]:
    """Every node of one scope: nested functions and classes are yielded (their names bind
    here) but not entered."""
    stack = list(body)
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, _NEW_SCOPES):
            continue
        stack.extend(ast.iter_child_nodes(node))


def _bound_names(node: ast.AST) -> Iterator[str]:
    if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
        yield node.id
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        yield node.name
    elif isinstance(node, (ast.Import, ast.ImportFrom)):
        for alias in node.names:
            if alias.name != "*":
                yield alias.asname or alias.name.split(".")[0]
    elif isinstance(node, ast.ExceptHandler) and node.name:
        yield node.name
