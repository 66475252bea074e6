"""Closed-chain mechanisms of Ehsani (2016, sections 3-3 and 4-4): four-bar (Eq. 121),
five-bar (Eq. 123) and Andrews' squeezer (Hairer & Wanner, Solving ODEs II, VII.7).

Each is a jaxmb `Model` whose dependent joint variables are
`ImplicitJointFunction` s of one `LoopClosure`, so
``mb.mass_matrix``, ``mb.bias_forces``, ``mb.simulate`` ... work on the minimal
coordinates q and the constraints hold to the Newton tolerance at every q.
"""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._checks import flag, positive_values, violated
from .._loop_closure import LoopClosure, LoopClosureError, implicit_joint_functions
from .._functions import Coordinate
from .._builder import ModelBuilder
from .._loads import LinearSpring
from .._model import Body, Model, _f, revolute
from .._typing import RealLike

_Z = (0.0, 0.0, 1.0)


def _wrap(a):
    """Angle wrapped to (-π, π]."""
    return jnp.arctan2(jnp.sin(a), jnp.cos(a))


def _e(a):
    return jnp.stack([jnp.cos(a), jnp.sin(a)])


def _circle_intersection(c1, r1, c2, r2, side):
    """The intersection of circle (c1, r1) and circle (c2, r2) on `side` (±1) of the
    line c1 -> c2 (+1: to the left). Radicand clipped at 0 (a guess, not a solve)."""
    d = c2 - c1
    dist = jnp.sqrt(jnp.sum(d**2))
    u = d / dist
    a = (r1**2 - r2**2 + dist**2) / (2 * dist)
    h = jnp.sqrt(jnp.maximum(r1**2 - a**2, 0.0))
    perp = jnp.stack([-u[1], u[0]])
    return c1 + a * u + side * h * perp


def _rod(name, mass, length, com_x):
    """A slender rod along body x, planar inertia m l²/12 about z at its centre of mass
    (diag(I/2, I/2, I) so that the principal moments satisfy the triangle inequality)."""
    i = mass * length**2 / 12.0
    return Body(name, mass, (com_x, 0.0, 0.0), jnp.diag(jnp.array([i / 2, i / 2, i])))


def _lamina(name, mass, com, izz):
    return Body(name, mass, (com[0], com[1], 0.0), jnp.diag(jnp.array([izz / 2, izz / 2, izz])))


# ---------------------------------------------------------------------------
# Five-bar (Eq. 123).
# ---------------------------------------------------------------------------


def _five_bar_g(f, q, p):
    l0, l1, l2, l3, l4 = p
    a1 = q[0]
    a12 = a1 + q[1]
    a123 = a12 + f[0]
    a1234 = a123 + f[1]
    return jnp.stack([
        l1 * jnp.sin(a1) + l2 * jnp.sin(a12) + l3 * jnp.sin(a123) + l4 * jnp.sin(a1234),
        l1 * jnp.cos(a1) + l2 * jnp.cos(a12) + l3 * jnp.cos(a123) + l4 * jnp.cos(a1234) - l0,
    ])


def _five_bar_branch(f, q, p):
    return jnp.sin(f[1])


def _five_bar_guess(branch):
    def guess(q, p):
        l0, l1, l2, l3, l4 = p
        p2 = l1 * _e(q[0]) + l2 * _e(q[0] + q[1])
        b = jnp.stack([l0, jnp.zeros_like(l0)])
        # Joint 4 is to the right of p2 -> b for sin(theta4) > 0.
        p3 = _circle_intersection(p2, l3, b, l4, -branch)
        phi3 = jnp.arctan2(*(p3 - p2)[::-1])
        phi4 = jnp.arctan2(*(b - p3)[::-1])
        return jnp.stack([_wrap(phi3 - q[0] - q[1]), _wrap(phi4 - phi3)])

    return guess


def five_bar(l0: float = 3.0, l1: float = 1.0, l2: float = 1.0, l3: float = 3.0, l4: float = 3.0,
             branch: int = 1, lp: float = 2.0, density: float = 1.0, g: float = 9.81,
             throw: bool = True) -> Model:
    """Ehsani's (2016) five-bar linkage (Eq. 123, Table 2: l0 = 3, l1 = l2 = 1, l3 = l4 = 3, l_p = 2).

    Four links in the x-y plane pinned in a chain from the ground point O = (0, 0)
    and closing on the ground point (l0, 0). Joint variables are relative angles
    (θ1 absolute); ``q = (θ1, θ2)``; θ3, θ4 are implicit. `branch` = 1 is the
    assembly with sin θ4 > 0, -1 the one with sin θ4 < 0.

    Links are uniform rods of `density` kg/m (the paper gives no masses), gravity
    along -y. The point p of Ehsani's figures is on link 3 at distance `lp` from
    joint 3 (body ``"link3"``, point ``(lp, 0, 0)``).

    **Arguments:**

    - `l0`: the distance between the ground pivots (m).
    - `l1`, `l2`, `l3`, `l4`: the link lengths (m).
    - `branch`: the assembly, 1 or -1 (see above).
    - `lp`: the distance of point p from joint 3 (m); it names the point, the model
      does not depend on it.
    - `density`: the rods' mass per length (kg/m).
    - `g`: gravitational acceleration (m/s²).
    - `throw`: the loop closure's `throw` (see [`jaxmb.LoopClosure`][jaxmb.LoopClosure]).

    **Returns:**

    The [`jaxmb.Model`][jaxmb.Model] (nq = 2, angles in rad) with one loop closure.

    **Raises:**

    `ValueError` if `branch` is not 1 or -1, or a length or the density is not positive.
    """
    positive_values("five_bar", l0=l0, l1=l1, l2=l2, l3=l3, l4=l4, density=density)
    if isinstance(branch, bool) or branch not in (1, -1):  # True == 1 to Python
        raise ValueError(f"five_bar: branch must be 1 or -1, got {branch!r}.")
    params = jnp.asarray([l0, l1, l2, l3, l4], dtype=float)
    q_ref = jnp.asarray([math.pi / 2, -math.pi / 4])
    guess = _five_bar_guess(branch)
    closure = LoopClosure(_five_bar_g, q_ref, guess(q_ref, params), params, guess=guess,
                          branch_fn=_five_bar_branch, name=f"five_bar(branch={branch})", throw=throw,
                          variable_names=("theta3", "theta4"))
    f3, f4 = implicit_joint_functions(closure)
    b = ModelBuilder("five_bar", gravity=(0.0, -g, 0.0))
    b.add_coordinate("theta1", default=float(q_ref[0]))
    b.add_coordinate("theta2", default=float(q_ref[1]))
    lengths = (l1, l2, l3, l4)
    fns = (Coordinate(0), Coordinate(1), f3, f4)
    parent = "ground"
    for k in range(4):
        name = f"link{k + 1}"
        b.add_body(_rod(name, density * lengths[k], lengths[k], lengths[k] / 2))
        b.add_joint(revolute(f"theta{k + 1}", parent, name, _Z, fns[k],
                             offset=(0.0, 0.0, 0.0) if k == 0 else (lengths[k - 1], 0.0, 0.0)))
        parent = name
    return b.build()


# ---------------------------------------------------------------------------
# Four-bar (Eq. 121).
# ---------------------------------------------------------------------------

FOUR_BAR_LENGTHS = dict(l0=5.0, l1=3.0, l2=5.0, l3=4.0, lcm2=0.5)
"""Default four-bar lengths (Ehsani's Table 1 is missing from the text): a Grashof
crank-rocker in which the centre-of-mass height q of the coupler (body 2) moves
monotonically on one assembly branch over q in [-2, 2]; see the how-to on closed chains."""


def _four_bar_g(f, q, p):
    l0, l1, l2, l3, lcm2 = p
    s1, s12, s123 = jnp.sin(f[0]), jnp.sin(f[0] + f[1]), jnp.sin(f[0] + f[1] + f[2])
    c1, c12, c123 = jnp.cos(f[0]), jnp.cos(f[0] + f[1]), jnp.cos(f[0] + f[1] + f[2])
    return jnp.stack([
        l1 * s1 + lcm2 * s12 - q[0],
        (l2 - lcm2) * s12 + l3 * s123 + q[0],
        l1 * c1 + l2 * c12 + l3 * c123 - l0,
    ])


def four_bar(l0: float = 5.0, l1: float = 3.0, l2: float = 5.0, l3: float = 4.0, lcm2: float = 0.5,
             f_ref: RealLike = (-0.1483, 1.2386, -2.7307), density: float = 1.0, g: float = 9.81,
             throw: bool = True) -> Model:
    """Ehsani's (2016) four-bar linkage (Eq. 121-122); ``q`` = centre-of-mass height of body 2.

    Links 1-3 in the x-y plane pinned in a chain from the ground point O = (0, 0)
    and closing on (l0, 0); joint variables θ1 (absolute), θ2, θ3 (relative) are all
    implicit functions of q. Body 2's centre of mass is at `lcm2` from joint 2.
    `f_ref` is an approximate assembly at q = 0 (to within the loop's ``ref_tol``)
    that selects the branch (the default is the elbow-up branch of the default
    lengths, to four decimals); the loop is solved by Newton's
    method after a continuation from q = 0 (no closed-form guess).
    Uniform rods of `density` kg/m (body 2's centre of mass at `lcm2`), gravity -y.
    Ehsani's point p is the joint between bodies 2 and 3: ``(5, 0, 0)`` on ``link2``
    for the default `l2`.

    **Arguments:**

    - `l0`: the distance between the ground pivots (m).
    - `l1`, `l2`, `l3`: the link lengths (m).
    - `lcm2`: body 2's centre of mass from joint 2 (m).
    - `f_ref`: the reference assembly ``(θ1, θ2, θ3)`` at q = 0 (3,), rad.
    - `density`: the rods' mass per length (kg/m).
    - `g`: gravitational acceleration (m/s²).
    - `throw`: the loop closure's `throw` (see [`jaxmb.LoopClosure`][jaxmb.LoopClosure]).

    **Returns:**

    The [`jaxmb.Model`][jaxmb.Model] (nq = 1, q in m) with one loop closure.

    **Raises:**

    `ValueError` if a length or the density is not positive, or `lcm2` not finite;
    `jaxmb.LoopClosureError` if `f_ref` is not an assembly of these lengths at q = 0 (the
    default `f_ref` is the default lengths').
    """
    positive_values("four_bar", l0=l0, l1=l1, l2=l2, l3=l3, density=density)
    if violated(np.isfinite, lcm2):  # else the loop's residual is NaN, and the message blames f_ref
        raise ValueError(f"four_bar: lcm2 must be finite, got {lcm2!r}.")
    params = jnp.asarray([l0, l1, l2, l3, lcm2], dtype=float)
    try:
        closure = LoopClosure(_four_bar_g, jnp.zeros(1), jnp.asarray(f_ref, dtype=float), params,
                              name="four_bar", throw=throw, n_continuation=8,
                              variable_names=("theta1", "theta2", "theta3"))
    except LoopClosureError as exc:
        raise LoopClosureError(f"{exc} The default f_ref assembles the default lengths (5, 3, 5, 4; lcm2 "
                               "0.5): give f_ref, an approximate assembly at q = 0, for other ones.") from None
    fns = implicit_joint_functions(closure)
    b = ModelBuilder("four_bar", gravity=(0.0, -g, 0.0))
    b.add_coordinate("q", default=0.0, range=(-2.0, 2.0))
    lengths = (l1, l2, l3)
    coms = (l1 / 2, lcm2, l3 / 2)
    parent = "ground"
    for k in range(3):
        name = f"link{k + 1}"
        b.add_body(_rod(name, density * lengths[k], lengths[k], coms[k]))
        b.add_joint(revolute(f"theta{k + 1}", parent, name, _Z, fns[k],
                             offset=(0.0, 0.0, 0.0) if k == 0 else (lengths[k - 1], 0.0, 0.0)))
        parent = name
    return b.build()


# ---------------------------------------------------------------------------
# Andrews' squeezer (Hairer & Wanner II, VII.7; Mazzia & Magherini's Test Set).
# ---------------------------------------------------------------------------

ANDREWS_PARAMETERS = dict(
    m1=0.04325, m2=0.00365, m3=0.02373, m4=0.00706, m5=0.07050, m6=0.00706, m7=0.05498,
    xa=-0.06934, ya=-0.00227, xb=-0.03635, yb=0.03273, xc=0.014, yc=0.072, c0=4530.0,
    i1=2.194e-6, i2=4.410e-7, i3=5.255e-6, i4=5.667e-7, i5=1.169e-5, i6=5.667e-7, i7=1.912e-5,
    d=0.028, da=0.0115, e=0.02, ea=0.01421, rr=0.007, ra=0.00092, l0=0.07785,
    ss=0.035, sa=0.01874, sb=0.01043, sc=0.018, sd=0.02, ta=0.02308, tb=0.00916,
    u=0.04, ua=0.01228, ub=0.00449, zf=0.02, zt=0.04, fa=0.01421, mom=0.033,
)
"""Hairer & Wanner's parameters (SI units), as in the Test Set for IVP Solvers ('andrews')."""

_ANDREWS_Y0 = (-0.0617138900142764496358948458001, 0.0, 0.455279819163070380255912382449,
              0.222668390165885884674473185609, 0.487364979543842550225598953530,
              -0.222668390165885884674473185609, 1.23054744454982119249735015568)
"""Consistent initial angles (β, Θ, γ, Φ, δ, Ω, ε) at t = 0 (velocities zero)."""

_ANDREWS_ANGLES = ("beta", "Theta", "gamma", "Phi", "delta", "Omega", "epsilon")


def _andrews_g(f, q, p):
    """Hairer & Wanner's six loop equations g(y) = 0, y = (β, Θ, γ, Φ, δ, Ω, ε);
    here ``f = (Θ, γ, Φ, δ, Ω, ε)`` and ``q = (β,)``."""
    P = ANDREWS_PARAMETERS
    be = q[0]
    th, ga, ph, de, om, ep = (f[k] for k in range(6))
    rr, d, ss, e, zt, zf, u = (p[k] for k in range(7))
    xa, ya, xb, yb = P["xa"], P["ya"], P["xb"], P["yb"]
    ex = rr * jnp.cos(be) - d * jnp.cos(be + th)
    ey = rr * jnp.sin(be) - d * jnp.sin(be + th)
    return jnp.stack([
        ex - ss * jnp.sin(ga) - xb,
        ey + ss * jnp.cos(ga) - yb,
        ex - e * jnp.sin(ph + de) - zt * jnp.cos(de) - xa,
        ey + e * jnp.cos(ph + de) - zt * jnp.sin(de) - ya,
        ex - zf * jnp.cos(om + ep) - u * jnp.sin(ep) - xa,
        ey - zf * jnp.sin(om + ep) + u * jnp.cos(ep) - ya,
    ])


# Sides of the circle intersections on the Test Set's assembly (checked against _ANDREWS_Y0).
_ANDREWS_SIDES = (1.0, 1.0, -1.0)


def _andrews_guess(q, p):
    P = ANDREWS_PARAMETERS
    rr, d, ss, e, zt, zf, u = (p[k] for k in range(7))
    be = q[0]
    a = jnp.asarray([P["xa"], P["ya"]], dtype=q.dtype)
    b = jnp.asarray([P["xb"], P["yb"]], dtype=q.dtype)
    fpt = rr * _e(be)
    ept = _circle_intersection(fpt, d, b, ss, _ANDREWS_SIDES[0])
    phi2 = jnp.arctan2(*(fpt - ept)[::-1])  # absolute angle of the rod: β + Θ (stays near 0)
    th = phi2 - be
    ga = jnp.arctan2(ept[0] - b[0], -(ept[1] - b[1]))
    h = _circle_intersection(a, zt, ept, e, _ANDREWS_SIDES[1])
    de = jnp.arctan2(*(h - a)[::-1])
    ph = _wrap(jnp.arctan2(ept[0] - h[0], -(ept[1] - h[1])) - de)
    i = _circle_intersection(a, u, ept, zf, _ANDREWS_SIDES[2])
    ep = jnp.arctan2(i[0] - a[0], -(i[1] - a[1]))
    om = _wrap(jnp.arctan2(*(ept - i)[::-1]) - ep)
    return jnp.stack([th, ga, ph, de, om, ep])


def andrews_squeezer(embedded: bool = True, throw: bool = True) -> Model:
    """Andrews' squeezer (Hairer & Wanner, Solving ODEs II, sec. VII.7; the 'andrews'
    problem of the Test Set for IVP Solvers): seven rigid bodies in the x-y plane,
    no gravity, driven by the torque ``mom`` on the crank and a spring (c0, l0)
    from point D of body K3 to the ground point C.

    Bodies and joints (H&W's angles; Θ, Φ, Ω relative, the others absolute):

    - K1 crank, pivot O = (0, 0), angle β; K2 rod from F (on K1 at rr) to E, angle Θ.
    - K3 triangle, pivot B, angle γ; E at (0, -ss), D at (sd, -sc) in its frame.
    - K5 pivot A, angle δ, H at (zt, 0); K4 from H to E, angle Φ, E at (0, -e).
    - K7 pivot A, angle ε, I at (0, -u); K6 from I to E, angle Ω, E at (zf, 0).

    Masses and inertias are H&W's; since there is no gravity only the distance of
    the centre of mass from the pivot matters for K1, K3, K5, K7 (placed at
    (ra, 0), (sb, -sa), (ta, tb), (ub, -ua)); K2, K4, K6 have theirs on the link
    (da from F, e - ea from H, zf - fa from I) as H&W's mass matrix implies.

    `embedded=True`: ``q = (β,)`` and the six other angles are implicit
    (`LoopClosure`, Newton from a closed-form guess). ``embedded=False``:
    the open tree with ``q`` = all seven angles (for the DAE baseline).

    Loads, part of the model (so [`jaxmb.simulate`][jaxmb.simulate] and
    [`jaxmb.generalized_forces`][jaxmb.generalized_forces] include them): the driving
    torque ``mom`` on K1 ([`jaxmb.BodyTorque`][jaxmb.BodyTorque]) and the spring
    ([`jaxmb.LinearSpring`][jaxmb.LinearSpring]).

    ``mb.joint_values`` lists the seven angles in H&W's order (β, Θ, γ, Φ, δ, Ω, ε).

    **Arguments:**

    - `embedded`: embed the six loop variables as implicit joint functions of β
      (True) or return the open tree in all seven angles (False).
    - `throw`: the loop closure's `throw` (see [`jaxmb.LoopClosure`][jaxmb.LoopClosure]).

    **Returns:**

    The [`jaxmb.Model`][jaxmb.Model]: nq = 1 (embedded) or 7, angles in rad, SI units throughout,
    with `q_default` the Test Set's consistent initial angles (β, or all seven).
    """
    from .._loads import BodyTorque

    P = ANDREWS_PARAMETERS
    params = jnp.asarray([P[k] for k in ("rr", "d", "ss", "e", "zt", "zf", "u")])
    y0 = jnp.asarray(_ANDREWS_Y0)
    if flag(embedded, "andrews_squeezer: embedded"):
        closure = LoopClosure(_andrews_g, y0[:1], y0[1:], params, guess=_andrews_guess,
                              name="andrews_squeezer", throw=throw,
                              variable_names=_ANDREWS_ANGLES[1:])
        fth, fga, fph, fde, fom, fep = implicit_joint_functions(closure)
        fbe = Coordinate(0)
        coords = ("beta",)
    else:
        fbe, fth, fga, fph, fde, fom, fep = (Coordinate(k) for k in range(7))
        coords = _ANDREWS_ANGLES
    b = ModelBuilder("andrews_squeezer", gravity=(0.0, 0.0, 0.0))
    for c in coords:
        b.add_coordinate(c)
    b.add_body(_lamina("K1", P["m1"], (P["ra"], 0.0), P["i1"]))
    b.add_body(_lamina("K2", P["m2"], (-P["da"], 0.0), P["i2"]))
    b.add_body(_lamina("K3", P["m3"], (P["sb"], -P["sa"]), P["i3"]))
    b.add_body(_lamina("K4", P["m4"], (0.0, -(P["e"] - P["ea"])), P["i4"]))
    b.add_body(_lamina("K5", P["m5"], (P["ta"], P["tb"]), P["i5"]))
    b.add_body(_lamina("K6", P["m6"], (P["zf"] - P["fa"], 0.0), P["i6"]))
    b.add_body(_lamina("K7", P["m7"], (P["ub"], -P["ua"]), P["i7"]))
    b.add_joint(revolute("beta", "ground", "K1", _Z, fbe))
    b.add_joint(revolute("Theta", "K1", "K2", _Z, fth, offset=(P["rr"], 0.0, 0.0)))
    b.add_joint(revolute("gamma", "ground", "K3", _Z, fga, offset=(P["xb"], P["yb"], 0.0)))
    b.add_joint(revolute("Phi", "K5", "K4", _Z, fph, offset=(P["zt"], 0.0, 0.0)))
    b.add_joint(revolute("delta", "ground", "K5", _Z, fde, offset=(P["xa"], P["ya"], 0.0)))
    b.add_joint(revolute("Omega", "K7", "K6", _Z, fom, offset=(0.0, -P["u"], 0.0)))
    b.add_joint(revolute("epsilon", "ground", "K7", _Z, fep, offset=(P["xa"], P["ya"], 0.0)))
    b.add_load(BodyTorque("K1", (0.0, 0.0, P["mom"])))
    b.add_load(LinearSpring("K3", (P["sd"], -P["sc"], 0.0), (P["xc"], P["yc"], 0.0), P["c0"], P["l0"]))
    model = b.build()
    if not embedded:
        model = eqx.tree_at(lambda m: m.q_default, model, y0)
    else:
        model = eqx.tree_at(lambda m: m.q_default, model, y0[:1])
    return model
