"""Independent oracles for the closed-chain tests (not library API): Hairer & Wanner's
closed-form mass matrix and the energy balance of Andrews' squeezer, the Test Set's
reference angles and velocities, and the points p of Ehsani's (2016) four-bar and
five-bar figures."""

import jax.numpy as jnp
from jaxtyping import Array, Float

from jaxmb import LinearSpring, Model, joint_values, kinetic_energy
from jaxmb.models._closed import ANDREWS_PARAMETERS
# The model's own data, read here rather than copied: the Test Set's consistent initial
# angles (the model's q_default) and their names in Hairer & Wanner's order.
from jaxmb.models._closed import _ANDREWS_ANGLES as ANDREWS_ANGLES  # noqa: F401
from jaxmb.models._closed import _ANDREWS_Y0 as ANDREWS_Y0  # noqa: F401

ANDREWS_REFERENCE_T003 = (0.1581077119629904e2, -0.1575637105984298e2, 0.4082224013073101e-1,
                          -0.5347301163226948, 0.5244099658805304, 0.5347301163226948,
                          0.1048080741042263e1)
"""Test Set reference angles (β, Θ, γ, Φ, δ, Ω, ε) at t = 0.03 s."""

ANDREWS_REFERENCE_VELOCITY_T003 = (0.1139920302151208e4, -0.1424379294994111e4, 0.1103291221937134e2,
                                   0.1929337464421385e2, 0.5735699284790808, -0.1929337464421385e2,
                                   0.3231791658026955)
"""Test Set reference angular velocities at t = 0.03 s."""

FOUR_BAR_POINT = ("link2", (5.0, 0.0, 0.0))
"""Body and body-frame point of the four-bar's point p (the joint between bodies 2 and
3) for the default l2 = 5."""

FIVE_BAR_POINT = ("link3", (2.0, 0.0, 0.0))
"""Body and body-frame point of the five-bar's point p for the default l_p = 2."""


def andrews_mass_matrix_hw(y) -> Float[Array, "7 7"]:
    """Hairer & Wanner's closed-form 7x7 mass matrix M(y) (an independent oracle)."""
    P = ANDREWS_PARAMETERS
    m1, m2, m3, m4, m5, m6, m7 = (P[f"m{k}"] for k in range(1, 8))
    i1, i2, i3, i4, i5, i6, i7 = (P[f"i{k}"] for k in range(1, 8))
    rr, ra, da, sa, sb, e, ea, zt = P["rr"], P["ra"], P["da"], P["sa"], P["sb"], P["e"], P["ea"], P["zt"]
    ta, tb, zf, fa, u, ua, ub = P["ta"], P["tb"], P["zf"], P["fa"], P["u"], P["ua"], P["ub"]
    cth, sph, som = jnp.cos(y[1]), jnp.sin(y[3]), jnp.sin(y[5])
    m = jnp.zeros((7, 7), dtype=jnp.asarray(y).dtype)
    m = m.at[0, 0].set(m1 * ra**2 + m2 * (rr**2 - 2 * da * rr * cth + da**2) + i1 + i2)
    m = m.at[1, 0].set(m2 * (da**2 - da * rr * cth) + i2)
    m = m.at[1, 1].set(m2 * da**2 + i2)
    m = m.at[2, 2].set(m3 * (sa**2 + sb**2) + i3)
    m = m.at[3, 3].set(m4 * (e - ea) ** 2 + i4)
    m = m.at[4, 3].set(m4 * ((e - ea) ** 2 + zt * (e - ea) * sph) + i4)
    m = m.at[4, 4].set(m4 * (zt**2 + 2 * zt * (e - ea) * sph + (e - ea) ** 2) + m5 * (ta**2 + tb**2) + i4 + i5)
    m = m.at[5, 5].set(m6 * (zf - fa) ** 2 + i6)
    m = m.at[6, 5].set(m6 * ((zf - fa) ** 2 - u * (zf - fa) * som) + i6)
    m = m.at[6, 6].set(m6 * ((zf - fa) ** 2 - 2 * u * (zf - fa) * som + u**2) + m7 * (ua**2 + ub**2) + i6 + i7)
    return jnp.tril(m) + jnp.tril(m, -1).T


def andrews_energy(model: Model, q, qd, q0) -> Float[Array, ""]:
    """``T + V_spring - mom (β - β0)``: constant along an exact trajectory."""
    spring = [ld for ld in model.loads if isinstance(ld, LinearSpring)][0]
    beta = joint_values(model, q)[0] if model.nq == 7 else q[0]
    beta0 = q0[0]
    return kinetic_energy(model, q, qd) + spring.potential_energy(model, q) - ANDREWS_PARAMETERS["mom"] * (beta - beta0)
