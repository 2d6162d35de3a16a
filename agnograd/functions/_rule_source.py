"""A gradient rule's expression, for code generated around it.

The rows declare most gradient rules as one expression, a lambda such as
``lambda xp, x, y, g: g * conjugate(xp, xp.cos(x))`` or a function of one
``return`` (the operators'). Forward mode's fast path
(agnograd.core._fast) computes the tangent of a real input by calling the rule with
the tangent for the gradient: two Python calls (the rule's and ``conjugate``'s, which
gives a real array itself) cost more than the arithmetic on a small array.
:func:`real_expression` gives the rule's expression as source, with ``conjugate``
dropped, so that the fast path can write it in; the fast path still calls the rule
wherever the class's rule is no longer this one.
"""

from __future__ import annotations

import ast
import copy
import functools
import inspect
import types
from typing import Any

from agnograd.functions import _core  # (which uses this module as it loads)


@functools.cache
def _module_tree(filename: str) -> ast.Module:
    with open(filename, encoding="utf-8") as f:
        return ast.parse(f.read(), filename)


def _declared(rule: Any) -> tuple[list[str], ast.expr] | None:
    """The parameters and the expression of the rule ``rule``: a lambda, or a
    function whose body is one ``return``, found in its source file; None for
    anything else, or where the source is not the code that runs (an edited file)."""
    code = getattr(rule, "__code__", None)
    if code is None or code.co_freevars:
        return None
    try:
        tree = _module_tree(inspect.getsourcefile(rule) or "")
    except (OSError, TypeError, SyntaxError):
        return None
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) != code.co_firstlineno:
            continue
        expression = _returned(node)
        if expression is None:
            continue
        assert isinstance(node, ast.Lambda | ast.FunctionDef)
        if isinstance(node, ast.Lambda):
            compiled = compile(ast.Expression(node), code.co_filename, "eval")
        else:
            compiled = compile(ast.Module([node], []), code.co_filename, "exec")
        same = next(c for c in compiled.co_consts if isinstance(c, types.CodeType))
        if (same.co_code, same.co_consts, same.co_names, same.co_varnames) == (
            code.co_code,
            code.co_consts,
            code.co_names,
            code.co_varnames,
        ):
            return [a.arg for a in node.args.args], expression
    return None


def _returned(node: ast.AST) -> ast.expr | None:
    """The expression that the lambda ``node`` returns, or the function ``node``
    whose body is one ``return`` (after its docstring); None for anything else."""
    if isinstance(node, ast.Lambda):
        return node.body
    if not isinstance(node, ast.FunctionDef) or node.decorator_list:
        return None
    body = node.body
    if isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # its docstring
    if len(body) == 1 and isinstance(body[0], ast.Return):
        return body[0].value
    return None


class _Rewrite(ast.NodeTransformer):
    """The rule's body with its parameters renamed and ``conjugate(xp, a)`` as ``a``,
    where ``a`` does not read the gradient (a real input's function: real); refuses
    (ValueError) any other name, a complex constant or a nested scope."""

    def __init__(self, names: dict[str, str], xp: str, gradient: str) -> None:
        self.names, self.xp, self.gradient = names, xp, gradient

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id not in self.names:
            raise ValueError(node.id)
        return ast.copy_location(ast.Name(self.names[node.id], ast.Load()), node)

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        if not isinstance(node.value, int | float):  # (bool is an int)
            raise ValueError(node.value)
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        f = node.func
        if not (isinstance(f, ast.Name) and f.id == "conjugate"):
            return self.generic_visit(node)
        if len(node.args) != 2 or node.keywords:
            raise ValueError("conjugate")
        xp, a = node.args
        if not (isinstance(xp, ast.Name) and xp.id == self.xp) or any(
            isinstance(n, ast.Name) and n.id == self.gradient for n in ast.walk(a)
        ):
            raise ValueError("conjugate")
        return self.visit(a)

    def generic_visit(self, node: ast.AST) -> ast.AST:
        if isinstance(node, ast.Lambda | ast.comprehension | ast.NamedExpr):
            raise ValueError(type(node).__name__)
        return super().generic_visit(node)


def real_expression(rule: Any, *arguments: str) -> str | None:
    """The source of ``rule(*arguments)`` for real arrays, without a call: its
    lambda's expression with its parameters replaced by ``arguments`` (source text,
    the last the gradient) and ``conjugate`` dropped. None where the rule is not one
    expression (a lambda, or a function of one ``return``) of its parameters, the
    namespace's functions, ``conjugate`` and real numbers alone.

    Examples
    --------
    >>> from agnograd.functions._rule_source import real_expression
    >>> import agnograd.functions as F
    >>> real_expression(F.sin.node.rule, "xp", "data", "y", "t")
    '(t * xp.cos(data))'
    >>> real_expression(lambda xp, x, y, g: g * abs(x), "xp", "data", "y", "t") is None
    True
    """
    declared = _declared(rule)
    if declared is None or rule.__globals__.get("conjugate") not in (None, _core.conjugate):
        return None
    params, expression = declared
    if len(params) != len(arguments):
        return None
    names = dict(zip(params, arguments, strict=True))
    try:
        body = _Rewrite(names, params[0], params[-1]).visit(copy.deepcopy(expression))
    except ValueError:
        return None
    return f"({ast.unparse(body)})"


def written_in(ref: str, rule: Any, name: str, arguments: str) -> str:
    """The source of the call ``ref(arguments)`` of a rule read as the code runs
    (``Node.rule``), on real arrays (``arguments``: names, the gradient last):
    :func:`real_expression` of ``rule`` while ``ref`` is ``rule`` (bound to ``name``
    where the code runs), the call otherwise (a rule replaced on its class).

    Examples
    --------
    >>> from agnograd.functions._rule_source import written_in
    >>> import agnograd.functions as F
    >>> written_in("Node.rule", F.exp.node.rule, "_rule", "xp, data, y, t")
    '((t * y) if Node.rule is _rule else Node.rule(xp, data, y, t))'
    """
    call = f"{ref}({arguments})"
    expression = real_expression(rule, *[a.strip() for a in arguments.split(",")])
    return call if expression is None else f"({expression} if {ref} is {name} else {call})"
