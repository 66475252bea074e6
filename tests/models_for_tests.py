"""Models used across the tests: the built-in examples plus 3-D trees with prismatic joints,
multi-coordinate joint functions, branches and multi-DOF joints."""

import pathlib

import jax.numpy as jnp
import numpy as np

import jaxmb as mb
from jaxmb._spatial import body_fixed_xyz  # private math helper: Euler-angle rotations (no public API)


def _inertia(seed: int):
    """A random valid inertia tensor (rotated principal moments satisfying the triangle rule)."""
    rng = np.random.default_rng(seed)
    moments = np.sort(rng.uniform(0.02, 0.1, 3))
    moments[2] = min(moments[2], 0.95 * (moments[0] + moments[1]))
    a, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    return jnp.asarray(a @ np.diag(moments) @ a.T)


def knee_like_tree():
    """A 3-D tree: 7 bodies, 3 coordinates, revolute and prismatic joints whose variables are
    splines, Fourier series, linear combinations and a two-coordinate callable; one branch."""
    b = mb.ModelBuilder("knee_like_tree", gravity=(0.3, -9.81, 0.2))
    hip = b.add_coordinate("hip")
    knee = b.add_coordinate("knee")
    ankle = b.add_coordinate("ankle")
    flex = jnp.linspace(-2.0, 2.0, 9)
    for k, name in enumerate(["pelvis_link", "femur", "tibia", "patella", "foot", "toe", "arm"]):
        rng = np.random.default_rng(k)
        b.add_body(mb.Body(name, 1.0 + k * 0.3, rng.uniform(-0.1, 0.1, 3), _inertia(k)))
    rot = body_fixed_xyz(jnp.array([0.2, -0.3, 0.4]))
    b.add_joint(mb.prismatic("pelvis_tx", "ground", "pelvis_link", (1.0, 0.2, 0.0),
                             mb.Linear((hip, knee), (0.1, 0.05), 0.02), offset=(0.0, 0.9, 0.0), rotation=rot))
    b.add_joint(mb.revolute("hip", "pelvis_link", "femur", (0.0, 0.0, 1.0), mb.Coordinate(hip),
                            offset=(0.0, -0.1, 0.08)))
    b.add_joint(mb.Joint("knee", "femur", "tibia", "revolute", (0.1, 0.0, 1.0),
                         mb.JaxFunction(lambda q, p: p[0] * q[1] + p[1] * jnp.sin(q[0]) * q[1], jnp.array([1.0, 0.2]), (0, 1)),
                         parent_translation=(0.0, -0.4, 0.0), parent_rotation=body_fixed_xyz(jnp.array([0.1, 0.0, -0.2])),
                         child_translation=(0.01, -0.02, 0.0), child_rotation=body_fixed_xyz(jnp.array([0.0, 0.3, 0.1]))))
    b.add_joint(mb.prismatic("patella_slide", "tibia", "patella", (0.0, 1.0, 0.3),
                             mb.CubicSpline.fit(knee, flex, 0.02 * jnp.sin(flex) + 0.01 * flex**2, "not-a-knot-fmm"),
                             offset=(0.05, 0.0, 0.0)))
    b.add_joint(mb.revolute("ankle", "tibia", "foot", (1.0, 0.0, 0.0),
                            mb.FourierSeries(ankle, 0.1, jnp.array([0.9, 0.05]), jnp.array([0.1, -0.02]), 1.0),
                            offset=(0.0, -0.4, 0.0)))
    b.add_joint(mb.revolute("toe", "foot", "toe", (0.0, 1.0, 0.0), mb.Linear((ankle, knee), (0.5, -0.3)),
                            offset=(0.1, -0.05, 0.0)))
    b.add_joint(mb.revolute("arm", "pelvis_link", "arm", (0.3, 0.3, 0.9), mb.Polynomial(hip, (0.0, 0.7, 0.2, -0.1)),
                            offset=(0.0, 0.3, 0.0)))
    return b.build()


def ball_and_free():
    """A floating body (free joint) carrying a ball-jointed body and a universal-jointed one."""
    b = mb.ModelBuilder("ball_and_free", gravity=(0.0, 0.0, -9.81))
    free = [b.add_coordinate(n) for n in ("rx", "ry", "rz", "tx", "ty", "tz")]
    ball = [b.add_coordinate(n) for n in ("b1", "b2", "b3")]
    uni = [b.add_coordinate(n) for n in ("u1", "u2")]
    b.add_body(mb.Body("trunk", 10.0, (0.0, 0.0, 0.1), _inertia(11)))
    b.add_body(mb.Body("limb", 2.0, (0.0, 0.0, -0.2), _inertia(12)))
    b.add_body(mb.Body("other", 1.0, (0.1, 0.0, 0.0), _inertia(13)))
    b.add_free("root", "ground", "trunk", tuple(free))
    b.add_ball("shoulder", "trunk", "limb", tuple(ball), offset=(0.2, 0.0, 0.3))
    b.add_universal("hip", "trunk", "other", tuple(uni), offset=(-0.1, 0.0, -0.2),
                    child_translation=(0.0, 0.05, 0.0))
    return b.build()


def walker_knee():
    """A thigh and a shank joined as OpenSim's ``walker_knee`` CustomJoint is: three
    rotations about x, z and y and a translation along y, the last three cubic splines of
    the one knee angle, chained through massless links. The shape where OpenSim 4.6's
    velocity terms leave its own Lagrangian (docs/opensim-parity.md)."""
    b = mb.ModelBuilder("walker_knee", gravity=(0.0, -9.81, 0.0))
    hip = b.add_coordinate("hip")
    knee = b.add_coordinate("knee")
    x = jnp.linspace(0.0, 2.1, 13)
    b.add_body(mb.Body("femur", 8.0, (0.0, -0.17, 0.0), _inertia(21)))
    for name in ("knee_r1", "knee_r2", "knee_t"):
        b.add_body(mb.Body.virtual(name))
    b.add_body(mb.Body("tibia", 3.5, (0.0, -0.19, 0.01), _inertia(22)))
    b.add_joint(mb.revolute("hip", "ground", "femur", (0.0, 0.0, 1.0), mb.Coordinate(hip), offset=(0.0, 1.0, 0.0)))
    b.add_joint(mb.revolute("knee_x", "femur", "knee_r1", (1.0, 0.0, 0.0), mb.Coordinate(knee),
                            offset=(0.0, -0.4, 0.0)))
    b.add_joint(mb.revolute("knee_z", "knee_r1", "knee_r2", (0.0, 0.0, 1.0),
                            mb.CubicSpline.fit(knee, x, 0.035 * jnp.sin(1.5 * x), "not-a-knot-fmm")))
    b.add_joint(mb.prismatic("knee_ty", "knee_r2", "knee_t", (0.0, 1.0, 0.0),
                             mb.CubicSpline.fit(knee, x, 0.007 * (1.0 - jnp.cos(x)), "not-a-knot-fmm")))
    b.add_joint(mb.revolute("knee_y", "knee_t", "tibia", (0.0, 1.0, 0.0),
                            mb.CubicSpline.fit(knee, x, 0.26 * (1.0 - jnp.exp(-2.0 * x)), "not-a-knot-fmm")))
    return b.build()


def all_models():
    return {
        "double_pendulum": mb.models.double_pendulum(),
        "three_link_arm_spring": mb.models.three_link_arm(spring_force=12.0, spring_distance=0.05),
        "planar_chain_4": mb.models.planar_chain(4),
        "knee_like_tree": knee_like_tree(),
        "ball_and_free": ball_and_free(),
        "walker_knee": walker_knee(),
    }


def random_state(model, seed=0, scale=1.0):
    rng = np.random.default_rng(seed)
    return (jnp.asarray(rng.uniform(-scale, scale, model.nq)), jnp.asarray(rng.uniform(-2, 2, model.nq)),
            jnp.asarray(rng.uniform(-3, 3, model.nq)))


def muscled_elbow(muscles):
    """One revolute elbow about z (a 1.5 kg forearm under gravity, coordinate "flex" in
    [-0.5, 2.5] rad) driven by straight-line muscles. `muscles` is a sequence of
    ``(name, side, force_model)`` or ``(name, side, force_model, activation_dynamics)``, side
    ``"flexor"`` (ground (0, 0.25, 0) to forearm (0.05, 0.02, 0)) or ``"extensor"`` (ground
    (0, -0.25, 0) to forearm (0.03, -0.02, 0))."""
    paths = {"flexor": [mb.PathPoint("ground", (0.0, 0.25, 0.0)), mb.PathPoint("forearm", (0.05, 0.02, 0.0))],
             "extensor": [mb.PathPoint("ground", (0.0, -0.25, 0.0)), mb.PathPoint("forearm", (0.03, -0.02, 0.0))]}
    b = mb.ModelBuilder("elbow")
    c = b.add_coordinate("flex", range=(-0.5, 2.5))
    b.add_body(mb.Body("forearm", 1.5, (0.15, 0.0, 0.0), jnp.diag(jnp.array([1e-3, 1e-2, 1e-2]))))
    b.add_joint(mb.revolute("elbow", "ground", "forearm", (0, 0, 1), mb.Coordinate(c)))
    for name, side, force_model, *activation in muscles:
        b.muscles.append(mb.Muscle(name, paths[side], force_model=force_model,
                                   activation_dynamics=activation[0] if activation else None))
    return b.build()


_MOTION_DATA = pathlib.Path(__file__).parent / "data" / "opensim" / "motion"


def arm26_tool_setup(tmp_path, setup: str, old: str = "", new: str = "") -> pathlib.Path:
    """`setup` (an OpenSim tool's setup file of arm26's tutorial, tests/data/opensim/motion)
    written into `tmp_path` as ``setup.xml`` with `old` replaced by `new` (once; `old` must
    be there), beside the model and the motion it names."""
    text = (_MOTION_DATA / setup).read_text()
    assert old in text, (setup, old)
    for f in ("arm26.osim", "arm26_InverseKinematics.mot"):
        (tmp_path / f).write_bytes((_MOTION_DATA / f).read_bytes())
    (tmp_path / "setup.xml").write_text(text.replace(old, new, 1) if old else text)
    return tmp_path / "setup.xml"
