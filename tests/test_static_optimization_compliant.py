"""Static optimization with compliant tendons (Ehsani 2016, section 4-4 C, Fig. 21): the torque
balance and the musculotendon equilibrium recomputed independently, optimality against scipy's
SLSQP on the nonlinear problem, the rigid-tendon limit, implicit derivatives against finite
differences, the equilibrium's second derivatives, and the force-sharing function of the
shoulder study (a small model here; MoBL-ARMS's 14 muscles under `slow`)."""

import pathlib
import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import minimize

import jaxmb as mb
from jaxmb import studies
from jaxmb.io import read_osim
from models_for_tests import muscled_elbow

TIME = np.linspace(0.0, 1.0, 41)
Q = jnp.asarray(1.0 + 0.8 * np.sin(2 * np.pi * TIME))[:, None]
RESERVE = (mb.CoordinateActuator("reserve", "flex"),)


def _elbow(compliant=True, strain=0.049):
    """An elbow with two flexors and an extensor (De Groote et al. 2016 muscles)."""
    return muscled_elbow([(name, side, mb.DeGrooteFregly2016Muscle(
        fmax, 0.12, 0.12, 0.1, 10.0, tendon_strain_at_one=strain, compliant_tendon=compliant))
        for name, side, fmax in (("flexor", "flexor", 300.0), ("flexor2", "flexor", 150.0),
                                 ("extensor", "extensor", 400.0))])


MODEL = _elbow()


def _loss(model, fmax, q):
    m = eqx.tree_at(lambda x: x.muscles[0].force_model.max_isometric_force, model, fmax)
    so = mb.static_optimization(m, TIME, q, actuators_extra=RESERVE, tendon="compliant")
    return jnp.sum(so.activations ** 2) + 1e-3 * jnp.sum(so.controls ** 2), so


# One compiled program serves every compliant solve of this file (the model is an argument).
_value_and_grad = eqx.filter_jit(jax.value_and_grad(_loss, argnums=(1, 2), has_aux=True))


def _value(fmax, q):
    return _value_and_grad(MODEL, fmax, q)[0][0]


@jax.jit
def _muscle_check(q, qd, a):
    """The muscles' own tendon forces at activations ``a`` and their moment arms, per frame."""
    def one(qi, qdi, ai):
        l, R = mb.muscle_lengths_and_moment_arms(MODEL, qi)
        return mb.muscle_forces(MODEL, ai, l, -R.T @ qdi), R
    return jax.vmap(one)(q, qd, a)


@pytest.fixture(scope="module")
def solved():
    return _value_and_grad(MODEL, jnp.asarray(300.0), Q)


def test_torque_balance_and_equilibrium_hold(solved):
    _, so = solved[0]
    assert bool(jnp.all(so.result == mb.RESULTS.successful)) and int(jnp.max(so.iterations)) < 30
    assert float(jnp.max(so.torque_residual)) < 1e-8 and float(jnp.max(so.kkt_residual)) < 1e-9
    # Independently: the muscles' own equilibrium tendon forces at the activations found, through
    # the moment arms, plus the reserve, balance the inverse dynamics.
    forces, R = _muscle_check(so.q, so.qd, so.activations)
    np.testing.assert_allclose(so.muscle_forces, forces, rtol=1e-12, atol=1e-9)
    tau = jax.jit(jax.vmap(lambda q, qd, qdd: mb.inverse_dynamics(MODEL, q, qd, qdd)))(so.q, so.qd, so.qdd)
    np.testing.assert_allclose(jnp.einsum("kij,kj->ki", R, forces) + so.actuator_forces, tau, rtol=0, atol=1e-8)
    # The compliant tendon changes the answer: the activations differ from the rigid route's.
    assert float(jnp.max(so.activations)) > 0.5 and float(jnp.min(so.activations)) == 0.0


def test_frame_equals_scipy_slsqp_on_the_nonlinear_problem(solved):
    _, so = solved[0]
    k = 12  # a frame with every muscle active
    q, qd = so.q[k:k + 1], so.qd[k:k + 1]
    tau = np.asarray(so.generalized_forces[k])

    def balance(x):  # the nonlinear constraint and its Jacobian (forces at activations x[:3])
        a = jnp.asarray(x[None, :3])
        f, R = _muscle_check(q, qd, a)
        h = 1e-7  # the slopes by central differences of the muscles' own forces (an independent route)
        df = (_muscle_check(q, qd, a + h)[0] - _muscle_check(q, qd, a - h)[0]) / (2 * h)
        R = np.asarray(R[0])
        return R @ np.asarray(f[0]) + x[3] - tau, np.hstack([R * np.asarray(df[0])[None, :], np.ones((1, 1))])

    res = minimize(lambda x: np.sum(x ** 2), np.full(4, 0.3), jac=lambda x: 2 * x, method="SLSQP",
                   bounds=[(0.0, 1.0)] * 3 + [(None, None)],
                   constraints=[{"type": "eq", "fun": lambda x: balance(x)[0], "jac": lambda x: balance(x)[1]}],
                   options={"ftol": 1e-14, "maxiter": 500})
    assert res.success, res.message
    np.testing.assert_allclose(np.concatenate([so.activations[k], so.controls[k]]), res.x, rtol=0, atol=1e-6)
    assert np.all(np.asarray(so.activations[k]) > 1e-3)


def test_gradient_equals_finite_differences(solved):
    (value, so), (g_f, g_q) = solved
    assert bool(jnp.isfinite(g_f)) and bool(jnp.all(jnp.isfinite(g_q)))
    fmax, h = jnp.asarray(300.0), 1e-3
    fd = (_value(fmax + h, Q) - _value(fmax - h, Q)) / (2 * h)
    assert abs(float(g_f) - float(fd)) < 1e-6 * abs(float(fd))
    dq = jnp.asarray(np.random.default_rng(3).normal(size=Q.shape)) * 1e-2
    fd_q = (_value(fmax, Q + 1e-4 * dq) - _value(fmax, Q - 1e-4 * dq)) / 2e-4
    assert abs(float(jnp.sum(g_q * dq)) - float(fd_q)) < 1e-6 * abs(float(fd_q))


def test_stiff_tendons_give_the_rigid_route():
    """As the tendon strain at one F_max goes to 0 the compliant solution tends to the rigid
    route's with passive forces (De Groote's equilibrium fibre velocity is the rigid one,
    v_MT cos(phi)); the difference is first order in the strain."""
    diffs = []
    for strain in (1e-3, 1e-4):
        (_, comp), _ = _value_and_grad(_elbow(True, strain), jnp.asarray(300.0), Q)
        rigid = mb.static_optimization(_elbow(False, strain), TIME, Q, actuators_extra=RESERVE, passive_forces=True)
        assert bool(jnp.all(comp.result == mb.RESULTS.successful))
        diffs.append(float(jnp.max(jnp.abs(comp.activations - rigid.activations))))
    assert diffs[1] < 1e-3, diffs
    assert 8.0 < diffs[0] / diffs[1] < 12.0, diffs


def test_bad_tendon_is_refused():
    with pytest.raises(ValueError, match="tendon must be 'rigid' or 'compliant', got 'elastic'"):
        mb.static_optimization(MODEL, TIME, Q, tendon="elastic")


@jax.jit
def _derivatives(fm, a, l):
    """dF_T/da, d²F_T/da², d²F_T/da dl_MT at one state."""
    first = jax.grad(fm.tendon_force)
    return first(a, l, -0.05), jax.grad(first)(a, l, -0.05), jax.grad(first, argnums=1)(a, l, -0.05)


@pytest.mark.slow  # 10-15 s of compile; the gradient test above fails too without exact second derivatives
def test_equilibrium_second_derivatives_equal_finite_differences():
    """The compliant sensitivities need d²F_T/da² and d²F_T/da dl_MT: the equilibrium's last two
    Newton steps make them exact (one step gave first derivatives only). Millard et al.
    (2013)'s model, MoBL-ARMS's (De Groote's is covered by the gradient test above)."""
    fm = mb.Millard2012EquilibriumMuscle(500.0, 0.1, 0.2, 0.3, 10.0)
    for a, l in ((0.3, 0.31), (0.7, 0.29)):
        _, d_aa, d_al = _derivatives(fm, a, l)
        fd_aa = (_derivatives(fm, a + 1e-5, l)[0] - _derivatives(fm, a - 1e-5, l)[0]) / 2e-5
        fd_al = (_derivatives(fm, a, l + 1e-7)[0] - _derivatives(fm, a, l - 1e-7)[0]) / 2e-7
        np.testing.assert_allclose(d_aa, fd_aa, rtol=1e-6)
        np.testing.assert_allclose(d_al, fd_al, rtol=1e-6)


# ---- the shoulder study's force sharing (Fig. 21) ----


def test_force_sharing_function_balances_given_torques(solved):
    _, so = solved[0]
    rigid_free = _elbow()
    tau = so.generalized_forces - so.actuator_forces  # what the muscles alone produced
    forces = studies.compliant_static_optimization(rigid_free, so.time, so.q, so.qd, tau)
    assert forces.shape == (TIME.size, 3)
    R = jax.vmap(lambda q: mb.moment_arms(rigid_free, q))(so.q)
    np.testing.assert_allclose(jnp.einsum("kij,kj->ki", R, forces), tau, rtol=0, atol=1e-8)
    with pytest.warns(RuntimeWarning, match=r"41 of 41 frames have no activations in \[0, 1\]"):
        studies.compliant_static_optimization(rigid_free, so.time, so.q, so.qd, tau + 1e4)


def test_read_osim_reads_a_subset_of_muscles():
    arm26 = pathlib.Path(mb.__file__).parent / "data" / "arm26.osim"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = read_osim(arm26, muscles=("TRIlong", "BIClong")).model
        assert model.muscle_names == ("TRIlong", "BIClong")  # file order
        with pytest.raises(mb.ModelError, match=r"arm26.osim has no muscles \['BIC'\]; its muscles are \["):
            read_osim(arm26, muscles=("BIC",))
        with pytest.raises(TypeError, match=r"write muscles=\['BIClong'\]"):
            read_osim(arm26, muscles="BIClong")


def test_frozen_paths_balance_the_torques_with_their_moment_arms():
    """``moment_arms="frozen_path"``: the compliant tendons' forces balance the torques through
    the frozen path's moment arms (OpenSim's), which differ from ``-dL/dq`` over arm26's wraps."""
    arm26 = pathlib.Path(mb.__file__).parent / "data" / "arm26.osim"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = read_osim(arm26, muscles=("BIClong",)).model
    time = np.linspace(0.0, 1.0, 6)
    q = jnp.stack([0.3 + 0.2 * np.sin(2 * np.pi * time), 1.0 + 0.6 * np.sin(2 * np.pi * time)], axis=1)
    reserves = tuple(mb.CoordinateActuator(f"reserve_{name}", name) for name in model.coordinate_names)
    so = mb.static_optimization(model, time, q, actuators_extra=reserves, tendon="compliant",
                                moment_arms="frozen_path")
    assert bool(jnp.all(so.result == mb.RESULTS.successful))

    def balance(R):
        return float(jnp.max(jnp.abs(jnp.einsum("kqn,kn->kq", R, so.muscle_forces) + so.actuator_forces
                                     - so.generalized_forces)))

    assert balance(jax.vmap(lambda x: mb.moment_arms(model, x, method="frozen_path"))(so.q)) < 1e-10
    # -dL/dq by central differences of the lengths does not balance them (h = 1e-6: 6e-11 m
    # from the closed-form R at these states, which differs from the frozen path's by 4.6e-4 m).
    h, lengths = 1e-6, jax.vmap(lambda x: mb.muscle_lengths(model, x))
    minus_dl_dq = jnp.stack([(lengths(so.q - h * e[None]) - lengths(so.q + h * e[None])) / (2 * h)
                             for e in jnp.eye(model.nq)], axis=1)
    assert balance(minus_dl_dq) > 1e-2


@pytest.mark.slow
def test_fig21_mobl_arms_fourteen_muscles(shared_dir):
    """Fig. 21: MoBL-ARMS's 14 shoulder muscles share the tracking's torques (a compile of
    minutes and several GB)."""
    path = shared_dir / "models" / "MOBL_ARMS_fixed_41.osim"
    if not path.exists():
        pytest.skip(f"{path} is not available")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        skeleton = studies.shoulder_model(read_osim(path, muscles=False, locked=studies.locked_coordinates()).model)
        model = studies.shoulder_model(read_osim(path, muscles=studies.SHOULDER_MUSCLES,
                                                 locked=studies.locked_coordinates()).model)
    assert model.muscle_names == studies.SHOULDER_MUSCLES
    tracking = eqx.filter_jit(lambda m: studies.track_shoulder(m, t1=1.0, n_frames=11, rtol=1e-10, atol=1e-10))(
        skeleton)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every frame balanced
        forces = studies.shoulder_muscle_forces(model, tracking, studies.compliant_static_optimization)
    assert forces.shape == (11, 14) and np.all(np.isfinite(forces)) and np.all(forces >= 0.0)
    R = jax.vmap(lambda q: mb.moment_arms(model, q))(tracking.q)
    np.testing.assert_allclose(jnp.einsum("kij,kj->ki", R, forces), tracking.tau, rtol=0, atol=1e-8)
