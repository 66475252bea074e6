"""The ForceSet's non-muscle elements (jaxmb._forces): each generalized force against an
independent route (Jacobians of points and bodies, potential-energy gradients, energy
conservation under simulate), and each kind of bad input."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmb as mb
from jaxmb._functions import Coordinate, Polynomial
from jaxmb._model import Body, Model, prismatic, revolute
from jaxmb._muscles import Muscle, PathPoint
from jaxmb._spatial import body_fixed_xyz, vee
from tests.assertions import assert_tree_allclose

_I = np.diag([0.1, 0.2, 0.15])
BODIES = [Body("b1", 1.0, (0.1, 0.2, 0.0), _I), Body("b2", 2.0, (0.0, 0.3, 0.1), _I),
          Body("b3", 0.5, (0.05, 0.0, 0.0), _I)]
JOINTS = [revolute("j1", "ground", "b1", (0, 0, 1), Coordinate(0), offset=(0.1, 0, 0)),
          revolute("j2", "b1", "b2", (1, 0, 0), Coordinate(1), offset=(0, 0.5, 0)),
          prismatic("j3", "b2", "b3", (0, 1, 0), Coordinate(2), offset=(0.2, 0, 0.1))]
COORDS = ["q0", "q1", "q2"]
Q = jnp.array([0.3, -0.4, 0.25])
QD = jnp.array([0.5, 0.2, -0.1])
BARE = Model(BODIES, JOINTS, COORDS)
BUSHING_F1 = mb.BushingForce.frame_from_xyz((0.1, 0.0, 0.05), (0.1, 0.2, 0.3))
BUSHING_F2 = mb.BushingForce.frame_from_xyz((0.0, 0.2, 0.0), (-0.2, 0.1, 0.4))


def _forces():
    path = Muscle("lig", [PathPoint("ground", (0.0, 1.0, 0.2)), PathPoint("b2", (0.05, 0.1, 0.0)),
                          PathPoint("b3", (0.1, 0.0, 0.0))])
    return [
        mb.CoordinateActuator("r1", "q1", 10.0, -2.0, 2.0),
        mb.PointActuator("pa", "b2", (0.1, 0.2, 0.3), (1, 1, 0), optimal_force=5.0),
        mb.PointActuator("pag", "b3", (0.3, 0.7, 0.1), (0, 1, 2), optimal_force=2.0, point_is_global=True,
                         force_is_global=True),
        mb.TorqueActuator("ta", "b3", "b1", (1, 1, 0), optimal_force=3.0, torque_is_global=False),
        mb.PointToPointSpring("s", "ground", (0, 1, 0), "b3", (0.1, 0, 0), 50.0, 0.3),
        mb.CoordinateLimitForce("clf", "q2", 100.0, 0.2, 80.0, -0.3, 2.0, 0.05),
        mb.BushingForce("bu", "b1", "b3", frame1=BUSHING_F1, frame2=BUSHING_F2,
                        rotational_stiffness=(1, 2, 3), translational_stiffness=(10, 20, 30),
                        rotational_damping=(0.1, 0.2, 0.3), translational_damping=(1, 2, 3)),
        mb.Ligament("lig", path, Polynomial(0, [0.0, 0.0, 40.0, -30.0]), 0.5, 200.0),
        mb.ExpressionBasedCoordinateForce("e", "q0", "-3*q^2 - 0.5*qdot + sin(q)/(1+exp(-q)) - -cos(2*qdot)"),
    ]


FORCES = _forces()
MODEL = Model(BODIES, JOINTS, COORDS, forces=FORCES)
BY_NAME = {f.name: f for f in FORCES}
U = {"r1": 0.3, "pa": 0.6, "pag": -0.4, "ta": 0.7}


@jax.jit
def _ours(q, qd):
    """Every element's Q at (q, q') (controls U), and the sums, in one compiled function."""
    out = {f.name: f.generalized_force(MODEL, q, qd, U.get(f.name)) for f in FORCES}
    u = jnp.array([U[n] for n in mb.actuator_names(MODEL)])
    slack = BY_NAME["lig"]
    out["slack"] = mb.Ligament("slack", slack.path, slack.force_length_curve, 10.0, 200.0).generalized_force(
        MODEL, q, qd)
    out["total"] = mb.force_set_forces(MODEL, q, qd, u)
    out["passive"] = mb.force_set_forces(MODEL, q, qd)
    out["actuators"] = mb.actuator_forces(MODEL, q, qd, u)
    out["fd"] = mb.forward_dynamics(MODEL, q, qd)
    out["fd_bare"] = mb.forward_dynamics(BARE, q, qd, out["passive"])
    return out


OURS = _ours(Q, QD)


def _point_jac(q, body, point):
    return mb.point_jacobian(BARE, q, body, point)


def _ang_jac(q, body):
    return mb.angular_jacobians(BARE, q)[BARE.body_index(body)]


def test_actuator_names_and_controls_order():
    assert mb.actuator_names(MODEL) == ("r1", "pa", "pag", "ta")
    assert_tree_allclose(OURS["total"], sum(OURS[f.name] for f in FORCES), rtol=1e-13)
    assert_tree_allclose(OURS["actuators"], sum(OURS[n] for n in U), rtol=1e-13)
    # A difference of two sums: its small entries carry the round-off of the large ones.
    assert_tree_allclose(OURS["total"] - OURS["passive"], OURS["actuators"], rtol=1e-12, normwise=True)


def test_coordinate_actuator():
    assert_tree_allclose(OURS["r1"], jnp.array([0.0, 3.0, 0.0]), rtol=1e-15)


def test_point_actuators_by_the_point_jacobian():
    assert_tree_allclose(OURS["pa"], ORACLES["pa"], rtol=1e-12)
    assert_tree_allclose(OURS["pag"], ORACLES["pag"], rtol=1e-12)


def test_torque_actuator_by_the_angular_jacobians():
    assert abs(float(OURS["ta"][1])) > 0.5
    assert_tree_allclose(OURS["ta"], ORACLES["ta"], rtol=1e-12, atol=1e-14)


def test_point_to_point_spring_is_minus_the_potential_gradient():
    assert_tree_allclose(OURS["s"], ORACLES["s"], rtol=1e-12)


def test_coordinate_limit_force_piecewise():
    clf = BY_NAME["clf"]
    f = jax.jit(lambda x, xd: clf.limit_force(x, xd))
    assert float(f(0.0, 1.0)) == 0.0  # inside the range: no stiffness, no damping
    assert_tree_allclose(f(0.5, 0.3), -100.0 * 0.3 - 2.0 * 0.3, rtol=1e-14)  # past the transition
    assert_tree_allclose(f(-0.6, -0.2), 80.0 * 0.3 + 2.0 * 0.2, rtol=1e-14)
    assert_tree_allclose(f(0.225, 0.0), -100.0 * 0.5 * 0.025, rtol=1e-14)  # mid-transition: step 1/2
    # the step is C2: its derivative vanishes at both ends of the transition
    g = jax.grad(lambda x: clf.limit_force(x, 0.0))
    # -K u³ (40 - 75 u + 36 u²) = -3.2e-20 at u = 2e-8; a C¹ (cubic) step would give -4e-13
    assert_tree_allclose(g(0.2 + 1e-9), 0.0, atol=1e-15)
    assert_tree_allclose(g(0.25), -100.0, rtol=1e-12)
    assert_tree_allclose(OURS["clf"], jnp.array([0.0, 0.0, float(f(0.25, -0.1))]), rtol=1e-14)


def test_bushing_by_opensims_frame_forces():
    """OpenSim's TwoFrameLinker::convertInternalForceToForcesOnFrames: moment ``R_GM N_FMᵀ f_θ``
    on body 2 (N from ``θ' = N ω_FM^M``, here from its inverse ``ω = vee(Rᵀ ∂R/∂θ) θ'``) and force
    ``R_GF f_p`` at M's origin; their negatives on body 1 at the same point."""
    assert_tree_allclose(OURS["bu"], ORACLES["bu"], rtol=1e-11, atol=1e-13)
    assert_tree_allclose(ORACLES["same"], jnp.zeros(6), atol=1e-15)  # coinciding frames: no deflection


def _bushing_oracle(q, qd):
    bu = BY_NAME["bu"]
    delta, rate = jax.jvp(lambda x: bu.deflection(BARE, x), (q,), (qd,))
    k = jnp.concatenate([bu.rotational_stiffness, bu.translational_stiffness])
    c = jnp.concatenate([bu.rotational_damping, bu.translational_damping])
    f = -(k * delta + c * rate)
    th = delta[:3]
    r = body_fixed_xyz(th)
    n_inv = jnp.stack([vee(r.T @ d) for d in jax.jacfwd(body_fixed_xyz)(th).transpose(2, 0, 1)], axis=1)
    n = jnp.linalg.inv(n_inv)
    poses = mb.body_transforms(BARE, q)
    gf, gm = poses[0] @ BUSHING_F1, poses[2] @ BUSHING_F2
    moment = gm[:3, :3] @ (n.T @ f[:3])
    force = gf[:3, :3] @ f[3:]
    m_in_1 = jnp.linalg.solve(poses[0][:3, :3], gm[:3, 3] - poses[0][:3, 3])
    m_in_2 = BUSHING_F2[:3, 3]
    expected = (_ang_jac(q, "b3").T @ moment + _point_jac(q, "b3", m_in_2).T @ force
                - _ang_jac(q, "b1").T @ moment - _point_jac(q, "b1", m_in_1).T @ force)
    return expected


def test_ligament_by_autodiff_lengths():
    assert ORACLES["lig_stretch"] > 1.0
    assert_tree_allclose(OURS["lig"], ORACLES["lig"], rtol=1e-11)
    assert_tree_allclose(OURS["slack"], jnp.zeros(3), atol=0)


@jax.jit
def _oracles(q, qd):
    """The independent routes, in one compiled function."""
    out = {}
    poses = mb.body_transforms(BARE, q)
    pa = BY_NAME["pa"]
    force = U["pa"] * 5.0 * poses[1][:3, :3] @ (jnp.array([1.0, 1.0, 0.0]) / jnp.sqrt(2.0))
    out["pa"] = _point_jac(q, "b2", pa.point).T @ force
    pag, t3 = BY_NAME["pag"], poses[2]
    local = t3[:3, :3].T @ (pag.point - t3[:3, 3])
    force = U["pag"] * 2.0 * jnp.array([0.0, 1.0, 2.0]) / jnp.sqrt(5.0)
    out["pag"] = _point_jac(q, "b3", local).T @ force
    torque = U["ta"] * 3.0 * poses[0][:3, :3] @ (jnp.array([1.0, 1.0, 0.0]) / jnp.sqrt(2.0))
    out["ta"] = (_ang_jac(q, "b3") - _ang_jac(q, "b1")).T @ torque
    out["s"] = -jax.grad(lambda x: BY_NAME["s"].potential_energy(BARE, x))(q)
    out["bu"] = _bushing_oracle(q, qd)
    same = mb.BushingForce("z", "b1", "b1", rotational_stiffness=(1, 1, 1), translational_stiffness=(1, 1, 1))
    out["same"] = same.deflection(BARE, q)
    lig = BY_NAME["lig"]
    one = Model(BODIES, JOINTS, COORDS, muscles=[lig.path])
    length, dl = jax.value_and_grad(lambda y: mb.muscle_lengths(one, y)[0])(q)
    x = length / 0.5
    out["lig_stretch"] = x
    out["lig"] = -200.0 * (40.0 * x**2 - 30.0 * x**3) * dl
    return out


ORACLES = _oracles(Q, QD)


@pytest.mark.parametrize("text, value", [
    ("-3*q^2 - 0.5*qdot + sin(q)/(1+exp(-q)) - -cos(2*qdot)", None),
    ("-q^2", -(0.3**2)), ("2^3^2", 2.0**9), ("1.5e1*(q+qdot)", 15.0 * 0.8), (".5 * +q", 0.15),
    ("q^0.5", 0.3**0.5), ("10 - 4 - 3", 3.0), ("12/3/2", 2.0),
])
def test_expression_values(text, value):
    q, qd = 0.3, 0.5
    if value is None:
        value = -3 * q**2 - 0.5 * qd + np.sin(q) / (1 + np.exp(-q)) + np.cos(2 * qd)
    e = mb.ExpressionBasedCoordinateForce("e", "q0", text)
    assert_tree_allclose(e.value(jnp.asarray(q), jnp.asarray(qd)), value, rtol=1e-15)


@pytest.mark.parametrize("text, message", [
    ("q*foo", r"character 3: unknown name 'foo'"), ("q +", "ends too early"), ("(q", r"expected '\)'"),
    ("q q", "unexpected 'q'"), ("", "empty"), ("step(q)", "unknown name 'step'"), ("q > 1", "unexpected '>'"),
    ("sin q", r"expected '\('"),
])
def test_expression_errors(text, message):
    with pytest.raises(mb.ModelError, match=r"ExpressionBasedCoordinateForce 'bad'.*" + message):
        mb.ExpressionBasedCoordinateForce("bad", "q0", text)


def test_forward_dynamics_adds_the_passive_forces():
    assert_tree_allclose(OURS["fd"], OURS["fd_bare"], rtol=1e-12)


def test_body_fixed_xyz_angles_invert_the_rotation():
    from jaxmb._spatial import body_fixed_xyz_angles
    for th in (jnp.array([0.1, 0.2, 0.3]), jnp.array([-2.5, 1.2, 3.0]), jnp.array([3.1, -1.5, -0.2])):
        assert_tree_allclose(body_fixed_xyz_angles(body_fixed_xyz(th)), th, rtol=1e-13)


def test_spring_mass_and_bushing_conserve_energy_under_simulate():
    """A slider on a spring to ground and a pendulum on a bushing to ground, no gravity."""
    bodies = [Body("cart", 1.0, (0, 0, 0), _I), Body("bob", 0.5, (0.2, 0.0, 0.0), _I)]
    joints = [prismatic("slide", "ground", "cart", (1, 0, 0), Coordinate(0)),
              revolute("hinge", "cart", "bob", (0, 0, 1), Coordinate(1))]
    springs = [mb.PointToPointSpring("s", "ground", (-1.0, 0.3, 0), "cart", (0, 0, 0), 40.0, 0.8),
               mb.BushingForce("bu", "ground", "bob", frame1=BUSHING_F1, rotational_stiffness=(1, 2, 3),
                               translational_stiffness=(10, 20, 30))]
    model = Model(bodies, joints, ["x", "th"], gravity=(0.0, 0.0, 0.0), forces=springs)
    sol = mb.simulate(model, jnp.array([0.1, 0.3]), jnp.array([0.5, -1.0]), 1.0, ts=jnp.linspace(0.0, 1.0, 3),
                      rtol=1e-11, atol=1e-11)

    def energy(q, qd):
        return mb.kinetic_energy(model, q, qd) + sum(s.potential_energy(model, q) for s in springs)

    e = jax.jit(jax.vmap(energy))(sol.q, sol.qd)
    assert float(jnp.ptp(sol.q[:, 0])) > 1e-2  # it moves
    assert_tree_allclose(e, jnp.full_like(e, e[0]), rtol=1e-8)


@pytest.mark.parametrize("force, message", [
    (mb.CoordinateActuator("a", "nope"), r"CoordinateActuator 'a' acts on coordinate 'nope'"),
    (mb.PointActuator("p", "nobody"), r"PointActuator 'p' names body 'nobody'"),
    (mb.TorqueActuator("t", "b1", "nobody"), r"TorqueActuator 't' names body 'nobody'"),
    (mb.PointToPointSpring("s", "nobody", (0, 0, 0), "b1", (0, 0, 0), 1.0), r"'s' names body 'nobody'"),
    (mb.BushingForce("b", "b1", "nobody"), r"BushingForce 'b' names body 'nobody'"),
    (mb.CoordinateLimitForce("c", "nope", 1, 1, 1, -1), r"CoordinateLimitForce 'c' acts on coordinate 'nope'"),
    (mb.ExpressionBasedCoordinateForce("e", "nope", "q"), r"'e' acts on coordinate 'nope'"),
    (mb.Ligament("l", Muscle("p", [PathPoint("ground", (0, 0, 0)), PathPoint("nobody", (0, 0, 0))]),
                 Polynomial(0, [1.0]), 1.0, 1.0), r"Ligament 'l': path point is on body 'nobody'"),
])
def test_missing_body_or_coordinate_is_named_at_build(force, message):
    with pytest.raises(mb.ModelError, match=message):
        Model(BODIES, JOINTS, COORDS, forces=[force])


def test_bad_parameters_are_named():
    with pytest.raises(mb.ModelError, match=r"Actuator 'a': min_control 2.0 exceeds max_control 1.0"):
        mb.CoordinateActuator("a", "q0", 1.0, 2.0, 1.0)
    for force in (0.0, -5.0):  # a column of zeros, or a control of the other sign (accepted silently before)
        with pytest.raises(mb.ModelError, match=rf"Actuator 'a': optimal_force must be positive, got {force}"):
            mb.CoordinateActuator("a", "q0", force)
    # (2, -1) is OpenSim's "from the second point to the last": a valid range.
    assert mb.WrapSphere("s", "upper", 0.02, range=(2, -1)).range == (2, -1)
    with pytest.raises(mb.ModelError, match=r"CoordinateLimitForce 'c': transition 0.0 must be positive"):
        mb.CoordinateLimitForce("c", "q0", 1, 1, 1, -1, 0.0, 0.0)
    with pytest.raises(mb.ModelError, match=r"PointActuator 'p': direction .* is zero"):
        mb.PointActuator("p", "b1", direction=(0, 0, 0))
    with pytest.raises(mb.ModelError, match=r"Ligament 'l': resting_length -1.0 must be positive"):
        mb.Ligament("l", BY_NAME["lig"].path, Polynomial(0, [1.0]), -1.0, 1.0)
    with pytest.raises(ValueError, match=r"controls must have shape \(4,\), one per actuator"):
        mb.force_set_forces(MODEL, Q, QD, jnp.zeros(3))


@pytest.mark.parametrize("make, message", [
    (lambda: mb.PointToPointSpring("s", "b1", (0, 0, 0), "b2", (0, 0, 0), float("nan")), "PointToPointSpring 's': stiffness"),
    (lambda: mb.BushingForce("b", "b1", "b2", translational_damping=(0, float("nan"), 0)),
     "BushingForce 'b': translational_damping"),
    (lambda: mb.CoordinateLimitForce("c", "q0", 1, 1, 1, -1, float("nan")), "CoordinateLimitForce 'c': damping"),
    (lambda: mb.CoordinateActuator("a", "q0", float("nan")), "CoordinateActuator 'a': optimal_force"),
])
def test_a_nan_parameter_of_any_force_element_is_named(make, message):
    """Before: accepted, and the dynamics came out NaN. Infinite control bounds (OpenSim's
    default) stay allowed."""
    with pytest.raises(mb.ModelError, match=message + " is NaN; give a number"):
        make()
    assert float(mb.CoordinateActuator("a", "q0").min_control) == -np.inf


def test_elements_built_inside_jit_check_their_concrete_parameters():
    """Concrete parameters (arrays made outside) of an element built under jit are checked in
    NumPy; with jnp the comparison was traced and the check skipped, so a limit force with its
    limits swapped or a zero torque axis built silently under jit."""
    lo, hi, axis = jnp.asarray(1.0), jnp.asarray(-1.0), jnp.zeros(3)
    with pytest.raises(mb.ModelError, match=r"CoordinateLimitForce 'c': lower_limit 1.0 exceeds upper_limit -1.0"):
        jax.jit(lambda: mb.CoordinateLimitForce("c", "q0", 1, hi, 1, lo).damping)()
    with pytest.raises(mb.ModelError, match=r"TorqueActuator 't': axis .* is zero"):
        jax.jit(lambda: mb.TorqueActuator("t", "b1", "b2", axis).optimal_force)()
    with pytest.raises(mb.ModelError, match=r"Actuator 'a': min_control 1.0 exceeds max_control -1.0"):
        jax.jit(lambda: mb.CoordinateActuator("a", "q0", 1.0, lo, hi).optimal_force)()
    ok = jax.jit(lambda: mb.CoordinateLimitForce("c", "q0", 1, lo, 1, hi).damping)()
    assert float(ok) == 0.0


def test_elements_built_inside_jit_from_numbers_check_them():
    """Parameters given as Python numbers to an element built under jit are converted while
    the trace runs into concrete arrays (`jax.ensure_compile_time_eval`), so they are checked
    too; before, `jnp.asarray(1.0)` there was a tracer and every check was skipped."""
    with pytest.raises(mb.ModelError, match=r"CoordinateLimitForce 'c': lower_limit 1.0 exceeds upper_limit -1.0"):
        jax.jit(lambda: mb.CoordinateLimitForce("c", "q0", 1, -1.0, 1, 1.0).damping)()
    with pytest.raises(mb.ModelError, match=r"Body 'b' has non-positive mass -1.0 kg"):
        jax.jit(lambda: mb.Body("b", -1.0, (0, 0, 0), (1.0, 1.0, 1.0)).mass)()
    with pytest.raises(mb.ModelError, match=r"muscle 'Thelen2003Muscle': max_isometric_force must be positive"):
        jax.jit(lambda: mb.Thelen2003Muscle(max_isometric_force=-1.0).af)()
    # a traced parameter is still accepted unchecked: a model built from a fitted value
    assert float(jax.jit(lambda k: mb.CoordinateLimitForce("c", "q0", k, 1.0, k, -1.0).upper_stiffness)(2.0)) == 2.0
