"""What the handler modules of both imported τ-bench domains share: the tools both
environments have (``calculate``, ``think``, ``transfer_to_human_agents``) and the
small helpers their other tools use.

The handler modules written next to an imported ``sandtable.yaml``
(``tau_retail_handlers.py``, ``tau_airline_handlers.py``) import from here, so a
fix to a shared tool reaches every imported domain with the package. Everything here
follows the handler contract (docs/spec.md, "Python handlers"): a handler is called
as ``handler(args, world, ctx)`` and returns the tool's result or raises
:class:`pytest_sandtable.ToolError`.

τ-bench's tools return ``"Error: ..."`` strings that the agent reads as the tool's
output; here those become tool errors carrying the same text after ``Error: ``
(404 for a record that does not exist, 409 for a record in the wrong state, 400 for
anything else), so that our call log, rules and ``called`` expectations know the call
failed while the agent still reads τ-bench's words.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from typing import Any

from .. import HandlerContext, ToolError, WorldHandle

__all__ = [
    "calculate",
    "copy_row",
    "key_error",
    "public_user",
    "require_row",
    "think",
    "transfer_to_human_agents",
]

# τ-bench's users have no id field: their id is the key of users.json. The imported
# users table keeps it as this field, which τ-bench's tools never show.
USER_KEY = "user_id"


def copy_row(world: WorldHandle, table: str, key: Any) -> dict[str, Any] | None:
    """A row to change (or None). The handlers change nested lists and mappings in
    place the way τ-bench's tools do; the handle's rows are deep copies, so that never
    reaches the world until the handler writes it back."""
    return world.get(table, key)


def key_error(key: Any) -> ToolError:
    """What τ-bench's agent reads when a tool indexes a record that is not there and
    Python raises ``KeyError`` (the environment turns it into ``Error: 'key'``)."""
    return ToolError(400, str(KeyError(key)))


def require_row(world: WorldHandle, table: str, key: Any) -> dict[str, Any]:
    """A deep copy of a row τ-bench's tool indexes without checking."""
    row = copy_row(world, table, key)
    if row is None:
        raise key_error(key)
    return row


def public_user(row: dict[str, Any]) -> dict[str, Any]:
    """A user as τ-bench shows it: without the key field the import added."""
    return {k: v for k, v in row.items() if k != USER_KEY}


# -- calculate: τ-bench evaluates the expression with eval(); this reads it with ast ----

_CALC_CHARS = frozenset("0123456789+-*/(). ")
_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}
# eval("9**9**9") would run for hours in τ-bench; an exponent this large is no fare
_MAX_EXPONENT = 10_000


class _CalcError(Exception):
    pass


def _evaluate(node: ast.AST) -> Any:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_evaluate(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > _MAX_EXPONENT:
            raise _CalcError("exponent too large")
        return _BINARY[type(node.op)](left, right)
    # digits, operators, dots and parentheses parse to nothing else but, say, `1 .real`
    raise _CalcError("unsupported expression")


def calculate(args: dict[str, Any], world: WorldHandle, ctx: HandlerContext) -> str:
    """``calculate``: the expression's value rounded to 2 places, as text, like τ-bench;
    read with :mod:`ast` (numbers and + - * / ** // only), never evaluated as code.
    The errors are τ-bench's (a syntax error, a division by zero), except for the few
    expressions of its characters that parse to something else than arithmetic (``()``,
    ``(1)(2)``): τ-bench shows Python's TypeError, this ``unsupported expression``."""
    expression = str(args["expression"])
    if not all(char in _CALC_CHARS for char in expression):
        raise ToolError(400, "invalid characters in expression")
    try:
        # eval() strips leading and trailing spaces from a string; ast.parse does not
        tree = ast.parse(expression.strip(" \t"), filename="<string>", mode="eval")
        return str(round(float(_evaluate(tree)), 2))
    except (SyntaxError, ArithmeticError, ValueError, _CalcError) as e:
        raise ToolError(400, str(e)) from None


def think(args: dict[str, Any], world: WorldHandle, ctx: HandlerContext) -> str:
    """``think``: changes nothing and returns an empty string."""
    return ""


def transfer_to_human_agents(args: dict[str, Any], world: WorldHandle, ctx: HandlerContext) -> str:
    """``transfer_to_human_agents``: a handoff tool (the conversation ends after it)."""
    return "Transfer successful"
