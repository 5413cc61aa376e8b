"""Safe arithmetic over named scene quantities, for task configs a user can edit.

A reference plan in a task config may write ``dx: "carton.x - ee.x - 0.06"``; names are looked up in a flat
mapping such as ``{"carton.x": 0.55, "ee.x": 0.40}``. Only numbers, names, + - * /, unary minus,
parentheses and the functions abs, min, max, sqrt, atan2 are allowed.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Mapping

from simpact.core.errors import SimpactError

__all__ = ["ExpressionError", "evaluate"]


class ExpressionError(SimpactError, ValueError):
    """An expression that is not allowed or names an unknown quantity."""


_BINARY: dict[type, Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}
_FUNCTIONS: dict[str, Callable[..., float]] = {
    "abs": abs,
    "min": min,
    "max": max,
    "sqrt": math.sqrt,
    "atan2": math.atan2,
}


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return None if head is None else f"{head}.{node.attr}"
    return None


def evaluate(expression: str | float | int, names: Mapping[str, float]) -> float:
    """Value of ``expression`` (a number passes through) with ``names`` bound."""
    if isinstance(expression, (int, float)) and not isinstance(expression, bool):
        return float(expression)
    if not isinstance(expression, str):
        raise ExpressionError(f"expected a number or an expression string, got {expression!r}")
    try:
        tree = ast.parse(expression, mode="eval").body
    except SyntaxError as exc:
        raise ExpressionError(f"cannot parse {expression!r}: {exc.msg}") from None

    def walk(node: ast.AST) -> float:
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return float(node.value)
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            return _BINARY[type(node.op)](walk(node.left), walk(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            value = walk(node.operand)
            return -value if isinstance(node.op, ast.USub) else value
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS:
            return float(_FUNCTIONS[node.func.id](*(walk(a) for a in node.args)))
        name = _dotted(node)
        if name is not None:
            if name not in names:
                raise ExpressionError(f"unknown name '{name}' in {expression!r}; known: {sorted(names)}")
            return float(names[name])
        raise ExpressionError(f"not allowed in {expression!r}: {ast.dump(node)[:60]}")

    return walk(tree)
