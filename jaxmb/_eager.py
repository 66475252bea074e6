"""Public calls that run compiled when called outside `jit`.

Outside `jit`, JAX runs a function operation by operation, tracing it again on every
call (docs/dev/performance.md has what that cost jaxmb's kinematics, energies and
muscle forces). `compiled_when_eager` gives such a call's
body one program per model structure and argument shapes (``eqx.filter_jit``, cached
on the static parts), and leaves it as it is where its arguments are traced: inside a
user's `jit`, `vmap` or `grad`, and inside jaxmb's own programs, which call these
functions as building blocks: their programs are then the ones they were before the
wrapper existed, with no nested `jit` in them. Every public call on a model and a
state (kinematics, dynamics, muscle geometry and forces, the force set) goes through
this one wrapper.
"""

import functools
from collections.abc import Callable

import equinox as eqx
import jax


def _traced(args, kwargs) -> bool:
    # The state arguments come after the model: look at them first, so that the model's
    # many arrays are flattened only where the state is concrete.
    for x in (*reversed(args), *kwargs.values()):
        if any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(x)):
            return True
    return False


def compiled_when_eager(fn: Callable | None = None, *, unless: Callable[..., bool] | None = None) -> Callable:
    """Decorate ``fn(model, *arrays, **static)``: called on concrete arrays it runs as one
    compiled program (``eqx.filter_jit``); called on traced ones, or where ``unless(*args,
    **kwargs)`` holds, it runs as it is. Its callers convert and check their arguments
    first (a Python number or list would be a static argument and compile per value)."""
    if fn is None:
        return functools.partial(compiled_when_eager, unless=unless)
    compiled = eqx.filter_jit(fn)

    @functools.wraps(fn)
    def call(*args, **kwargs):
        if _traced(args, kwargs) or (unless is not None and unless(*args, **kwargs)):
            return fn(*args, **kwargs)
        return compiled(*args, **kwargs)

    return call
