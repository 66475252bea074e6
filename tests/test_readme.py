"""The README's code runs as printed, and what its comments claim holds."""

import pathlib
import re

import jax
import jax.numpy as jnp
import pytest

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


@pytest.fixture(scope="module")
def readme():
    """The namespace after running every ```python block of the README, in order."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert len(blocks) >= 3, "the README's examples were not found"
    namespace = {}
    for k, block in enumerate(blocks):
        exec(compile(block, f"README.md, python block {k + 1}", "exec"), namespace)
    return namespace


def test_first_examples_give_the_documented_shapes(readme):
    assert readme["M"].shape == (2, 2) and readme["qdd"].shape == (2,)
    assert jnp.allclose(readme["M"], readme["M"].T, rtol=0, atol=1e-15)
    assert readme["leg"].nq == 1 and readme["leg"].coordinate_names == ("knee_flexion",)
    assert readme["sol"].q.shape == (201, 1)   # the slider-crank's; it reuses the name


def test_slider_crank_swing_keeps_the_loop_closed_and_conserves_energy(readme):
    assert float(readme["gap"].max()) < 1e-10
    energy = readme["energy"]
    assert float(jnp.ptp(energy)) < 1e-7 * float(jnp.abs(energy).max())
    q = readme["sol"].q[:, 0]
    # A swing, not a turn: the continuation from q_ref is good over this range.
    assert -4.0 < float(q.min()) < -3.0 and float(q.max()) == pytest.approx(0.5)


def test_slider_crank_premodeled_turns_keep_the_loop_closed(readme):
    mb, fast, spin = readme["mb"], readme["fast"], readme["spin"]
    assert float(readme["fit_error"].max()) < 1e-12
    q = spin.q[-1]
    assert float(q[0]) > 4 * jnp.pi   # more than two turns
    f = mb.joint_values(fast, q)
    assert float(jnp.abs(readme["slider_crank"](f[1:], q, jnp.array([0.1, 0.3]))).max()) < 1e-12
    energy = lambda q, qd: mb.kinetic_energy(fast, q, qd) + mb.potential_energy(fast, q)  # noqa: E731
    e0 = energy(jnp.array([0.5]), jnp.array([20.0]))
    assert float(jnp.abs(energy(spin.q[-1], spin.qd[-1]) - e0)) < 1e-7 * float(e0)
