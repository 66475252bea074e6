"""Open-chain examples: the double pendulum of Watanabe and Duarte, the three-link arm
of Cesari et al. (2001), and the planar chain used by the benchmarks."""


from collections.abc import Sequence

import jax.numpy as jnp

from .._checks import is_count, positive_values
from .._functions import Coordinate, Linear
from .._builder import ModelBuilder
from .._loads import PointForce
from .._model import Body, revolute

_Z = (0.0, 0.0, 1.0)


def _rod_inertia(mass, length, along: str):
    """Uniform slender rod about its centre: m l²/12 about both transverse axes."""
    i = mass * length**2 / 12.0
    return jnp.diag(jnp.array([i, 0.0, i] if along == "y" else [0.0, i, i]))


def double_pendulum(m1: float = 1.0, l1: float = 1.0, m2: float = 1.0, l2: float = 0.5, g: float = 9.81):
    """Watanabe and Duarte's double pendulum of uniform rods in the x-y plane, gravity along -y.

    ``q = (θ1, θ2)``: absolute angles of rods 1 and 2 from the downward vertical.
    The elbow joint's variable is the relative angle ``θ2 - θ1``, a
    `Linear` joint function. Generalized forces
    ``tau = (M1 - M12, M12)`` for a shoulder torque M1 and an elbow torque M12
    (use `double_pendulum_torques`). Each rod's inertia is ``m l²/12`` about its
    centre of mass, which lies at its middle.

    **Arguments:**

    - `m1`, `m2`: the rods' masses (kg); default 1 kg each, as in Watanabe and Duarte.
    - `l1`, `l2`: the rods' lengths (m); default 1 m and 0.5 m.
    - `g`: gravitational acceleration (m/s²).

    **Returns:**

    The [`jaxmb.Model`][jaxmb.Model] (nq = 2, angles in rad).

    **Raises:**

    `ValueError` if a mass or a length is not positive (a rod of length zero turns
    about its own end: the mass matrix is singular).
    """
    positive_values("double_pendulum", m1=m1, l1=l1, m2=m2, l2=l2)
    b = ModelBuilder("double_pendulum", gravity=(0.0, -g, 0.0))
    t1 = b.add_coordinate("theta1")
    t2 = b.add_coordinate("theta2")
    b.add_body(Body("rod1", m1, (0.0, -l1 / 2, 0.0), _rod_inertia(m1, l1, "y")))
    b.add_body(Body("rod2", m2, (0.0, -l2 / 2, 0.0), _rod_inertia(m2, l2, "y")))
    b.add_joint(revolute("shoulder", "ground", "rod1", _Z, Coordinate(t1)))
    b.add_joint(revolute("elbow", "rod1", "rod2", _Z, Linear((t1, t2), (-1.0, 1.0)), offset=(0.0, -l1, 0.0)))
    return b.build()


def double_pendulum_torques(m1_torque, m12_torque):
    """Generalized forces of the double pendulum for joint torques: ``(M1 - M12, M12)``.

    With absolute angles as coordinates (Watanabe and Duarte), the elbow torque
    acts on both generalized coordinates.

    **Arguments:**

    - `m1_torque`: the shoulder torque M1 (N·m), scalar or batch (...,).
    - `m12_torque`: the elbow torque M12 (N·m), same shape.

    **Returns:**

    The generalized forces (2, ...) in N·m.
    """
    return jnp.stack([jnp.asarray(m1_torque) - jnp.asarray(m12_torque), jnp.asarray(m12_torque)])


def three_link_arm(l: Sequence[float] = (0.30, 0.26, 0.19), d: Sequence[float] = (0.13, 0.11, 0.07),
                   m: Sequence[float] = (1.9, 1.1, 0.45), I: Sequence[float] = (0.015, 0.008, 0.0015),
                   g: float = 9.81, spring_force: float = 0.0, spring_distance: float = 0.0):
    """The planar three-link arm of Cesari et al. (2001) (upper arm, forearm, hand), gravity along -y.

    ``q = (α1, α2, α3)``: α1 of the upper arm from the +x horizontal, α2 and α3
    relative (elbow, wrist). Segment i lies along its body x axis with centre of
    mass at ``d_i`` from its proximal joint and moment of inertia ``I_i`` (kg m²)
    about the centre of mass (z axis). A horizontal spring force ``(-F_S, 0, 0)``
    acts on the hand at ``d3 + d_S`` from the wrist (Cesari et al. 2001, Eq. 15-17,
    42-44). Default segment data are adult-arm values for illustration.

    **Arguments:**

    - `l`: segment lengths (3,), m.
    - `d`: centre-of-mass distances from the proximal joints (3,), m.
    - `m`: segment masses (3,), kg.
    - `I`: moments of inertia about the centres of mass (3,), kg m².
    - `g`: gravitational acceleration (m/s²).
    - `spring_force`: the spring force F_S (N); 0 adds no load.
    - `spring_distance`: d_S, where the force acts beyond the hand's centre of mass (m).

    **Returns:**

    The [`jaxmb.Model`][jaxmb.Model] (nq = 3, angles in rad).

    **Raises:**

    `ValueError` if `l`, `d`, `m` or `I` does not hold three values, or a length or a
    mass is not positive.
    """
    for name, values in (("l", l), ("d", d), ("m", m), ("I", I)):
        if len(values) != 3:
            raise ValueError(f"three_link_arm: {name} must hold three values (upper arm, forearm, hand), "
                             f"got {len(values)}.")
    positive_values("three_link_arm", l=l, m=m)
    b = ModelBuilder("three_link_arm", gravity=(0.0, -g, 0.0))
    names = ("upper_arm", "forearm", "hand")
    joints = ("shoulder", "elbow", "wrist")
    parents = ("ground",) + names[:2]
    offsets = ((0.0, 0.0, 0.0), (l[0], 0.0, 0.0), (l[1], 0.0, 0.0))
    for k in range(3):
        c = b.add_coordinate(f"alpha{k + 1}")
        b.add_body(Body(names[k], m[k], (d[k], 0.0, 0.0), jnp.diag(jnp.array([0.0, I[k], I[k]]))))
        b.add_joint(revolute(joints[k], parents[k], names[k], _Z, Coordinate(c), offset=offsets[k]))
    if spring_force != 0.0:
        b.add_load(PointForce("hand", (d[2] + spring_distance, 0.0, 0.0), (-spring_force, 0.0, 0.0)))
    return b.build()


def planar_chain(n: int, length: float = 1.0, mass: float = 1.0, g: float = 9.81):
    """``n`` uniform rods hanging along -y, revolute joints about z, gravity along -y.

    ``q_k`` is the relative angle of rod k (absolute for k = 0). Rod k has its
    centre of mass at ``(0, -length/2, 0)`` and the next joint at ``(0, -length, 0)``.

    **Arguments:**

    - `n`: the number of rods (≥ 1), and of coordinates.
    - `length`: each rod's length (m).
    - `mass`: each rod's mass (kg).
    - `g`: gravitational acceleration (m/s²).

    **Returns:**

    The [`jaxmb.Model`][jaxmb.Model] (nq = n, angles in rad).

    **Raises:**

    `ValueError` if `n` is not a whole number of at least 1, or `length` or `mass` is not positive.
    """
    if not is_count(n, 1):  # float("3") or True would pass a test of the value alone
        raise ValueError(f"planar_chain needs a whole number n >= 1 of rods, got {n!r}.")
    positive_values("planar_chain", length=length, mass=mass)
    n = int(n)
    b = ModelBuilder(f"planar_chain_{n}", gravity=(0.0, -g, 0.0))
    parent = "ground"
    for k in range(n):
        c = b.add_coordinate(f"q{k}")
        name = f"rod{k}"
        b.add_body(Body(name, mass, (0.0, -length / 2, 0.0), _rod_inertia(mass, length, "y")))
        b.add_joint(revolute(f"joint{k}", parent, name, _Z, Coordinate(c),
                             offset=(0.0, 0.0, 0.0) if k == 0 else (0.0, -length, 0.0)))
        parent = name
    return b.build()
