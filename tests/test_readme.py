"""The README's and the documentation's code runs as printed, and what its comments claim holds.

Each page's ```python blocks run in order in one namespace, as a reader would paste them.
"""

import pathlib
import re

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
QUICK_START = (
    "python3 -m venv .venv && .venv/bin/pip install -e . && "
    ".venv/bin/jaxmb simulate double-pendulum --t1 20 --out results",
    'python3 -m venv .venv && .venv/bin/pip install -e ".[test]" && .venv/bin/python -m pytest',
)


def run_page(relative, min_blocks=1):
    """The namespace after running every ```python block of a Markdown page, in order."""
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / relative).read_text(), re.S)
    assert len(blocks) >= min_blocks, f"the examples of {relative} were not found"
    namespace = {}
    for k, block in enumerate(blocks):
        exec(compile(block, f"{relative}, python block {k + 1}", "exec"), namespace)
    return namespace


@pytest.fixture(scope="module")
def readme():
    return run_page("README.md")


@pytest.fixture(scope="module")
def getting_started():
    return run_page("docs/getting-started.md", min_blocks=3)


@pytest.fixture(scope="module")
def closed_chains():
    return run_page("docs/how-to/closed-chains.md", min_blocks=2)


def test_quick_start_commands_are_in_the_readme_and_the_getting_started_page():
    """CI and fresh-machine checks run these two lines: they stay byte-identical."""
    for page in ("README.md", "docs/getting-started.md"):
        text = (ROOT / page).read_text()
        for command in QUICK_START:
            assert f"```bash\n{command}\n```" in text, (page, command)


def test_readme_example_gives_the_documented_shapes(readme):
    assert readme["M"].shape == (2, 2) and readme["qdd"].shape == (2,)
    assert jnp.allclose(readme["M"], readme["M"].T, rtol=0, atol=1e-15)
    assert readme["sol"].q.shape == (501, 2) and bool(readme["sol"].success)


def test_getting_started_builds_the_leg(getting_started):
    assert getting_started["M"].shape == (2, 2) and getting_started["qdd"].shape == (2,)
    leg = getting_started["leg"]
    assert leg.nq == 1 and leg.coordinate_names == ("knee_flexion",)


def test_slider_crank_swing_keeps_the_loop_closed_and_conserves_energy(closed_chains):
    assert closed_chains["sol"].q.shape == (201, 1)
    assert float(closed_chains["gap"].max()) < 1e-10
    energy = closed_chains["energy"]
    assert float(jnp.ptp(energy)) < 1e-7 * float(jnp.abs(energy).max())
    q = closed_chains["sol"].q[:, 0]
    # A swing, not a turn: the continuation from q_ref is good over this range.
    assert -4.0 < float(q.min()) < -3.0 and float(q.max()) == pytest.approx(0.5)


def test_slider_crank_premodeled_turns_keep_the_loop_closed(closed_chains):
    mb, fast, spin = closed_chains["mb"], closed_chains["fast"], closed_chains["spin"]
    assert float(closed_chains["fit_error"].max()) < 1e-12
    q = spin.q[-1]
    assert float(q[0]) > 4 * jnp.pi   # more than two turns
    f = mb.joint_values(fast, q)
    assert float(jnp.abs(closed_chains["slider_crank"](f[1:], q, jnp.array([0.1, 0.3]))).max()) < 1e-12
    energy = lambda q, qd: mb.kinetic_energy(fast, q, qd) + mb.potential_energy(fast, q)  # noqa: E731
    e0 = energy(jnp.array([0.5]), jnp.array([20.0]))
    assert float(jnp.abs(energy(spin.q[-1], spin.qd[-1]) - e0)) < 1e-7 * float(e0)


def test_controller_examples_hold_the_elbow_and_track_the_reference():
    page = run_page("docs/how-to/controllers.md", min_blocks=2)
    assert abs(float(page["sol"].q[-1, 1]) - float(jnp.pi) / 3) < 2e-2
    assert float(jnp.abs(page["tracked"].q[-1] - page["reference"](2.0)[0]).max()) < 1e-3
    activation = page["muscled"].state.controller
    assert abs(float(activation[-1, 0]) - 0.5) < 1e-3 and float(activation[0, 0]) == 0.05


def test_batch_examples_run_and_float32_stays_float32():
    page = run_page("docs/how-to/batches.md", min_blocks=3)
    q_end, success = page["final_states"](page["q0s"])
    assert q_end.shape == (64, 2) and bool(success.all())
    assert jnp.allclose(page["chunked"](page["q0s"]), q_end, rtol=1e-6, atol=1e-8)
    assert page["qdd"].dtype == jnp.float32


def test_identification_page_recovers_the_masses_that_made_its_motion():
    """The page's claim: Levenberg-Marquardt finds the double pendulum's masses (0.8, 1.3) to
    round-off in about 10 iterations, and the fitted model is the guess with only those leaves
    changed."""
    page = run_page("docs/how-to/identification.md")
    fit, guess, masses, mb = page["fit"], page["guess"], page["masses"], page["mb"]
    assert fit.result == mb.RESULTS.successful and bool(page["fit"].result == mb.RESULTS.successful)
    np.testing.assert_allclose(jnp.stack(fit.parameters), (0.8, 1.3), rtol=1e-9)
    np.testing.assert_allclose(jnp.stack(masses(fit.model)), (0.8, 1.3), rtol=1e-9)
    assert float(fit.loss) < 1e-20 and 5 <= int(fit.steps) <= 15
    rest = eqx.tree_at(masses, fit.model, masses(guess))
    assert jax.tree.all(jax.tree.map(lambda a, b: bool(jnp.all(a == b)), eqx.filter(rest, eqx.is_array),
                                     eqx.filter(guess, eqx.is_array)))


def test_sharp_bits_page_results_are_what_its_comments_say():
    """A simulation out of steps stops with its result code and its last accepted state; a
    loop closure out of reach reports ``loop_not_converged`` instead of a number."""
    page = run_page("docs/sharp-bits.md", min_blocks=2)
    mb, sol = page["mb"], page["sol"]
    assert sol.result == mb.RESULTS.max_steps_reached and not bool(sol.success)
    assert mb.RESULTS[sol.result].startswith("the integrator reached max_steps before t1")
    assert 0.0 < float(sol.t_end) < 10.0 and bool(jnp.all(jnp.isfinite(sol.state_end.q)))
    loop = page["loop"]
    assert loop.solve(jnp.array([9.0]), throw=False).result == mb.RESULTS.loop_not_converged
    assert loop.solve(jnp.array([0.0]), throw=False).result == mb.RESULTS.successful
