"""Public calls compiled once per model structure, called eagerly or inside a trace.

Outside `jit`, JAX runs a function operation by operation, tracing it again on every
call (docs/dev/performance.md has what that cost jaxmb's kinematics, energies and
muscle forces). `compiled_per_model` gives such a call's body one program per model
structure and argument shapes (``eqx.filter_jit``, cached on the static parts). Inside
a trace (a user's `jit`, `vmap` or `grad`, or jaxmb's own programs, which call these
functions as building blocks) the same nested `jit` is inlined by XLA, and JAX reuses
its traced body across the enclosing traces of a model: without it, every `jit`,
`jacfwd` or `vmap` of a muscle model traced the whole geometry again
(docs/dev/performance.md). Every public call on a model and a state (kinematics, dynamics,
muscle geometry and forces, the force set) goes through this one wrapper.
"""

import functools
from collections.abc import Callable

import equinox as eqx


def compiled_per_model(fn: Callable | None = None, *, unless: Callable[..., bool] | None = None) -> Callable:
    """Decorate ``fn(model, *arrays, **static)``: it runs as one compiled program
    (``eqx.filter_jit``; nested, and so inlined, where its arguments are traced), or as
    it is where ``unless(*args, **kwargs)`` holds. Its callers convert and check their arguments
    first (a Python number or list would be a static argument and compile per value)."""
    if fn is None:
        return functools.partial(compiled_per_model, unless=unless)
    compiled = eqx.filter_jit(fn)

    @functools.wraps(fn)
    def call(*args, **kwargs):
        if unless is not None and unless(*args, **kwargs):
            return fn(*args, **kwargs)
        return compiled(*args, **kwargs)

    return call
