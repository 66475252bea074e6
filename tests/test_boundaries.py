"""The boundary a user touches: arguments of the wrong shape or dtype get an error that
names the function, the argument, the expected and the received shape."""

import jax
import jax.numpy as jnp
import pytest

import jaxmb as mb
from assertions import assert_tree_allclose

MODEL = mb.models.double_pendulum()  # nq = 2


def _calls(q, qd, qdd, tau):
    m = MODEL
    return {
        "mass_matrix": lambda: mb.mass_matrix(m, q),
        "gravity_forces": lambda: mb.gravity_forces(m, q),
        "velocity_forces": lambda: mb.velocity_forces(m, q, qd),
        "bias_forces": lambda: mb.bias_forces(m, q, qd),
        "generalized_forces": lambda: mb.generalized_forces(m, q),
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
    }


GOOD = jnp.array([0.3, -0.2])
BAD = jnp.array([0.3, -0.2, 0.1])
NAMES = list(_calls(GOOD, GOOD, GOOD, GOOD))


@pytest.mark.parametrize("name", NAMES)
def test_wrong_length_q_names_the_argument_and_shapes(name):
    with pytest.raises(mb.ModelError, match=rf"{name}: q must have shape \(2,\).*got shape \(3,\)"):
        _calls(BAD, GOOD, GOOD, GOOD)[name]()


@pytest.mark.parametrize("arg", ["qd", "qdd", "tau"])
def test_wrong_length_rates_name_the_argument(arg):
    args = dict(q=GOOD, qd=GOOD, qdd=GOOD, tau=GOOD)
    args[arg] = BAD
    fn = {"qd": "forward_dynamics", "qdd": "inverse_dynamics", "tau": "forward_dynamics"}[arg]
    with pytest.raises(mb.ModelError, match=rf"{fn}: {arg} must have shape \(2,\).*got shape \(3,\)"):
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


def test_python_lists_are_accepted():
    assert jnp.array_equal(mb.mass_matrix(MODEL, [0.3, -0.2]), mb.mass_matrix(MODEL, GOOD))  # the same program


@pytest.mark.parametrize("point", [jnp.zeros(2), jnp.zeros(1)])
@pytest.mark.parametrize("body", [0, "ground"])
def test_a_body_point_of_the_wrong_shape_is_named(point, body):
    """Before: (2,) failed inside a matrix product, and (1,) on 'ground' broadcast to a 3-vector."""
    with pytest.raises(mb.ModelError, match=rf"point_position: point must have shape \(3,\).*got \({point.shape[0]},\)"):
        mb.point_velocity(MODEL, GOOD, GOOD, body, point)


def test_a_series_of_mismatched_lengths_is_named():
    """Before: JAX's 'vmap got inconsistent sizes', naming no argument."""
    with pytest.raises(mb.ModelError, match=r"inverse_dynamics_series: q, qd and qdd must each have shape \(T, nq\) "
                                            r"with nq = 2 .* got \(5, 2\), \(5, 2\) and \(4, 2\)"):
        mb.inverse_dynamics_series(MODEL, jnp.zeros((5, 2)), jnp.zeros((5, 2)), jnp.zeros((4, 2)))
