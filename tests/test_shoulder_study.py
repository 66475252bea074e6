"""The shoulder study (Ehsani 2016, section 4-4 C): MoBL-ARMS's shoulder with the elbow,
forearm and wrist locked, computed-torque tracking (Eq. 200-201) and its torques.

One tracking run is compiled (module scope) and shared by the asserts, and its torques
are checked by the constrained route; the power balance, the full DAE simulation and
the autodiff inverse dynamics (each a compilation of tens of seconds) are `slow`.
"""

import pathlib
import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmb as mb
from jaxmb import studies
from jaxmb.io import read_osim

GAINS = (100.0, 100.0, 1000.0)
T1, FRAMES, TOL = 1.0, 51, 1e-10  # the elevation's rise (half a period)


def _path(shared_dir) -> pathlib.Path:
    path = shared_dir / "models" / "MOBL_ARMS_fixed_41.osim"
    if not path.exists():
        pytest.skip(f"{path} is not available")
    return path


@pytest.fixture(scope="module")
def model(shared_dir):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # MoBL's impossible inertias are reported, not errors
        return studies.shoulder_model(read_osim(_path(shared_dir), muscles=False, locked=studies.locked_coordinates()).model)


_track = eqx.filter_jit(lambda m: studies.track_shoulder(m, t1=T1, n_frames=FRAMES, rtol=TOL, atol=TOL))


@pytest.fixture(scope="module")
def tracking(model):
    return _track(model)


def test_model_holds_the_shoulder_coordinates_and_locks_the_rest(model, shared_dir):
    assert model.coordinate_names == studies.SHOULDER_COORDINATES
    assert not model.muscles and not model.forces
    # MoBL's four phantom bodies (1e-4 kg, 1 kg m²) are massless unless asked for.
    phantoms = {"clavphant", "scapphant", "humphant", "humphant1"}
    assert phantoms <= {b.name for b in model.bodies if b.massless}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full = read_osim(_path(shared_dir), muscles=False).model
        bent = studies.shoulder_model(read_osim(_path(shared_dir), locked=studies.locked_coordinates({"elbow_flexion": 1.2})).model)
    # The locked model's poses are the full model's with the distal coordinates at their values.
    q3 = jnp.array([1.2, 0.9, -0.4])
    q7 = jnp.concatenate([q3, jnp.asarray([1.2, 0.0, 0.0, 0.0])])
    np.testing.assert_allclose(mb.body_transforms(bent, q3), mb.body_transforms(full, q7), rtol=0, atol=1e-14)


def test_bodies_fixed_by_locked_joints_merge_into_the_humerus(model):
    """The plant of the tracking: the six bodies the locked coordinates fix to the humerus
    merged into it (composite inertia), the same M(q) and bias(q, q') as the full chain,
    computed alike from concrete and from traced arrays."""
    from jaxmb._dynamics import _mass_matrix_and_forces  # M and Q - bias, as forward dynamics uses them
    from jaxmb.studies._shoulder import _welded

    q, qd = jnp.array([1.2, 0.9, -0.4]), jnp.array([0.7, -1.1, 2.0])
    welded, got, want = jax.jit(lambda m: (_welded(m), _mass_matrix_and_forces(_welded(m), q, qd),
                                           _mass_matrix_and_forces(m, q, qd)))(model)
    assert welded.n_bodies == model.n_bodies - 6 and welded.body_names[-1] == "humerus"
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-13 * float(jnp.abs(b).max()))


def test_read_osim_locked_rejects_bad_names(shared_dir):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(mb.ModelError, match=r"'no_such' is no coordinate of .*MOBL.*lock one of"):
            read_osim(_path(shared_dir), muscles=False, locked={"no_such": 0.0})
        with pytest.raises(mb.ModelError, match=r"'sternoclavicular_r2' is a dependent \(coupled\) coordinate"):
            read_osim(_path(shared_dir), muscles=False, locked={"sternoclavicular_r2": 0.0})
        with pytest.raises(mb.ModelError, match=r"the value of 'elbow_flexion' must be finite"):
            read_osim(_path(shared_dir), muscles=False, locked={"elbow_flexion": float("nan")})
        with pytest.raises(mb.ModelError, match=r"distal names 'elv_angle'; the locked coordinates are"):
            studies.locked_coordinates({"elv_angle": 0.0})
        with pytest.raises(mb.ModelError, match=r"the shoulder study needs MoBL-ARMS's"):
            studies.shoulder_model(read_osim(pathlib.Path(mb.__file__).parent / "data" / "arm26.osim", muscles=False).model)


def test_trajectory_derivatives_and_the_dissertation_values():
    traj = studies.ElevationTrajectory()
    ts = jnp.linspace(0.0, 2.0, 9)
    q, qd, qdd = jax.vmap(traj)(ts)
    np.testing.assert_allclose(q[:, 0], np.pi / 2, rtol=0, atol=0)  # plane of elevation 90 degrees
    np.testing.assert_allclose(q[:, 2], -np.pi / 6, rtol=0, atol=0)  # axial rotation -30 degrees
    np.testing.assert_allclose(q[[0, 4, 8], 1], np.deg2rad([20.0, 110.0, 20.0]), rtol=1e-15)
    np.testing.assert_allclose(jax.vmap(jax.jacfwd(lambda t: traj(t)[0]))(ts), qd, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(jax.vmap(jax.jacfwd(lambda t: traj(t)[1]))(ts), qdd, rtol=1e-13, atol=1e-15)
    with pytest.raises(ValueError, match="period must be positive"):
        studies.ElevationTrajectory(period=0.0)
    with pytest.raises(ValueError, match="high must be a finite scalar"):
        studies.ElevationTrajectory(high=float("inf"))


def test_computed_torque_gains_are_critically_damped():
    # Eq. 201: Q_d = q''_des - 2K (q' - q'_des) - K² (q - q_des)
    c = studies.computed_torque(mb.models.planar_chain(3), lambda t: (jnp.zeros(3),) * 3, (100.0, 100.0, 1000.0))
    np.testing.assert_array_equal(c.kd, [200.0, 200.0, 2000.0])
    np.testing.assert_array_equal(c.kp, [1e4, 1e4, 1e6])


def test_computed_torque_gains_must_be_positive():
    """Before: accepted; kp = K² hid the sign, and kd = 2K < 0 anti-damped the error."""
    with pytest.raises(ValueError, match=r"computed_torque: gains must be positive \(1/s\), got \[-1.0, 2.0, 3.0\]"):
        studies.computed_torque(mb.models.planar_chain(3), lambda t: (jnp.zeros(3),) * 3, (-1.0, 2.0, 3.0))


def test_tracking_to_the_dissertation_precision(tracking):
    """The held coordinates to round-off, the elevation within 2e-4 rad (the dissertation's
    bound; here far better), the rates likewise."""
    err = np.abs(np.asarray(tracking.q - tracking.q_ref)).max(axis=0)
    derr = np.abs(np.asarray(tracking.qd - tracking.qd_ref)).max(axis=0)
    assert err[0] <= 1e-14 and err[2] <= 1e-13, err
    assert err[1] < 2e-4 and err[1] < 1e-9, err
    assert derr[0] <= 1e-13 and derr[2] <= 1e-11 and derr[1] < 1e-7, derr
    assert np.all(np.isfinite(np.asarray(tracking.tau)))
    # The elevation torque holds the arm up against gravity (about 4.7 N m at 20 degrees,
    # 11.5 N m at 110) and accelerates it (0.46-0.54 kg m² times ±7.75 rad/s²).
    tau = np.asarray(tracking.tau[:, 1])
    assert 7.5 < tau[0] < 9.0 and 6.5 < tau[-1] < 8.0 and tau.min() > 6.0, tau


def _dae_torques(dae, model, tracking):
    """The torques of the same states by the constrained route: every moving joint a
    coordinate, the rhythm held by Lagrange multipliers (`CoupledDAE.tracking`)."""
    def one(t, q, qd):
        z, zd = dae.state(model, q, qd)
        return dae.tracking(t, z, zd, studies.ElevationTrajectory(), jnp.asarray(GAINS), 0.0, 0.0)

    return jax.vmap(one)(tracking.ts, tracking.q, tracking.qd)


_dae_torques_jit = eqx.filter_jit(_dae_torques)


def test_torques_equal_the_constrained_route(model, tracking):
    dae = studies.CoupledDAE.of(model)
    zdd, lam, tau = _dae_torques_jit(dae, model, tracking)
    scale = float(jnp.abs(tracking.tau).max())
    np.testing.assert_allclose(tau, tracking.tau, rtol=0, atol=1e-10 * scale)
    # The DAE's independent accelerations are the commanded ones.
    np.testing.assert_allclose(zdd[:, jnp.asarray(dae.z_of_q)], tracking.qdd, rtol=0, atol=1e-12)
    assert lam.shape == (FRAMES, len(dae.dependent)) and len(dae.dependent) == 11


@pytest.mark.slow
def test_torques_balance_the_power(model, tracking):
    """d/dt (T + V) = tau · q' along the motion (T from body velocities, not M): the
    elevation's torque, the only one that does work (the other rates are zero)."""
    def power(q, qd, qdd):
        energy = lambda a, b: mb.kinetic_energy(model, a, b) + mb.potential_energy(model, a)  # noqa: E731
        return jax.jvp(energy, (q, qd), (qd, qdd))[1]

    de = eqx.filter_jit(jax.vmap(power))(tracking.q, tracking.qd, tracking.qdd)
    work = jnp.sum(tracking.tau * tracking.qd, axis=1)
    np.testing.assert_allclose(de, work, rtol=0, atol=1e-10 * float(jnp.abs(work).max()))


def test_coupled_dae_rejects_models_it_cannot_write():
    body = mb.Body("b", 1.0, inertia=(1.0, 1.0, 1.0))
    scaled = mb.Model([body], [mb.revolute("j", "ground", "b", (0.0, 0.0, 1.0), mb.Scaled(mb.Coordinate(0), 2.0))],
                      ["q"])
    with pytest.raises(mb.ModelError, match="the DAE route needs each coordinate to drive one joint"):
        studies.CoupledDAE.of(scaled)


@pytest.mark.slow
def test_dae_simulation_matches_and_torques_equal_autodiff_inverse_dynamics(model, tracking):
    """The full DAE simulation (Ehsani's comparison) reaches the embedded route's motion
    and torques; the torques equal the Lagrangian (autodiff) inverse dynamics."""
    dae = eqx.filter_jit(lambda m: studies.track_shoulder_dae(m, t1=T1, n_frames=FRAMES, rtol=TOL, atol=TOL))(model)
    np.testing.assert_allclose(dae.q, tracking.q, rtol=0, atol=1e-9)
    assert float(dae.drift.max()) < 1e-12
    scale = float(jnp.abs(tracking.tau).max())
    np.testing.assert_allclose(dae.tau, tracking.tau, rtol=0, atol=1e-7 * scale)
    auto = eqx.filter_jit(jax.vmap(lambda q, qd, qdd: mb.inverse_dynamics(model, q, qd, qdd, method="autodiff")))(
        tracking.q, tracking.qd, tracking.qdd)
    np.testing.assert_allclose(auto, tracking.tau, rtol=0, atol=1e-10 * scale)


class _Muscled:
    """A stand-in for a model with muscles: what `shoulder_muscle_forces` reads."""

    name = "stand-in"
    muscle_names = ("CORB",) + studies.SHOULDER_MUSCLES[::-1]


def test_force_sharing_hook_picks_the_fourteen_muscles_and_checks_shapes(tracking, tmp_path):
    def share(model, ts, q, qd, tau):  # each muscle's "force" is its column number times the elevation torque
        return np.asarray(tau[:, 1:2]) * np.arange(len(model.muscle_names))[None, :]

    forces = studies.shoulder_muscle_forces(_Muscled(), tracking, share)
    expected = [_Muscled.muscle_names.index(m) for m in studies.SHOULDER_MUSCLES]
    np.testing.assert_allclose(forces, np.asarray(tracking.tau[:, 1:2]) * np.asarray(expected)[None, :])
    with pytest.raises(ValueError, match=r"returned shape \(51, 2\); expected \(frames, muscles\) = \(51, 15\)"):
        studies.shoulder_muscle_forces(_Muscled(), tracking, lambda *a: np.zeros((FRAMES, 2)))
    with pytest.raises(ValueError, match=r"has no muscles \['XYZ'\]; read it with read_osim\(path, muscles=True"):
        studies.shoulder_muscle_forces(_Muscled(), tracking, share, muscles=("XYZ",))
    studies.plot_muscle_forces(tracking.ts, forces, path=tmp_path / "fig21.png")
    report = studies.report_markdown(tracking, forces=forces, figures={"Fig. 21": "fig21.png"})
    assert "| DELT1 |" in report and "![Fig. 21](fig21.png)" in report


def test_report_figures_and_csv(tracking, tmp_path):
    studies.plot_elevation(tracking, tmp_path / "fig19.png")
    studies.plot_torques(tracking, tmp_path / "fig20.png")
    assert (tmp_path / "fig19.png").stat().st_size > 1000 and (tmp_path / "fig20.png").stat().st_size > 1000
    data = np.loadtxt(studies.write_csv(tracking, tmp_path / "t.csv"), delimiter=",", skiprows=1)
    np.testing.assert_array_equal(data[:, 7:], np.asarray(tracking.tau))
    report = studies.report_markdown(tracking, timings={"embedded ODE run": 0.5, "DAE run": 1.5})
    assert "elevation within 2e-4 rad: met here" in report and "DAE / embedded run time: 3.00x" in report
    assert "Not computed: no force-sharing function was given" in report


def test_command_errors_are_one_line(tmp_path, capsys, monkeypatch):
    from jaxmb.cli import main

    monkeypatch.delenv("JAXMB_MOBL_ARMS", raising=False)
    assert main(["shoulder-study", "--out", str(tmp_path / "a"), "--compile-cache", "none"]) == 1
    assert "give MoBL-ARMS's .osim with --model PATH" in capsys.readouterr().err
    arm26 = pathlib.Path(mb.__file__).parent / "data" / "arm26.osim"
    assert main(["shoulder-study", "--model", str(arm26), "--out", str(tmp_path / "a"), "--muscles",
                 "--compile-cache", "none"]) == 1
    err = capsys.readouterr().err
    # arm26 has none of the coordinates to lock: read_osim names the first.
    assert err.startswith("jaxmb: error: ") and "elbow_flexion" in err and err.count("\n") == 1
    assert main(["shoulder-study", "--model", str(arm26), "--out", str(tmp_path / "a"), "--fps", "0"]) == 2
    assert not (tmp_path / "a").exists()


@pytest.mark.slow
def test_command_writes_figures_report_and_csv(tmp_path, shared_dir, capsys):
    from jaxmb.cli import main

    out = tmp_path / "shoulder"
    assert main(["shoulder-study", "--model", str(_path(shared_dir)), "--out", str(out), "--period", "1",
                 "--fps", "50", "--rtol", "1e-8", "--compile-cache", "none", "--no-progress"]) == 0
    assert {p.name for p in out.iterdir()} == {"fig19_elevation.png", "fig20_torques.png", "tracking.csv",
                                               "report.md"}
    assert "met here" in (out / "report.md").read_text()
    assert "51 frames" in capsys.readouterr().out
