"""Malformed models raise jaxmb.ModelError naming the offending object."""

import jax
import jax.numpy as jnp
import pytest

import jaxmb as mb

ROD = dict(com=(0.0, -0.5, 0.0), inertia=jnp.diag(jnp.array([0.1, 0.01, 0.1])))


def _model(bodies, joints, coords=("q",)):
    return mb.Model(bodies, joints, coords)


def _rev(name, parent, child, fn=None):
    return mb.revolute(name, parent, child, (0.0, 0.0, 1.0), fn or mb.Coordinate(0))


@pytest.mark.parametrize(
    "build, match",
    [
        (lambda: mb.Body("b", 0.0, **ROD), "non-positive mass"),
        (lambda: mb.Body("b", -1.0, **ROD), "non-positive mass"),
        (lambda: mb.Body("b", 1.0, inertia=jnp.array([[1.0, 0.2, 0], [0.0, 1, 0], [0, 0, 1]])), "not symmetric"),
        (lambda: mb.Body("b", 1.0, inertia=jnp.diag(jnp.array([1.0, -0.5, 1.0]))), "positive semi-definite"),
        (lambda: mb.Body("b", 1.0, inertia=jnp.diag(jnp.array([0.1, 0.1, 1.0]))), "triangle inequality"),
        (lambda: mb.Body("b", jnp.nan, **ROD), "finite"),
        (lambda: mb.Body("b", 0.0, inertia=jnp.eye(3), massless=True), "massless"),
        (lambda: mb.revolute("j", "ground", "b", (0.0, 0.0, 0.0), mb.Coordinate(0)), "zero"),
        (lambda: mb.Joint("j", "ground", "b", "helical", (0, 0, 1.0), mb.Coordinate(0)), "revolute' or 'prismatic"),
        (lambda: mb.Joint("j", "ground", "b", "revolute", (0, 0, 1.0), lambda q: q[0]), "jaxmb joint function"),
        (lambda: mb.Joint("j", "ground", "b", "revolute", (0, 0, 1.0), mb.Coordinate(0),
                          parent_rotation=jnp.diag(jnp.array([1.0, 1.0, -1.0]))), "proper rotation"),
        (lambda: _model([mb.Body("a", 1.0, **ROD)], [_rev("j", "pelvis", "a")]), "unknown parent 'pelvis'"),
        (lambda: _model([mb.Body("a", 1.0, **ROD)], [_rev("j", "ground", "zzz")]), "unknown body 'zzz'"),
        (lambda: _model([mb.Body("a", 1.0, **ROD), mb.Body("a", 1.0, **ROD)], [_rev("j", "ground", "a")]),
         "Duplicate body name 'a'"),
        (lambda: _model([mb.Body("a", 1.0, **ROD), mb.Body("b", 1.0, **ROD)],
                        [_rev("j", "ground", "a"), _rev("j", "a", "b")]), "Duplicate joint name 'j'"),
        (lambda: _model([mb.Body("a", 1.0, **ROD), mb.Body("b", 1.0, **ROD)],
                        [_rev("j1", "b", "a"), _rev("j2", "a", "b")]), "cycle"),
        (lambda: _model([mb.Body("a", 1.0, **ROD)], [_rev("j1", "ground", "a"), _rev("j2", "ground", "a")]),
         "child of two joints"),
        (lambda: _model([mb.Body("a", 1.0, **ROD), mb.Body("b", 1.0, **ROD)], [_rev("j", "ground", "a")]),
         "Body 'b' has no joint"),
        (lambda: _model([mb.Body("a", 1.0, **ROD)], [_rev("j", "ground", "a", mb.Coordinate(3))]),
         "reads coordinate index 3"),
        (lambda: _model([mb.Body("ground", 1.0, **ROD)], [_rev("j", "ground", "ground")]), "may not be called"),
        (lambda: mb.Model([mb.Body("a", 1.0, **ROD)], [_rev("j", "ground", "a")], ("q", "q")), "Duplicate coordinate"),
        (lambda: mb.models.planar_chain(0), "n >= 1"),
    ],
)
def test_invalid_models_raise_clear_errors(build, match):
    with pytest.raises(ValueError, match=match):
        build()


def test_model_error_is_a_value_error():
    assert issubclass(mb.ModelError, ValueError)


def test_validation_is_skipped_for_traced_values():
    """Under jit/vmap the checks cannot read values; construction still works."""
    out = jax.vmap(lambda m: mb.Body("b", m, **ROD).mass)(jnp.array([1.0, 2.0]))
    assert out.shape == (2,)


def test_topological_order_and_names():
    bodies = [mb.Body("child", 1.0, **ROD), mb.Body("parent", 1.0, **ROD)]
    joints = [_rev("j2", "parent", "child"), _rev("j1", "ground", "parent")]
    model = mb.Model(bodies, joints, ("q",))
    assert model.body_names == ("parent", "child")
    assert model.joint_names == ("j1", "j2")
    assert model.parents == (-1, 0)
    assert model.ancestors(1) == (0,)
    with pytest.raises(mb.ModelError, match="no body 'nope'"):
        model.body_index("nope")
