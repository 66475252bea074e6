"""The ForceSet's non-muscle elements read from .osim files: OpenSim 4.6's generalized
forces (tests/data/opensim/opensim_forces_reference.py) and the importer's errors."""

import pathlib
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmb as mb
from tests.assertions import assert_tree_allclose

DATA = pathlib.Path(__file__).parent / "data" / "opensim"
MODEL_FILE = DATA / "forces_model.osim"
REF = np.load(DATA / "forces_reference.npz")


def test_forces_match_opensim():
    """Each element's Q at three states against OpenSim 4.6's inverse dynamics with only that
    element applied (actuators at OpenSim's overridden actuation = optimal_force · u)."""
    model = mb.load_osim(MODEL_FILE)
    assert model.coordinate_names == tuple(REF["coordinate_names"])
    assert tuple(f.name for f in model.forces) == tuple(REF["force_names"])
    assert mb.actuator_names(model) == tuple(REF["actuator_names"])
    kinds = [type(f).__name__ for f in model.forces]
    assert kinds == ["CoordinateActuator", "PointActuator", "PointActuator", "TorqueActuator",
                     "CoordinateLimitForce", "CoordinateLimitForce", "PointToPointSpring", "BushingForce",
                     "Ligament", "ExpressionBasedCoordinateForce"]
    acts = list(REF["actuator_names"])

    @jax.jit
    def each(q, qd, u):
        return jnp.stack([f.generalized_force(model, q, qd, u[acts.index(f.name)] if f.name in acts else None)
                          for f in model.forces])

    for n in range(len(REF["q"])):
        got = each(jnp.asarray(REF["q"][n]), jnp.asarray(REF["qd"][n]), jnp.asarray(REF["u"][n]))
        for k, name in enumerate(REF["force_names"]):
            ref = REF["Q"][n, k]
            assert np.max(np.abs(ref)) > 1e-2, name  # every element acts at every state
            assert_tree_allclose(got[k], ref, rtol=0, atol=1e-10 * np.max(np.abs(ref)), what=f"{name}, state {n}")


def test_eager_force_set_calls_run_one_compiled_program_and_sum_opensims_elements():
    """Outside `jit`, `force_set_forces` and `actuator_forces` each run one compiled program,
    cached per model structure (they ran every element operation by operation, half a
    second a call on this model). Each is the sum of OpenSim's forces of its elements
    applied alone."""
    model = mb.load_osim(MODEL_FILE)
    actuated = np.isin(REF["force_names"], REF["actuator_names"])
    for n in range(2):
        q, qd, u = (jnp.asarray(REF[k][n]) for k in ("q", "qd", "u"))
        for call in (mb.force_set_forces, mb.actuator_forces):
            # The state closed over, as concrete arrays: an eager call.
            program = jax.make_jaxpr(lambda call=call: call(model, q, qd, u))()
            assert [e.primitive.name for e in program.eqns] in (["jit"], ["pjit"]), program
        scale = np.abs(REF["Q"][n]).max()
        np.testing.assert_allclose(mb.force_set_forces(model, q, qd, u), REF["Q"][n].sum(axis=0), rtol=0,
                                   atol=1e-10 * scale)
        np.testing.assert_allclose(mb.actuator_forces(model, q, qd, u), REF["Q"][n][actuated].sum(axis=0), rtol=0,
                                   atol=1e-10 * scale)


def _broken(tmp_path, old, new, count=1):
    text = MODEL_FILE.read_text()
    assert text.count(old) >= count, old
    path = tmp_path / "broken.osim"
    path.write_text(text.replace(old, new, count))
    return path


def _line_of(path, needle):
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if needle in line)


@pytest.mark.parametrize("old, new, element, message", [
    ("<expression>-3*q^2-0.5*qdot+sin(q)/(1+exp(-q))</expression>", "<expression>q*foo(qdot)</expression>",
     "<ExpressionBasedCoordinateForce name='expression_q0'>", r"unknown name 'foo'"),
    ("<coordinate>r2</coordinate>", "<coordinate>nope</coordinate>", "<CoordinateActuator name='reserve_r2'>",
     r"coordinate 'nope' is not a coordinate of the model"),
    ("<socket_body2>/bodyset/b3</socket_body2>", "<socket_body2>/bodyset/b9</socket_body2>",
     "<PointToPointSpring name='spring'>", r"<socket_body2> '/bodyset/b9' is not a body of the model"),
    ("<socket_frame2>/bodyset/b3/f3</socket_frame2>", "<socket_frame2>/bodyset/b3/f9</socket_frame2>",
     "<socket_frame2>", r"frame '/bodyset/b3/f9' .* does not exist"),
    ("<transition>5</transition>", "<transition>0</transition>", "<CoordinateLimitForce name='limit_r1'>",
     r"transition 0.0 must be positive"),
    ('<SimmSpline name="force_length_curve">', '<SimmSpline name="something_else">', "<Ligament name='ligament'>",
     r"has no force_length_curve"),
    ("<resting_length>0.5</resting_length>", "<resting_length>-0.5</resting_length>",
     "<Ligament name='ligament'>", r"resting_length -0.5 must be positive"),
])
def test_broken_force_elements_are_named_with_file_and_line(tmp_path, old, new, element, message):
    path = _broken(tmp_path, old, new)
    tag = element[1:].split()[0].rstrip(">")
    name = element.split("'")[1] if "'" in element else None
    line = _line_of(path, f'<{tag} name="{name}"' if name else new.split(">")[0])
    with pytest.raises(mb.ModelError) as info:
        mb.load_osim(path)
    text = str(info.value)
    assert text.startswith(f"{element} at {path}:"), text
    assert f"{path}:{line}" in text, text
    assert __import__("re").search(message, text), text


def test_unknown_force_types_are_named_in_a_warning(tmp_path):
    path = _broken(tmp_path, "</objects>\n\t\t\t<groups />\n\t\t</ForceSet>",
                   '<SpringGeneralizedForce name="sgf"><coordinate>q0</coordinate></SpringGeneralizedForce>'
                   "</objects>\n\t\t\t<groups />\n\t\t</ForceSet>")
    with pytest.warns(UserWarning, match=r"skipped 1: 1 SpringGeneralizedForce \(sgf\)"):
        model = mb.load_osim(path)
    assert len(model.forces) == 10


def test_disabled_elements_are_not_applied(tmp_path):
    path = _broken(tmp_path, '<ExpressionBasedCoordinateForce name="expression_q0">',
                   '<ExpressionBasedCoordinateForce name="expression_q0"><appliesForce>false</appliesForce>')
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = mb.load_osim(path)
    assert "expression_q0" not in [f.name for f in model.forces]


@pytest.mark.parametrize("frames", ["opensim3", "own_frames"])
def test_bushing_frame_forms_read_the_same_frames(tmp_path, frames):
    """The 3.x ``body_1``/``location_body_1``/``orientation_body_1`` form and offset frames in the
    bushing's own ``<frames>`` (socket paths relative to the bushing) give the frames that the
    body components of forces_model.osim give."""
    sockets = "<socket_frame1>/bodyset/b1/f1</socket_frame1>"
    text = MODEL_FILE.read_text()
    start = text.index(sockets)
    end = text.index("</socket_frame2>") + len("</socket_frame2>")
    if frames == "opensim3":
        new = ("<body_1>b1</body_1><location_body_1>0.1 0 0.05</location_body_1>"
               "<orientation_body_1>0.1 0.2 0.3</orientation_body_1><body_2>b3</body_2>"
               "<location_body_2>0 0.2 0</location_body_2><orientation_body_2>-0.2 0.1 0.4</orientation_body_2>")
    else:
        new = ("<socket_frame1>b1_offset</socket_frame1><socket_frame2>b3_offset</socket_frame2><frames>"
               '<PhysicalOffsetFrame name="b1_offset"><socket_parent>/bodyset/b1</socket_parent>'
               "<translation>0.1 0 0.05</translation><orientation>0.1 0.2 0.3</orientation></PhysicalOffsetFrame>"
               '<PhysicalOffsetFrame name="b3_offset"><socket_parent>/bodyset/b3</socket_parent>'
               "<translation>0 0.2 0</translation><orientation>-0.2 0.1 0.4</orientation></PhysicalOffsetFrame>"
               "</frames>")
    path = tmp_path / "bushing.osim"
    path.write_text(text[:start] + new + text[end:])
    ours = {f.name: f for f in mb.load_osim(path).forces}["bushing"]
    ref = {f.name: f for f in mb.load_osim(MODEL_FILE).forces}["bushing"]
    assert (ours.body1, ours.body2) == (ref.body1, ref.body2) == ("b1", "b3")
    assert_tree_allclose((ours.frame1, ours.frame2), (ref.frame1, ref.frame2), rtol=1e-15, atol=1e-16)
