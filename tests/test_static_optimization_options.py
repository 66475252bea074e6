"""Static optimization's options: per-muscle control bounds read from the .osim, the optax
route against the dual Newton route and SLSQP, and acceleration vs moment matching."""

import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmb as mb

_TWO_LINK = (pathlib.Path(__file__).parent / "data" / "broken_osim" / "path_point_nan_location.osim").read_text(
).replace("nan 0.1 0", "0.1 0.1 0")
_FLEXOR = '<Thelen2003Muscle name="flexor">'
_TIME = np.linspace(0.0, 1.0, 21)
_Q = np.column_stack([0.6 * np.sin(2 * np.pi * _TIME), 0.5 + 0.3 * np.cos(2 * np.pi * _TIME)])


def _two_link(tmp_path, controls=""):
    path = tmp_path / "two_link.osim"
    path.write_text(_TWO_LINK.replace(_FLEXOR, _FLEXOR + controls))
    return mb.load_osim(path)


def _reserves():
    return [mb.CoordinateActuator("q1_reserve", "q1", optimal_force=2.0, min_control=-np.inf, max_control=np.inf),
            mb.CoordinateActuator("q2_reserve", "q2", optimal_force=50.0, min_control=-np.inf, max_control=np.inf)]


# ---- per-muscle min_control and max_control ----


def test_max_control_bounds_the_activation(tmp_path):
    free = mb.static_optimization(_two_link(tmp_path), _TIME, _Q, actuators_extra=_reserves())
    model = _two_link(tmp_path, "<min_control>0.02</min_control><max_control>0.5</max_control>")
    assert float(model.muscles[0].min_control) == 0.02 and float(model.muscles[0].max_control) == 0.5
    so = mb.static_optimization(model, _TIME, _Q, actuators_extra=_reserves())
    assert float(jnp.max(free.activations)) > 0.6 and float(jnp.min(free.activations)) == 0.01  # Thelen's default
    assert float(jnp.max(so.activations)) == 0.5 and float(jnp.min(so.activations)) == 0.02
    assert bool(jnp.all(so.result == mb.RESULTS.successful))
    assert float(jnp.max(so.torque_residual)) < 1e-10 and float(jnp.max(so.kkt_residual)) < 1e-10
    # Where the bound is active the reserve makes up the rest: the torque balance holds.
    tau = jnp.einsum("kqn,kn->kq", so.constraint_matrix, jnp.hstack([so.activations, so.controls]))
    np.testing.assert_allclose(np.asarray(tau), np.asarray(so.constraint_target), rtol=0, atol=1e-10)


@pytest.mark.parametrize("controls, message", [
    ("<min_control>0.6</min_control><max_control>0.5</max_control>",
     r"Thelen2003Muscle name='flexor'> at .*two_link\.osim:\d+: .*min_control 0\.6 is above max_control 0\.5"),
    ("<max_control>nan</max_control>", r"two_link\.osim:\d+.*non-finite number \('nan'\)"),
    ("<min_control>0.001</min_control>",
     r"two_link\.osim:\d+: .*min_control 0\.001 is below the Thelen 2003 model's minimum_activation 0\.01"),
])
def test_bad_control_bounds_are_refused(tmp_path, controls, message):
    with pytest.raises(mb.ModelError, match=message):
        _two_link(tmp_path, controls)
