"""Parity with OpenSim 4.6: muscle lengths and R = -dL/dq of arm26, gait2354 and MoBL-ARMS
against the reference data of tests/data/opensim/opensim_reference.py (tests/data/opensim/*.npz).

OpenSim's -dL/dq by central differences is the oracle for R; points where the length is
not smooth (a conditional point switching, a wrap engaging) are excluded and reported.
MoBL-ARMS is read from ../shared/models (its licence is unclear); its tests skip where
that file is absent. Its whole-model parity runs with the suite (about 3 minutes); the
other whole-model MoBL checks and arm26's 10^4-state gradient check are marked `slow`
(minutes each): deselected by default, run with `pytest -m slow tests/test_muscle_parity.py`.
"""

import dataclasses
import pathlib
import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmb as mb

DATA = pathlib.Path(__file__).parent / "data" / "opensim"
MODELS = pathlib.Path(__file__).resolve().parents[2] / "shared" / "models"
TOL_CLOSED_VS_AUTODIFF = 1e-10
TOL_LENGTH = 1e-7  # m
TOL_R = 1e-6  # m


def _load(name, file, shared_dir=None, wrap_geometry="opensim"):
    path = (pathlib.Path(shared_dir) / "models" / file) if shared_dir else MODELS / file
    if not path.exists():
        pytest.skip(f"{path} is absent")
    ref = DATA / f"{name}.npz"
    if not ref.exists():
        pytest.skip(f"{ref} is absent")
    return mb.load_osim(path, wrap_geometry=wrap_geometry), np.load(ref)


def _with_torus_search(model, search):
    """The model with every WrapTorus searching as `search` ("opensim": OpenSim's
    Levenberg-Marquardt iterate, the default; "converged")."""
    def one(w):
        return dataclasses.replace(w, search=search) if isinstance(w, mb.WrapTorus) else w
    muscles = tuple(eqx.tree_at(lambda m: m.wraps, m, tuple(one(w) for w in m.wraps)) for m in model.muscles)
    return eqx.tree_at(lambda m: m.muscles, model, muscles)


def _parity(model, d, stride, exact_muscles=None, random_states=(), optimize=False):
    """Length and R errors at every `stride`-th sweep state (only `exact_muscles`' columns,
    if given); with `random_states`, also R at those random states of `d` (one compiled
    program for both: the suite is compile-bound). `optimize`: compile at XLA's backend
    optimisation level 1, not the suite's 0 (conftest.py), where running the states costs
    more than the compile saves (MoBL-ARMS: 40 + 44 s at level 0, 55 + 17 s at level 1)."""
    # L and R from one resolution of the paths (test_muscles.py checks it equals each alone).
    options = {"xla_backend_optimization_level": 1} if optimize else None
    f = jax.jit(lambda qs: jax.lax.map(lambda q: mb.muscle_lengths_and_moment_arms(model, q), qs),
                compiler_options=options)
    idx = np.arange(0, len(d["sweep_q_ind"]), stride)
    qs = np.concatenate([d["sweep_q_ind"][idx], d["random_q_ind"][list(random_states)]])
    length, r = (np.asarray(a) for a in f(jnp.asarray(qs)))
    r_random = r[len(idx):]
    length, r = length[:len(idx)], r[:len(idx)]
    c = d["sweep_coordinate"][idx]
    r_sweep = r[np.arange(len(idx)), c, :]
    smooth = d["sweep_fd_smooth"][idx]
    len_err = np.abs(length - d["sweep_muscle_lengths"][idx])
    r_err = np.where(smooth, np.abs(r_sweep - d["sweep_moment_arms_fd"][idx]), 0.0)
    print(f"\n{len(idx)} sweep states; {int((~smooth).sum())} (state, muscle) pairs next to a path "
          "discontinuity excluded from the R comparison")
    names = list(d["muscle_names"])
    cols = range(len(names)) if exact_muscles is None else [names.index(m) for m in exact_muscles]
    for k in range(len(names)):
        print(f"  {names[k]:10s} |dL| {len_err[:, k].max():.2e}  |dR| {r_err[:, k].max():.2e}")
    errors = len_err[:, list(cols)], r_err[:, list(cols)]
    return (*errors, r_random) if random_states else errors


def test_parity_gait2354():
    model, d = _load("gait2354", "gait2354_simbody.osim")
    assert model.muscle_names == tuple(d["muscle_names"])
    len_err, r_err = _parity(model, d, stride=23)
    assert len_err.max() < TOL_LENGTH and r_err.max() < TOL_R


# arm26: all lengths match exactly (BIClong: one WrapEllipsoid, OpenSim's algorithm;
# TRIlong: cylinder + ellipsoid + cylinder, whose multi-pass length uses PathWrapPoint
# ground locations cached at the first pass that engaged them, docs/opensim-parity.md).
# So do all moment arms, since the wrap iterations are differentiated as the iterates
# OpenSim stops at (with the converged points' derivative TRIlong was 7.8e-5 m off).
ARM26_MUSCLES = ("TRIlong", "TRIlat", "TRImed", "BIClong", "BICshort", "BRA")


def test_parity_arm26():
    model, d = _load("arm26", "arm26.osim")
    assert model.muscle_names == tuple(d["muscle_names"])
    len_err, r_err = _parity(model, d, stride=8, exact_muscles=ARM26_MUSCLES)
    assert len_err.max() < TOL_LENGTH
    assert r_err.max() < TOL_R


def test_arm26_in_float32_stays_near_opensim():
    """Float32 on request (large GPU batches): a model and states cast to float32 give float32
    lengths and moment arms, with every wrap iteration in float32, within float32's reach of
    OpenSim 4.6's (float64 holds 1e-7 m and 1e-6 m of OpenSim's). Lengths were measured
    2.9e-7 m from OpenSim's on one CPU and 1.29e-6 m on another (AMD EPYC, same jaxlib):
    XLA's float32 code follows the CPU's vector width, and the wraps' loosely stopped
    iterations carry its round-off (27 float32 steps of a 0.45 m length); moment arms
    1.0e-6 m from jaxmb's float64 ones."""
    model, d = _load("arm26", "arm26.osim")
    model32 = jax.tree.map(lambda x: x.astype(jnp.float32) if eqx.is_inexact_array(x) else x, model)
    idx = np.arange(0, len(d["sweep_q_ind"]), 8)
    qs = jnp.asarray(d["sweep_q_ind"][idx], jnp.float32)
    length, r = jax.jit(jax.vmap(lambda q: mb.muscle_lengths_and_moment_arms(model32, q)))(qs)
    assert length.dtype == r.dtype == jnp.float32
    r_sweep = np.asarray(r, float)[np.arange(len(idx)), d["sweep_coordinate"][idx], :]
    smooth = d["sweep_fd_smooth"][idx]
    assert np.abs(np.asarray(length, float) - d["sweep_muscle_lengths"][idx]).max() < 5e-6
    assert np.where(smooth, np.abs(r_sweep - d["sweep_moment_arms_fd"][idx]), 0.0).max() < 1e-5


@pytest.mark.slow  # documents a difference (opensim-parity.md); CI: test_converged_wraps.py
def test_converged_geometry_of_arm26_differs_from_opensim_where_opensim_stops_sliding_early():
    """docs/opensim-parity.md, "Converged wrap geometry": with wrap_geometry="converged"
    only TRIlong (cylinder, ellipsoid, cylinder: the multi-wrap cylinders slide) moves,
    by at most 1e-4 m in length and 5e-3 m in R (measured over the whole sweep: 8.3e-5
    and 3.3e-3 m, the latter where OpenSim's own R jumps); the other muscles keep
    OpenSim's lengths and moment arms."""
    model, d = _load("arm26", "arm26.osim", wrap_geometry="converged")
    len_err, r_err = _parity(model, d, stride=8)
    tri = list(d["muscle_names"]).index("TRIlong")
    others = [k for k in range(len_err.shape[1]) if k != tri]
    assert len_err[:, others].max() < TOL_LENGTH and r_err[:, others].max() < TOL_R
    assert 1e-6 < len_err[:, tri].max() < 1e-4  # it does slide elsewhere than OpenSim stops
    assert r_err[:, tri].max() < 5e-3


def test_mobl_arms_loads_with_muscles_ligaments_and_limit_forces(shared_dir):
    path = pathlib.Path(shared_dir) / "models" / "MOBL_ARMS_fixed_41.osim"
    if not path.exists():
        pytest.skip(f"{path} is absent")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = mb.load_osim(path)
    assert not any("skipped" in str(w.message) for w in caught)  # every ForceSet element is read
    assert len(model.muscles) == 50
    kinds = [type(f).__name__ for f in model.forces]
    assert kinds == ["Ligament"] * 4 + ["CoordinateLimitForce"] * 14
    assert [f.name for f in model.forces[:4]] == ["s_glenohum", "m_glenohum", "i_glenohum", "coracohum"]
    from jaxmb.io._osim import read_ligaments
    ligs = read_ligaments(path)
    assert [m.name for m in ligs] == ["s_glenohum", "m_glenohum", "i_glenohum", "coracohum"]
    assert all(m.kind == "Ligament" and len(m.wraps) == 1 for m in ligs)


# A state where OpenSim 4.6 gives ECRL 0.570014285381491 m, within the sum of the wraps'
# allowances: `Model("MOBL_ARMS_fixed_41.osim")`, these coordinates set (in the order of
# `independent_coordinate_names`), `assemble`, `getMuscles().get("ECRL").getLength(s)`.
ECRL_ASTRAY_Q = (0.046273, 1.144100, 1.132507, 0.805920, -0.724479, 0.025945, -0.573222)


def test_path_status_flags_the_mobl_arms_paths_whose_wraps_go_astray_in_opensim_too(shared_dir):
    """At MoBL-ARMS's 20 random reference states OpenSim 4.6 gives ECRL 0.52 to 0.90 m at
    three (0.30 to 0.35 m at the others: its torus's inner cylinder is forced round by a
    segment passing about 0.1 m off the torus) and LAT2 0.72 m at one (0.30 to 0.38 m at the
    others). jaxmb gives the same lengths, and `path_status` flags those states, and
    only those, as implausible. Not PQ (two cylinders), though at one state it is 0.08 mm
    shorter than the straight path through its points: within the 0.5 mm to which
    OpenSim's passes make a multi-wrap length consistent. Nor FCR, though at one state
    (0.308 m) its torus's inner cylinder, wrapping a segment beside the tube, lengthens it
    by 1.4 turns and diameters about the tube: within two. At `ECRL_ASTRAY_Q` (OpenSim:
    0.570 m) the path's length is within the sum of its two wraps' allowances, and the
    torus alone lengthens its segment by more than twice its own: flagged."""
    path = pathlib.Path(shared_dir) / "models" / "MOBL_ARMS_fixed_41.osim"
    if not path.exists():
        pytest.skip(f"{path} is absent")
    d = np.load(DATA / "mobl_arms.npz")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # MoBL-ARMS's inertias (test_osim_skeleton.py)
        model = mb.io.read_osim(path, muscles=["ECRL", "LAT2", "PQ", "FCR"], wrap_geometry="opensim").model
    assert model.coordinate_names == tuple(d["independent_coordinate_names"])
    states = jnp.concatenate([jnp.asarray(d["random_q_ind"]), jnp.array([ECRL_ASTRAY_Q])])
    status, lengths = jax.jit(jax.vmap(lambda q: (mb.path_status(model, q), mb.muscle_lengths(model, q))))(states)
    names = list(d["muscle_names"])
    reference = d["random_muscle_lengths"][:, [names.index(m) for m in model.muscle_names]]
    np.testing.assert_allclose(lengths[:-1], reference, atol=TOL_LENGTH, rtol=0)
    astray = reference > 1.2 * np.median(reference, axis=0)
    astray[:, model.muscle_names.index("PQ")] = False  # its lengths span 22 to 38 mm with pronation, smoothly
    assert dict(zip(model.muscle_names, astray.sum(axis=0).tolist())) == {"ECRL": 3, "LAT2": 1, "PQ": 0, "FCR": 0}
    np.testing.assert_array_equal(np.asarray(status.plausible[:-1]), ~astray)
    k = model.muscle_names.index("ECRL")
    np.testing.assert_allclose(lengths[-1, k], 0.570014285381491, atol=TOL_LENGTH, rtol=0)
    assert not bool(status.plausible[-1, k])
    np.testing.assert_array_equal(np.asarray(status.wraps_converged), True)


def test_moving_point_clamps_its_coordinate(shared_dir):
    """OpenSim evaluates a MovingPathPoint at the coordinate clamped to its range."""
    path = pathlib.Path(shared_dir) / "models" / "gait2354_simbody.osim"
    if not path.exists():
        pytest.skip(f"{path} is absent")
    model = mb.load_osim(path)
    k = model.coordinate_index("knee_angle_r")
    m = model.muscles[model.muscle_names.index("rect_fem_r")]
    pt = next(p for p in m.points if isinstance(p, mb.MovingPathPoint))
    q_hi, q_out = model.q_default.at[k].set(model.q_upper[k]), model.q_default.at[k].set(model.q_upper[k] + 0.2)
    np.testing.assert_allclose(pt.location(q_out), pt.location(q_hi), atol=0)


MOBL_CHAINED = ("TMIN", "ECRL")  # 3 and 2 wraps; the closed form used to be off by ~R here
MOBL_CHAINED_STATES = (1, 3, 5)  # random states of mobl_arms.npz


# Not opt-in (issue 35): the whole model's lengths and closed-form R compile and run
# 222 states in about 3 minutes on the 2-core VM since the multi-wrap pass is a scan.
def test_parity_mobl_arms(shared_dir):
    """docs/opensim-parity.md, MoBL-ARMS table: every muscle's length and R = -dL/dq match
    OpenSim's at every 5th sweep state (away from path discontinuities), whatever its wraps
    (with the default torus search, OpenSim's iterate). And at random states, where one
    wrap's tangent point feeds the next (TMIN, ECRL), R matches OpenSim's central differences
    in every coordinate: the wrap iterations are differentiated as the iterates OpenSim
    stops at (with the converged points' derivative TMIN was off by up to 1.3e-5 m here,
    ECRL by 1.6e-5 m; closed form against autodiff R for chained wraps is
    test_muscles.py::test_closed_form_equals_autodiff_chained_wraps)."""
    model, d = _load("mobl_arms", "MOBL_ARMS_fixed_41.osim", shared_dir)
    assert model.muscle_names == tuple(d["muscle_names"])
    len_err, r_err, r_random = _parity(model, d, stride=5, random_states=MOBL_CHAINED_STATES, optimize=True)
    for k, name in enumerate(d["muscle_names"]):
        assert len_err[:, k].max() < TOL_LENGTH, name
        assert r_err[:, k].max() < TOL_R, name
    cols = [list(d["muscle_names"]).index(m) for m in MOBL_CHAINED]
    states = list(MOBL_CHAINED_STATES)
    fd = d["random_moment_arms_fd"][states][:, :, cols]
    smooth = d["random_fd_smooth"][states][:, :, cols]
    assert smooth.mean() > 0.9
    np.testing.assert_allclose(np.where(smooth, r_random[:, :, cols], 0.0), np.where(smooth, fd, 0.0),
                               atol=TOL_R, rtol=0)


@pytest.mark.slow  # the whole MoBL-ARMS path graph compiled once more (about a minute)
def test_converged_geometry_of_mobl_arms_stays_within_its_documented_distance_of_opensim(shared_dir):
    """docs/opensim-parity.md, "Converged wrap geometry", MoBL-ARMS: with
    wrap_geometry="converged" lengths stay within 5e-4 m of OpenSim's and R within 1e-2 m
    (measured over the whole sweep: 2.7e-4 m, LAT1, and 4.5e-3 m, LAT1) at every 5th
    sweep state, except where OpenSim's own length spikes (more than 1 cm from both its
    sweep neighbours: INFSP's torus at sweep state 356, 0.387 m between neighbours of
    0.0965 m); the muscles whose paths do not slide keep OpenSim's values."""
    model, d = _load("mobl_arms", "MOBL_ARMS_fixed_41.osim", shared_dir, wrap_geometry="converged")
    len_err, r_err = _parity(model, d, stride=5, optimize=True)
    idx = np.arange(0, len(d["sweep_q_ind"]), 5)
    ref = d["sweep_muscle_lengths"]
    up, down = ref[np.minimum(idx + 1, len(ref) - 1)], ref[np.maximum(idx - 1, 0)]
    spike = (np.abs(ref[idx] - up) > 1e-2) & (np.abs(ref[idx] - down) > 1e-2)
    assert np.sum(spike) <= 2
    assert np.where(spike, 0.0, len_err).max() < 5e-4 and r_err.max() < 1e-2
    sliding = [k for k, m in enumerate(model.muscles)
               if len(m.wraps) > 1 and any(isinstance(w, (mb.WrapCylinder, mb.WrapTorus)) for w in m.wraps)]
    still = [k for k in range(len(model.muscles)) if k not in sliding]
    assert len_err[:, still].max() < TOL_LENGTH and r_err[:, still].max() < TOL_R
    assert np.where(spike, 0.0, len_err).max() > 1e-5  # the converged points are not OpenSim's iterates


@pytest.mark.slow  # one state's stalled search (opensim-parity.md); ECRB's sweep: test_parity_mobl_arms
@pytest.mark.parametrize("state", [966])
def test_mobl_ecrb_torus_moment_arm_is_the_iterates_derivative(shared_dir, state):
    """docs/opensim-parity.md (WrapTorus): at this state (wrist flexion -1.204 rad) OpenSim's torus search
    stalls near a stationary point of its squared residual that is no root (a dip end),
    and OpenSim's length follows that iterate. With search="opensim" jaxmb's length is
    OpenSim's, and its R is the derivative of the same iterate, so it matches OpenSim's
    central differences; the converged search (search="converged") takes the residual's
    root instead, and ECRB is 0.24 m longer (docs/opensim-parity.md, WrapTorus).

    The two central differences are compared at 5e-7 m, not tighter: the iterate
    amplifies round-off. Two evaluation orders of the same pose products (written-out
    3x3 products vs plain matmuls) move this length by 8.3e-14 m and the difference
    quotient at h = 1e-6 by 3.0e-8 m (measured once, comparing the two orders); jaxmb's
    quotient is 9.3e-8 m from OpenSim's standalone and was 1.1e-7 m in a full test
    run, against 6.3e-8 m with plain matmuls. 5e-7 m still
    separates the iterate's derivative from the root's by a factor of 380."""
    model, d = _load("mobl_arms", "MOBL_ARMS_fixed_41.osim", shared_dir)
    model = eqx.tree_at(lambda m: m.muscles, model, tuple(m for m in model.muscles if m.name == "ECRB"))
    model = _with_torus_search(model, "opensim")
    k, c, h = list(d["muscle_names"]).index("ECRB"), int(d["sweep_coordinate"][state]), float(d["fd_step"])
    q = jnp.asarray(d["sweep_q_ind"][state])
    e = jnp.zeros_like(q).at[c].set(1.0)
    # One compilation (the suite is compile-bound): L at q and q ± h e, both R at q.
    length, r, r_autodiff = jax.jit(lambda qs: (
        jax.vmap(lambda x: mb.muscle_lengths(model, x)[0])(qs),
        mb.moment_arms(model, qs[0])[c, 0], mb.moment_arms(model, qs[0], method="autodiff")[c, 0]))(
        jnp.stack([q, q + h * e, q - h * e]))
    fd = -(length[1] - length[2]) / (2 * h)
    assert d["sweep_fd_smooth"][state, k]
    np.testing.assert_allclose(length[0], d["sweep_muscle_lengths"][state, k], atol=TOL_LENGTH)
    np.testing.assert_allclose(fd, d["sweep_moment_arms_fd"][state, k], atol=5e-7)
    np.testing.assert_allclose(r, r_autodiff, atol=TOL_CLOSED_VS_AUTODIFF)
    np.testing.assert_allclose(r, d["sweep_moment_arms_fd"][state, k], atol=TOL_R)


# Sweep states of mobl_arms.npz where a muscle wrapping a sphere-shaped WrapEllipsoid (SUPSP,
# ANC: 0.02 m) had NaN moment arms before the circular-section guard in _ellipsoid_wrap; which
# states hit the exact arctan2(0, 0) depends on XLA's rounding: 509 (shoulder_rot 13 deg) with
# default XLA flags, 38 and 93 (elv_angle) and 705, 708 (elbow_flexion, ANC) with the test
# flags of conftest.py, as were random states 0, 2 and 8.
MOBL_NAN_SWEEP_STATES = {38: "SUPSP", 93: "SUPSP", 509: "SUPSP", 705: "ANC", 708: "ANC"}


@pytest.mark.slow  # compiles the whole MoBL-ARMS path graph twice (several minutes)
def test_mobl_arms_lengths_and_moment_arms_are_finite(shared_dir):
    """Lengths and both moment-arm methods at the former NaN states and all 20 random states:
    one jit, a lax.map over 25 states (about 1.5 min on the 2-core VM, mostly compilation)."""
    model, d = _load("mobl_arms", "MOBL_ARMS_fixed_41.osim", shared_dir)
    sweep = list(MOBL_NAN_SWEEP_STATES)
    qs = jnp.asarray(np.concatenate([d["sweep_q_ind"][sweep], d["random_q_ind"]]))
    f = jax.jit(lambda qs: jax.lax.map(lambda q: (mb.muscle_lengths(model, q), mb.moment_arms(model, q),
                                                  mb.moment_arms(model, q, method="autodiff")), qs))
    length, rc, ra = (np.asarray(a) for a in f(qs))
    for name, a in (("lengths", length), ("closed_form", rc), ("autodiff", ra)):
        bad = np.argwhere(~np.isfinite(a))
        assert bad.size == 0, f"{name}: non-finite at (state, ..., muscle) {bad[:10].tolist()}"
    names = list(d["muscle_names"])
    cols = [names.index(m) for m in ("SUPSP", "ANC")]
    # One ellipsoid each: the closed form equals autodiff.
    np.testing.assert_allclose(rc[..., cols], ra[..., cols], atol=1e-10, rtol=0)
    # The repaired values are OpenSim's -dL/dq there.
    for i, (s, muscle) in enumerate(MOBL_NAN_SWEEP_STATES.items()):
        k, c = names.index(muscle), d["sweep_coordinate"][s]
        assert d["sweep_fd_smooth"][s, k]
        np.testing.assert_allclose(rc[i, c, k], d["sweep_moment_arms_fd"][s, k], atol=TOL_R)


def _random_states_with_range_ends(model, n, seed):
    """n states in the coordinates' ranges, a fifth of the entries at each end."""
    rng = np.random.default_rng(seed)
    lo, hi = np.asarray(model.q_lower), np.asarray(model.q_upper)
    u = rng.random((n, lo.size))
    u[rng.random(u.shape) < 0.2] = 0.0
    u[rng.random(u.shape) < 0.2] = 1.0
    return jnp.asarray(lo + (hi - lo) * u)


def _nonfinite_states(model, qs):
    """States where the length, its reverse-mode gradient or the closed-form R is not finite."""
    def one(q):
        total, grad = jax.value_and_grad(lambda x: jnp.sum(mb.muscle_lengths(model, x)))(q)
        return total, grad, mb.moment_arms(model, q)
    total, grad, r = (np.asarray(a) for a in jax.jit(lambda qs: jax.lax.map(one, qs))(qs))
    ok = np.isfinite(total) & np.all(np.isfinite(grad), axis=1) & np.all(np.isfinite(r), axis=(1, 2))
    return np.asarray(qs)[~ok]


def test_gait2354_gradients_are_finite_at_10000_states_with_range_ends():
    """Issue 35: lengths, their gradient (reverse mode) and the closed-form R are finite at
    10^4 random gait2354 states, many at one or several range ends, where its conditional
    points switch and its moving points reach the ends of their functions' data (it has no
    wrap objects: arm26's test below, slow, covers the wrap iterations)."""
    model = mb.load_osim(pathlib.Path(mb.__file__).parent / "data" / "gait2354_simbody.osim")
    qs = _random_states_with_range_ends(model, 10_000, seed=1)
    assert np.mean(np.any(np.asarray(qs) == np.asarray(model.q_upper), axis=1)) > 0.5
    bad = _nonfinite_states(model, qs)
    assert bad.shape[0] == 0, f"non-finite at q = {bad[:5].tolist()}"


@pytest.mark.slow  # arm26's ellipsoid and cylinders: about 10 minutes on the 2-core VM
@pytest.mark.parametrize("wrap_geometry", ["opensim", "converged"])
def test_arm26_gradients_are_finite_at_10000_states_with_range_ends(wrap_geometry):
    """The same through arm26's wrap iterations (one ellipsoid, cylinders, the multi-pass
    loop; with the converged geometry, the closed-form sliding instead of the restarts);
    2000 such states take about 3 minutes (1 with the converged geometry)."""
    model = mb.load_osim(pathlib.Path(mb.__file__).parent / "data" / "arm26.osim", wrap_geometry=wrap_geometry)
    bad = _nonfinite_states(model, _random_states_with_range_ends(model, 10_000, seed=1))
    assert bad.shape[0] == 0, f"non-finite at q = {bad[:5].tolist()}"


@pytest.mark.slow  # MoBL-ARMS: every wrap kind; on the 2-core VM 40 minutes (converged) and 70 (opensim)
@pytest.mark.parametrize("wrap_geometry", ["converged", "opensim"])
def test_mobl_arms_gradients_are_finite_at_10000_states_with_range_ends(wrap_geometry, shared_dir):
    """The same on MoBL-ARMS, whose paths also wrap spheres and tori, several wraps per
    muscle: finite everywhere in range, including where a path fails (TMIN's metres of
    length at some states)."""
    model, _ = _load("mobl_arms", "MOBL_ARMS_fixed_41.osim", shared_dir, wrap_geometry=wrap_geometry)
    bad = _nonfinite_states(model, _random_states_with_range_ends(model, 10_000, seed=1))
    assert bad.shape[0] == 0, f"non-finite at {bad.shape[0]} states, q = {bad[:5].tolist()}"
