"""The boundary a user touches: arguments of the wrong shape or dtype get an error that
names the function, the argument, the expected and the received shape."""

import gc

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmb as mb
from assertions import assert_tree_allclose
from models_for_tests import muscled_elbow

MODEL = mb.models.double_pendulum()  # nq = 2


def _calls(q, qd, qdd, tau):
    m = MODEL
    return {
        "mass_matrix": lambda: mb.mass_matrix(m, q),
        "gravity_forces": lambda: mb.gravity_forces(m, q),
        "velocity_forces": lambda: mb.velocity_forces(m, q, qd),
        "bias_forces": lambda: mb.bias_forces(m, q, qd),
        "generalized_forces": lambda: mb.generalized_forces(m, q, [mb.PointForce("rod2", (0.0, -0.5, 0.0), (1.0, 0.0, 0.0))]),
        "forward_dynamics": lambda: mb.forward_dynamics(m, q, qd, tau),
        "inverse_dynamics": lambda: mb.inverse_dynamics(m, q, qd, qdd),
        "inverse_dynamics_terms": lambda: mb.inverse_dynamics_terms(m, q, qd, qdd),
        "kinetic_energy": lambda: mb.kinetic_energy(m, q, qd),
        "potential_energy": lambda: mb.potential_energy(m, q),
        "body_transforms": lambda: mb.body_transforms(m, q),
        "point_position": lambda: mb.point_position(m, q, 0),
        "point_velocity": lambda: mb.point_velocity(m, q, qd, 0),
        "point_acceleration": lambda: mb.point_acceleration(m, q, qd, qdd, 0),
        "point_jacobian": lambda: mb.point_jacobian(m, q, 0),
        "body_angular_velocities": lambda: mb.body_angular_velocities(m, q, qd),
        "angular_jacobians": lambda: mb.angular_jacobians(m, q),
        "joint_values": lambda: mb.joint_values(m, q),
        "joint_gradients": lambda: mb.joint_gradients(m, q),
        "joint_hessians": lambda: mb.joint_hessians(m, q),
        "joint_rates": lambda: mb.joint_rates(m, q, qd, qdd),
    }


GOOD = jnp.array([0.3, -0.2])
BAD = jnp.array([0.3, -0.2, 0.1])
NAMES = list(_calls(GOOD, GOOD, GOOD, GOOD))


@pytest.mark.parametrize("name", NAMES)
def test_wrong_length_q_names_the_argument_and_shapes(name):
    with pytest.raises(mb.ModelError, match=rf"{name}: q must have shape \(2,\).*got shape \(3,\)"):
        _calls(BAD, GOOD, GOOD, GOOD)[name]()


@pytest.mark.parametrize("arg, fn", [("qd", "forward_dynamics"), ("qdd", "inverse_dynamics"),
                                     ("tau", "forward_dynamics"), ("qd", "joint_rates"), ("qdd", "joint_rates")])
def test_wrong_length_rates_name_the_argument(arg, fn):
    args = dict(q=GOOD, qd=GOOD, qdd=GOOD, tau=GOOD)
    args[arg] = BAD
    with pytest.raises(mb.ModelError, match=rf"{fn}: {arg} must have shape \(2,\).*got shape \(3,\)"):
        _calls(**args)[fn]()


@pytest.mark.parametrize("arg, fn", [("q", "mass_matrix"), ("qd", "forward_dynamics"), ("qdd", "inverse_dynamics"),
                                     ("tau", "forward_dynamics"), ("qd", "joint_rates")])
def test_complex_arguments_are_refused_not_cut_to_their_real_part(arg, fn):
    """The rates were cast to q's dtype before the check, so a complex qd, qdd or tau lost
    its imaginary part with only NumPy's ComplexWarning."""
    args = dict(q=GOOD, qd=GOOD, qdd=GOOD, tau=GOOD)
    args[arg] = GOOD.astype(jnp.complex128)
    with pytest.raises(mb.ModelError, match=rf"{fn}: {arg} must be real, got dtype complex"):
        _calls(**args)[fn]()


@pytest.mark.parametrize("name", NAMES)
def test_an_eager_call_with_nan_names_the_coordinate(name):
    """Before: NaN in, NaN out (a mass matrix of NaN). Under jit the rigid-body functions
    add no check (they run in simulate's right-hand side, which reports a non-finite state
    as RESULTS.nonfinite_state)."""
    with pytest.raises(ValueError, match=rf"{name}: q must be finite, got NaN or inf at coordinates \['theta2'\]"):
        _calls(GOOD.at[1].set(jnp.nan), GOOD, GOOD, GOOD)[name]()


@pytest.mark.parametrize("arg, fn", [("qd", "forward_dynamics"), ("qdd", "inverse_dynamics"), ("tau", "forward_dynamics"),
                                     ("qd", "joint_rates"), ("qd", "bias_forces")])
def test_an_eager_call_with_an_infinite_rate_names_it(arg, fn):
    args = dict(q=GOOD, qd=GOOD, qdd=GOOD, tau=GOOD)
    args[arg] = GOOD.at[0].set(jnp.inf)
    with pytest.raises(ValueError, match=rf"{fn}: {arg} must be finite, got NaN or inf at coordinates \['theta1'\]"):
        _calls(**args)[fn]()


def test_a_batch_is_refused_with_a_hint_at_vmap():
    with pytest.raises(mb.ModelError, match=r"mass_matrix: q must have shape \(2,\).*\(4, 2\).*jax.vmap"):
        mb.mass_matrix(MODEL, jnp.zeros((4, 2)))
    # ... and works under vmap.
    assert jax.vmap(lambda q: mb.mass_matrix(MODEL, q))(jnp.zeros((4, 2))).shape == (4, 2, 2)


@pytest.mark.parametrize("name", NAMES)
def test_integer_arguments_work_like_floats(name):
    ints = _calls(jnp.array([1, 0]), jnp.array([0, 2]), jnp.array([1, 1]), jnp.array([0, 1]))[name]()
    floats = _calls(jnp.array([1.0, 0.0]), jnp.array([0.0, 2.0]), jnp.array([1.0, 1.0]), jnp.array([0.0, 1.0]))[name]()
    assert all(jnp.issubdtype(a.dtype, jnp.floating) for a in jax.tree.leaves(ints))
    assert_tree_allclose(ints, floats, rtol=1e-14)


@pytest.mark.parametrize("name", NAMES)
def test_an_eager_call_runs_one_compiled_program(name):
    """Outside `jit` a call checks its arguments, then runs one program, compiled once per
    model structure and argument shapes (equinox's cache). The kinematics and the energies
    ran operation by operation before, traced again on every call (tens of milliseconds a
    call on gait2354; `jaxmb.muscle_forces` a second)."""
    program = jax.make_jaxpr(_calls(GOOD, -GOOD, -GOOD, -GOOD)[name])()
    assert [e.primitive.name for e in program.eqns] in (["jit"], ["pjit"]), program


ELBOW = muscled_elbow([  # two force-model classes, two activation-dynamics classes
    ("flexor", "flexor", mb.Thelen2003Muscle(300.0, 0.12, 0.14, 0.1, 10.0), mb.FirstOrderActivation()),
    ("extensor", "extensor", mb.DeGrooteFregly2016Muscle(400.0, 0.12, 0.12, 0.1, 10.0), mb.DeGrooteActivation())])
Q1, X, L = GOOD[:1], jnp.array([0.4, 0.6]), jnp.array([0.3, 0.25])  # elbow state, per-muscle values
_MORE_CALLS = {
    "joint_values": lambda: mb.joint_values(MODEL, GOOD),
    "joint_gradients": lambda: mb.joint_gradients(MODEL, GOOD),
    "joint_hessians": lambda: mb.joint_hessians(MODEL, GOOD),
    "joint_rates": lambda: mb.joint_rates(MODEL, GOOD, GOOD, GOOD),
    "muscle_lengths": lambda: mb.muscle_lengths(ELBOW, Q1),
    "moment_arms": lambda: mb.moment_arms(ELBOW, Q1),
    "muscle_lengths_and_moment_arms": lambda: mb.muscle_lengths_and_moment_arms(ELBOW, Q1),
    "moment_arm_derivatives": lambda: mb.moment_arm_derivatives(ELBOW, Q1),
    "muscle_lengthening_speeds": lambda: mb.muscle_lengthening_speeds(ELBOW, Q1, Q1),
    "muscle_forces": lambda: mb.muscle_forces(ELBOW, X, L, X),
    "muscle_states": lambda: mb.muscle_states(ELBOW, X, L, X),
    "activation_rates": lambda: mb.activation_rates(ELBOW, X, X),
}


@pytest.mark.parametrize("name", sorted(_MORE_CALLS))
def test_an_eager_call_of_the_joints_or_muscles_runs_one_compiled_program(name):
    """As above, for the joint functions and the muscles (`muscle_forces` and `muscle_states`
    took a second a call on gait2354, its tendons' equilibrium solved operation by operation)."""
    program = jax.make_jaxpr(_MORE_CALLS[name])()
    assert [e.primitive.name for e in program.eqns] in (["jit"], ["pjit"]), program


GAIT = mb.__file__.replace("__init__.py", "data/gait2354_simbody.osim")


def test_an_eager_call_hands_the_model_to_its_program_as_one_buffer_per_dtype():
    """A full-body model is a pytree of thousands of small arrays (gait2354: 1794). Flattening
    it and handing each array to the program cost about 1.4 ms per eager call, ten times the
    computation (docs/dev/performance.md); the arrays now reach the program packed, one
    buffer per dtype and weak type, made once per model object. Values are the traced
    route's (the model closed over in a user's `jit`)."""
    model = mb.load_osim(GAIT)
    q, qd = jnp.asarray(np.asarray(model.q_default) + 0.1), jnp.asarray(np.full(model.nq, 0.3))
    (eqn,) = jax.make_jaxpr(lambda: mb.bias_forces(model, q, qd))().eqns
    assert len(eqn.invars) <= 5 < len(jax.tree.leaves(model)), eqn.invars
    for call in (lambda q: mb.mass_matrix(model, q), lambda q: mb.inverse_dynamics(model, q, qd, qd),
                 lambda q: mb.muscle_lengths(model, q)):
        assert_tree_allclose(call(q), jax.jit(call)(q), rtol=1e-14, normwise=True)


def test_an_eager_call_keeps_each_array_of_the_model_as_it_was():
    """Packing keeps every array's shape, dtype and weak type (a weakly typed float64 mass
    must not turn a float32 state's result into float64), float32 models stay float32, and
    a gradient with respect to the model outside `jit` (its arrays traced: not packed) is
    the gradient inside `jit`."""
    from jaxmb import _eager

    model = mb.models.planar_chain(3)
    model32 = jax.tree.map(lambda x: x.astype(jnp.float32) if jnp.issubdtype(x.dtype, jnp.floating) else x, model)
    for m in (model, model32, muscled_elbow([("flexor", "flexor", mb.Thelen2003Muscle(300.0, 0.12, 0.14, 0.1, 10.0),
                                                mb.FirstOrderActivation())])):
        q = jnp.full(m.nq, 0.2, jax.tree.leaves(m)[0].dtype)
        mb.kinetic_energy(m, q, q)
        packing = _eager._MODELS[id(m)][1]
        unpacked = packing.skeleton.unpack(packing.buffers)
        kind = lambda x: (x.shape, x.dtype, x.weak_type) if eqx.is_array(x) else x  # noqa: E731
        assert jax.tree.structure(unpacked) == jax.tree.structure(m)
        assert jax.tree.leaves(jax.tree.map(kind, unpacked)) == jax.tree.leaves(jax.tree.map(kind, m))
        assert all(np.array_equal(a, b) for a, b in zip(jax.tree.leaves(unpacked), jax.tree.leaves(m)))
    assert mb.mass_matrix(model32, jnp.full(3, 0.2, jnp.float32)).dtype == jnp.float32
    q = jnp.array([0.3, -0.2, 0.5])
    energy = lambda m: mb.kinetic_energy(m, q, q)  # noqa: E731
    assert_tree_allclose(jax.grad(energy)(model), jax.jit(jax.grad(energy))(model), rtol=1e-14)


def test_a_model_holding_a_numpy_array_is_read_afresh_at_each_call():
    """A NumPy array can change in place, so such a model is not packed once."""
    mass = np.asarray(2.0)
    model = eqx.tree_at(lambda m: m.bodies[1].mass, mb.models.planar_chain(2), mass)
    before = mb.mass_matrix(model, GOOD)
    mass[...] = 4.0
    assert_tree_allclose(mb.mass_matrix(model, GOOD), jax.jit(lambda q: mb.mass_matrix(model, q))(GOOD), rtol=1e-14)
    assert not np.allclose(mb.mass_matrix(model, GOOD), before)


def test_a_models_packed_arrays_leave_with_it():
    from jaxmb import _eager

    before = len(_eager._MODELS)
    model = mb.models.planar_chain(2)
    mb.mass_matrix(model, GOOD)
    assert len(_eager._MODELS) == before + 1
    del model
    gc.collect()
    assert len(_eager._MODELS) == before


def test_a_structure_no_model_or_program_holds_leaves_the_skeleton_table():
    from jaxmb import _eager

    model = mb.models.planar_chain(13, mass=2.5)  # a structure no other test compiles
    skeleton = _eager.model_packing(model).skeleton  # packed, never compiled
    twin = mb.models.planar_chain(13, mass=1.5)  # the same structure shares the skeleton
    assert _eager.model_packing(twin).skeleton is skeleton
    key = hash(skeleton)
    assert _eager._SKELETONS[key]() is skeleton
    del model, twin, skeleton
    gc.collect()
    assert key not in _eager._SKELETONS


def test_python_lists_are_accepted():
    assert jnp.array_equal(mb.mass_matrix(MODEL, [0.3, -0.2]), mb.mass_matrix(MODEL, GOOD))  # the same program


_POINT_CALLS = {
    "point_position": lambda body, point: mb.point_position(MODEL, GOOD, body, point),
    "point_velocity": lambda body, point: mb.point_velocity(MODEL, GOOD, GOOD, body, point),
    "point_acceleration": lambda body, point: mb.point_acceleration(MODEL, GOOD, GOOD, GOOD, body, point),
    "point_jacobian": lambda body, point: mb.point_jacobian(MODEL, GOOD, body, point),
}


@pytest.mark.parametrize("call", sorted(_POINT_CALLS))
@pytest.mark.parametrize("point", [jnp.zeros(2), jnp.zeros(1)])
@pytest.mark.parametrize("body", [0, "ground"])
def test_a_body_point_of_the_wrong_shape_is_named(call, point, body):
    """Before: (2,) failed inside a matrix product, and (1,) on 'ground' broadcast to a 3-vector."""
    with pytest.raises(mb.ModelError, match=rf"{call}: point must have shape \(3,\).*got \({point.shape[0]},\)"):
        _POINT_CALLS[call](body, point)


@pytest.mark.parametrize("call", sorted(_POINT_CALLS))
def test_a_body_point_that_is_not_finite_is_named(call):
    """Before: NaN positions, velocities and Jacobians."""
    with pytest.raises(mb.ModelError, match=rf"{call}: point must be finite, got \[nan, 0.0, 0.0\]"):
        _POINT_CALLS[call](0, jnp.array([jnp.nan, 0.0, 0.0]))
    assert jnp.isfinite(_POINT_CALLS[call](0, jnp.array([0.1, 0.0, 0.0]))).all()


@pytest.mark.parametrize("call", sorted(_POINT_CALLS))
@pytest.mark.parametrize("body", [7, 2, -1, 1.0, True])
def test_a_body_index_out_of_range_is_named(call, body):
    """Before: JAX's indexing clamped it, so body 7 (or -1) gave the point on the last body."""
    with pytest.raises(mb.ModelError, match=rf"{call}: body must be a body's name or an index in 0..1 .*got"):
        _POINT_CALLS[call](body, jnp.zeros(3))
    # A NumPy or concrete JAX integer works as an int.
    assert_tree_allclose(_POINT_CALLS[call](np.int64(1), jnp.zeros(3)), _POINT_CALLS[call](1, jnp.zeros(3)))
    assert_tree_allclose(_POINT_CALLS[call](jnp.array(1), jnp.zeros(3)), _POINT_CALLS[call](1, jnp.zeros(3)))


def test_a_series_of_mismatched_lengths_is_named():
    """Before: JAX's 'vmap got inconsistent sizes', naming no argument."""
    with pytest.raises(mb.ModelError, match=r"inverse_dynamics_series: q, qd and qdd must each have shape \(T, nq\) "
                                            r"with nq = 2 .* got \(5, 2\), \(5, 2\) and \(4, 2\)"):
        mb.inverse_dynamics_series(MODEL, jnp.zeros((5, 2)), jnp.zeros((5, 2)), jnp.zeros((4, 2)))


def test_a_batch_under_explicit_sharding_is_refused_with_what_to_do():
    """An explicitly sharded batch (`jax.make_mesh`'s default axis type) failed deep inside a
    linear solve or a batching rule; every call refuses it at its argument, naming the
    axis and the ways that work (a test with one device: the type is what matters)."""
    from jax.sharding import PartitionSpec as P

    model = mb.models.planar_chain(3)
    mesh = jax.make_mesh((1,), ("states",), axis_types=(jax.sharding.AxisType.Explicit,))
    qs = jax.device_put(jnp.zeros((256, 3)), jax.NamedSharding(mesh, P("states")))
    with jax.set_mesh(mesh):
        for call in (lambda q: mb.forward_dynamics(model, q, q), lambda q: mb.joint_values(model, q)):
            with pytest.raises(ValueError, match=r"explicit mesh axes \('states',\).*shard_map.*AxisType.Auto"):
                jax.jit(jax.vmap(call))(qs)
    # The ways the message names work: the batch split by shard_map, or an Auto mesh.
    auto = jax.make_mesh((1,), ("states",), axis_types=(jax.sharding.AxisType.Auto,))
    ref = jax.jit(jax.vmap(lambda q: mb.forward_dynamics(model, q, q)))(jnp.zeros((256, 3)))
    split = jax.jit(jax.shard_map(jax.vmap(lambda q: mb.forward_dynamics(model, q, q)), mesh=mesh,
                                  in_specs=P("states"), out_specs=P("states"), check_vma=False))(qs)
    on_auto = jax.jit(jax.vmap(lambda q: mb.forward_dynamics(model, q, q)))(
        jax.device_put(jnp.zeros((256, 3)), jax.NamedSharding(auto, P("states"))))
    assert_tree_allclose(split, ref, rtol=1e-14)
    assert_tree_allclose(on_auto, ref, rtol=1e-14)


def test_per_muscle_arguments_are_real_vectors_checked_as_q_is():
    """`muscle_forces`, `muscle_states` and `activation_rates` took their per-muscle vectors
    with `jnp.asarray`: integers now work like floats, complex numbers and arrays under
    explicit sharding are refused with the argument's name (as every `q` is)."""
    ints = mb.muscle_forces(ELBOW, jnp.array([1, 0]), L, jnp.array([0, 0]))
    floats = mb.muscle_forces(ELBOW, jnp.array([1.0, 0.0]), L, jnp.array([0.0, 0.0]))
    assert jnp.issubdtype(ints.dtype, jnp.floating)
    assert_tree_allclose(ints, floats, rtol=1e-14)
    with pytest.raises(mb.ModelError, match="muscle_states: activations must be real, got dtype complex"):
        mb.muscle_states(ELBOW, X.astype(jnp.complex128), L, X)
    from jax.sharding import PartitionSpec as P

    mesh = jax.make_mesh((1,), ("states",), axis_types=(jax.sharding.AxisType.Explicit,))
    xs = jax.device_put(jnp.tile(X, (4, 1)), jax.NamedSharding(mesh, P("states")))
    with jax.set_mesh(mesh), pytest.raises(ValueError, match=r"activation_rates: excitations is typed with the "
                                                              r"explicit mesh axes \('states',\)"):
        jax.jit(jax.vmap(lambda x: mb.activation_rates(ELBOW, x, X)))(xs)


def test_dynamics_and_simulations_split_by_shard_map_equal_the_plain_batch():
    """Forward dynamics (a Cholesky solve) and simulations (diffrax) under `jax.shard_map`,
    as docs/how-to/batches.md splits a batch over CPU devices. lineax's solve refused the
    sharded type of the right-hand side there ("Vector and operator structures do not match")."""
    from jax.sharding import PartitionSpec as P

    model = mb.models.planar_chain(3)
    mesh = jax.make_mesh((1,), ("states",))
    q0s = jnp.linspace(0.1, 0.8, 24).reshape(8, 3)
    calls = (lambda q: mb.forward_dynamics(model, q, -q),
             lambda q: mb.simulate(model, q, jnp.zeros(3), 0.1, throw=False).q[-1],
             lambda q: mb.simulate(model, q, jnp.zeros(3), 0.1).q[-1])
    for call in calls:
        split = jax.jit(jax.shard_map(jax.vmap(call), mesh=mesh, in_specs=P("states"), out_specs=P("states"),
                                      check_vma=False))
        assert_tree_allclose(split(jax.device_put(q0s, jax.NamedSharding(mesh, P("states")))),
                             jax.jit(jax.vmap(call))(q0s), rtol=1e-13)


@pytest.mark.parametrize("name, arg, call", [
    ("velocity_matrix", "qd", lambda: mb.matrix_calculus.velocity_matrix(MODEL, GOOD, BAD)),
    ("mass_matrix", "q", lambda: mb.matrix_calculus.mass_matrix(MODEL, BAD)),
    ("D_closed_form", "q", lambda: mb.matrix_calculus.D_closed_form(MODEL, BAD)),
])
def test_the_matrix_calculus_route_names_its_own_function(name, arg, call):
    """Before: 'joint_values: q must have shape ...', or a raw dot_general error for qd."""
    with pytest.raises(mb.ModelError, match=rf"matrix_calculus.{name}: {arg} must have shape \(2,\)"):
        call()
