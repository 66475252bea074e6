"""Moment arms about one coordinate over its range (`moment_arm_sweep`, what
`jaxmb moment-arms` plots): the muscles that can depend on the coordinate, in groups
compiled apart, chunks of states through each program."""

import collections
import concurrent.futures

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._checks import finite_coordinate_vector, flag, is_concrete, is_count
from .._eager import model_packing
from .._functions import AbstractJointFunction
from .._model import GROUND, Model
from ._moment_arms import moment_arms
from ._paths import muscle_lengths


def spans_coordinate(model: Model, muscle, k: int) -> bool:
    """Whether `muscle`'s length can depend on coordinate `k`, from the model's structure:
    a joint function inside its points (conditional, moving) reads ``q_k``, or a joint
    between its bodies (points' and wraps') does. The relative pose of two bodies depends
    only on the joints on the tree path between them, all of which belong to some body's
    path from the ground and not to every body's (conservative: True where unsure)."""
    functions = jax.tree.leaves(muscle.points, is_leaf=lambda x: isinstance(x, AbstractJointFunction))
    if any(isinstance(f, AbstractJointFunction) and k in f.coordinate_indices() for f in functions):
        return True
    if muscle.path is not None:
        return k in muscle.path.coordinate_indices()
    names = {p.body for p in muscle.points} | {w.body for w in muscle.wraps}
    paths = [set() if b == GROUND else {model.body_index(b), *model.ancestors(model.body_index(b))} for b in names]
    between = set().union(*paths) - set.intersection(*paths)
    return any(k in model.joints[i].function.coordinate_indices() for i in between)


def _sweep_row(model: Model, q, k: int, method: str):
    """Row `k` of ``R(q)``; by autodiff a single forward-mode direction ``-dL/dq_k``."""
    if method == "autodiff":
        e = jnp.zeros_like(q).at[k].set(1.0)
        return -jax.jvp(lambda x: muscle_lengths(model, x), (q,), (e,))[1]
    return moment_arms(model, q, method=method)[k]


def _sweep_chunk(skeleton, buffers, qs, k: int, method: str):
    # One state at a time (`lax.map`): the compiled program is one state's, whatever the
    # chunk; a vmap of the wrap iterations compiles to a program many times larger. The
    # model's arrays come in packed, as in an eager call (`jaxmb._eager.model_packing`): a
    # program compiled ahead of time takes its arguments through JAX's Python path, one
    # array at a time, and an OpenSim model has thousands.
    model = skeleton.unpack(buffers)
    return jax.lax.map(lambda q: _sweep_row(model, q, k, method), qs)


# The sweep's programs, by whether XLA optimizes them fully (see `moment_arm_sweep`).
_SWEEP_CHUNK = {True: jax.jit(_sweep_chunk, static_argnums=(0, 3, 4)),
                False: jax.jit(_sweep_chunk, static_argnums=(0, 3, 4),
                               compiler_options={"xla_backend_optimization_level": 0})}
# Sweeps of at most this many wrap computations (states x PathWraps of the muscles
# computed) compile with XLA's backend optimization off (see `moment_arm_sweep`).
_SWEEP_QUICK_COMPILE = 4096
# Programs of a sweep compiled at once (each holds its own compile's memory).
_SWEEP_THREADS = 2
# The sweeps' compiled programs (compiled ahead of time, so outside `jax.jit`'s own cache),
# by the structure of their model and what they compute; the most recent few are kept.
_SWEEP_PROGRAMS: collections.OrderedDict = collections.OrderedDict()
_SWEEP_PROGRAMS_KEPT = 16


def _sweep_groups(muscles) -> list[list[int]]:
    """The muscles of a sweep in groups that compile to programs of their own, so that
    one program compiles while the next is traced and two compile at once. A program
    holds each wrap algorithm once, whatever the number of muscles that run it
    (`Layout.kinds`), and the multi-wrap passes hold every algorithm of the muscles in
    them: the muscles with several wraps stay together (split, each part would hold the
    passes and most algorithms again), and those with one wrap group by its class (that
    algorithm alone, no passes); muscles without wraps join the last group. The group
    with several wraps comes first: it is the largest program."""
    multi = [i for i, muscle in enumerate(muscles) if len(muscle.wraps) > 1]
    by_class: dict = {}
    for i, muscle in enumerate(muscles):
        if len(muscle.wraps) == 1:
            by_class.setdefault(type(muscle.wraps[0]).__name__, []).append(i)
    plain = [i for i, muscle in enumerate(muscles) if not muscle.wraps]
    groups = ([multi] if multi else []) + [by_class[name] for name in sorted(by_class)]
    if not groups:
        return [plain]
    groups[-1] = sorted(groups[-1] + plain)
    return groups


def _sweep_program(pool, run, model: Model, qs, k: int, method: str):
    """The compiled program of `run` (a `_SWEEP_CHUNK` entry) for `model` and chunks like
    `qs`: ``(future of the program, the model's arrays packed, its key in
    _SWEEP_PROGRAMS)``. A kept program is reused; otherwise the program is traced here
    and compiled on `pool` (the caller keeps it once compiled)."""
    packing = model_packing(model)
    if packing is None:  # NumPy arrays in the model: a sweep reads them once, as JAX arrays
        packing = model_packing(jax.tree.map(lambda x: jnp.asarray(x) if eqx.is_array(x) else x, model))
    if packing is None:
        raise ValueError(f"moment_arm_sweep: model {model.name!r} cannot be handed to a compiled sweep: its arrays "
                         "lie on several devices, or a static field is unhashable.")
    buffers = packing.buffers
    key = (run, packing.skeleton, tuple((x.shape, x.dtype) for x in buffers), qs.shape, qs.dtype, k, method)
    if key in _SWEEP_PROGRAMS:
        _SWEEP_PROGRAMS.move_to_end(key)
        ready = concurrent.futures.Future()
        ready.set_result(_SWEEP_PROGRAMS[key])
        return ready, buffers, key
    return pool.submit(run.lower(packing.skeleton, buffers, qs, k, method).compile), buffers, key


def moment_arm_sweep(model: Model, coordinate_name: str, n: int = 181, q0=None, method: str = "closed_form",
                     chunk: int = 16, progress=None, optimize: bool | None = None):
    """Moment arms about one coordinate while it sweeps its range (others at `q0`).

    The muscles are computed in a few groups, each by a program of its own compiled for
    this sweep (`_sweep_groups`: the muscles with several wraps, then those with one wrap
    of each class), two programs compiling at a time on threads while the next is
    traced; the states go `chunk` at a time through each program, so that `progress` can
    report between chunks. The programs are kept: a sweep of another model of the same
    structure (other values), or the same sweep again, compiles nothing.

    **Arguments:**

    - `model`: a model with muscles.
    - `coordinate_name`: the coordinate that sweeps its range (an unbounded range sweeps ±π).
    - `n`: number of values.
    - `q0`: `(nq,)` the other coordinates, rad or m (default `model.q_default`).
    - `method`: `"closed_form"` (row k of `moment_arms`, Ehsani 2016, Eq. 195) or
      `"autodiff"` (``-dL/dq_k``, one forward-mode direction: the smaller program to
      compile when only this row is wanted), or `"frozen_path"` (OpenSim's
      computeMomentArm, row k of ``moment_arms(..., method="frozen_path")``).
    - `chunk`: states per call of the compiled program, >= 1.
    - `progress`: called as ``progress(done, n)`` after each chunk of each group (`done`:
      the share of the work done, in states, rising to `n`), or None.
    - `optimize`: whether XLA's backend optimizes the compiled programs (True), or
      compiles them at optimization level 0 (False), which compiles in about half the time
      and runs a few times slower per state. None (default): False where the sweep's
      cost is mostly the compilation (the programs are compiled per coordinate, each
      keeping only the muscles that can depend on it): at most 4096 wrap computations,
      states times the PathWraps of those muscles (arm26's elbow, a model without wraps);
      True for more (MoBL-ARMS's elbow: 22 muscles, 49 PathWraps).

    **Returns:**

    `(values (n,), moment arms (n, n_muscles))`: the row of R for that coordinate; exact
    zeros for the muscles whose length cannot depend on it (no joint between their bodies,
    no joint function in their points reads it), which are not computed.

    **Raises:**

    ``ValueError`` for an unknown method, `n` or `chunk` below 1, a model with traced
    arrays (the sweep runs outside ``jit``, ``grad`` and ``vmap``); [`jaxmb.ModelError`][jaxmb.ModelError]
    for an unknown coordinate or a `q0` of the wrong shape or not finite.
    """
    if method not in ("closed_form", "autodiff", "frozen_path"):
        raise ValueError(f"moment_arm_sweep: method must be 'closed_form', 'autodiff' or 'frozen_path', "
                         f"got {method!r}.")
    if not all(is_count(x, 1) for x in (n, chunk)):
        raise ValueError(f"moment_arm_sweep: n (the number of values) and chunk must be integers >= 1, got "
                         f"n={n!r}, chunk={chunk!r}.")
    if not is_concrete(jax.tree.leaves(model)):
        raise ValueError(f"moment_arm_sweep: model {model.name!r} has traced arrays: the sweep runs its own compiled "
                         "programs from Python, so it is called outside jax.jit, jax.grad and jax.vmap; under a "
                         "transformation take rows of jaxmb.moment_arms at the states instead.")
    k = model.coordinate_index(coordinate_name)
    lo, hi = float(model.q_lower[k]), float(model.q_upper[k])
    if not np.isfinite(lo):
        lo = -np.pi
    if not np.isfinite(hi):
        hi = np.pi
    if progress is not None and not callable(progress):  # else a TypeError after the first compile
        raise TypeError(f"moment_arm_sweep: progress must be None or a callable progress(done, n), got {progress!r}.")
    if optimize is not None:
        optimize = flag(optimize, "moment_arm_sweep: optimize")
    values = jnp.linspace(lo, hi, n)
    base = model.q_default if q0 is None else finite_coordinate_vector(model, q0, "moment_arm_sweep", "q0")
    qs = jnp.tile(base, (n, 1)).at[:, k].set(values)
    # Muscles whose length cannot depend on q_k (all their bodies on one side of the
    # coordinate's joints) have a zero row and are not computed: the compiled program
    # holds the others only (a shoulder muscle's wraps, for an elbow sweep).
    keep = [i for i, muscle in enumerate(model.muscles) if spans_coordinate(model, muscle, k)]
    out = jnp.zeros((n, len(model.muscles)), qs.dtype)
    if not keep:
        if progress is not None:
            progress(n, n)
        return values, out
    chunk = min(chunk, n)
    m = -(-n // chunk)
    # The last chunk is padded with the final state (its rows are dropped).
    qs = jnp.concatenate([qs, jnp.tile(qs[-1:], (m * chunk - n, 1))])
    if optimize is None:
        optimize = n * sum(len(model.muscles[i].wraps) for i in keep) > _SWEEP_QUICK_COMPILE
    # One program per group of muscles (`_sweep_groups`), traced here one after the other
    # and compiled on threads (XLA's compiler releases the GIL): one group's compile
    # overlaps the next one's tracing and another's compile; each group's states run as
    # soon as its program is ready.
    groups = [[keep[j] for j in g] for g in _sweep_groups([model.muscles[i] for i in keep])]
    work, done = m * len(groups), 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=min(len(groups), _SWEEP_THREADS)) as pool:
        programs = {}
        for g in groups:
            sub = eqx.tree_at(lambda md: md.muscles, model, tuple(model.muscles[i] for i in g))
            ready, flat, key = _sweep_program(pool, _SWEEP_CHUNK[optimize], sub, qs[:chunk], k, method)
            programs[ready] = (g, flat, key)
        for ready in concurrent.futures.as_completed(programs):
            (g, flat, key), compiled = programs[ready], ready.result()
            _SWEEP_PROGRAMS[key] = compiled
            while len(_SWEEP_PROGRAMS) > _SWEEP_PROGRAMS_KEPT:
                _SWEEP_PROGRAMS.popitem(last=False)
            rows = []
            for i in range(m):
                rows.append(compiled(flat, qs[i * chunk:(i + 1) * chunk]))
                done += 1
                if progress is not None:
                    rows[-1].block_until_ready()
                    progress(min(n, -(-done * n // work)), n)
            out = out.at[:, np.asarray(g)].set(jnp.concatenate(rows)[:n])
    return values, out
