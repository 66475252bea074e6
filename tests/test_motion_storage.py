"""OpenSim motion files (``.mot``/``.sto``): reading, writing, OpenSim 4.6 reading what
jaxmb writes, coordinates in the model's order and units, and an error per broken input."""

import json
import math
import pathlib

import numpy as np
import pytest

import jaxmb as mb
from jaxmb.io import MotionData, coordinates_from_motion, read_storage, write_storage

DATA = pathlib.Path(__file__).parent / "data" / "opensim" / "motion"


def _written_example() -> MotionData:
    """The table behind ``jaxmb_written.sto`` (OpenSim 4.6 read it: opensim_reads_jaxmb.json)."""
    time = np.array([0.0, 0.01, 0.02, 1.0 / 3.0, 0.5])
    values = np.array([[1.0 / 3.0, -2.5e-300], [math.pi, 1e10], [-0.1, 0.0], [12.5, -7.0], [np.e, 1.0 / 7.0]])
    return MotionData(time, ("r_shoulder_elev", "r_elbow_flex"), values, in_degrees=True, name="jaxmb_roundtrip")


@pytest.fixture(scope="module")
def arm26():
    return mb.load_osim(DATA / "arm26.osim")


def _write(tmp_path, text, name="m.mot"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_round_trip_is_exact(tmp_path):
    rng = np.random.default_rng(0)
    motion = MotionData(np.cumsum(rng.uniform(0.001, 0.1, 40)), ("a", "b", "c"), rng.normal(size=(40, 3)) * 1e3,
                        in_degrees=False, name="random")
    write_storage(tmp_path / "r.sto", motion)
    back = read_storage(tmp_path / "r.sto")
    np.testing.assert_array_equal(back.time, motion.time)
    np.testing.assert_array_equal(back.values, motion.values)
    assert back.labels == motion.labels and back.in_degrees is False and back.name == "random"


def test_opensim_reads_what_jaxmb_writes(tmp_path):
    motion = _written_example()
    write_storage(tmp_path / "w.sto", motion)
    # The committed file is what jaxmb writes today, so OpenSim's reading of it applies.
    assert (tmp_path / "w.sto").read_bytes() == (DATA / "jaxmb_written.sto").read_bytes()
    ref = json.loads((DATA / "opensim_reads_jaxmb.json").read_text())
    assert ref["storage_labels"] == ["time", *motion.labels] and ref["storage_in_degrees"] is True
    np.testing.assert_array_equal(np.array(ref["storage_rows"]), np.column_stack([motion.time, motion.values]))
    assert ref["table_labels"] == list(motion.labels) and ref["table_in_degrees"] == "yes"
    np.testing.assert_array_equal(ref["table_times"], motion.time)


def test_version2_header_whitespace_columns_and_degrees(tmp_path, arm26):
    path = _write(tmp_path, "DataType=double\nversion=2\nOpenSimVersion=4.6\ninDegrees=yes\nendheader\n"
                            "time r_elbow_flex   r_shoulder_elev\n0 90 -45\n0.5 180 30\n")
    motion = read_storage(path)
    assert motion.in_degrees and motion.labels == ("r_elbow_flex", "r_shoulder_elev")
    q = coordinates_from_motion(arm26, motion)  # the model's order, radians
    np.testing.assert_allclose(q, np.deg2rad([[-45.0, 90.0], [30.0, 180.0]]), rtol=1e-15)


def test_tutorial_motion_in_degrees(arm26):
    motion = read_storage(DATA / "arm26_InverseKinematics.mot")
    assert motion.values.shape == (121, 2) and motion.in_degrees and motion.name == "Coordinates"
    q = coordinates_from_motion(arm26, motion)
    np.testing.assert_array_equal(q[:, 1], motion.column("r_elbow_flex") * (math.pi / 180.0))


def test_translations_are_never_converted():
    model = mb.Model([mb.Body("slider", 1.0, (0, 0, 0), np.eye(3)), mb.Body("arm", 1.0, (0, 0, 0), np.eye(3))],
                     [mb.prismatic("x", "ground", "slider", (1, 0, 0), mb.Coordinate(0)),
                      mb.revolute("r", "slider", "arm", (0, 0, 1), mb.Coordinate(1))], ["tx", "angle"])
    assert mb.io.rotational_coordinates(model) == (False, True)
    q = coordinates_from_motion(model, MotionData([0.0], ("tx", "angle"), [[0.25, 90.0]], in_degrees=True))
    np.testing.assert_allclose(q, [[0.25, math.pi / 2]], rtol=1e-15)


def test_an_angle_read_only_with_other_coordinates_is_rotational():
    """The double pendulum's θ2 (absolute) enters only the elbow's Linear(θ1, θ2); before, no
    revolute joint read it alone, so it counted as a translation and stayed in degrees."""
    model = mb.models.double_pendulum()
    assert mb.io.rotational_coordinates(model) == (True, True)
    q = coordinates_from_motion(model, MotionData([0.0, 0.1], model.coordinate_names, np.full((2, 2), 90.0),
                                                  in_degrees=True))
    np.testing.assert_allclose(q, np.full((2, 2), math.pi / 2), rtol=1e-15)


@pytest.mark.parametrize("kwargs, message", [
    (dict(time=[0.1, 0.0]), r"time must be finite and increasing, got \[0.1, 0.0\]"),
    (dict(time=[0.0, np.nan]), "time must be finite and increasing"),
    (dict(labels="ab"), "labels must be a sequence of column names, got the string 'ab'"),
    (dict(labels=("time", "b")), "'time' is the time column"),
    (dict(name="line1\nendheader"), "name must be one line"),  # write_storage wrote an unreadable file
])
def test_a_motion_table_checks_what_it_is_given(kwargs, message):
    """read_storage refused these in a file; a MotionData built in Python took them (and
    in_degrees='no', which read as true: test_untyped_calls.py)."""
    args = dict(time=[0.0, 0.1], labels=("a", "b"), values=np.ones((2, 2)), in_degrees=False, name="n")
    with pytest.raises(ValueError, match="MotionData: " + message):
        MotionData(**(args | kwargs))


def test_a_coordinate_that_is_not_finite_in_the_file_is_named(tmp_path):
    """read_storage keeps a nan cell; coordinates_from_motion returned it in q."""
    path = _write(tmp_path, "x\ninDegrees=no\nendheader\ntime\ttheta1\ttheta2\n0\tnan\t1\n0.1\t0\t1\n")
    motion = read_storage(path)
    with pytest.raises(mb.ModelError, match=r"m\.mot: coordinate 'theta1' is not finite at 1 frame \(first at t = 0 s\)"):
        coordinates_from_motion(mb.models.double_pendulum(), motion)


# ---- broken inputs: one test each, asserting the message ----


def test_an_empty_column_label(tmp_path):
    """Before: 'a row of 3 numbers under 2 column labels' (the empty label was dropped)."""
    path = _write(tmp_path, "x\nendheader\ntime\t\tb\n0\t1\t2\n")
    with pytest.raises(mb.ModelError, match=r"m\.mot:3: an empty column label after 'time' \(two tabs in a row\)"):
        read_storage(path)


def test_missing_time_column(tmp_path):
    path = _write(tmp_path, "x\nendheader\nframe\tr_elbow_flex\n0\t1\n")
    with pytest.raises(mb.ModelError, match=r"m\.mot:3: the first column is 'frame', not 'time'"):
        read_storage(path)


def test_unknown_column_names_the_closest_coordinates(tmp_path, arm26):
    path = _write(tmp_path, "endheader\ntime\tr_elbow_flexion\tr_shoulder_elev\n0\t1\t2\n")
    with pytest.raises(mb.ModelError, match=r"columns that are no coordinate.*'r_elbow_flexion' "
                                            r"\(closest coordinates: r_elbow_flex"):
        coordinates_from_motion(arm26, read_storage(path))
    # Named as known (e.g. an .osim's locked coordinates), it is skipped.
    path = _write(tmp_path, "endheader\ntime\textra\tr_elbow_flex\tr_shoulder_elev\n0\t1\t2\t3\n")
    np.testing.assert_array_equal(coordinates_from_motion(arm26, read_storage(path), ignore=["extra"]), [[3.0, 2.0]])
    # One name as a string is that name (it was ignored character by character).
    np.testing.assert_array_equal(coordinates_from_motion(arm26, read_storage(path), ignore="extra"), [[3.0, 2.0]])


def test_degrees_labelled_as_radians(tmp_path, arm26):
    path = _write(tmp_path, "inDegrees=no\nendheader\ntime\tr_elbow_flex\tr_shoulder_elev\n0\t95\t2\n")
    with pytest.raises(mb.ModelError, match=r"inDegrees=no, but rotational coordinate 'r_elbow_flex' reaches 95 "
                                            r".*Set 'inDegrees=yes'"):
        coordinates_from_motion(arm26, read_storage(path))
    q = coordinates_from_motion(arm26, read_storage(path), check_units=False)
    np.testing.assert_array_equal(q, [[2.0, 95.0]])


def test_missing_coordinate(tmp_path, arm26):
    path = _write(tmp_path, "endheader\ntime\tr_elbow_flex\n0\t1\n")
    with pytest.raises(mb.ModelError, match=r"no column for the model's coordinates \['r_shoulder_elev'\]"):
        coordinates_from_motion(arm26, read_storage(path))
    q = coordinates_from_motion(arm26, read_storage(path), missing="default")
    np.testing.assert_array_equal(q, [[float(arm26.q_default[0]), 1.0]])


@pytest.mark.parametrize("text, message", [
    ("version=1\ntime\ta\n0\t1\n", r"m\.mot:3: no 'endheader'"),
    ("nRows=3\nendheader\ntime\ta\n0\t1\n", r"m\.mot:1: the header says nrows=3 but the file has 1 data rows"),
    ("endheader\ntime\ta\n0\t1\n0.1\n", r"m\.mot:4: a row of 1 numbers under 2 column labels"),
    ("endheader\ntime\ta\n0\tx\n", r"m\.mot:3: 'x' is not a number"),
    ("endheader\ntime\ta\n0\t1\n0\t2\n", r"m\.mot:4: time 0.0 does not increase"),
    ("inDegrees=maybe\nendheader\ntime\ta\n0\t1\n", r"m\.mot:1: inDegrees='maybe'"),
    # before: the last of the two lines won (radians), and a file of labels only gave 0 samples
    ("inDegrees=yes\nversion=1\ninDegrees=no\nendheader\ntime\ta\n0\t1\n",
     r"m\.mot:3: inDegrees='no', but line 1 says inDegrees='yes'"),
    ("endheader\ntime\ta\n\n", r"m\.mot:2: no data rows after the column labels"),
    # before: "m.mot:3: <Mesh name=...> but line 2 says <Mesh ...>" (its attributes read as a header)
    ('<?xml version="1.0"?>\n<OpenSimDocument Version="40000">\n<Mesh file="a"/>\n<Mesh file="b"/>\n',
     r"m\.mot: an XML file \(it begins '<\?xml version=.*not an OpenSim \.mot/\.sto table"),
])
def test_malformed_files(tmp_path, text, message):
    with pytest.raises(mb.ModelError, match=message):
        read_storage(_write(tmp_path, text))
