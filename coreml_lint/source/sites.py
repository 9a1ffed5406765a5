"""Where the source builds a module the program names.

A program's module stack names each module by its attribute path from the root
(``blocks.2.mlp.1``) and its class. Model code rarely builds every module with its own
``self.<name> = Class(...)`` line: layers come from comprehensions in a ``ModuleList``,
members of an ``nn.Sequential`` are its positional arguments (or ``OrderedDict`` entries),
``ModuleDict`` entries are dict values, and helper methods (``self._make_layer(...)``)
return whole containers. Containers are not classes of the model's file, so a module is
placed relative to its nearest owner that is not a torch container: the attribute of that
owner, then the keys into the containers below it. Every key is followed through the
expression that built the container; a key that cannot be followed (a list of unknown
length before it, a name bound twice) yields nothing, so a fix is never guessed.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from coreml_lint.source.context import SourceContext, int_literal
from coreml_lint.source.patterns import (
    enclosing_class,
    is_rebound,
    parameter_default,
    single_assignment,
)

CONTAINERS = frozenset(
    f"torch.nn.modules.container.{name}" for name in ("Sequential", "ModuleList", "ModuleDict")
)
_SEQUENTIAL = "torch.nn.Sequential"
_LISTS = ("torch.nn.ModuleList", "torch.nn.Sequential")
_DICTS = ("torch.nn.ModuleDict", "collections.OrderedDict", "dict")
_COMPREHENSIONS = (ast.ListComp, ast.GeneratorExp, ast.SetComp)
_DEPTH = 8  # names, helpers and containers followed before giving up

Function = ast.FunctionDef | ast.AsyncFunctionDef
Built = tuple[Function, ast.Call]  # the call and the method whose code holds it


def owner_stack(stack: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The end of a module stack from the leaf's nearest owner that is not a torch
    container: ``[("", "m.Model"), ("mlp", "...Sequential"), ("mlp.1", "...GELU")]`` ->
    all three; ``[("", "m.Model"), ("blocks.0", "m.Block"), ("blocks.0.norm", ...)]`` ->
    the last two."""
    for index in range(len(stack) - 2, -1, -1):
        if stack[index][1] not in CONTAINERS:
            return stack[index:]
    return stack[-1:]


def relative_path(owner_path: str, path: str) -> str | None:
    """``"n1.0"`` for the module at ``"blocks.1.n1.0"`` under ``"blocks.1"``."""
    prefix = f"{owner_path}." if owner_path else ""
    return path[len(prefix) :] if path.startswith(prefix) and len(path) > len(prefix) else None


def module_site(stack: list[tuple[str, str]]) -> tuple[str, str] | None:
    """(short class name of the owner, path of the leaf relative to it) for a stack as
    ``owner_stack`` returns it; None for a stack without an owner."""
    if len(stack) < 2:
        return None
    relative = relative_path(stack[0][0], stack[-1][0])
    return (stack[0][1].rsplit(".", 1)[-1], relative) if relative else None


def constructor_calls(source: SourceContext, owner: str, relative: str) -> list[Built]:
    """Every call in class ``owner`` (or a base class of it in this file) that builds the
    module at ``relative`` (``"norm"``, ``"n1.0"``, ``"mlp.1"``, ``"heads.cls"``), once."""
    attribute, *keys = relative.split(".")
    found: dict[int, Built] = {}
    for cls in _with_bases(source, owner):
        for method, value in _attribute_values(cls, attribute):
            for built in _resolve(source, cls, method, value, keys, 0):
                found.setdefault(id(built[1]), built)
        for method, call in _container_init(source, cls):  # class MLP(nn.Sequential)
            for built in _resolve(source, cls, method, call, [attribute, *keys], 0):
                found.setdefault(id(built[1]), built)
        if keys:  # self.layers = nn.ModuleList(); self.layers.append(Block())
            appended = _appended(cls, attribute)
            for method, value in _indexed(appended, keys[0]):
                for built in _resolve(source, cls, method, value, keys[1:], 0):
                    found.setdefault(id(built[1]), built)
    return list(found.values())


def _with_bases(source: SourceContext, owner: str) -> list[ast.ClassDef]:
    """The classes called ``owner`` and, breadth-first, their bases defined in this file."""
    queue, seen = list(source.classes(owner)), set()
    result = []
    while queue:
        cls = queue.pop(0)
        if id(cls) in seen:
            continue
        seen.add(id(cls))
        result.append(cls)
        for base in cls.bases:
            if isinstance(base, ast.Name):
                queue.extend(source.classes(base.id))
    return result


def _attribute_values(cls: ast.ClassDef, attribute: str) -> Iterator[tuple[Function, ast.expr]]:
    """Each value a method of ``cls`` assigns to ``self.<attribute>``: by assignment, or by
    ``self.add_module(name, value)`` / ``setattr(self, name, value)`` with a name that can
    be ``attribute`` (``f"norm{i}"``, ``"layer%d" % i``)."""
    for method in _methods(cls):
        for node in ast.walk(method):
            if isinstance(node, ast.Assign):
                targets, value = node.targets, node.value
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                targets, value = [node.target], node.value
            elif isinstance(node, ast.Call) and _registers(node, attribute):
                yield method, node.args[-1]
                continue
            else:
                continue
            if any(_is_self_attribute(t, attribute) for t in targets):
                yield method, value


def _registers(call: ast.Call, attribute: str) -> bool:
    """``self.add_module(name, m)``, ``self.register_module(name, m)`` or ``setattr(self,
    name, m)`` whose name may be ``attribute``."""
    func, args = call.func, call.args
    if (
        isinstance(func, ast.Attribute)
        and func.attr in ("add_module", "register_module")
        and isinstance(func.value, ast.Name)
        and func.value.id == "self"
        and len(args) == 2
    ):
        name = args[0]
    elif (
        isinstance(func, ast.Name)
        and func.id == "setattr"
        and len(args) == 3
        and isinstance(args[0], ast.Name)
        and args[0].id == "self"
    ):
        name = args[1]
    else:
        return False
    pattern = _name_pattern(name)
    return pattern is not None and re.fullmatch(pattern, attribute) is not None


def _name_pattern(expr: ast.expr) -> str | None:
    """A regular expression for the names a string expression can make."""
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return re.escape(expr.value)
    if isinstance(expr, ast.JoinedStr):
        parts = [re.escape(v.value) if isinstance(v, ast.Constant) else ".+?" for v in expr.values]
        return "".join(parts)
    if (
        isinstance(expr, ast.BinOp)
        and isinstance(expr.op, ast.Mod)
        and isinstance(expr.left, ast.Constant)
        and isinstance(expr.left.value, str)
    ):
        pieces = re.split(r"%[-+ #0-9.]*[sdir]", expr.left.value)
        return ".+?".join(re.escape(p) for p in pieces)
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "str":
        return ".+"
    return None


def _container_init(source: SourceContext, cls: ast.ClassDef) -> list[tuple[Function, ast.Call]]:
    """For a subclass of a torch container, its ``super().__init__(...)`` call as a call of
    the container (``class MLP(nn.Sequential)`` passing its layers up)."""
    bases = [b for b in cls.bases if _qualname(source, b) in (*_LISTS, "torch.nn.ModuleDict")]
    init = next((m for m in _methods(cls) if m.name == "__init__"), None)
    if len(bases) != 1 or init is None:
        return []
    found = []
    for node in ast.walk(init):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if node.func.attr != "__init__":
            continue
        target = node.func.value
        args = node.args
        if isinstance(target, ast.Call) and getattr(target.func, "id", None) == "super":
            pass
        elif _qualname(source, target) == _qualname(source, bases[0]) and args:
            args = args[1:]  # nn.Sequential.__init__(self, ...)
        else:
            continue
        found.append((init, ast.Call(func=bases[0], args=args, keywords=node.keywords)))
    return found


def _appended(cls: ast.ClassDef, attribute: str) -> list[tuple[Function, ast.Call]]:
    """``self.<attribute>.append(x)`` calls in the methods of ``cls``, in source order."""
    found = []
    for method in _methods(cls):
        for node in ast.walk(method):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "append"
                and _is_self_attribute(node.func.value, attribute)
                and len(node.args) == 1
            ):
                found.append((method, node))
    return sorted(found, key=lambda item: (item[1].lineno, item[1].col_offset))


def _indexed(appends: list[tuple[Function, ast.Call]], key: str) -> list[tuple[Function, ast.expr]]:
    """The value the ``key``-th append adds, appends in source order. An append in a loop
    adds every position of the loop's iterations: ``for _ in range(4)`` (a count the code
    states) moves the next append 4 positions on; a loop of unknown count takes every
    position from its own on when its append is the last one (else nothing is known)."""
    if not key.isdigit() or not appends:
        return []
    index, offset = int(key), 0
    for position, (method, call) in enumerate(appends):
        if _inside(call, method, (ast.If, ast.Try, ast.Match)):
            return []  # an append that may not run: the indices from here on are unknown
        count = _iterations(call, method)
        if count is None:
            last = position == len(appends) - 1
            return [(method, call.args[0])] if last and index >= offset else []
        if index < offset + count:
            return [(method, call.args[0])]
        offset += count
    return []


def _iterations(node: ast.AST, scope: ast.AST) -> int | None:
    """How many times ``node`` runs in one run of ``scope``: 1 outside loops, the product
    of the counts of the ``for`` loops around it when each states its count
    (``range(4)``, ``range(1, 5)``, a literal list), else None."""
    count = 1
    for block in ast.walk(scope):
        if not isinstance(block, (ast.For, ast.AsyncFor, ast.While)):
            continue
        if not any(child is node for child in ast.walk(block)):
            continue
        body = [n for statement in block.body for n in ast.walk(statement)]
        if isinstance(block, ast.While) or block.orelse:
            return None
        if any(isinstance(n, (ast.Break, ast.Continue, ast.Return)) for n in body):
            return None  # an iteration may stop early
        stated = _stated_count(block.iter)
        if stated is None:
            return None
        count *= stated
    return count


def _stated_count(expr: ast.expr) -> int | None:
    """The number of items ``range(<ints>)`` or a literal list/tuple/set yields, else None."""
    if isinstance(expr, (ast.List, ast.Tuple, ast.Set)):
        return None if any(isinstance(e, ast.Starred) for e in expr.elts) else len(expr.elts)
    if not (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name)):
        return None
    if expr.func.id != "range" or expr.keywords or not 1 <= len(expr.args) <= 3:
        return None
    bounds = [int_literal(a) for a in expr.args]
    if any(b is None for b in bounds):
        return None
    return len(range(*bounds))  # type: ignore[arg-type]


def _inside(node: ast.AST, scope: ast.AST, kinds: tuple[type, ...]) -> bool:
    """Whether ``node`` is inside a statement of one of ``kinds`` within ``scope``."""
    return any(
        isinstance(block, kinds) and any(child is node for child in ast.walk(block))
        for block in ast.walk(scope)
    )


def _resolve(
    source: SourceContext,
    cls: ast.ClassDef,
    scope: Function,
    expr: ast.expr | None,
    keys: list[str],
    depth: int,
) -> list[Built]:
    """The calls ``expr`` builds the module at ``keys`` below it with."""
    if expr is None or depth > _DEPTH:
        return []
    if isinstance(expr, ast.Name):
        return _resolve(
            source, cls, scope, single_assignment(source, expr.id, scope), keys, depth + 1
        )
    if isinstance(expr, ast.IfExp):
        return [
            *_resolve(source, cls, scope, expr.body, keys, depth + 1),
            *_resolve(source, cls, scope, expr.orelse, keys, depth + 1),
        ]
    if not isinstance(expr, ast.Call):
        return []
    helper = _helper(source, cls, expr)
    if helper is not None:
        return [
            built
            for value in _returned(helper)
            for built in _resolve(source, cls, helper, value, keys, depth + 1)
        ]
    if not keys:
        return [(scope, expr)]
    name = _qualname(source, expr.func)
    key, rest = keys[0], keys[1:]
    if name == _SEQUENTIAL and len(expr.args) == 1 and _is_dict(source, expr.args[0]):
        element = _entry(source, scope, expr.args[0], key, depth)  # Sequential(OrderedDict(...))
    elif name in _LISTS:
        args = expr.args if name == _SEQUENTIAL else expr.args[:1]
        starred = [ast.Starred(value=a) for a in args] if name != _SEQUENTIAL else args
        element = _element(source, scope, starred, key, depth)
    elif name in _DICTS:
        element = _entry(source, scope, expr, key, depth)
    else:
        return []
    return [b for e in element for b in _resolve(source, cls, scope, e, rest, depth + 1)]


def _element(
    source: SourceContext, scope: Function, args: list[ast.expr], key: str, depth: int
) -> list[ast.expr]:
    """The ``key``-th of positional arguments, where a ``*starred`` one spreads a list."""
    if not key.isdigit() or depth > _DEPTH:
        return []
    index, offset = int(key), 0
    for position, arg in enumerate(args):
        if not isinstance(arg, ast.Starred):
            if index == offset:
                return [arg]
            offset += 1
            continue
        length = _length(source, scope, arg.value)
        last = position == len(args) - 1
        if length is None and not last:
            return []  # the indices after a list of unknown length are unknown
        if length is None or index < offset + length:
            return _items(source, scope, arg.value, index - offset, depth + 1)
        offset += length
    return []


def _items(
    source: SourceContext, scope: Function, expr: ast.expr, index: int, depth: int
) -> list[ast.expr]:
    """The ``index``-th item of a list expression: a comprehension's element (every item),
    a literal's item, or a local list filled by ``.append`` calls."""
    if depth > _DEPTH:
        return []
    if isinstance(expr, _COMPREHENSIONS):
        return [expr.elt]
    if isinstance(expr, (ast.List, ast.Tuple)):
        return _element(source, scope, list(expr.elts), str(index), depth + 1)
    if isinstance(expr, ast.Name):
        value = single_assignment(source, expr.id, scope)
        calls = _name_appends(scope, expr.id)
        if calls is None:
            return []  # extended, sorted, ...: its items are unknown
        appends = [(scope, c) for c in calls]
        if isinstance(value, ast.List) and appends:  # layers = [stem]; layers.append(...)
            if any(isinstance(e, ast.Starred) for e in value.elts):
                return []
            if index < len(value.elts):
                return [value.elts[index]]
            return [v for _, v in _indexed(appends, str(index - len(value.elts)))]
        if value is not None:
            return _items(source, scope, value, index, depth + 1)
    if isinstance(expr, ast.Call) and _qualname(source, expr.func) in ("list", "tuple"):
        return _items(source, scope, expr.args[0], index, depth + 1) if expr.args else []
    return []


def _length(source: SourceContext, scope: Function, expr: ast.expr) -> int | None:
    """The number of items of a list literal (directly or through a local name bound
    once), else None."""
    if isinstance(expr, ast.Name):
        if _name_appends(scope, expr.id) != []:
            return None  # filled by appends, or changed otherwise
        expr = single_assignment(source, expr.id, scope)
    if isinstance(expr, (ast.List, ast.Tuple)) and not any(
        isinstance(e, ast.Starred) for e in expr.elts
    ):
        return len(expr.elts)
    return None


def _name_appends(scope: Function, name: str) -> list[ast.Call] | None:
    """``name.append(x)`` calls in source order; None when the list is changed otherwise."""
    calls = [
        node
        for node in ast.walk(scope)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "append"
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == name
        and len(node.args) == 1
    ]
    mutated = any(
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("extend", "insert", "pop", "remove", "reverse", "sort")
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == name
        for node in ast.walk(scope)
    )
    return None if mutated else sorted(calls, key=lambda c: (c.lineno, c.col_offset))


def _is_dict(source: SourceContext, expr: ast.expr) -> bool:
    return isinstance(expr, (ast.Dict, ast.DictComp)) or (
        isinstance(expr, ast.Call) and _qualname(source, expr.func) in _DICTS
    )


def _entry(
    source: SourceContext, scope: Function, expr: ast.expr, key: str, depth: int
) -> list[ast.expr]:
    """The value at ``key`` of a dict, ``OrderedDict``/``ModuleDict`` call or comprehension."""
    if depth > _DEPTH:
        return []
    if isinstance(expr, ast.Name):
        return _entry(source, scope, single_assignment(source, expr.id, scope), key, depth + 1)
    if isinstance(expr, ast.DictComp):
        return [expr.value]
    if isinstance(expr, ast.Dict):  # the last entry of the key wins; a ``**`` after it may
        found: list[ast.expr] = []
        for k, v in zip(expr.keys, expr.values, strict=True):
            if k is None:
                found = []  # ``**other`` may hold the key: unknown from here on
            elif isinstance(k, ast.Constant) and str(k.value) == key:
                found = [v]
        return found
    if isinstance(expr, ast.Call) and _qualname(source, expr.func) in _DICTS:
        named = [kw.value for kw in expr.keywords if kw.arg == key]
        if named or not expr.args:
            return named
        pairs = expr.args[0]
        if isinstance(pairs, (ast.List, ast.Tuple)):
            return [
                p.elts[1]
                for p in pairs.elts
                if isinstance(p, ast.Tuple)
                and len(p.elts) == 2
                and isinstance(p.elts[0], ast.Constant)
                and str(p.elts[0].value) == key
            ]
        return _entry(source, scope, pairs, key, depth + 1)
    return []


def _helper(source: SourceContext, cls: ast.ClassDef | None, call: ast.Call) -> Function | None:
    """The function a builder call runs: a method of ``cls`` called as ``self.<method>(...)``
    or a function defined at the top of this file (``make_mlp(dim)``)."""
    func = call.func
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        if func.value.id != "self" or cls is None:
            return None
        methods = [m for c in _with_bases(source, cls.name) for m in _methods(c)]
        return next((m for m in methods if m.name == func.attr), None)
    if not isinstance(func, ast.Name) or func.id in source.imports:
        return None
    defined = [
        node
        for node in source.tree.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        and node.name == func.id
    ]
    only = defined[0] if len(defined) == 1 else None
    return only if isinstance(only, (ast.FunctionDef, ast.AsyncFunctionDef)) else None


def _qualname(source: SourceContext, func: ast.expr) -> str | None:
    """The callee's qualified name, torch's containers by their public name, and the
    builtins ``list``/``tuple``/``dict`` when the file does not rebind them."""
    name = source.qualname(func)
    if name is None and isinstance(func, ast.Name) and func.id in ("list", "tuple", "dict"):
        return None if func.id in source.rebound_names else func.id
    prefix = "torch.nn.modules.container."
    return f"torch.nn.{name[len(prefix) :]}" if name and name.startswith(prefix) else name


def _returned(function: Function) -> list[ast.expr]:
    """The values ``function`` returns (not those of functions nested in it)."""
    found, stack = [], list(function.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Return) and node.value is not None:
            found.append(node.value)
        elif not isinstance(
            node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
        ):
            stack.extend(ast.iter_child_nodes(node))
    return found


def _methods(cls: ast.ClassDef) -> list[Function]:
    return [m for m in cls.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _is_self_attribute(node: ast.AST, attribute: str) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == attribute
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    )


def shown(relative: str) -> str:
    """``self.n1[0]`` for ``"n1.0"``, ``self.heads["cls"]`` for ``"heads.cls"``."""
    attribute, *keys = relative.split(".")
    return f"self.{attribute}" + "".join(f"[{k}]" if k.isdigit() else f'["{k}"]' for k in keys)


def functions_called_at(source: SourceContext, line: int) -> list[Function]:
    """The functions of this file that calls on ``line`` run: a function defined at the top
    of the file called by name, or a method of the enclosing class (or of a base class in
    this file) called as ``self.<method>(...)``. A node's stack trace keeps the frames of
    ``forward`` methods only, so an op made in such a helper points at this line."""
    found: dict[int, Function] = {}
    for call in source.calls():
        if not (call.lineno <= line <= (call.end_lineno or call.lineno)):
            continue
        helper = _helper(source, enclosing_class(source, call), call)
        if helper is not None:
            found.setdefault(id(helper), helper)
    return list(found.values())


def chosen_by(
    source: SourceContext,
    chain: list[tuple[str, str]],
    index: int,
    function: Function,
    parameter: str,
) -> ast.expr | None:
    """The expression that gives ``parameter`` of ``function``, the ``__init__`` of the
    module at ``chain[index]`` (a node's whole module stack), its value in this program:
    the argument the call that builds that module passes, followed up through the
    builders' own ``__init__`` parameters (timm passes ``norm_layer`` down this way), or
    the parameter's default where the call leaves it out. None when a step is not one
    call or the value is rebound on the way."""
    for _ in range(_DEPTH):
        if is_rebound(source, parameter, function):
            return None
        if index == 0:
            return parameter_default(function, parameter)
        upper = owner_stack(chain[: index + 1])
        site = module_site(upper)
        builds = constructor_calls(source, *site) if site is not None else []
        if len(builds) != 1:
            return None
        method, call = builds[0]
        given = _argument(call, function, parameter)
        if given is None:
            return parameter_default(function, parameter)
        if not (isinstance(given, ast.Name) and given.id in _parameters(method)):
            return given
        if method.name != "__init__" or upper[0] not in chain:
            return None  # a helper's parameter: who calls it is not followed
        function, parameter, index = method, given.id, chain.index(upper[0])
    return None


def _argument(call: ast.Call, function: Function, parameter: str) -> ast.expr | None:
    """What ``call`` of a class whose ``__init__`` is ``function`` passes for ``parameter``."""
    for kw in call.keywords:
        if kw.arg == parameter:
            return kw.value
    positional = [a.arg for a in (*function.args.posonlyargs, *function.args.args)][1:]
    if parameter not in positional:
        return None
    position = positional.index(parameter)
    if any(isinstance(a, ast.Starred) for a in call.args[: position + 1]):
        return None
    return call.args[position] if position < len(call.args) else None


def _parameters(function: Function) -> set[str]:
    args = function.args
    return {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}
