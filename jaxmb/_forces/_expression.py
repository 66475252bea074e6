"""OpenSim's ExpressionBasedCoordinateForce, for expressions of a small safe grammar.

The expression (OpenSim evaluates it with Lepton) is parsed here into a tree of tuples
(static, hashable) and evaluated with ``jax.numpy``:

    expr  := term (('+' | '-') term)*
    term  := unary (('*' | '/') unary)*
    unary := ('-' | '+') unary | power
    power := atom ('^' unary)?
    atom  := number | 'q' | 'qdot' | ('sin' | 'cos' | 'exp') '(' expr ')' | '(' expr ')'

so that ``-q^2`` is ``-(q²)`` and ``2^3^2`` is ``2^9``, as in Lepton. Anything else
(other names and functions, comparisons, ``step``, ...) raises [`jaxmb.ModelError`][jaxmb.ModelError].
"""

import re

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._errors import ModelError
from .._functions import AbstractJointFunction
from ._base import AbstractForce, check_coordinate_force, coordinate_terms

FUNCTIONS = {"sin": jnp.sin, "cos": jnp.cos, "exp": jnp.exp}
VARIABLES = ("q", "qdot")
_TOKEN = re.compile(r"\s*(?:(\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)|([A-Za-z_]\w*)|(\S))")
_GRAMMAR = "numbers, q, qdot, + - * / ^, parentheses and sin, cos, exp"


class _Parser:
    def __init__(self, text: str, owner: str):
        self.text, self.owner = text, owner
        self.tokens = []  # (kind, value, position)
        pos = 0
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None:  # trailing blanks
                break
            if m.group(1):
                self.tokens.append(("num", float(m.group(1)), m.start(1)))
            elif m.group(2):
                self.tokens.append(("name", m.group(2), m.start(2)))
            elif m.group(3):
                self.tokens.append(("op", m.group(3), m.start(3)))
            pos = m.end()
        self.i = 0

    def fail(self, what: str, at: int | None = None):
        at = len(self.text) if at is None else at
        raise ModelError(f"{self.owner}: cannot read the expression {self.text!r} at character {at + 1}: "
                         f"{what} (jaxmb reads {_GRAMMAR}).")

    def peek(self):
        return self.tokens[self.i] if self.i < len(self.tokens) else (None, None, len(self.text))

    def take(self):
        tok = self.peek()
        self.i += 1
        return tok

    def expect(self, op):
        kind, value, at = self.take()
        if (kind, value) != ("op", op):
            self.fail(f"expected {op!r}, found {value!r}" if kind else f"expected {op!r} at the end", at)

    def parse(self):
        if not self.tokens:
            self.fail("the expression is empty", 0)
        tree = self.expr()
        kind, value, at = self.peek()
        if kind is not None:
            self.fail(f"unexpected {value!r}", at)
        return tree

    def expr(self):
        tree = self.term()
        while self.peek()[:2] in (("op", "+"), ("op", "-")):
            tree = (self.take()[1], tree, self.term())
        return tree

    def term(self):
        tree = self.unary()
        while self.peek()[:2] in (("op", "*"), ("op", "/")):
            tree = (self.take()[1], tree, self.unary())
        return tree

    def unary(self):
        if self.peek()[:2] in (("op", "-"), ("op", "+")):
            op = self.take()[1]
            inner = self.unary()
            return ("neg", inner) if op == "-" else inner
        return self.power()

    def power(self):
        base = self.atom()
        if self.peek()[:2] == ("op", "^"):
            self.take()
            return ("^", base, self.unary())
        return base

    def atom(self):
        kind, value, at = self.take()
        if kind == "num":
            return ("num", value)
        if kind == "name":
            if value in VARIABLES:
                return ("var", value)
            if value in FUNCTIONS:
                self.expect("(")
                inner = self.expr()
                self.expect(")")
                return ("call", value, inner)
            self.fail(f"unknown name {value!r}", at)
        if (kind, value) == ("op", "("):
            inner = self.expr()
            self.expect(")")
            return inner
        self.fail(f"unexpected {value!r}" if kind else "the expression ends too early", at)


def parse_expression(text: str, owner: str = "expression") -> tuple:
    """The tree (nested tuples) of `text` in the grammar of this module; `owner` names the
    element in the error message."""
    return _Parser(str(text), owner).parse()


def evaluate_expression(tree: tuple, q, qdot):
    """The value of a parsed expression at ``q`` and ``qdot``."""
    kind = tree[0]
    if kind == "num":
        return jnp.asarray(tree[1], jnp.result_type(q))
    if kind == "var":
        return q if tree[1] == "q" else qdot
    if kind == "neg":
        return -evaluate_expression(tree[1], q, qdot)
    if kind == "call":
        return FUNCTIONS[tree[1]](evaluate_expression(tree[2], q, qdot))
    a = evaluate_expression(tree[1], q, qdot)
    if kind == "^" and tree[2][0] == "num" and float(tree[2][1]).is_integer():
        return a ** int(tree[2][1])  # an integer power: defined (and differentiable) for a < 0
    b = evaluate_expression(tree[2], q, qdot)
    return {"+": jnp.add, "-": jnp.subtract, "*": jnp.multiply, "/": jnp.divide, "^": jnp.power}[kind](a, b)


class ExpressionBasedCoordinateForce(AbstractForce):
    """A generalized force ``Q_c = e(q_c, q_c')`` on one coordinate given by an expression of
    the coordinate's value ``q`` and rate ``qdot`` (OpenSim's ExpressionBasedCoordinateForce;
    the grammar is this module's).

    **Arguments:**

    - `name`: the element's name.
    - `coordinate`: the coordinate it acts on.
    - `expression`: e.g. ``"-10*q - 0.5*qdot"`` (N m or N; q in rad or m).
    - `function`: the coordinate as a joint function of ``q`` where it is not an
      independent coordinate (coupled or locked); ``Q = ∇x(q) e(x, x')``.
    """

    name: str = eqx.field(static=True)
    coordinate: str = eqx.field(static=True)
    function: AbstractJointFunction | None
    expression: str = eqx.field(static=True)
    tree: tuple = eqx.field(static=True)

    def __init__(self, name: str, coordinate: str, expression: str, function: AbstractJointFunction | None = None):
        self.name, self.coordinate, self.expression = str(name), str(coordinate), str(expression)
        self.function = function
        self.tree = parse_expression(self.expression, f"ExpressionBasedCoordinateForce {self.name!r}")

    def check_model(self, model):
        check_coordinate_force(self, model)

    def value(self, x, xd) -> Float[Array, ""]:
        """The expression at ``q = x`` and ``qdot = xd``."""
        return evaluate_expression(self.tree, x, xd)

    def generalized_force(self, model, q, qd, control=None):
        x, xd, grad = coordinate_terms(self, model, q, qd)
        return grad * self.value(x, xd)
