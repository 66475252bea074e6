"""WrapEllipsoid's derivative rules (jaxmb._muscles._ellipsoid): the surface polyline's
length is differentiated by one reverse pass applied to every tangent direction; it must
equal forward mode through the polyline's 499 points, to first and second order. Parity
of the whole wrap with OpenSim 4.6 is in test_muscle_parity.py, closed-form against
autodiff moment arms in test_muscles.py.
"""

import jax
import jax.numpy as jnp
import numpy as np

# Private: the polyline and its plain (rule-free) form, compared with each other.
from jaxmb._muscles import _ellipsoid as E


def test_polyline_length_rule_equals_forward_mode_through_the_points():
    """First and second derivatives on the short way, the long way (a quadrant) and a
    3-segment polyline; the semi-axes' contribution included."""
    a = jnp.array([1.4, 0.8, 0.8])
    r1 = E._ellipsoid_closest(a, jnp.array([1.0, 0.5, -0.2]))
    r2 = E._ellipsoid_closest(a, jnp.array([-1.0, 0.4, 0.3]))
    vs = jnp.cross(r1, r2) / jnp.linalg.norm(jnp.cross(r1, r2))
    x = jnp.concatenate([r1, r2, vs, -(vs @ r1)[None]])

    @jax.jit
    def both(x, a, n, sign):
        f = lambda x, a: E._ell_polyline_length(x, a, n, sign, 2 * r1, 2 * r2)  # noqa: E731
        g = lambda x, a: E._ell_polyline_plain(x, a, n, sign, 2 * r1, 2 * r2)  # noqa: E731
        return ((jax.jacfwd(f, argnums=(0, 1))(x, a), jax.jacrev(f, argnums=(0, 1))(x, a), jax.hessian(f)(x, a)),
                jax.jacfwd(g, argnums=(0, 1))(x, a), jax.jacfwd(jax.jacfwd(g))(x, a))

    for n, sign in ((150, 0), (150, -1), (3, 1)):
        (fwd, rev, hess), ref, ref2 = both(x, a, jnp.int32(n), sign)
        assert float(jnp.max(jnp.abs(ref[0]))) > 0.1 and float(jnp.max(jnp.abs(ref[1]))) > 0.1
        for g, r in zip((*fwd, *rev), (*ref, *ref)):
            np.testing.assert_allclose(g, r, rtol=0, atol=1e-14)
        np.testing.assert_allclose(hess, ref2, rtol=0, atol=1e-12 * float(jnp.max(jnp.abs(ref2))))
