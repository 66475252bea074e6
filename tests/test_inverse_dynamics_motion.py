"""Inverse dynamics over a motion (OpenSim's Inverse Dynamics tool): the coordinate
pipeline (padding, low-pass filter, GCV quintic splines), external loads, the command
line, against OpenSim 4.6 and independent routes."""

import math
import os
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmb as mb
from jaxmb._functions._gcvspl import gcvspline_fit, gcvspline_interpolation_operators
from jaxmb._signal import lowpass_iir, opensim_coordinate_operators, pad_reflect
from jaxmb.cli import main
from models_for_tests import arm26_tool_setup
from pages import in_folder_with, run_page

DATA = pathlib.Path(__file__).parent / "data" / "opensim" / "motion"


@pytest.fixture(scope="module")
def arm26():
    model = mb.load_osim(DATA / "arm26.osim")
    motion = mb.io.read_storage(DATA / "arm26_InverseKinematics.mot")
    return model, motion, mb.io.coordinates_from_motion(model, motion)


def _by_name(model, reference):
    """The reference's columns (``<coordinate>_moment``/``_force``) in the model's order."""
    names = [label.rsplit("_", 1)[0] for label in reference.labels]
    return reference.values[:, [names.index(c) for c in model.coordinate_names]]


# ---- the coordinate pipeline, piece by piece ----


def test_pad_reflects_and_negates():
    np.testing.assert_array_equal(pad_reflect(np.array([1.0, 2.0, 4.0, 7.0]), 2),
                                  [-2.0, 0.0, 1.0, 2.0, 4.0, 7.0, 10.0, 12.0])


def test_lowpass_halves_a_sine_at_the_cutoff():
    # Forward-backward third-order Butterworth: |H|² = 1/2 at the (pre-warped) cutoff.
    dt, fc = 1e-3, 10.0
    t = np.arange(4000) * dt
    out = lowpass_iir(np.stack([np.sin(2 * np.pi * fc * t), np.full_like(t, 3.0)], axis=1), dt, fc)
    middle = slice(1000, 3000)
    assert abs(np.max(np.abs(out[middle, 0])) - 0.5) < 2e-3
    np.testing.assert_allclose(out[:, 1], 3.0, rtol=1e-12)  # unit gain at DC


def test_spline_operators_equal_gcvspl_search():
    # The operators fix GCVSPL's smoothing parameter at its clip; the search (an
    # independent route, gcvspline_fit) ends there for error variance 0.
    rng = np.random.default_rng(1)
    x = np.cumsum(rng.uniform(0.5, 1.5, 25))
    y = np.sin(x) + 0.1 * rng.normal(size=25)
    _, pieces = gcvspline_fit(x, y, 3)
    xq = np.concatenate([x, x[:-1] + 0.3, [x[0] - 1.0, x[-1] + 1.0]])
    w = gcvspline_interpolation_operators(x, 3, xq)
    k = np.searchsorted(x, xq, side="right") - 1
    tau = xq - x[np.maximum(k, 0)]
    for d, wd in enumerate(w):
        expected = [np.polyval(np.polyder(pieces[i + 1][::-1], d), s) for i, s in zip(k, tau)]
        np.testing.assert_allclose(wd @ y, expected, rtol=0, atol=1e-12)


def test_filtered_frames_are_opensims(arm26):
    _, motion, _ = arm26
    frames, w0, _, _ = opensim_coordinate_operators(motion.time, lowpass_hz=6.0, time_range=(0.0, 1.0))
    reference = mb.io.read_storage(DATA / "arm26_id_lowpass6.sto")
    np.testing.assert_allclose(frames, reference.time, rtol=0, atol=1e-12)  # padded, resampled grid
    assert w0.shape == (121, 121)


def test_too_long_or_too_short_motions_are_refused():
    with pytest.raises(ValueError, match=r"a motion of 7000 frames: .* at most 6000 samples .*split the motion"):
        opensim_coordinate_operators(np.arange(7000.0) * 0.01)
    with pytest.raises(ValueError, match=r"a motion of 5 frames: OpenSim's quintic splines need at least 6"):
        opensim_coordinate_operators(np.arange(5.0))


@pytest.mark.parametrize("tool", ["inverse_dynamics_motion", "static_optimization"])
def test_an_empty_motion_is_named_by_the_tools(arm26, tool):
    """A motion file with a header and no rows ended in NumPy's reshape error."""
    model, _, _ = arm26
    with pytest.raises(ValueError, match="a motion of 0 frames: OpenSim's quintic splines need at least 6"):
        getattr(mb, tool)(model, np.zeros(0), np.zeros((0, model.nq)))


def test_a_time_range_outside_the_motion_is_refused():
    """Before: the last frame alone was solved."""
    with pytest.raises(ValueError, match=r"time range \(10.0, 20.0\) s lies outside the motion's times \[0, 1\] s"):
        opensim_coordinate_operators(np.linspace(0.0, 1.0, 11), time_range=(10.0, 20.0))


def test_a_cutoff_below_one_cycle_over_the_motion_warns():
    """Before: 1e-3 Hz on a 1 s motion filtered the motion away without a word."""
    with pytest.warns(UserWarning, match="low-pass cutoff 0.37 Hz is below one cycle over the motion's 1 s"):
        opensim_coordinate_operators(np.linspace(0.0, 1.0, 11), lowpass_hz=0.37)


def test_a_time_range_of_nan_is_refused_as_such():
    """Before: NaN was told that the start exceeded the end (a range of three times or a
    scalar: tests/test_untyped_calls.py)."""
    with pytest.raises(ValueError, match=r"time_range must be two times \(start, end\) in s"):
        opensim_coordinate_operators(np.linspace(0.0, 1.0, 11), time_range=(np.nan, np.nan))


@pytest.mark.parametrize("tool", ["inverse_dynamics_motion", "static_optimization"])
def test_a_motion_with_a_gap_is_named_by_its_frames(arm26, tool):
    """Before: a NaN sample spread through the splines into every frame's forces, silently."""
    model, motion, q = arm26
    q = np.array(q)
    q[[3, 7], 1] = np.nan
    with pytest.raises(mb.ModelError, match=tool + r": q is not finite at 2 frames \(first at t = 0.025, 0.058"):
        getattr(mb, tool)(model, motion.time, q)


# ---- against OpenSim 4.6's InverseDynamicsTool ----


@pytest.mark.parametrize("lowpass, reference", [(None, "arm26_id_unfiltered.sto"), (6.0, "arm26_id_lowpass6.sto")])
def test_arm26_equals_opensim(arm26, lowpass, reference):
    model, motion, q = arm26
    result = mb.inverse_dynamics_motion(model, motion.time, q, lowpass_hz=lowpass, time_range=(0.0, 1.0))
    ref = mb.io.read_storage(DATA / reference)
    np.testing.assert_allclose(np.asarray(result.time), ref.time, rtol=0, atol=1e-12)
    expected = _by_name(model, ref)
    # The file holds 8 decimals: agreement to its last digit (the 1% of peak asked is 2.7e-2 N m).
    np.testing.assert_allclose(np.asarray(result.forces), expected, rtol=0, atol=1e-8)


def test_frames_are_batched_single_inverse_dynamics(arm26):
    model, motion, q = arm26
    result = mb.inverse_dynamics_motion(model, motion.time, q)
    single_frame = jax.jit(lambda a, b, c: mb.inverse_dynamics(model, a, b, c))
    for i in (0, 60, 120):
        single = single_frame(result.q[i], result.qd[i], result.qdd[i])
        np.testing.assert_allclose(result.forces[i], single, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(result.q, q, rtol=0, atol=1e-12)  # the spline interpolates


def test_differentiable_in_the_coordinates(arm26):
    model, motion, q = arm26
    q = jnp.asarray(q)
    direction = jnp.asarray(np.random.default_rng(2).normal(size=q.shape)) * 1e-2

    def total(x):
        return jnp.sum(mb.inverse_dynamics_motion(model, motion.time, x, lowpass_hz=6.0).forces ** 2)

    gradient = jax.grad(total)(q)
    h = 1e-5
    fd = (total(q + h * direction) - total(q - h * direction)) / (2 * h)
    assert abs(float(jnp.sum(gradient * direction)) - float(fd)) < 1e-6 * abs(float(fd))


# ---- external loads ----


def _arm_with_load(tmp_path, arm26, body="r_ulna_radius_hand", point_identifier="hand_p"):
    _, motion, _ = arm26
    n = 50
    time = np.linspace(motion.time[0] - 0.1, motion.time[-1] + 0.1, n)
    values = np.column_stack([np.full(n, 1.5), -20.0 + time, np.full(n, 3.0),  # force (N), ground axes
                              np.full(n, 0.01), np.full(n, -0.2), np.full(n, 0.02),  # point, humerus frame
                              np.full(n, 0.3), np.zeros(n), np.full(n, -0.4)])  # torque (N m), ground axes
    labels = ("hand_fx", "hand_fy", "hand_fz", "hand_px", "hand_py", "hand_pz", "hand_tx", "hand_ty", "hand_tz")
    mb.io.write_storage(tmp_path / "loads.mot", mb.io.MotionData(time, labels, values, name="loads"))
    (tmp_path / "loads.xml").write_text(f"""<?xml version="1.0" encoding="UTF-8"?>
<OpenSimDocument Version="40000">
  <ExternalLoads name="loads">
    <objects>
      <ExternalForce name="hand">
        <applied_to_body>{body}</applied_to_body>
        <force_expressed_in_body>ground</force_expressed_in_body>
        <point_expressed_in_body>r_humerus</point_expressed_in_body>
        <force_identifier>hand_f</force_identifier>
        <point_identifier>{point_identifier}</point_identifier>
        <torque_identifier>hand_t</torque_identifier>
      </ExternalForce>
    </objects>
    <groups/>
    <datafile>loads.mot</datafile>
  </ExternalLoads>
</OpenSimDocument>
""")
    return tmp_path / "loads.xml"


def test_external_force_is_jacobian_transpose(tmp_path, arm26):
    model, motion, q = arm26
    (load,) = mb.io.read_external_loads(_arm_with_load(tmp_path, arm26), model)
    with_load = mb.inverse_dynamics_motion(model, motion.time, q, external_loads=[load])
    without = mb.inverse_dynamics_motion(model, motion.time, q)
    # Independent route: point Jacobian and angular Jacobians by autodiff, the point
    # carried from the humerus frame to the hand's; the torque is in the force's frame
    # (ground), as OpenSim's force_expressed_in_body says.
    hand, humerus = model.body_index("r_ulna_radius_hand"), model.body_index("r_humerus")
    for i in (0, 70):
        qi = with_load.q[i]
        poses = mb.body_transforms(model, qi)
        force = np.array([1.5, -20.0 + float(with_load.time[i]), 3.0])
        ground_point = poses[humerus, :3, :3] @ np.array([0.01, -0.2, 0.02]) + poses[humerus, :3, 3]
        on_hand = poses[hand, :3, :3].T @ (ground_point - poses[hand, :3, 3])
        torque = np.array([0.3, 0.0, -0.4])
        expected = (mb.point_jacobian(model, qi, "r_ulna_radius_hand", on_hand).T @ force
                    + mb.angular_jacobians(model, qi)[hand].T @ torque)
        np.testing.assert_allclose(without.forces[i] - with_load.forces[i], expected, rtol=1e-10, atol=1e-12)


def test_loads_that_do_not_cover_the_motion_are_refused(arm26):
    """Loads sampled over another span were extrapolated linearly from their end slopes and
    applied at every frame, silently."""
    model, motion, q = arm26
    t = np.asarray(motion.time)
    for span in ((t[-1] + 1.0, t[-1] + 2.0), (t[0], 0.5 * (t[0] + t[-1]))):
        load = mb.ExternalForce("push", "r_ulna_radius_hand", np.linspace(*span, 5), force=np.ones((5, 3)),
                                point=np.zeros((5, 3)), point_expressed_in_body="r_ulna_radius_hand")
        with pytest.raises(ValueError, match=r"inverse_dynamics_motion: ExternalForce 'push' is sampled over .* "
                                             r"which does not cover the motion's"):
            mb.inverse_dynamics_motion(model, t, q, external_loads=[load])
    # A time range inside the loads' span is fine.
    half = (t[0], 0.5 * (t[0] + t[-1]))
    load = mb.ExternalForce("push", "r_ulna_radius_hand", np.linspace(*half, 5), force=np.ones((5, 3)))
    assert mb.inverse_dynamics_motion(model, t, q, external_loads=[load], time_range=(t[0], 0.4 * half[1])).q.shape[0]


def test_external_force_samples_the_natural_cubic_spline():
    """Independent route: scipy's natural cubic spline through all the samples (the sampled
    values come from a cached matrix of the times, built from each frame's window)."""
    from scipy.interpolate import CubicSpline

    rng = np.random.default_rng(3)
    time = np.cumsum(rng.uniform(0.5e-3, 1.5e-3, 400))
    data = np.stack([np.sin(40 * time), np.cos(25 * time) + rng.normal(0, 1e-2, time.size), time ** 2], axis=1)
    load = mb.ExternalForce("f", "r_humerus", time, force=data, point=2 * data)
    frames = np.concatenate([[time[0] - 0.01], np.linspace(time[0], time[-1], 37)[:-1], time[150:153]])
    force, point, torque = load.sample(frames)
    spline = CubicSpline(time, data, bc_type="natural")
    expected = spline(frames)
    expected[0] = data[0] + spline(time[0], 1) * (frames[0] - time[0])  # linear below the samples
    np.testing.assert_allclose(force, expected, rtol=0, atol=1e-12)
    np.testing.assert_allclose(point, 2 * expected, rtol=0, atol=2e-12)
    np.testing.assert_array_equal(torque, 0.0)
    # A second call reuses the matrix (same times' values, new arrays).
    from jaxmb._motion import cubic_sampling_operator

    assert cubic_sampling_operator(time, frames) is cubic_sampling_operator(time.copy(), frames.copy())


def test_external_loads_name_a_missing_body(tmp_path, arm26):
    model = arm26[0]
    path = _arm_with_load(tmp_path, arm26, body="r_ulna_radius_hnd")
    with pytest.raises(mb.ModelError, match=r"<ExternalForce name='hand'> at .*loads\.xml:5: <applied_to_body> "
                                            r"'r_ulna_radius_hnd' is not a body .*closest: r_ulna_radius_hand"):
        mb.io.read_external_loads(path, model)


def test_external_loads_name_a_missing_column(tmp_path, arm26):
    path = _arm_with_load(tmp_path, arm26, point_identifier="hand_q")
    with pytest.raises(mb.ModelError, match=r"loads\.xml:5: point_identifier 'hand_q' matches 0 columns"):
        mb.io.read_external_loads(path)


def test_external_loads_name_a_sample_that_is_not_finite(tmp_path, arm26):
    """Before: 'force must be finite with shape (n, 3), got (n, 3)', no row or column."""
    path = _arm_with_load(tmp_path, arm26)
    data = mb.io.read_storage(tmp_path / "loads.mot")
    values = np.array(data.values)
    values[4, 1] = np.nan
    mb.io.write_storage(tmp_path / "loads.mot", mb.io.MotionData(data.time, data.labels, values, name="loads"))
    with pytest.raises(mb.ModelError, match=rf"loads\.xml:5: force_identifier 'hand_f': column 'hand_fy' of "
                                            rf".*loads\.mot is nan at time {data.time[4]:g} s \(row 5 of the data\)"):
        mb.io.read_external_loads(path)


def test_an_external_force_names_its_sample_that_is_not_finite():
    with pytest.raises(ValueError, match=r"ExternalForce 'h': force must be finite; its component x is nan at time "
                                         r"1 s \(row 1\)"):
        mb.ExternalForce("h", "r_humerus", np.array([0.0, 1.0]), force=np.array([[0.0, 0.0, 0.0], [np.nan, 0.0, 0.0]]))


def test_external_loads_refuse_a_point_without_a_force(tmp_path, arm26):
    """Before: the point was dropped and the torque alone applied."""
    path = _arm_with_load(tmp_path, arm26)
    path.write_text(path.read_text().replace("<force_identifier>hand_f</force_identifier>",
                                             "<force_identifier></force_identifier>"))
    with pytest.raises(mb.ModelError, match=r"loads\.xml:5: <point_identifier> is given but no <force_identifier>"):
        mb.io.read_external_loads(path)


# ---- the command line ----


def test_command_writes_opensims_file(tmp_path, capsys):
    out = tmp_path / "id"
    assert main(["inverse-dynamics", "--setup", str(DATA / "arm26_Setup_InverseDynamics.xml"),
                 "--out", str(out), "--compile-cache", "none"]) == 0
    written = mb.io.read_storage(out / "arm26_InverseDynamics.sto")
    ref = mb.io.read_storage(DATA / "arm26_id_lowpass6.sto")
    assert written.labels == ref.labels == ("r_shoulder_elev_moment", "r_elbow_flex_moment")
    np.testing.assert_allclose(written.values, ref.values, rtol=0, atol=1e-8)
    assert "121 frames, 2 coordinates, low-pass 6 Hz" in capsys.readouterr().out


def test_command_refuses_a_bad_motion(tmp_path, capsys):
    bad = tmp_path / "bad.mot"
    bad.write_text("endheader\ntime\tr_elbow\n0\t1\n0.1\t2\n")
    assert main(["inverse-dynamics", str(DATA / "arm26.osim"), str(bad), "--out", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("jaxmb: error: ") and "'r_elbow' (closest coordinates: r_elbow_flex" in err


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("JAXMB_SLOW"), reason="gait2392 compiles for about a minute; set JAXMB_SLOW=1")
def test_gait2392_with_ground_reactions_equals_opensim(tmp_path, monkeypatch):
    """As docs/how-to/motion-files.md computes it, run beside the files it names."""
    in_folder_with(monkeypatch, tmp_path, [DATA / name for name in (
        "arm26.osim", "arm26_InverseKinematics.mot", "subject01_simbody.osim", "subject01_walk1_ik.mot",
        "subject01_walk1_grf.xml", "subject01_walk1_grf.mot")])
    page = run_page("docs/how-to/motion-files.md", min_blocks=4)
    gait, result = page["gait"], page["walk_id"]
    ref = mb.io.read_storage(DATA / "gait2392_walk1_id.sto")
    np.testing.assert_allclose(np.asarray(result.time), ref.time, rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.asarray(result.forces), _by_name(gait, ref), rtol=0, atol=1e-8)
    assert math.isclose(float(np.max(np.abs(ref.values))), 132.0, rel_tol=0.05)


def test_setup_file_naming_a_missing_file(tmp_path, capsys):
    setup = tmp_path / "Setup_InverseDynamics.xml"
    setup.write_text("""<?xml version="1.0" encoding="UTF-8"?>
<OpenSimDocument Version="40000">
  <InverseDynamicsTool name="t">
    <model_file>arm26.osim</model_file>
    <coordinates_file>missing.mot</coordinates_file>
  </InverseDynamicsTool>
</OpenSimDocument>
""")
    (tmp_path / "arm26.osim").write_bytes((DATA / "arm26.osim").read_bytes())
    assert main(["inverse-dynamics", "--setup", str(setup), "--out", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert "Setup_InverseDynamics.xml:5: file 'missing.mot' not found" in err and "relative to its folder" in err


@pytest.mark.parametrize("old, new, message", [
    # before: written to o/../escaped.sto, outside the results folder (an absolute name the same way)
    ("<output_gen_force_file> arm26_InverseDynamics.sto </output_gen_force_file>",
     "<output_gen_force_file>../escaped.sto</output_gen_force_file>", "'../escaped.sto' is not a file name"),
    ("<coordinates_in_degrees>true</coordinates_in_degrees>",
     "<coordinates_in_degrees>maybe</coordinates_in_degrees>", "expected true or false, got 'maybe'"),
])
def test_setup_values_jaxmb_would_misread_are_refused(tmp_path, capsys, old, new, message):
    setup = arm26_tool_setup(tmp_path, "arm26_Setup_InverseDynamics.xml", old, new)
    assert main(["inverse-dynamics", "--setup", str(setup), "--out", str(tmp_path / "o")]) == 1
    assert message in capsys.readouterr().err
    assert not (tmp_path / "escaped.sto").exists()


def test_setup_that_does_not_exclude_the_muscles_is_told_they_are_left_out(tmp_path, capsys):
    """OpenSim reads an empty <forces_to_exclude> as 'exclude nothing'; jaxmb's inverse
    dynamics leaves the muscles out whatever it says (before: silently)."""
    setup = arm26_tool_setup(tmp_path, "arm26_Setup_InverseDynamics.xml",
                             "<forces_to_exclude> Muscles </forces_to_exclude>", "<forces_to_exclude></forces_to_exclude>")
    assert main(["inverse-dynamics", "--setup", str(setup), "--out", str(tmp_path / "o"), "--no-progress"]) == 0
    assert "jaxmb: warning: " in (err := capsys.readouterr().err) and "does not name Muscles, but jaxmb's" in err
