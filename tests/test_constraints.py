"""Loop closures: solve, branches, singularities, and the four derivative routes
(implicit differentiation closed form, optimistix IFT autodiff, Ehsani's analytical
projection method, Ehsani 2016, Eq. 100-120, computational molecule, pre-modeling)."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmb as mb
from closed_oracles import FIVE_BAR_POINT, FOUR_BAR_POINT

R = mb.RESULTS

# Named tolerances.
ROUNDOFF = 1e-12  # two exact routes to the same derivative
MOLECULE_H = 1e-4  # molecule step
MOLECULE_GRAD_TOL = 1e-6  # O(h^2) truncation of the central difference
MOLECULE_HESS_TOL = 1e-5  # O(h^2) truncation + O(eps/h^2) round-off
RESIDUAL_TOL = 1e-12  # |g| after a Newton solve

FIVE_BAR_QS = np.array([[0.7, -0.4], [0.45, -0.1], [1.0, -0.7], [0.8, -0.25]])


@pytest.fixture(scope="module", params=[1, -1], ids=["branch+1", "branch-1"])
def five(request):
    model = mb.models.five_bar(branch=request.param)
    return request.param, model, model.joints[2].function.closure


def test_five_bar_solution_and_branch(five):
    branch, model, closure = five
    sols = jax.jit(jax.vmap(closure.solve))(jnp.asarray(FIVE_BAR_QS))
    assert np.all(np.asarray(sols.result == R.successful))
    assert np.all(np.asarray(sols.residual) < RESIDUAL_TOL)
    assert np.all(np.sign(np.sin(np.asarray(sols.f[:, 1]))) == branch)
    # joint_values follows the model's chain order (theta1..theta4).
    z = mb.joint_values(model, jnp.asarray(FIVE_BAR_QS[0]))
    assert model.joint_names == ("theta1", "theta2", "theta3", "theta4")
    np.testing.assert_allclose(z[2:], sols.f[0], atol=ROUNDOFF)
    np.testing.assert_allclose(z[:2], FIVE_BAR_QS[0], atol=0)


def test_wrong_branch_is_flagged(five):
    branch, model, closure = five
    other = mb.models.five_bar(branch=-branch).joints[2].function.closure
    q = jnp.asarray(FIVE_BAR_QS[0])
    f_other = other.solve(q).f
    s = closure.solve(q, f_other, throw=False)
    assert s.result == R.loop_wrong_branch
    with pytest.raises(mb.LoopClosureError, match="another assembly branch"):
        closure.solve(q, f_other)


def _slider_crank(f, q, p):
    r, length = p
    return jnp.stack([r * jnp.cos(q[0]) + length * jnp.cos(q[0] + f[0]) - f[1],
                      r * jnp.sin(q[0]) + length * jnp.sin(q[0] + f[0])])


def _slider_crank_assembly(q, r=0.1, length=0.3, mirror=False):
    """An assembly of the slider-crank at q in closed form: the loop's own (the piston on
    the crank's side, the rod's relative angle continuous from 0 at q = 0) or the mirror
    image (the piston on the far side)."""
    s = jnp.arcsin(r * jnp.sin(q) / length)
    phi = jnp.pi + s if mirror else -s   # the rod's absolute angle
    return jnp.stack([phi - q, r * jnp.cos(q) + length * jnp.cos(phi)], axis=-1)


def _slider_crank_loop(**options):
    return mb.LoopClosure(_slider_crank, [0.0], [0.0, 0.4], jnp.array([0.1, 0.3]), name="slider_crank",
                          **options)


def _engine(loop):
    """A slider-crank under gravity whose rod angle and piston position are `loop`'s."""
    b = mb.ModelBuilder("engine", gravity=(0.0, -9.81, 0.0))
    crank = b.add_coordinate("crank")
    inertia = jnp.diag(jnp.array([1e-6, 1e-3, 1e-3]))
    b.add_body(mb.Body("crank", 1.0, (0.05, 0.0, 0.0), inertia))
    b.add_body(mb.Body("rod", 2.0, (0.15, 0.0, 0.0), inertia))
    b.add_body(mb.Body("piston", 0.5, (0.0, 0.0, 0.0), inertia))
    rod, piston = mb.implicit_joint_functions(loop)
    b.add_joint(mb.revolute("main_bearing", "ground", "crank", (0, 0, 1), mb.Coordinate(crank)))
    b.add_joint(mb.revolute("crank_pin", "crank", "rod", (0, 0, 1), rod, offset=(0.1, 0, 0)))
    b.add_joint(mb.prismatic("cylinder", "ground", "piston", (1, 0, 0), piston))
    return b.build()


def test_without_branch_fn_the_sign_of_det_dg_df_keeps_the_branch():
    """No guess and no branch_fn: a solution on the mirror assembly is a root of g
    (|g| at round-off) but det dg/df has the other sign, so it is flagged, not
    returned as if it were the loop's."""
    loop = _slider_crank_loop()
    assert loop.branch == 1
    q = jnp.array([0.7])
    mirror = _slider_crank_assembly(q[0], mirror=True)
    assert float(jnp.abs(_slider_crank(mirror, q, loop.params)).max()) < 1e-15
    ours = loop.solve(q)
    assert ours.result == R.successful and float(ours.f[1]) > 0
    assert loop.solve(q, mirror, throw=False).result == R.loop_wrong_branch
    with pytest.raises(mb.LoopClosureError, match="slider_crank.*another assembly branch.*guess"):
        loop.solve(q, mirror)
    # A continuation of 8 fixed steps from q_ref = 0 lands on the mirror assembly at q = 7.25.
    coarse = _slider_crank_loop(continuation_step=None)
    assert coarse.solve(jnp.array([7.25]), throw=False).result == R.loop_wrong_branch
    with pytest.raises(mb.LoopClosureError, match="slider_crank.*another assembly branch.*continuation_step"):
        mb.joint_values(_engine(coarse), jnp.array([7.25]))
    # A singular reference (r = L, q = pi/2: the rod straight down, det dg/df = 0)
    # names no branch.
    with pytest.raises(mb.LoopClosureError, match="slider_crank.*reference assembly.*singular"):
        mb.LoopClosure(_slider_crank, [jnp.pi / 2], [-jnp.pi, 0.0], jnp.array([0.3, 0.3]), name="slider_crank")


def _circle(f, q, p):
    return jnp.stack([f[0] ** 2 + q[0] ** 2 - 1.0])


def _cubic(f, q, p):
    return jnp.stack([f[0] ** 3 - q[0]])


def test_one_dependent_variable_is_singular_where_it_turns():
    """f³ = q: at q = 1e-30, f = 1e-10 and df/dq = 1/(3 f²) = 3.3e19. A 1 x 1 ∂g/∂f has
    σ_min/σ_max = 1 wherever it is not zero; rcond is then |∂g/∂f| / ‖∂g/∂(f, q)‖, 3e-20
    here, and the solve says singular on both routes (the SVD of `solve`, Newton's own
    Jacobian for the rates)."""
    loop = mb.LoopClosure(_cubic, [1.0], [1.0], name="cubic", guess=lambda q, p: jnp.cbrt(q), throw=False)
    regular = loop.solve(jnp.array([0.125]))
    assert regular.result == mb.RESULTS.successful
    np.testing.assert_allclose(regular.rcond, 0.75 / np.sqrt(0.75**2 + 1.0), rtol=1e-12)  # f = 0.5
    turning = jnp.array([1e-30])
    sol = loop.solve(turning)
    assert sol.result == mb.RESULTS.loop_singular and float(sol.rcond) < 1e-19, sol
    assert int(loop._status(turning)) == int(mb.RESULTS.loop_singular._value)
    strict = mb.LoopClosure(_cubic, [1.0], [1.0], name="cubic", guess=lambda q, p: jnp.cbrt(q))
    with pytest.raises(mb.LoopClosureError, match="cubic"):
        strict.solve(turning)


def test_a_reference_far_from_any_assembly_is_an_error():
    """A reference that Newton would carry to some other solution (here the upper
    half circle from f_ref = 0.5, which may not be the assembly meant) is not moved
    silently: the error names the loop, the residual and the fix; so is a guess whose
    solve at q_ref reaches another assembly than the reference."""
    with pytest.raises(mb.LoopClosureError, match=r"'circle'.*far from a solution.*max \|g\(f_ref, q_ref\)\| = "
                                                  r"0\.75.*Give f_ref on the intended assembly"):
        mb.LoopClosure(_circle, [0.0], [0.5], name="circle")
    near = mb.LoopClosure(_circle, [0.0], [1.001], name="circle")  # within ref_tol: polished
    np.testing.assert_allclose(near.f_ref, [1.0], atol=RESIDUAL_TOL)
    with pytest.raises(mb.LoopClosureError, match=r"'circle'.*guess\(q_ref\).*different assemblies"):
        mb.LoopClosure(_circle, [0.0], [-1.0], name="circle",
                       guess=lambda q, p: jnp.sqrt(1.0 - q**2))


@pytest.mark.parametrize("kwargs", [dict(rtol=-1.0), dict(atol=np.nan), dict(max_steps=0)])
def test_newton_settings_that_cannot_work_are_named(kwargs):
    """rtol=-1 was accepted; max_steps=0 said "no assembly near f_ref" at a solved reference
    (max_steps=2.7, cut to 2 before: test_untyped_calls.py)."""
    with pytest.raises(mb.LoopClosureError, match=r"'circle': rtol and atol must be positive finite numbers and "
                                                  r"max_steps an integer >= 1"):
        mb.LoopClosure(_circle, [0.0], [1.0], name="circle", **kwargs)


def test_continuation_steps_grow_with_the_distance_from_q_ref():
    """Without a guess, a solve far from q_ref (turns of the crank away) takes continuation
    steps of at most continuation_step and stays on the branch: eager, under jit and vmap
    (each state its own number of steps), and differentiable in the loop's parameters."""
    loop = _slider_crank_loop()
    qs = jnp.array([7.25, -7.25, 40.0, 0.3])
    for q in qs:
        np.testing.assert_allclose(loop.solve(q[None]).f, _slider_crank_assembly(q), atol=1e-12)
    np.testing.assert_allclose(jax.jit(jax.vmap(lambda q: loop.solve(q).f))(qs[:, None]),
                               _slider_crank_assembly(qs), atol=1e-12)
    np.testing.assert_allclose(mb.joint_values(_engine(loop), qs[2:3])[1:], _slider_crank_assembly(qs[2]),
                               atol=1e-12)

    def piston(p, q):
        return eqx.tree_at(lambda c: c.params, loop, p).solve(q).f[1]

    q = jnp.array([40.0])
    grad = jax.jit(jax.grad(piston))(loop.params, q)
    exact = jax.grad(lambda p: _slider_crank_assembly(q[0], *p)[1])(loop.params)
    np.testing.assert_allclose(grad, exact, rtol=1e-10)
    with pytest.raises(mb.LoopClosureError, match="continuation_step must be positive"):
        _slider_crank_loop(continuation_step=0.0)


def test_simulate_starts_each_solve_from_the_loop_variables_carried_along():
    """A loop without a guess, over three turns of the crank: instead of a continuation
    from q_ref at every right-hand side, ever longer as the crank turns (above),
    simulate carries w' = J q' and starts Newton from w. The motion equals that of the loop
    pre-modeled by Fourier series (no solves) to the tolerance's order, in as many
    steps (w is outside the step-size control), and its derivative with respect to
    the loop's parameters equals a central difference."""
    loop = _slider_crank_loop()
    engine = _engine(loop)
    q0, qd0, ts = jnp.array([0.5]), jnp.array([20.0]), jnp.linspace(0.0, 1.0, 11)
    run = eqx.filter_jit(lambda m: mb.simulate(m, q0, qd0, 1.0, ts=ts, solver="dopri8", rtol=1e-10, atol=1e-10))
    sol = run(engine)
    assert float(sol.q[-1, 0]) > 6 * np.pi
    fast, fit_error = mb.constraints.premodeled(engine, -np.pi, np.pi, np.pi / 128, kind="fourier", order=24)
    assert float(fit_error.max()) < 1e-13
    ref = run(fast)
    np.testing.assert_allclose(sol.q, ref.q, rtol=0, atol=1e-9)
    assert int(sol.stats["num_steps"]) == int(ref.stats["num_steps"])

    def final_angle(params):
        m = eqx.tree_at(lambda e: e.joints[1].function.closure.params, engine, params)
        m = eqx.tree_at(lambda e: e.joints[2].function.closure.params, m, params)
        return mb.simulate(m, q0, qd0, 0.2, solver="dopri8", rtol=1e-12, atol=1e-12).q[-1, 0]

    p = loop.params
    grad = jax.jit(jax.grad(final_angle))(p)
    h, angle = 1e-6, jax.jit(final_angle)  # one compilation for the four runs
    fd = [(angle(p.at[k].add(h)) - angle(p.at[k].add(-h))) / (2 * h) for k in range(2)]
    np.testing.assert_allclose(grad, jnp.stack(fd), rtol=1e-5)
    assert float(jnp.abs(grad).min()) > 1e-2   # both parameters matter


@pytest.mark.parametrize("k", range(len(FIVE_BAR_QS)))
def test_derivative_routes_agree(five, k):
    _, model, closure = five
    q = jnp.asarray(FIVE_BAR_QS[k])
    f, jac, hess = closure.derivatives(q)
    # optimistix implicit-function-theorem adjoint, through jax.jacfwd / jax.hessian
    np.testing.assert_allclose(jax.jacfwd(closure)(q), jac, atol=ROUNDOFF)
    np.testing.assert_allclose(jax.hessian(closure)(q), hess, atol=ROUNDOFF)
    # the hand-written JVP rule used by the joint functions
    np.testing.assert_allclose(jax.hessian(closure.value)(q), hess, atol=ROUNDOFF)
    # Ehsani's analytical projection method (Ehsani 2016, Eq. 116-120)
    _, jp, hp = mb.constraints.projection_derivatives(closure, q)
    np.testing.assert_allclose(jp, jac, atol=ROUNDOFF)
    np.testing.assert_allclose(hp, hess, atol=ROUNDOFF)
    # computational molecule, to truncation error
    _, jm, hm = mb.constraints.molecule_derivatives(closure, q, MOLECULE_H)
    np.testing.assert_allclose(jm, jac, atol=MOLECULE_GRAD_TOL)
    np.testing.assert_allclose(hm, hess, atol=MOLECULE_HESS_TOL)
    # the model's joint gradients/Hessians are these
    np.testing.assert_allclose(mb.joint_gradients(model, q)[2:], jac, atol=ROUNDOFF)
    np.testing.assert_allclose(mb.joint_hessians(model, q)[2:], hess, atol=ROUNDOFF)


def test_molecule_error_is_truncation():
    """Halving h divides the molecule's gradient error by ~4 (second order), so the
    comparison above can fail for a wrong formula."""
    closure = mb.models.five_bar().joints[2].function.closure
    q = jnp.asarray(FIVE_BAR_QS[0])
    jac = closure.gradient(q)
    e1 = np.abs(mb.constraints.molecule_derivatives(closure, q, 1e-2)[1] - jac).max()
    e2 = np.abs(mb.constraints.molecule_derivatives(closure, q, 5e-3)[1] - jac).max()
    assert 3.0 < e1 / e2 < 5.0


def test_premodel_five_bar():
    """Tensor natural-spline pre-model of the five-bar: values within the measured fit
    error, derivatives converge to the implicit ones."""
    closure = mb.models.five_bar(throw=False).joints[2].function.closure
    fit = mb.constraints.premodel(closure, [0.3, -0.8], [1.1, 0.0], 0.1)
    assert np.all(np.asarray(fit.fit_error) < 1e-2)
    for q in FIVE_BAR_QS:
        q = jnp.asarray(q)
        f, jac, hess = closure.derivatives(q)
        for k, fn in enumerate(fit.functions):
            assert abs(float(fn(q) - f[k])) <= float(fit.fit_error[k]) * 1.5
            np.testing.assert_allclose(jax.grad(fn)(q), jac[k], atol=2e-2)


def test_premodel_four_bar_spline_and_fourier():
    model = mb.models.four_bar(throw=False)
    closure = model.joints[0].function.closure
    fit = mb.constraints.premodel(closure, [-2.0], [2.0], 0.02)  # Ehsani (2016) sweeps with 0.01
    assert np.all(np.asarray(fit.fit_error) < 3e-5)
    q = jnp.asarray([0.3])
    f, jac, hess = closure.derivatives(q)
    for k, fn in enumerate(fit.functions):
        np.testing.assert_allclose(fn.gradient(q), jac[k], atol=1e-4)
        np.testing.assert_allclose(fn.hessian(q), hess[k], atol=1e-2)
    four = mb.constraints.premodel(closure, [-2.0], [2.0], 0.05, kind="fourier", order=12, omega=2 * np.pi / 5.0)
    assert np.all(np.asarray(four.fit_error) < 1e-2)


def test_premodel_four_bar_quintic_takes_the_loops_exact_derivatives():
    """``kind="quintic"``: the spline through the solved angles and their implicit
    gradient and Hessian at every knot. Far more accurate than the natural cubic spline
    on the same grid (which sees values only), with derivative errors that shrink as
    O(h⁵) and O(h⁴) (ratios 32 and 16 under halving) and that the result reports; between
    knots the derivatives match the loop's within those reported errors."""
    closure = mb.models.four_bar(throw=False).joints[0].function.closure
    cubic = mb.constraints.premodel(closure, [-2.0], [2.0], 0.05)
    coarse = mb.constraints.premodel(closure, [-2.0], [2.0], 0.05, kind="quintic")
    fine = mb.constraints.premodel(closure, [-2.0], [2.0], 0.025, kind="quintic")
    assert np.max(np.asarray(coarse.fit_error)) < 1e-3 * np.max(np.asarray(cubic.fit_error))
    assert np.max(np.asarray(coarse.derivative_error[:, 1])) < 1e-3 * np.max(np.asarray(cubic.derivative_error[:, 1]))
    ratio = np.max(np.asarray(coarse.derivative_error), axis=0) / np.max(np.asarray(fine.derivative_error), axis=0)
    assert 22 < ratio[0] < 42 and 11 < ratio[1] < 21, ratio
    with pytest.raises(mb.LoopClosureError, match="periodic=True applies to kind='quintic'"):
        mb.constraints.premodel(closure, [-2.0], [2.0], 0.05, periodic=True)
    for q in (jnp.asarray([0.3]), jnp.asarray([-1.737])):
        f, jac, hess = closure.derivatives(q)
        for k, fn in enumerate(fine.functions):
            assert abs(float(fn(q) - f[k])) <= 1.5 * float(fine.fit_error[k])
            assert abs(float(fn.gradient(q)[0] - jac[k, 0])) <= 1.5 * float(fine.derivative_error[k, 0])
            assert abs(float(fn.hessian(q)[0, 0] - hess[k, 0, 0])) <= 1.5 * float(fine.derivative_error[k, 1])


@pytest.mark.parametrize("lower, upper, step, kwargs, message", [
    ([1.0], [0.0], 0.1, {}, r"bounds must be finite with lower < upper, got lower=\[1\.\], upper=\[0\.\]"),
    ([np.nan], [1.0], 0.1, {}, "bounds must be finite with lower < upper"),
    ([0.0], [1.0], 0.0, {}, r"step must be positive, finite and at most upper - lower = \[1\.\], got \[0\.\]"),
    ([0.0], [1.0], 2.0, {}, "step must be positive, finite and at most upper - lower"),
    ([0.0], [1.0], 0.1, dict(kind="fourier", order=0), r"order \(the Fourier series' harmonics\) must be an integer >= 1"),
    ([0.0], [1.0], 0.1, dict(kind="hermite"), "kind must be 'spline', 'fourier' or 'quintic', got 'hermite'"),
    # These were ignored (a spline has no fundamental) or raised NumPy's broadcast error.
    ([0.0], [1.0], 0.1, dict(omega=5.0), "omega is the Fourier series' fundamental; kind='spline' has none"),
    ([0.0], [1.0], [0.1, 0.1], {}, r"step must be one number or one per coordinate \(1\), got \[0.1, 0.1\]"),
])
def test_premodel_names_a_sweep_it_cannot_make(lower, upper, step, kwargs, message):
    """Before: NumPy's 'Number of samples, -9, must be non-negative' or an OverflowError from
    the grid, and an unknown kind only after the whole sweep was solved."""
    closure = mb.models.four_bar(throw=False).joints[0].function.closure
    with pytest.raises(mb.LoopClosureError, match=message):
        mb.constraints.premodel(closure, lower, upper, step, **kwargs)


@pytest.mark.parametrize("throw", [True, False])
def test_premodel_over_a_range_the_loop_cannot_reach_names_the_bounds(throw):
    """Before: with throw=False a fit through unconverged solves came back as a result; with
    throw=True an equinox runtime error from inside the sweep's jit that named the loop's
    options, not premodel's bounds."""
    closure = mb.models.four_bar(throw=throw).joints[0].function.closure
    with pytest.raises(mb.LoopClosureError, match=r"premodel: loop 'four_bar' does not close at q = \[3.5\] .* "
                                                  r"lower=\[-0.5\], upper=\[8.0\]; narrow them"):
        mb.constraints.premodel(closure, [-0.5], [8.0], 0.5)


def test_four_bar_range_and_continuation():
    model = mb.models.four_bar(throw=False)
    closure = model.joints[0].function.closure
    qs = jnp.linspace(-2.0, 2.0, 21)[:, None]
    sols = jax.jit(jax.vmap(closure.solve))(qs)
    assert np.all(np.asarray(sols.result == R.successful))
    assert np.all(np.asarray(sols.rcond) > 0.1)
    # continuity: the branch is followed (no jumps between neighbouring q)
    assert np.max(np.abs(np.diff(np.asarray(sols.f), axis=0))) < 0.2
    # beyond the range of motion: flagged, not NaN-silent
    out = closure.solve(jnp.asarray([3.3]), throw=False)
    assert out.result in (R.loop_not_converged, R.loop_singular)


def test_loops_solve_in_float32():
    """A float32 loop stops Newton at what float32 resolves (the default tolerances,
    1e-12, are below its round-off) and agrees with float64 to float32 precision, in
    the continuation from q_ref and in the factored Newton of the right-hand side."""
    closure = mb.models.four_bar().joints[0].function.closure
    closure32 = jax.tree.map(lambda x: x.astype(jnp.float32) if eqx.is_inexact_array(x) else x, closure)
    qs = jnp.linspace(-2.0, 2.0, 5)[:, None]
    sols = jax.jit(jax.vmap(lambda q: closure32.solve(q, throw=False)))(qs.astype(jnp.float32))
    assert sols.f.dtype == jnp.float32 and np.all(np.asarray(sols.result == R.successful))
    reference = jax.vmap(closure.solve)(qs).f
    np.testing.assert_allclose(sols.f, reference, rtol=0, atol=1e-5)
    f, _, _, converged = jax.jit(jax.vmap(closure32._factored_newton))(qs.astype(jnp.float32))
    assert np.all(np.asarray(converged))
    np.testing.assert_allclose(f, reference, rtol=0, atol=1e-5)


def test_singular_configuration_errors():
    """l3 + l4 equal to the distance of joint 3 from the ground pivot: links 3 and 4
    stretched, dg/df rank-deficient."""
    q = jnp.asarray([0.0, np.pi])  # joint 3 at (0, 0), ground pivot at (3, 0): distance 3
    flagged = mb.models.five_bar(l3=1.5, l4=1.5, throw=False).joints[2].function.closure
    s = flagged.solve(q)
    assert s.result in (R.loop_singular, R.loop_not_converged)
    closure = mb.models.five_bar(l3=1.5, l4=1.5).joints[2].function.closure
    with pytest.raises(mb.LoopClosureError, match=r"five_bar.*q = \[0\. +3\.14159"):
        closure(q)
    with pytest.raises(Exception, match="five_bar"):
        jax.block_until_ready(eqx.filter_jit(lambda c, x: c.value(x))(closure, q))
    # a regular configuration of the same mechanism is fine
    ok = closure.solve(jnp.asarray([0.5, 0.3]), throw=False)
    assert ok.result == R.successful


_STRETCHED = mb.models.five_bar(l3=1.5, l4=1.5)  # links 3 and 4 stretched at q = (0, pi)
_EAGER_CALLS = {
    "joint_values": lambda q: mb.joint_values(_STRETCHED, q),
    "joint_rates": lambda q: mb.joint_rates(_STRETCHED, q, q),
    "body_transforms": lambda q: mb.body_transforms(_STRETCHED, q),
    "point_velocity": lambda q: mb.point_velocity(_STRETCHED, q, q, 1),
    "mass_matrix": lambda q: mb.mass_matrix(_STRETCHED, q),
    "bias_forces": lambda q: mb.bias_forces(_STRETCHED, q, q),
    "forward_dynamics": lambda q: mb.forward_dynamics(_STRETCHED, q, q),
    "inverse_dynamics": lambda q: mb.inverse_dynamics(_STRETCHED, q, q, q),
    "kinetic_energy": lambda q: mb.kinetic_energy(_STRETCHED, q, q),
}


@pytest.mark.parametrize("call", sorted(_EAGER_CALLS))
def test_every_eager_call_on_a_loop_that_cannot_close_raises_its_loop_closure_error(call):
    """Eager calls on a model with loops run compiled programs, in which a failing solve
    can only raise an equinox runtime error; the call raises the loop's
    `LoopClosureError`, naming it and q, whichever call it is (before, the kinematics ran
    operation by operation to raise it, and the dynamics raised the equinox error)."""
    with pytest.raises(mb.LoopClosureError, match=r"five_bar.*q = \[0\. +3\.14159"):
        jax.block_until_ready(_EAGER_CALLS[call](jnp.asarray([0.0, np.pi])))
    assert jnp.all(jnp.isfinite(jnp.asarray(jax.tree.leaves(_EAGER_CALLS[call](jnp.asarray([0.5, 0.3])))[0])))


def test_checks_in_simulations_bound_the_condition_number_without_an_svd():
    """The right-hand side's check (throw=True) and simulate's step-end check
    (throw=False) estimate rcond(∂g/∂f) = σ_min/σ_max by 1/(‖J‖_F ‖J⁻¹‖_F) from
    Newton's last Jacobian and inverse: at most rcond and at least rcond/m. Their codes
    are solve()'s, here over the four-bar's range, past its end and at the five-bar's
    stretched configuration."""
    four = mb.models.four_bar(throw=False).joints[0].function.closure
    qs = jnp.concatenate([jnp.linspace(-2.52, 3.0, 12), jnp.asarray([3.3])])[:, None]
    sols = jax.vmap(four.solve)(qs)
    _, jac, inverse, _ = jax.vmap(four._factored_newton)(qs)
    estimate = 1.0 / (jnp.linalg.norm(jac, axis=(1, 2)) * jnp.linalg.norm(inverse, axis=(1, 2)))
    regular = np.asarray(sols.result == R.successful)
    assert regular.sum() == 12 and float(sols.rcond[0]) < 1e-2  # q = -2.52: near the turning point
    rcond, estimate = np.asarray(sols.rcond)[regular], np.asarray(estimate)[regular]
    assert np.all(estimate <= rcond * (1 + 1e-9)) and np.all(estimate >= rcond / four.m), (estimate, rcond)
    np.testing.assert_array_equal(jax.vmap(four._status)(qs), sols.result._value)
    # With a threshold among the estimates, the check flags exactly those below it.
    for threshold in np.sort(estimate)[[3, 8]]:
        strict = mb.LoopClosure(four.fn, four.q_ref, four.f_ref, four.params, name="four_bar", throw=False,
                                rcond_min=float(threshold))
        codes = np.asarray(jax.vmap(strict._status)(qs))[regular]
        np.testing.assert_array_equal(codes, np.where(estimate < threshold, R.loop_singular._value, R.successful._value))
    stretched = mb.models.five_bar(l3=1.5, l4=1.5, throw=False).joints[2].function.closure
    assert int(stretched._status(jnp.asarray([0.0, np.pi]))) in (R.loop_singular._value, R.loop_not_converged._value)
    assert int(stretched._status(jnp.asarray([0.5, 0.3]))) == R.successful._value


def test_singular_configuration_in_a_batch_names_the_failing_q(capfd):
    """Under jit + vmap the failure still raises, and the failing q (only it) is printed;
    the check is one host callback for the whole batch, not one per state (which would
    make the compiled program, and its compile time, grow with the batch size)."""
    closure = mb.models.five_bar(l3=1.5, l4=1.5).joints[2].function.closure
    qs = jnp.stack([jnp.linspace(0.2, 0.6, 40), jnp.full(40, 0.3)], axis=1).at[17].set(jnp.asarray([0.0, np.pi]))
    batched = jax.jit(jax.vmap(closure.value))
    jax.block_until_ready(batched(qs[:17]))  # all regular: no error, nothing printed
    assert "failed" not in capfd.readouterr().out
    with pytest.raises(Exception, match="five_bar"):
        jax.block_until_ready(batched(qs))
    out = capfd.readouterr().out
    assert "five_bar" in out and "3.14159" in out and "0.2 " not in out, out
    callbacks = [batched.lower(qs[:n]).as_text().count("python_cpu_callback") for n in (2, 40)]
    assert callbacks[0] == callbacks[1] <= 3, callbacks


@pytest.mark.parametrize("name", ["five_bar", "four_bar"])
def test_traditional_route_matches_embedded(name):
    """Velocity and acceleration of p: constraint-Jacobian route in all joint variables
    (no f gradients/Hessians) == embedded route with implicit derivatives."""
    if name == "five_bar":
        model, (body, point) = mb.models.five_bar(), FIVE_BAR_POINT
        q, qd, qdd = jnp.array([0.7, -0.4]), jnp.array([1.3, -0.6]), jnp.array([-2.0, 4.0])
    else:
        model, (body, point) = mb.models.four_bar(), FOUR_BAR_POINT
        q, qd, qdd = jnp.array([0.4]), jnp.array([1.7]), jnp.array([-3.0])
    pos, vel, acc = mb.constraints.traditional_point_kinematics(model, q, qd, qdd, body, point)
    np.testing.assert_allclose(pos, mb.point_position(model, q, body, point), atol=ROUNDOFF)
    np.testing.assert_allclose(vel, mb.point_velocity(model, q, qd, body, point), atol=ROUNDOFF)
    np.testing.assert_allclose(acc, mb.point_acceleration(model, q, qd, qdd, body, point), atol=ROUNDOFF)
    # and the constraints hold for the solved joint variables
    phi = mb.constraints.constraint_function(model)
    assert np.max(np.abs(phi(mb.joint_values(model, q), q))) < RESIDUAL_TOL


def test_params_are_differentiable_leaves():
    """d f / d l0 through the loop (implicit function theorem) vs central difference."""
    q = jnp.asarray([0.7, -0.4])

    def theta4(l0):
        closure = mb.models.five_bar().joints[2].function.closure
        closure = eqx.tree_at(lambda c: c.params, closure, closure.params.at[0].set(l0))
        return closure.value(q)[1]

    d = jax.grad(theta4)(3.0)
    fd = (theta4(3.0 + 1e-6) - theta4(3.0 - 1e-6)) / 2e-6
    assert abs(float(d - fd)) < 1e-7


def test_kinematics_solves_each_loop_once_per_state(monkeypatch):
    """The model records its loops (``model.loops``); kinematics solves each once per
    state and hands every joint its share (no cache between calls, no global state),
    and an implicit joint function called on its own still solves its loop."""
    model = mb.models.five_bar()
    assert model.loops == ((2, 3),)
    calls = []
    original = mb.LoopClosure.joint_outputs

    def counting(self, method, *args):
        calls.append(method)
        return original(self, method, *args)

    monkeypatch.setattr(mb.LoopClosure, "joint_outputs", counting)
    q, qd = jnp.asarray([0.7, -0.4]), jnp.asarray([0.3, -0.2])
    z = mb.joint_values(model, q)
    jac = mb.joint_gradients(model, q)
    hess = mb.joint_hessians(model, q)
    f, fd, fdd = mb.joint_rates(model, q, qd)
    assert calls == ["__call__", "gradient", "hessian", "rates"]
    fn = model.joints[3].function
    np.testing.assert_allclose(fn(q), z[3], atol=ROUNDOFF)
    np.testing.assert_allclose(fn.gradient(q), jac[3], atol=ROUNDOFF)
    np.testing.assert_allclose(fn.hessian(q), hess[3], atol=ROUNDOFF)
    np.testing.assert_allclose(fn.rates(q, qd), (f[3], fd[3], fdd[3]), atol=ROUNDOFF)
    # Under jit with the model as an argument, still one solve per evaluation.
    calls.clear()
    jax.jit(mb.joint_rates).lower(model, q, qd)
    assert calls == ["rates"]


def test_copies_of_a_loop_that_disagree_are_an_error():
    """A loop is solved once for all its joints, so a copy edited in one joint alone
    would be ignored: that is an error naming the joints, not a silent choice."""
    model = mb.models.five_bar()
    closure = model.joints[3].function.closure
    edited = eqx.tree_at(lambda m: m.joints[3].function.closure.params, model, closure.params * 1.01)
    with pytest.raises(mb.LoopClosureError, match=r"'theta3' and 'theta4' hold different copies of loop"):
        mb.joint_values(edited, jnp.asarray([0.7, -0.4]))
    # Both copies edited alike (the ground link 1% longer: a uniform scale would leave the
    # angles as they were): the loop of a five-bar built with that length.
    params = closure.params.at[0].multiply(1.01)
    both = eqx.tree_at(lambda m: (m.joints[2].function.closure.params, m.joints[3].function.closure.params),
                       model, (params, params))
    q = jnp.asarray([0.7, -0.4])
    np.testing.assert_allclose(mb.joint_values(both, q), mb.joint_values(mb.models.five_bar(l0=3.03), q), atol=ROUNDOFF)
    assert float(jnp.max(jnp.abs(mb.joint_values(both, q) - mb.joint_values(model, q)))) > 1e-3
