"""Malformed models raise jaxmb.ModelError naming the offending object."""

import jax
import jax.numpy as jnp
import numpy as np
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
        # A user's callable reading past q (JAX would clamp q[5] to q[1]) or reading a
        # coordinate it does not list (the structural checks trust the list).
        (lambda: _model([mb.Body("a", 1.0, **ROD)], [_rev("j", "ground", "a", mb.JaxFunction(lambda q, p: q[5], None, (0,)))]),
         r"Joint 'j': its JaxFunction reads an index past the model's 1 coordinates"),
        (lambda: _model([mb.Body("a", 1.0, **ROD), mb.Body("b", 1.0, **ROD)],
                        [_rev("j1", "ground", "a"),
                         _rev("j2", "a", "b", mb.JaxFunction(lambda q, p: q[0] + jnp.sin(q[1]), None, (0,)))],
                        ("q", "r")),
         r"Joint 'j2': its JaxFunction depends on the coordinates \['r'\], which its coordinates \['q'\] do not list"),
        (lambda: _model([mb.Body("ground", 1.0, **ROD)], [_rev("j", "ground", "ground")]), "may not be called"),
        (lambda: mb.Model([mb.Body("a", 1.0, **ROD)], [_rev("j", "ground", "a")], ("q", "q")), "Duplicate coordinate"),
        (lambda: mb.Model([mb.Body("a", 1.0, **ROD)], [_rev("j", "ground", "a")], ("q",), loads=[(0.0, 1.0)]),
         r"Model 'model': loads must be jaxmb loads .*got tuple"),
        # Arguments of the wrong type, named where they are given (the ones that the suite's
        # run-time type checks would stop first are in test_untyped_calls.py).
        (lambda: mb.revolute("j", "ground", "b", "z", mb.Coordinate(0)), "Joint 'j': axis must be numbers, got 'z'"),
        (lambda: mb.Body("b", "1 kg"), "Body 'b': mass must be numbers, got '1 kg'"),
        (lambda: mb.models.planar_chain(0), "n >= 1"),
        # Non-finite parameters, named with their object (NaN would pass into every result).
        (lambda: mb.Model([mb.Body("a", 1.0, **ROD)], [_rev("j", "ground", "a")], ("q",),
                          gravity=(0.0, jnp.nan, 0.0)), "gravity must be finite"),
        (lambda: mb.Model([mb.Body("a", 1.0, **ROD)], [_rev("j", "ground", "a")], ("q",), gravity=(0.0, -9.81)),
         r"Model 'model': gravity must have shape \(3,\), got \(2,\)"),
        (lambda: mb.revolute("j", "ground", "b", (0, 0, 1.0), mb.Coordinate(0), offset=(0.0, jnp.inf, 0.0)),
         "Joint 'j': parent_translation must be finite"),
        (lambda: mb.Joint("j", "ground", "b", "revolute", (0, 0, 1.0), mb.Coordinate(0),
                          child_rotation=jnp.full((3, 3), jnp.nan)), "Joint 'j': child_rotation must be finite"),
        (lambda: mb.PointForce("a", (0.0, 0.0, 0.0), (jnp.nan, 0.0, 0.0)), "PointForce on body 'a': force"),
        (lambda: mb.BodyTorque("a", (0.0, jnp.inf, 0.0)), "BodyTorque on body 'a': torque"),
        (lambda: mb.LinearSpring("a", (0.0, 0.0, 0.0), (1.0, 0.0, 0.0), jnp.nan, 0.1),
         "LinearSpring on body 'a': stiffness"),
        # The examples' parameters: a rod of length zero turns about its end and its
        # coordinate carries no inertia (the double pendulum's M would be singular).
        (lambda: mb.models.double_pendulum(l1=0.0), "double_pendulum: l1 must be positive"),
        (lambda: mb.models.double_pendulum(m2=-1.0), "double_pendulum: m2 must be positive"),
        (lambda: mb.models.planar_chain(3, length=-1.0), "planar_chain: length must be positive"),
        (lambda: mb.models.three_link_arm(l=(0.3, 0.2)), "l must hold three values"),
        (lambda: mb.models.three_link_arm(m=(1.0, jnp.nan, 1.0)), "three_link_arm: m must be positive"),
        (lambda: mb.models.five_bar(l0=0.0), "five_bar: l0 must be positive"),
        (lambda: mb.models.four_bar(density=-1.0), "four_bar: density must be positive"),
        # before: an empty model built (every call then failed in jnp.stack), and a joint into
        # ground asked for a body called 'ground', which may not be added
        (lambda: mb.ModelBuilder("empty").build(), "Model 'empty' has no bodies"),
        (lambda: mb.Model([mb.Body("a", 1.0, **ROD)], [_rev("j", "a", "ground")], ("q",)),
         "Joint 'j' moves 'ground', the fixed frame"),
        # before: "max |g| = nan" blamed f_ref; other lengths than the defaults need their own f_ref
        (lambda: mb.models.four_bar(lcm2=jnp.nan), "four_bar: lcm2 must be finite"),
        (lambda: mb.models.four_bar(lcm2=-1.0), "The default f_ref assembles the default lengths"),
    ],
)
def test_invalid_models_raise_clear_errors(build, match):
    with pytest.raises(ValueError, match=match):
        build()


def _with_muscles(*muscles):
    """A one-coordinate rod with `muscles`."""
    return mb.Model([mb.Body("a", 1.0, **ROD)], [_rev("j", "ground", "a")], ("q",), muscles=muscles, name="rod")


_ENDS = [mb.PathPoint("ground", (0.0, 0.1, 0.0)), mb.PathPoint("a", (0.0, -0.5, 0.0))]


@pytest.mark.parametrize(
    "muscles, match",
    [
        ([mb.Muscle("m", [mb.PathPoint("ground", (0.0, 0.1, 0.0)), mb.PathPoint("arm", (0.0, -0.5, 0.0), name="end")])],
         r"Muscle 'm': path point 'end' is on body 'arm', which model 'rod' does not have"),
        ([mb.Muscle("m", _ENDS, [mb.WrapSphere("ball", "arm", 0.05)])],
         r"Muscle 'm': wrap object 'ball' is on body 'arm'"),
        # JAX would clamp q[3] to the last coordinate and return another coordinate's value.
        ([mb.Muscle("m", [_ENDS[0], mb.ConditionalPathPoint("a", (0.0, 0.0, 0.0), mb.Coordinate(3), (-1.0, 1.0)),
                          _ENDS[1]])], r"Muscle 'm': its path reads coordinate index 3 \(Coordinate\), but model "
                                       r"'rod' has 1 coordinates"),
        ([mb.Muscle("m", (), path=mb.FunctionBasedPath([mb.Coordinate(1)],
                                                       mb.MultivariatePolynomial(np.array([0.2, 0.01]), 1, 1)))],
         "Muscle 'm': its path reads coordinate index 1"),
        ([mb.Muscle("m", _ENDS), mb.Muscle("m", _ENDS)], "two muscles are named 'm'"),
        (["m"], "muscles must be jaxmb.Muscle objects, got str"),
    ],
)
def test_muscles_that_do_not_fit_the_model_are_refused_at_build(muscles, match):
    with pytest.raises(mb.ModelError, match=match):
        _with_muscles(*muscles)
    _with_muscles(mb.Muscle("m", _ENDS))  # the same model with a muscle that fits builds


def test_a_ligament_whose_path_does_not_fit_the_model_is_refused():
    path = mb.Muscle("lig", (), path=mb.FunctionBasedPath([mb.Coordinate(2)],
                                                          mb.MultivariatePolynomial(np.array([0.2, 0.01]), 1, 1)))
    lig = mb.Ligament("lig", path, mb.Linear((0,), (1.0,)), 0.2, 10.0)
    with pytest.raises(mb.ModelError, match="Ligament 'lig': its path reads coordinate index 2"):
        mb.Model([mb.Body("a", 1.0, **ROD)], [_rev("j", "ground", "a")], ("q",), forces=(lig,), name="rod")


def test_model_error_is_a_value_error():
    assert issubclass(mb.ModelError, ValueError)


def test_validation_is_skipped_for_traced_values():
    """Under jit/vmap the checks cannot read values; construction still works."""
    out = jax.vmap(lambda m: mb.Body("b", m, **ROD).mass)(jnp.array([1.0, 2.0]))
    np.testing.assert_array_equal(out, [1.0, 2.0])


def test_user_order_is_kept_and_traversal_is_parents_first():
    bodies = [mb.Body("child", 1.0, **ROD), mb.Body("parent", 1.0, **ROD)]
    joints = [_rev("j2", "parent", "child"), _rev("j1", "ground", "parent")]
    model = mb.Model(bodies, joints, ("q",))
    assert model.joint_names == ("j2", "j1")
    assert model.body_names == ("child", "parent")  # body i is the child of joint i
    assert model.parents == (1, -1)
    assert model.order == (1, 0)
    assert model.ancestors(0) == (1,)
    with pytest.raises(mb.ModelError, match="no body 'nope'"):
        model.body_index("nope")


def test_joint_listing_order_does_not_change_the_dynamics():
    """A chain listed children-first gives the same M, bias and poses (by name)."""
    chain = mb.models.planar_chain(3)
    shuffled = mb.Model(chain.bodies[::-1], chain.joints[::-1], chain.coordinate_names, gravity=chain.gravity)
    q, qd = jnp.array([0.3, -0.5, 0.9]), jnp.array([1.0, 0.2, -0.7])
    for f in (mb.mass_matrix, lambda m, x: mb.bias_forces(m, x, qd)):
        a, b = jax.jit(f)(chain, q), jax.jit(f)(shuffled, q)
        assert float(jnp.max(jnp.abs(a - b))) < 1e-13
    assert jnp.allclose(mb.body_transforms(chain, q)[0], mb.body_transforms(shuffled, q)[2], atol=1e-15)
    np.testing.assert_array_equal(mb.joint_values(shuffled, q), q[::-1])


# Models whose mass matrix is singular by construction are refused at build time.

def _arm(coords=("q",), end=None, extra=None):
    b = mb.ModelBuilder("arm")
    for c in coords:
        b.add_coordinate(c)
    b.add_body(mb.Body("upper", 1.0, **ROD))
    b.add_joint(_rev("shoulder", "ground", "upper"))
    if end is not None:
        b.add_body(end)
        b.add_joint(extra)
    return b.build()


def test_a_default_outside_the_range_is_flagged():
    """Before: accepted silently (a default of 0 left outside a range of [0.5, 1])."""
    with pytest.warns(UserWarning, match=r"Coordinate 'x': default 0 is outside its range \[0.5, 1\]"):
        mb.ModelBuilder().add_coordinate("x", range=(0.5, 1.0))


def test_empty_coordinate_range_is_refused():
    b = mb.ModelBuilder()
    with pytest.raises(mb.ModelError, match=r"Coordinate 'knee': range \(1, -1\).*lower <= upper"):
        b.add_coordinate("knee", range=(1, -1))
    with pytest.raises(mb.ModelError, match="coordinate 'q' has range"):
        mb.Model([mb.Body("a", 1.0, **ROD)], [_rev("j", "ground", "a")], ["q"], q_lower=[1.0], q_upper=[-1.0])


def test_coordinate_names_given_as_one_string_are_refused():
    """Model(..., coordinate_names="qr") made two coordinates, 'q' and 'r'."""
    with pytest.raises(mb.ModelError, match=r"coordinate_names must be a sequence of names, got the string 'q'"):
        mb.Model([mb.Body("a", 1.0, **ROD)], [_rev("j", "ground", "a")], "q")


def test_coordinate_read_by_no_joint_is_refused():
    with pytest.raises(mb.ModelError, match="no joint function reads coordinate 'spare' .*remove the coordinate"):
        _arm(coords=("q", "spare"))


def test_massless_end_body_with_its_own_coordinate_is_refused():
    with pytest.raises(mb.ModelError, match="body 'hand' and the bodies it carries have no mass.*'wrist'.*"
                                            r"\['w'\]"):
        _arm(coords=("q", "w"), end=mb.Body.virtual("hand"),
             extra=mb.revolute("wrist", "upper", "hand", (0, 0, 1.0), mb.Coordinate(1)))
    # A massless link carrying a body with mass is fine (a multi-DOF joint's chain).
    b = mb.ModelBuilder()
    q = [b.add_coordinate(c) for c in ("a", "b")]
    b.add_universal("u", "ground", "ball", (q[0], q[1]))
    b.add_body(mb.Body("ball", 1.0, inertia=jnp.eye(3) * 0.1))
    assert b.build().nq == 2


def test_a_model_without_any_mass_is_kinematic_its_forward_dynamics_refused_at_the_call():
    """No body has mass (a model built for moment arms, as OpenSim's wrist model): it
    builds, its kinematics and inverse dynamics are defined (M = 0, tau = 0 without
    gravity's pull on anything), and what needs M⁻¹ names the model and the fix."""
    b = mb.ModelBuilder("linkage")
    for c in ("a", "b"):
        b.add_coordinate(c)
    b.add_body(mb.Body.virtual("upper"))
    b.add_joint(_rev("shoulder", "ground", "upper"))
    b.add_body(mb.Body.virtual("lower"))
    b.add_joint(mb.revolute("elbow", "upper", "lower", (0, 0, 1.0), mb.Coordinate(1), offset=(0, -1.0, 0)))
    m = b.build()
    x, v = jnp.array([0.3, -0.2]), jnp.array([1.0, 2.0])
    assert float(jnp.abs(mb.mass_matrix(m, x)).max()) == 0.0
    assert float(jnp.abs(mb.inverse_dynamics(m, x, v, v)).max()) == 0.0
    assert mb.body_transforms(m, x).shape == (2, 4, 4)
    torques = [mb.CoordinateActuator(f"{c}_motor", c, optimal_force=1.0) for c in ("a", "b")]
    time = np.linspace(0.0, 1.0, 11)
    motion = np.column_stack([0.3 * time, -0.2 * time])
    for call, name in ((lambda: mb.forward_dynamics(m, x, v), "forward_dynamics"),
                       (lambda: mb.simulate(m, x, v, 1.0), "simulate"),
                       (lambda: mb.static_optimization(m, time, motion, actuators_extra=torques,
                                                       matching="accelerations"),
                        r"static_optimization\(matching='accelerations'\)")):
        with pytest.raises(mb.ModelError, match=f"{name}: no body of Model 'linkage' has mass.*give its bodies mass"):
            call()
    # One body with mass makes it a dynamic model again, checked as one at build time.
    with pytest.raises(mb.ModelError, match="body 'hand' and the bodies it carries have no mass"):
        _arm(coords=("q", "w"), end=mb.Body.virtual("hand"),
             extra=mb.revolute("wrist", "upper", "hand", (0, 0, 1.0), mb.Coordinate(1)))


def test_revolute_joint_without_inertia_about_its_axis_is_refused():
    # A point mass on the axis of the wrist (the axis passes through the hand's origin).
    point = mb.Body("hand", 0.5, com=(0.0, 0.0, 0.3))
    with pytest.raises(mb.ModelError, match="revolute joint 'wrist'.*no inertia about its axis.*'w'"):
        _arm(coords=("q", "w"), end=point,
             extra=mb.revolute("wrist", "upper", "hand", (0, 0, 1.0), mb.Coordinate(1), offset=(0, -1.0, 0)))
    # The same point mass off the axis has inertia about it.
    off = mb.Body("hand", 0.5, com=(0.1, 0.0, 0.3))
    m = _arm(coords=("q", "w"), end=off,
             extra=mb.revolute("wrist", "upper", "hand", (0, 0, 1.0), mb.Coordinate(1), offset=(0, -1.0, 0)))
    assert jnp.linalg.eigvalsh(mb.mass_matrix(m, jnp.zeros(2)))[0] > 0


def _tilted(angle):
    c, s = np.cos(angle), np.sin(angle)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]) @ np.array([[1.0, 0.0, 0.0], [0.0, c, -s],
                                                                             [0.0, s, c]])


@pytest.mark.parametrize("dtype, error, ok", [(np.float32, 3e-7, True), (np.float32, 1e-3, False),
                                              (np.float64, 3e-7, False), (np.float64, 1e-12, True)])
def test_rotation_and_inertia_checks_follow_the_dtype(dtype, error, ok):
    """A float32 model (an .osim loaded without x64) carries rotations orthonormal and inertias
    symmetric only to float32 round-off: accepted there, refused in float64, and a real
    defect refused in both."""
    r = (_tilted(0.3) + error * np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]])).astype(dtype)
    inertia = (np.diag([1.0, 1.2, 1.5]) + error * np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 0.0], [0, 0, 0]])).astype(dtype)
    joint = lambda: mb.Joint("j", "ground", "b", "revolute", (0, 0, 1.0), mb.Coordinate(0),  # noqa: E731
                             parent_rotation=jnp.asarray(r))
    body = lambda: mb.Body("b", 1.0, inertia=jnp.asarray(inertia))  # noqa: E731
    if ok:
        assert joint().parent_rotation.dtype == dtype and body().inertia.dtype == dtype
    else:
        with pytest.raises(ValueError, match="proper rotation"):
            joint()
        with pytest.raises(ValueError, match="not symmetric"):
            body()


def test_subtree_composites_give_the_mass_matrix_diagonal():
    """The build check's composite inertias (accumulated children first, one pass: a chain
    of n bodies took n² eigenvalue problems and subtree walks) against
    the mass matrix: for a chain of revolute joints about z through each child's origin,
    M[i, i] is the z-z entry of the composite inertia of body i's subtree about that origin."""
    from jaxmb._model_checks import _concrete, _default_frames, _subtree_composites

    model = mb.models.planar_chain(6)
    q = np.zeros(6)
    mass = [float(b.mass) for b in model.bodies]
    total = [sum(mass[i:]) for i in range(6)]  # the chain's subtrees
    inertial = _concrete(*(x for b in model.bodies for x in (b.mass, b.com, b.inertia)))
    composites = _subtree_composites(model, _default_frames(model), inertial[0::3], inertial[1::3],
                                     inertial[2::3], total)
    np.testing.assert_allclose([c[0][2, 2] for c in composites], np.diag(mb.mass_matrix(model, q)), rtol=1e-13)
