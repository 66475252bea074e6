"""`moment_arms(..., method="frozen_path")`: OpenSim's `Muscle.computeMomentArm`, the
generalized force of a unit tension along the path frozen at q (a MovingPathPoint's own
motion included). Checked against OpenSim 4.6's computeMomentArm
(tests/data/opensim/*.npz, `random_moment_arms_opensim`) and against ``-dL/dq`` where the
path's tangent points are exact."""

import pathlib
import warnings

import equinox as eqx
import jax
import jax.extend
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmb as mb

DATA = pathlib.Path(__file__).parent / "data" / "opensim"
TOL = 1e-10  # m: the same path, so round-off


def _model(path, wrap_geometry="opensim", keep=None, **kwargs):
    if not pathlib.Path(path).exists():
        pytest.skip(f"{path} is absent")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # MoBL-ARMS's skipped elements
        model = mb.load_osim(path, wrap_geometry=wrap_geometry, **kwargs)
    if keep is not None:
        model = eqx.tree_at(lambda m: m.muscles, model, tuple(m for m in model.muscles if keep(m)))
    return model


def _frozen(model, qs):
    return np.asarray(jax.jit(jax.vmap(lambda q: mb.moment_arms(model, q, method="frozen_path")))(jnp.asarray(qs)))


def _columns(model, ref):
    names = list(ref["muscle_names"])
    return [names.index(n) for n in model.muscle_names]


def test_frozen_path_is_opensims_compute_moment_arm_on_gait2354():
    """All 54 muscles, 4 of them with a MovingPathPoint on the knee (whose motion OpenSim
    applies as a generalized force), at OpenSim's 20 random states."""
    model = _model(mb.__file__.replace("__init__.py", "data/gait2354_simbody.osim"))
    ref = np.load(DATA / "gait2354.npz")
    assert sum(any(p.moves for p in m.points) for m in model.muscles) == 4
    got = _frozen(model, ref["random_q_ind"])
    np.testing.assert_allclose(got, ref["random_moment_arms_opensim"], rtol=0, atol=TOL)


def _one_wrap_fixed_points(m):
    return len(m.wraps) <= 1 and not any(p.moves for p in m.points)


@pytest.mark.parametrize("name, file", [("arm26", None), ("mobl_arms", "MOBL_ARMS_fixed_41.osim")])
def test_frozen_path_is_opensims_compute_moment_arm_over_every_wrap_kind(name, file, shared_dir):
    """Every muscle with at most one PathWrap and no MovingPathPoint (arm26: 5 of 6;
    MoBL-ARMS: 12 of 50, over cylinders, ellipsoids and tori, whose tangent points are
    not stationary, so that computeMomentArm differs from -dL/dq): equal at OpenSim's 20
    random states. The other muscles are not compared: OpenSim's multi-wrap paths carry
    tangent points from earlier passes, and computeMomentArm leaves out the work of a
    MovingPathPoint's own motion along the segment that starts at it (test below)."""
    path = mb.__file__.replace("__init__.py", "data/arm26.osim") if file is None else pathlib.Path(shared_dir) / "models" / file
    model = _model(path, keep=_one_wrap_fixed_points)
    kinds = {type(w).__name__ for m in model.muscles for w in m.wraps}
    assert kinds == ({"WrapCylinder", "WrapEllipsoid"} if file is None else {"WrapCylinder", "WrapEllipsoid", "WrapTorus"})
    ref = np.load(DATA / f"{name}.npz")
    got = _frozen(model, ref["random_q_ind"])
    want = ref["random_moment_arms_opensim"][:, :, _columns(model, ref)]
    np.testing.assert_allclose(got, want, rtol=0, atol=TOL)
    # where OpenSim's own derivative differs from computeMomentArm, so does this route
    fd = ref["random_moment_arms_fd"][:, :, _columns(model, ref)]
    smooth = ref["random_fd_smooth"][:, :, _columns(model, ref)]
    assert np.max(np.where(smooth, np.abs(got - fd), 0.0)) > 1e-4


def test_frozen_path_runs_no_derivative_through_the_wrap_iterations():
    """The path is resolved on values only: forward mode reaches no `while` loop (the
    ellipsoid's Newton and Gauss-Newton iterations), so the program's loops are the
    resolution's alone (those of `muscle_lengths`)."""
    model = _model(mb.__file__.replace("__init__.py", "data/arm26.osim"), keep=lambda m: m.name == "BIClong")
    q = model.q_default

    def loop_work(fn):
        """The equations inside every `while` body of fn's program (nested programs included)."""
        def walk(jaxpr, in_loop):
            total = 0
            for eqn in jaxpr.eqns:
                total += in_loop
                for sub in jax.extend.core.jaxprs_in_params(eqn.params):
                    total += walk(sub, in_loop or eqn.primitive.name == "while")
            return total
        return walk(jax.make_jaxpr(fn)(q).jaxpr, False)

    lengths = loop_work(lambda x: mb.muscle_lengths(model, x))
    assert lengths > 0  # the ellipsoid iterates
    assert loop_work(lambda x: mb.moment_arms(model, x, method="frozen_path")) == lengths
    assert loop_work(lambda x: mb.moment_arms(model, x)) > lengths  # forward mode through the loops


def test_lengths_and_frozen_path_moment_arms_come_from_one_resolution():
    """`muscle_lengths_and_moment_arms(..., method="frozen_path")` returns what
    `muscle_lengths` and `moment_arms(..., method="frozen_path")` return apart."""
    model = _model(mb.__file__.replace("__init__.py", "data/arm26.osim"), keep=lambda m: m.name in ("BIClong", "BRA"))
    q = jnp.asarray([0.4, 1.1])
    lengths, arms = mb.muscle_lengths_and_moment_arms(model, q, method="frozen_path")
    np.testing.assert_allclose(lengths, mb.muscle_lengths(model, q), rtol=1e-14)
    np.testing.assert_allclose(arms, mb.moment_arms(model, q, method="frozen_path"), rtol=1e-14, atol=1e-16)
    with pytest.raises(ValueError, match="method must be 'closed_form' or 'frozen_path'"):
        mb.muscle_lengths_and_moment_arms(model, q, method="autodiff")


def test_ligaments_with_the_frozen_path_apply_opensims_generalized_forces(shared_dir):
    """MoBL-ARMS's four ligaments (each over an ellipsoid) at 8 random states, against
    OpenSim 4.6's inverse dynamics with one ligament applied
    (tests/data/opensim/opensim_ligaments_reference.py): `Ligament(moment_arms="frozen_path")`
    is OpenSim's force to round-off (`load_osim(..., ligament_moment_arms="frozen_path")`);
    the default, R = -dL/dq, differs by up to 0.25 %."""
    path = pathlib.Path(shared_dir) / "models" / "MOBL_ARMS_fixed_41.osim"
    model = _model(path)
    ref = np.load(DATA / "mobl_ligaments.npz")

    def ligaments(m):
        by_name = {f.name: f for f in m.forces if isinstance(f, mb.Ligament)}
        assert sorted(by_name) == sorted(ref["names"])
        return [by_name[str(n)] for n in ref["names"]]

    default = ligaments(model)
    frozen = ligaments(_model(path, ligament_moment_arms="frozen_path"))
    assert {f.moment_arms for f in default} == {"closed_form"} and {f.moment_arms for f in frozen} == {"frozen_path"}
    assert [f.with_moment_arms("closed_form").moment_arms for f in frozen] == ["closed_form"] * len(frozen)
    with pytest.raises(ValueError, match="ligament_moment_arms must be 'closed_form' or 'frozen_path'"):
        mb.load_osim(path, ligament_moment_arms="opensim")
    qd = jnp.zeros(model.nq)
    k = list(ref["names"]).index("i_glenohum")  # the default's largest difference (one compile, not four)

    @jax.jit
    def forces(q):
        return jnp.stack([f.generalized_force(model, q, qd) for f in frozen]), default[k].generalized_force(model, q, qd)

    got = [tuple(np.asarray(x) for x in forces(jnp.asarray(q))) for q in ref["q"]]
    want = ref["Q"]
    scale = np.max(np.abs(want))
    assert scale > 1.0  # the ligaments are taut at these states
    np.testing.assert_allclose(np.stack([g[0] for g in got]), want, rtol=0, atol=1e-12 * scale)
    closed = np.stack([g[1] for g in got])
    assert 1e-4 * scale < np.max(np.abs(closed - want[:, k])) < 5e-3 * scale
    with pytest.raises(mb.ModelError, match="moment_arms must be 'closed_form' or 'frozen_path'"):
        mb.Ligament("l", frozen[0].path, frozen[0].force_length_curve, 1.0, 1.0, moment_arms="autodiff")


# How far OpenSim's tendon force is from the fibre's equilibrium, relative: arm26's Thelen
# muscles split the lengthening speed between fibre and tendon by a heuristic OpenSim iterates
# (tests/test_hill_muscles.py); MoBL-ARMS's Millard muscles are in static equilibrium, solved
# to OpenSim's tolerance.
_EQUILIBRIUM_RTOL = {"arm26": 1e-4, "mobl_arms": 1e-6}


@pytest.mark.parametrize("name, file", [("arm26", None), ("mobl_arms", "MOBL_ARMS_fixed_41.osim")])
def test_muscle_excitations_apply_opensims_muscle_forces(name, file, shared_dir):
    """The muscles' generalized force as OpenSim 4.6's forward dynamics applies it, at 8 random
    states with speeds and random activations, every fibre in OpenSim's static equilibrium
    (tests/data/opensim/opensim_muscle_forces_reference.py): `MuscleExcitations` with
    ``moment_arms="frozen_path"`` gives OpenSim's lengthening speeds, its tendon forces (to
    OpenSim's equilibrium tolerance) and its generalized forces, for every muscle with at most
    one PathWrap and no MovingPathPoint (OpenSim applies ``computeMomentArm`` times the tendon
    force, for every muscle, so those that the frozen path reproduces are compared)."""
    path = mb.__file__.replace("__init__.py", "data/arm26.osim") if file is None else pathlib.Path(shared_dir) / "models" / file
    ref = np.load(DATA / f"{name}_muscle_forces.npz")
    cma = np.load(DATA / f"{name}.npz")["random_moment_arms_opensim"][:8]
    np.testing.assert_allclose(cma * ref["tendon_forces"][:, None, :], np.swapaxes(ref["Q_each"], 1, 2),
                               rtol=0, atol=1e-10 * np.max(np.abs(ref["Q_each"])))
    model = _model(path, keep=_one_wrap_fixed_points)
    names = list(ref["names"])
    cols = [names.index(n) for n in model.muscle_names]
    assert len(cols) == (5 if file is None else 12)
    ctrl = mb.control.MuscleExcitations(model, lambda t: jnp.zeros(len(cols)), moment_arms="frozen_path")

    @jax.jit
    def forces(q, qd, a):
        F, R = ctrl.tendon_forces(q, qd, a)
        return F, R, -R.T @ qd, ctrl.torque(0.0, q, qd, a), mb.path_status(model, q).ok

    for k in range(8):
        q, qd, a = (jnp.asarray(ref[key][k]) for key in ("q", "qd", "activations"))
        F, R, speeds, torque, ok = (np.asarray(x) for x in forces(q, qd, a[jnp.asarray(cols)]))
        F_osim, Q_osim = ref["tendon_forces"][k, cols], ref["Q_each"][k, cols]
        np.testing.assert_allclose(speeds, ref["lengthening_speeds"][k, cols], rtol=0, atol=1e-12)
        # the path applies OpenSim's tension as OpenSim does ...
        np.testing.assert_allclose(R * F_osim[None, :], Q_osim.T, rtol=0, atol=1e-10 * max(1.0, np.max(np.abs(Q_osim))))
        # ... and the tension is OpenSim's, to its equilibrium solve's tolerance, where the path is plausible
        # (MoBL-ARMS's TMIN fails at two of these states: metres of length, in OpenSim as in jaxmb)
        np.testing.assert_allclose(F[ok], F_osim[ok], rtol=_EQUILIBRIUM_RTOL[name])
        # ... and the controller's torque is that tension through the frozen path (OpenSim's Q where plausible)
        np.testing.assert_allclose(torque, R @ F, rtol=1e-13, atol=1e-12)
        np.testing.assert_allclose(R[:, ok] @ F[ok], Q_osim[ok].sum(axis=0), rtol=_EQUILIBRIUM_RTOL[name], atol=1e-9)
        assert ok.sum() >= len(cols) - 1


def test_opensims_compute_moment_arm_leaves_out_a_moving_points_work_along_its_next_segment(shared_dir):
    """What OpenSim 4.6 does with a MovingPathPoint that is not a path's last point: its
    computeMomentArm (and so the force its dynamics applies) counts the point's own motion
    (its location's dependence on q) only through the segment that ends at the point, not
    through the one that starts there. MoBL-ARMS's APL (no wrap, a MovingPathPoint on the hand
    following wrist flexion, then three more points): jaxmb's frozen path, which is -dL/dq on a
    path without wraps, minus OpenSim's computeMomentArm is, at each of the 20 random states,
    ``u_next · (R_GB ∂p_B/∂q)``, the work of the point's motion along the next segment, to
    round-off. gait2354's MovingPathPoints are last points, so the two agree there."""
    model = _model(pathlib.Path(shared_dir) / "models" / "MOBL_ARMS_fixed_41.osim", keep=lambda m: m.name == "APL")
    ref = np.load(DATA / "mobl_arms.npz")
    (muscle,) = model.muscles
    k = next(i for i, p in enumerate(muscle.points) if p.moves)
    moving, following = muscle.points[k], muscle.points[k + 1]
    assert not muscle.wraps and 0 < k < len(muscle.points) - 1 and not following.moves

    @jax.jit
    def next_segment_work(q):
        here = mb.point_position(model, q, moving.body, moving.location(q))
        u = following_point(q) - here
        u = u / jnp.linalg.norm(u)
        # the point's motion in its body, carried to ground with the body held where it is
        motion = jax.jacfwd(lambda x: mb.point_position(model, q, moving.body, moving.location(x)))(q)
        return u @ motion

    def following_point(q):
        return mb.point_position(model, q, following.body, following.location(q))

    frozen = _frozen(model, ref["random_q_ind"])[:, :, 0]
    cma = ref["random_moment_arms_opensim"][:, :, _columns(model, ref)[0]]
    work = np.stack([np.asarray(next_segment_work(jnp.asarray(q))) for q in ref["random_q_ind"]])
    assert np.max(np.abs(work)) > 1e-3  # m: the left-out term is not small
    np.testing.assert_allclose(frozen - cma, work, rtol=0, atol=TOL)
    np.testing.assert_allclose(frozen, ref["random_moment_arms_fd"][:, :, _columns(model, ref)[0]], rtol=0, atol=1e-6)
