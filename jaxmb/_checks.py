"""Checks of the arguments a user passes to jaxmb's public functions.

Shapes and dtypes are static under ``jit``, so these checks run once, at trace time,
and cost nothing in the compiled program. Each failure names the function, the
argument, what was expected and what was received.
"""

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from ._errors import ModelError


def float_array(x, dtype=None, *, what: str = "a value") -> Array:
    """`x` as a JAX array of a floating dtype: `dtype` if given; otherwise a floating array
    keeps its dtype (float32 stays float32) and anything else becomes JAX's default float.
    Complex values raise a `jaxmb.ModelError` naming `what`: every cast to a real dtype
    would drop the imaginary part silently. Evaluated at once where `x` is concrete
    (`jax.ensure_compile_time_eval`): under an enclosing jit, `jnp.asarray` of a number is
    otherwise a tracer, and the build-time checks of a model element given it would be
    skipped."""
    with jax.ensure_compile_time_eval():
        x = jnp.asarray(x)
        if jnp.issubdtype(x.dtype, jnp.complexfloating):
            raise ModelError(f"{what} must be real, got dtype {x.dtype}.")
        if dtype is not None:
            x = x.astype(dtype)
        elif not jnp.issubdtype(x.dtype, jnp.floating):
            x = x.astype(float)
    return x


def _refuse_explicit_sharding(x, caller: str, name: str) -> None:
    """A ``ValueError`` for `x` typed with a mesh of ``Explicit`` axes (a batch sharded by
    explicit sharding, `jax.sharding.AxisType.Explicit`, the default of `jax.make_mesh`):
    jaxmb's programs (their lookups, solves and batching rules) do not carry sharding
    types, and JAX's errors from deep inside them do not say what to do. Inside
    `jax.shard_map` the axes are manual, and every call works."""
    mesh = getattr(getattr(jax.typeof(x), "sharding", None), "mesh", None)
    explicit = [n for n, t in zip(getattr(mesh, "axis_names", ()), getattr(mesh, "axis_types", ()))
                if t == jax.sharding.AxisType.Explicit]
    if explicit:
        raise ValueError(
            f"{caller}: {name} is typed with the explicit mesh axes {tuple(explicit)}; jaxmb's calls do not take "
            "arrays under explicit sharding (jax.sharding.AxisType.Explicit, the default of jax.make_mesh). Split "
            "a batch with jax.shard_map(jax.vmap(...), mesh=..., in_specs=..., out_specs=..., check_vma=False), "
            "or shard it over a mesh of AxisType.Auto axes (docs/how-to/batches.md, 'On a CPU: every core').")


def real_argument(x, caller: str, name: str, dtype=None) -> Array:
    """`x` as a JAX array of a floating dtype (`real_numbers`: text and complex numbers
    refused, integers and booleans promoted to `dtype`, default JAX's default float), named
    ``"{caller}: {name}"`` in the errors; arrays under explicit sharding refused."""
    x = real_numbers(x, f"{caller}: {name}", dtype)
    _refuse_explicit_sharding(x, caller, name)
    return x


def real_numbers(value, what: str, dtype=None) -> Array:
    """`value` as a float array (`float_array`, complex values refused naming `what`), and
    a ModelError ``"{what} must be numbers"`` for text or objects, which fail in JAX with a
    message that names no argument (NumPy reads the text ``"0 0"`` as a dtype's name and
    raises a SyntaxError)."""
    try:
        if isinstance(value, (str, bytes)):
            raise TypeError
        with jax.ensure_compile_time_eval():
            x = jnp.asarray(value)
    except (TypeError, ValueError):
        raise ModelError(f"{what} must be numbers, got {value!r:.80}.") from None
    return float_array(x, dtype, what=what)


def coordinate_vector(model, x, caller: str, name: str, dtype=None) -> Array:
    """`x` as a float array of shape ``(model.nq,)``, or a :class:`jaxmb.ModelError`
    naming `caller`, the argument `name`, the expected and the received shape.

    **Arguments:**

    - `model`: the model whose coordinates `x` holds values or rates of.
    - `x`: array-like, ``(nq,)``.
    - `caller`, `name`: the public function and its argument, for the message.
    - `dtype`: cast to this dtype (e.g. that of `q` for `qd`); default: keep a
      floating dtype, promote integers to JAX's default float.
    """
    x = real_argument(x, caller, name, dtype)
    if x.shape != (model.nq,):
        raise ModelError(
            f"{caller}: {name} must have shape ({model.nq},) for model {model.name!r} "
            f"(coordinates {model.coordinate_names}); got shape {x.shape}. "
            "For a batch of states use jax.vmap."
        )
    return x


def finite_coordinate_vector(model, x, caller: str, name: str, dtype=None, *, at_run_time: bool = True) -> Array:
    """:func:`coordinate_vector`, and finite: NaN or inf in `x` is an error naming
    `caller`, the argument `name` and (when the values are at hand) the coordinates.

    Called eagerly the values are checked at once (a ``ValueError``); under ``jit``,
    ``vmap`` or ``grad`` through ``eqx.error_if`` at run time (one reduction over `x`
    per call), unless `at_run_time` is False (`eager_finite_vector`).

    **Arguments:** as :func:`coordinate_vector`.
    """
    x = coordinate_vector(model, x, caller, name, dtype)
    if not (at_run_time or is_concrete(x)):
        return x
    return finite_entries(x, caller, name, model.coordinate_names, f"coordinates {{}} (indices {{}}) of model "
                          f"{model.name!r}")


def eager_finite_vector(model, x, caller: str, name: str, dtype=None) -> Array:
    """:func:`finite_coordinate_vector` where the values are at hand (an eager call), nothing
    added under ``jit``: the rigid-body functions run inside `jaxmb.simulate`'s right-hand
    side, whose steps may try a non-finite state that the step control then rejects (a run
    that ends non-finite reports ``RESULTS.nonfinite_state``)."""
    return finite_coordinate_vector(model, x, caller, name, dtype, at_run_time=False)


def nonfinite_rows(x) -> np.ndarray:
    """Indices of the rows (leading axis) of a concrete `x` that hold NaN or inf, in NumPy
    (jnp under an enclosing ``jit`` would trace even concrete values); none for a tracer."""
    if not is_concrete(x):
        return np.zeros(0, int)
    x = np.asarray(x)
    if not x.size:  # no rows (a motion file with a header only): none bad, the callers count the frames
        return np.zeros(0, int)
    return np.flatnonzero(~np.all(np.isfinite(x.reshape(x.shape[0], -1)), axis=1))


def entries_where(x: Array, ok: Callable, caller: str, name: str, words: str, describe: Callable) -> Array:
    """`x`, checked entry by entry by the predicate `ok` (elementwise, on NumPy or JAX
    arrays): eagerly a ``ValueError`` ``"{caller}: {name} must be {words}, got " +
    describe(bad)`` with `bad` the first 8 failing indices; under ``jit``, ``vmap`` or
    ``grad`` through ``eqx.error_if`` at run time (one reduction over `x`)."""
    if is_concrete(x):
        bad = np.flatnonzero(~np.asarray(ok(np.asarray(x))))
        if bad.size:
            raise ValueError(f"{caller}: {name} must be {words}, got {describe(bad[:8])}.")
        return x
    return eqx.error_if(x, ~jnp.all(ok(x)), f"{caller}: {name} must be {words}.")


def finite_entries(x: Array, caller: str, name: str, labels, where: str) -> Array:
    """`x`, checked finite entry by entry (`entries_where`; `labels` names them): the
    message ends ``"got NaN or inf at " + where`` with `where`'s two ``{}`` filled by the
    bad entries' labels and indices."""
    return entries_where(x, np.isfinite if is_concrete(x) else jnp.isfinite, caller, name, "finite",
                         lambda bad: "NaN or inf at " + where.format([labels[i] for i in bad], bad.tolist()))


def is_count(value, minimum: int) -> bool:
    """Whether `value` is an integer (Python's or NumPy's, not a bool) of at least `minimum`:
    what counts, orders and indices must be, checked rather than cast (``int()`` would cut
    2.7 to 2, and ``True`` is an int to Python)."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= minimum


def positive_count(value, caller: str, name: str) -> int:
    """`value` as an ``int`` >= 1 (a count of steps or iterations, `is_count`), else a
    ``ValueError`` naming it."""
    if not is_count(value, 1):
        raise ValueError(f"{caller}: {name} must be an integer >= 1, got {value!r}.")
    return int(value)


def finite_tolerance(value, caller: str, name: str, dtype) -> float:
    """A relative or absolute tolerance: a positive finite number that `dtype` can
    resolve (at least 10 machine epsilons), else a ``ValueError`` naming the argument;
    below float32's resolution the message names ``jax_enable_x64``."""
    try:
        v = float(value)
    except TypeError:
        return value  # a traced tolerance: checked by the solver itself
    if not np.isfinite(v) or v <= 0.0:
        raise ValueError(f"{caller}: {name} must be a positive finite number, got {value!r}.")
    if name == "rtol" and v >= 1.0:  # a relative error of 100 % or more: the step control accepts anything
        raise ValueError(f"{caller}: rtol must be below 1 (a relative error), got {value!r}.")
    eps = float(jnp.finfo(dtype).eps)
    if v < 10.0 * eps:
        hint = (" Switch on float64 with jax.config.update('jax_enable_x64', True) before creating "
                "arrays, or" if jnp.finfo(dtype).bits < 64 else "")
        raise ValueError(
            f"{caller}: {name}={v:g} is below what {jnp.dtype(dtype).name} can resolve "
            f"(machine epsilon {eps:.1e}).{hint} use {name} >= {10.0 * eps:.0e}."
        )
    return v


def flag(value, what: str) -> bool:
    """`value` as a bool: True or False (NumPy's and concrete JAX scalars of dtype bool
    too), else a ``TypeError`` naming `what`: ``bool("no")`` is True."""
    if isinstance(value, (bool, np.bool_)) or (
            getattr(value, "dtype", None) == bool and np.ndim(value) == 0 and is_concrete(value)):
        return bool(value)
    raise TypeError(f"{what} must be True or False, got {value!r}.")


def is_concrete(tree) -> bool:
    """Whether `tree` holds no tracer: its values are at hand to check (a model element built
    eagerly, or under jit from concrete parameters; not from traced ones)."""
    return not any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves(tree))


def violated(check, *values) -> bool:
    """Whether the build-time check ``check(*values)`` fails, evaluated in NumPy on the
    values (a jnp comparison under an enclosing jit is traced even on concrete arrays);
    False where a value is traced (an element built from traced parameters: nothing to
    check until run time). NaN fails every comparison, so a NaN parameter is refused."""
    return is_concrete(values) and not bool(np.all(check(*(np.asarray(v) for v in values))))


def finite(x, what: str) -> Array:
    """`x` as a float array, refused where its values are at hand and any is NaN or infinite
    (a ModelError ``"{what} must be finite, got ..."``); traced values pass."""
    x = float_array(x)
    if violated(np.isfinite, x):
        raise ModelError(f"{what} must be finite, got {np.asarray(x).tolist()}.")
    return x


def positive_values(what: str, **values) -> None:
    """A ModelError ``"{what}: {name} must be positive and finite, got ..."`` for the first of
    `values` (numbers or arrays, by argument name) whose values are at hand and not all
    positive and finite (NaN included); traced values pass (a model built from traced
    parameters, e.g. under ``jax.grad``)."""
    for name, value in values.items():
        if violated(lambda x: np.isfinite(x) & (x > 0.0), value):
            v = np.asarray(value)
            shown = v.item() if v.size == 1 else v.tolist()
            raise ModelError(f"{what}: {name} must be positive and finite, got {shown}.")
