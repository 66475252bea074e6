"""Andrews' squeezer, five-bar and four-bar as embedded ODEs: Test Set reference,
H&W's closed-form mass matrix and initial accelerations, energy balance, constraint
drift (embedded: none; DAE baseline: reported)."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmb as mb
from jaxmb.models._closed import ANDREWS_PARAMETERS, _andrews_guess  # the model's data and guess

import closed_oracles as O

C = mb.models  # the built-in mechanisms (the Test Set data are in closed_oracles)

REFERENCE_DIGITS = 9  # significant digits required at t = 0.03 (max relative error)
EMBEDDED_RESIDUAL = 1e-10  # |g| along every embedded trajectory
ENERGY_TOL = 1e-7  # relative change of T + V - W along the Andrews trajectory
SIM_TOL = 1e-11  # integrator rtol = atol
TS = np.linspace(0.0, 0.03, 31)


@pytest.fixture(scope="module")
def andrews():
    return C.andrews_squeezer(throw=False)


@pytest.fixture(scope="module")
def andrews_run(andrews):
    q0 = jnp.asarray(O.ANDREWS_Y0[:1])

    @eqx.filter_jit
    def run(model):
        sol = mb.simulate(model, q0, jnp.zeros(1), 0.03, ts=jnp.asarray(TS),
                          rtol=SIM_TOL, atol=SIM_TOL, solver="dopri8")
        closure = model.joints[1].function.closure
        sols = jax.vmap(closure.solve)(sol.q)
        angles = jax.vmap(lambda q: mb.joint_values(model, q))(sol.q)
        energy = jax.vmap(lambda q, qd: O.andrews_energy(model, q, qd, q0))(sol.q, sol.qd)
        return sol, sols, angles, energy

    return run(andrews)


def test_open_tree_mass_matrix_is_hairer_wanner():
    tree = C.andrews_squeezer(embedded=False)
    for k in range(3):
        y = jnp.asarray(O.ANDREWS_Y0) + 0.7 * k * jnp.arange(7.0)
        m = mb.mass_matrix(tree, y)
        np.testing.assert_allclose(m, O.andrews_mass_matrix_hw(y), rtol=1e-13, atol=1e-20)


def test_initial_accelerations_and_multipliers(andrews):
    """Test Set consistent initial values: w(0) and lambda(0)."""
    q0 = jnp.asarray(O.ANDREWS_Y0[:1])
    qdd = eqx.filter_jit(lambda m: mb.forward_dynamics(m, q0, jnp.zeros(1), jnp.zeros(1)))(andrews)
    np.testing.assert_allclose(qdd, [14222.4439199541138705911625887], rtol=1e-12)
    field = mb.constraints.dae_vector_field(andrews)
    perm = jnp.asarray([O.ANDREWS_ANGLES.index(n) for n in andrews.joint_names])
    z0 = jnp.asarray(O.ANDREWS_Y0)[perm]
    zdd, lam = eqx.filter_jit(lambda f: f.accelerations(z0, jnp.zeros(7)))(field)
    theta = andrews.joint_names.index("Theta")
    np.testing.assert_allclose(zdd[theta], -10666.8329399655854029433719415, rtol=1e-12)
    np.testing.assert_allclose(lam[:2], [98.5668703962410896057654982170, -6.12268834425566265503114393122],
                               rtol=1e-12)
    np.testing.assert_allclose(lam[2:], 0.0, atol=1e-12)  # round-off of multipliers of order 100


def test_andrews_reference_at_003(andrews_run):
    sol, _, angles, _ = andrews_run
    ref = np.asarray(O.ANDREWS_REFERENCE_T003)
    rel = np.abs(np.asarray(angles[-1]) - ref) / np.abs(ref)
    assert rel.max() < 10.0 ** (-REFERENCE_DIGITS), rel
    np.testing.assert_allclose(sol.qd[-1, 0], O.ANDREWS_REFERENCE_VELOCITY_T003[0], rtol=1e-8)
    # The loop (throw=False) was checked at the end of every step and solved there.
    assert bool(sol.success) and float(sol.t_end) == 0.03 and {**sol.loop_results} == {"andrews_squeezer": 0}


def test_andrews_embedded_has_no_drift(andrews_run):
    _, sols, _, _ = andrews_run
    assert np.all(np.asarray(sols.result == mb.RESULTS.successful))
    assert np.max(np.asarray(sols.residual)) < EMBEDDED_RESIDUAL


def test_andrews_energy_balance(andrews_run):
    """T + V_spring - mom (beta - beta0) is conserved (no dissipation in the model)."""
    _, _, _, energy = andrews_run
    e = np.asarray(energy)
    scale = np.max(np.abs(e - e[0])) + abs(e[0])
    assert np.max(np.abs(e - e[0])) / abs(e[0]) < ENERGY_TOL, (e[0], np.max(np.abs(e - e[0])), scale)


def test_spring_force_matches_hairer_wanner(andrews):
    """The spring's generalized force on gamma equals H&W's ff(3)."""
    P = ANDREWS_PARAMETERS
    tree = C.andrews_squeezer(embedded=False)
    y = jnp.asarray(O.ANDREWS_Y0) + 0.1
    ga = y[2]
    xd = P["sd"] * jnp.cos(ga) + P["sc"] * jnp.sin(ga) + P["xb"]
    yd = P["sd"] * jnp.sin(ga) - P["sc"] * jnp.cos(ga) + P["yb"]
    lng = jnp.sqrt((xd - P["xc"]) ** 2 + (yd - P["yc"]) ** 2)
    force = -P["c0"] * (lng - P["l0"]) / lng
    ff3 = force * (xd - P["xc"]) * (P["sc"] * jnp.cos(ga) - P["sd"] * jnp.sin(ga)) + \
        force * (yd - P["yc"]) * (P["sd"] * jnp.cos(ga) + P["sc"] * jnp.sin(ga))
    q = mb.generalized_forces(tree, y)
    np.testing.assert_allclose(q[2], ff3, rtol=1e-12)
    np.testing.assert_allclose(q[0], P["mom"], rtol=1e-12)
    np.testing.assert_allclose(q[jnp.asarray([1, 3, 4, 5, 6])], 0.0, atol=1e-15)


def test_a_dae_solve_traces_its_dynamics_once(andrews, monkeypatch):
    """As simulate's (tests/test_simulate.py): the DAE's vector field is traced once per
    solve, not at each of diffrax's evaluations (three without that); none if an
    identical one was traced before."""
    from jaxmb._loops import _dae  # private: the test counts traces of an internal function

    calls, original = [], _dae._mass_matrix_and_forces

    def counting(*args):
        calls.append(1)
        return original(*args)

    monkeypatch.setattr(_dae, "_mass_matrix_and_forces", counting)
    z0 = jnp.asarray(O.ANDREWS_Y0)
    # Standard dtype promotion here: diffrax evaluates the vector field both inside its own
    # `jax.numpy_dtype_promotion("standard")` scopes (e.g. Tsit5.step, Dopri8.step) and outside
    # them; the setting is part of jit's cache key, so under "strict" it is traced twice.
    with jax.numpy_dtype_promotion("standard"):
        jax.jit(lambda z: mb.constraints.simulate_dae(andrews, z, jnp.zeros(7), 0.03, alpha=100.0, beta=100.0).z).lower(z0)
    assert len(calls) <= 1


def test_andrews_dae_baseline_drifts_but_agrees(andrews):
    perm = jnp.asarray([O.ANDREWS_ANGLES.index(n) for n in andrews.joint_names])
    z0 = jnp.asarray(O.ANDREWS_Y0)[perm]
    run = eqx.filter_jit(lambda m: mb.constraints.simulate_dae(m, z0, jnp.zeros(7), 0.03, ts=jnp.asarray([0.015, 0.03]),
                                                   alpha=0.0, beta=0.0, rtol=1e-10, atol=1e-10))
    s = run(andrews)
    ref = np.asarray(O.ANDREWS_REFERENCE_T003)[np.asarray(perm)]
    rel = np.abs(np.asarray(s.z[-1]) - ref) / np.abs(ref)
    assert rel.max() < 1e-7
    drift = float(np.max(np.asarray(s.drift)))
    print(f"DAE (index 1, no stabilisation) constraint drift at t=0.03: {drift:.2e}")
    assert 0.0 < drift < 1e-6


def test_dae_solver_by_name(andrews):
    """simulate_dae takes the solver names of simulate ("kvaerno5" with its stage iteration
    that runs to convergence, tests/test_simulate.py) and names an unknown one."""
    z0 = jnp.asarray(O.ANDREWS_Y0)[jnp.asarray([O.ANDREWS_ANGLES.index(n) for n in andrews.joint_names])]
    with pytest.raises(ValueError, match="simulate_dae: unknown solver 'radau'.*kvaerno5"):
        mb.constraints.simulate_dae(andrews, z0, jnp.zeros(7), 0.03, solver="radau")


def test_five_bar_embedded_trajectory_has_no_drift():
    model = C.five_bar(throw=False)
    closure = model.joints[2].function.closure

    @eqx.filter_jit
    def run(m):
        sol = mb.simulate(m, jnp.asarray([1.2, -0.9]), jnp.zeros(2), 1.0, ts=jnp.linspace(0, 1.0, 21),
                          rtol=1e-9, atol=1e-9)
        return sol, jax.vmap(closure.solve)(sol.q), jax.vmap(lambda q, qd: mb.kinetic_energy(m, q, qd)
                                                             + mb.potential_energy(m, q))(sol.q, sol.qd)

    sol, sols, energy = run(model)
    assert np.all(np.asarray(sols.result == mb.RESULTS.successful))
    assert np.max(np.asarray(sols.residual)) < EMBEDDED_RESIDUAL
    assert np.ptp(np.asarray(sol.q[:, 0])) > 0.1  # it moved
    e = np.asarray(energy)
    assert np.max(np.abs(e - e[0])) < 1e-6 * max(1.0, abs(e[0]))


@pytest.mark.parametrize("kind", ["fourier", "quintic"])
def test_andrews_premodeled_is_exact_to_round_off(andrews, kind):
    """Pre-modeling (Ehsani 2016, section 3-3) over one crank revolution, Θ with its
    secular term -β: Fourier series of order 24, or periodic quintic splines through
    the loop's values and exact derivatives at 512 knots. Either fit is exact to
    round-off in value, its dynamics equal the implicit model's, and its simulation
    meets the reference."""
    options = dict(order=24) if kind == "fourier" else dict(periodic=True)
    step = 2 * np.pi / (256 if kind == "fourier" else 512)
    fourier, err = mb.constraints.premodeled(andrews, 0.0, 2 * np.pi, step, kind=kind, **options)
    assert float(jnp.max(err)) < 1e-13
    theta = fourier.joints[andrews.joint_names.index("Theta")].function
    assert float(theta.slope) == -1.0

    @eqx.filter_jit
    def both(implicit, fitted):
        qs = jnp.asarray([[-0.0617], [1.3], [4.0]])
        qd = jnp.asarray([900.0])
        acc = lambda m: jax.vmap(lambda q: mb.forward_dynamics(m, q, qd))(qs)  # noqa: E731
        q0 = jnp.asarray(O.ANDREWS_Y0[:1])
        sol = mb.simulate(fitted, q0, jnp.zeros(1), 0.03, rtol=SIM_TOL, atol=SIM_TOL, solver="dopri8")
        return acc(implicit), acc(fitted), mb.joint_values(fitted, sol.q[-1])

    a_impl, a_fit, angles = both(andrews, fourier)
    # The quintic's curvatures are good to 7e-11 (the fit's derivative_error); times
    # β'² = 8.1e5 that is 6e-5 rad/s² in β'' ~ 6e4, 1e-9 relative.
    np.testing.assert_allclose(a_fit, a_impl, rtol=1e-10 if kind == "fourier" else 1e-9)
    ref = np.asarray(O.ANDREWS_REFERENCE_T003)
    assert np.max(np.abs(np.asarray(angles) - ref) / np.abs(ref)) < 10.0 ** (-REFERENCE_DIGITS)


def test_loop_rates_equal_nested_forward_mode(andrews):
    """joint_rates of an implicit loop (one solve, closed-form f' and q'ᵀHq') equal
    nested jax.jvp through the root finder (implicit-function-theorem JVPs)."""
    closure = andrews.joints[1].function.closure

    @jax.jit
    def both(q, qd):
        f, jac, fd, fdd = closure.rates(q, qd)
        inner = lambda x: jax.jvp(closure, (x,), (qd,))  # noqa: E731
        (f2, fd2), (_, fdd2) = jax.jvp(inner, (q,), (qd,))
        return f, fd, fdd, f2, fd2, fdd2, jac, jax.jacfwd(closure)(q)

    for q, qd in (([0.2], [10.0]), ([2.9], [-700.0])):
        f, fd, fdd, f2, fd2, fdd2, jac, jac2 = both(jnp.asarray(q), jnp.asarray(qd))
        np.testing.assert_allclose(f, f2, rtol=1e-13, atol=1e-14)
        np.testing.assert_allclose(fd, fd2, rtol=1e-11, atol=1e-11 * float(jnp.max(jnp.abs(fd2))))
        np.testing.assert_allclose(fdd, fdd2, rtol=1e-10, atol=1e-10 * float(jnp.max(jnp.abs(fdd2))))
        np.testing.assert_allclose(jac, jac2, rtol=1e-11, atol=1e-13)
        # Each implicit joint's rates_and_gradient is its row of the same solve.
        implicit = [j.function for j in andrews.joints if isinstance(j.function, mb.ImplicitJointFunction)]
        assert len(implicit) == closure.m
        for fn in implicit:
            got = fn.rates_and_gradient(jnp.asarray(q), jnp.asarray(qd))
            for x, want in zip(got, (f, fd, fdd, jac)):
                np.testing.assert_allclose(x, want[fn.index], rtol=1e-13, atol=1e-13 * float(jnp.max(jnp.abs(want))))


def test_loop_rates_from_a_poor_guess_and_their_parameter_derivatives(andrews):
    """rates() runs its own Newton loop (keeping the last inverse of ∂g/∂f for the
    implicit derivatives): from a guess 1e-2 rad off it iterates to the same
    solution, and its outputs differentiate in q and in the loop's parameters (forward
    and reverse mode) as the nested-jvp route through optimistix does."""
    c = andrews.joints[1].function.closure
    poor = mb.LoopClosure(c.fn, c.q_ref, c.f_ref, c.params, guess=lambda q, p: _andrews_guess(q, p) + 1e-2,
                          name="andrews, poor guess", throw=True)
    q, qd = jnp.asarray([0.7]), jnp.asarray([40.0])

    def via_rates(closure, q):
        f, jac, fd, fdd = closure.rates(q, qd)
        return jnp.concatenate([f, jac[:, 0], fd, fdd])

    def via_jvp(closure, q):
        inner = lambda x: jax.jvp(closure, (x,), (qd,))  # noqa: E731
        (f, fd), (_, fdd) = jax.jvp(inner, (q,), (qd,))
        return jnp.concatenate([f, jax.jacfwd(closure)(q)[:, 0], fd, fdd])

    np.testing.assert_allclose(via_rates(poor, q), via_jvp(c, q), rtol=1e-12, atol=1e-12)

    def d_params(route, mode):
        fn = lambda p, x: route(eqx.tree_at(lambda cc: cc.params, c, p), x)  # noqa: E731
        if mode == "fwd":
            return jax.jacfwd(fn, argnums=(0, 1))(c.params, q)
        w = jnp.linspace(0.5, 1.5, 4 * c.m)
        return jax.grad(lambda p, x: w @ fn(p, x), argnums=(0, 1))(c.params, q)

    for mode in ("fwd", "rev"):
        got = jax.tree.leaves(eqx.filter_jit(lambda: d_params(via_rates, mode))())
        want = jax.tree.leaves(eqx.filter_jit(lambda: d_params(via_jvp, "fwd" if mode == "fwd" else "rev"))())
        for a, b in zip(got, want):
            scale = max(float(jnp.max(jnp.abs(b))), 1.0)
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12 * scale)


def test_four_bar_falling_freely_stops_at_the_turning_point_of_its_coordinate():
    """The four-bar's q (body 2's centre-of-mass height) has a minimum, about -2.522 m
    with the default lengths, where dg/df is singular: q is not a coordinate of the
    mechanism across it. Released at rest from q = 0, the linkage conserves energy to
    1e-7 (relative) on the way down and reaches it at about t = 1.23 s. There simulate
    stops with the loop's error naming the mechanism, whether the loop checks its own
    solves (throw=True) or not (then simulate checks them at the end of every step);
    with simulate(throw=False) it stops with a result flag and where it stopped."""
    run = eqx.filter_jit(lambda m, t1, throw: mb.simulate(
        m, jnp.array([0.0]), jnp.zeros(1), t1, ts=jnp.linspace(0.0, t1, 21), solver="dopri8",
        rtol=1e-10, atol=1e-10, throw=throw))
    model, loose = mb.models.four_bar(), mb.models.four_bar(throw=False)
    down = run(model, jnp.asarray(1.2), True)
    energy = jax.vmap(lambda q, qd: mb.kinetic_energy(model, q, qd) + mb.potential_energy(model, q))(
        down.q, down.qd)
    assert float(jnp.abs(energy - energy[0]).max()) < 1e-7 * float(jnp.abs(energy[0]))
    assert -2.522 < float(down.q[-1, 0]) < -2.5   # nearly at the turning point
    assert float(down.t_end) == 1.2 and down.loop_results == {}
    np.testing.assert_allclose(down.q_end, down.q[-1], rtol=1e-12)  # the save at t1, interpolated
    closure = model.joints[0].function.closure
    assert float(closure.solve(down.q[-1]).rcond) < 0.05
    with pytest.raises(eqx.EquinoxRuntimeError, match="LoopClosure 'four_bar'"):
        run(model, jnp.asarray(1.3), True)
    with pytest.raises(eqx.EquinoxRuntimeError, match="simulate: LoopClosure 'four_bar' failed at the end of a step"):
        eqx.filter_jit(lambda m: run.__wrapped__(m, jnp.asarray(1.3), True).q)(loose)  # whatever is used raises
    at_the_turning_point = r"simulate: LoopClosure 'four_bar' failed at t = 1\.22\d+, q = \[-2\.52"
    with pytest.raises(mb.LoopClosureError, match=at_the_turning_point):
        mb.simulate(loose, jnp.array([0.0]), jnp.zeros(1), 1.3, solver="dopri8", rtol=1e-10, atol=1e-10)
    # Unchecked, the run went on past the turning point and reported success with its
    # energy far off (f406490). Now it stops there, each member of a vmap on its own.
    both = eqx.filter_jit(jax.vmap(lambda t1: run.__wrapped__(loose, t1, False)))(jnp.asarray([1.2, 1.3]))
    ok, over = (jax.tree.map(lambda x: x[k], both) for k in range(2))
    assert bool(ok.success) and int(ok.loop_results["four_bar"]) == 0
    # The same motion to the integrator's accuracy: under vmap a Newton loop iterates
    # until every member has converged, so the steps differ at round-off.
    np.testing.assert_allclose(ok.q, down.q, rtol=1e-8)
    assert not bool(over.success)
    assert bool((over.result == mb.RESULTS.loop_not_converged) | (over.result == mb.RESULTS.loop_singular))
    assert int(over.loop_results["four_bar"]) != 0
    assert 1.2 < float(over.t_end) < 1.25 and -2.5222 < float(over.q_end[0]) < -2.5217
    saved = np.asarray(over.ts) <= float(over.t_end)
    assert np.all(np.isinf(np.asarray(over.q)[~saved])) and np.all(np.isfinite(np.asarray(over.q)[saved]))
