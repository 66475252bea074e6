"""MINPACK's Levenberg-Marquardt (lmdif) for one residual and one unknown, as OpenSim
modifies it in Lmdif.cpp (used by [`jaxmb.WrapTorus`][jaxmb.WrapTorus]).

OpenSim's changes to MINPACK: a forward-difference Jacobian with a fixed step of
1e-5, an initial step bound of 0.2 when the start point is 0; the torus calls it
with ftol = xtol = 1e-4 and at most 500 evaluations. Reference: Moré, Garbow and
Hillstrom, User Guide for MINPACK-1, Argonne National Laboratory ANL-80-74 (1980).
"""

import functools

import jax
import jax.numpy as jnp

from .._safe import safe_div, sqrt0

_LM_STEP = 1e-5  # OpenSim's fdjac2: a fixed forward-difference step
_LM_DWARF = 1.0e-38
_LM_MACHEP = 1.2e-16


def _lmpar_1d(r, d, qtb, delta, par):
    """MINPACK's lmpar for one unknown: the Levenberg-Marquardt parameter and step x
    with |d x| close to delta (r: the 1x1 R factor, d: the scaling, qtb: Q^T f)."""
    x_gn = safe_div(qtb, r)
    dxnorm = jnp.abs(d * x_gn)
    fp0 = dxnorm - delta
    gauss_newton = fp0 <= 0.1 * delta
    ok_r = r != 0.0
    w = safe_div(d * safe_div(d * x_gn, dxnorm), r)
    parl = jnp.where(ok_r, safe_div(safe_div(fp0, delta), w * w), 0.0)
    gnorm = jnp.abs(safe_div(r * qtb, d))
    paru = gnorm / delta
    paru = jnp.where(paru == 0.0, _LM_DWARF / jnp.minimum(delta, 0.1), paru)
    par = jnp.minimum(jnp.maximum(par, parl), paru)
    par = jnp.where(par == 0.0, safe_div(gnorm, dxnorm), par)

    def solve(par):
        # qrsolv: one Givens rotation eliminates sqrt(par) * d below r.
        sd = sqrt0(par) * d
        small_r = jnp.abs(r) < jnp.abs(sd)
        cot = safe_div(r, sd)
        tan = safe_div(sd, r)
        sin_a = 0.5 / jnp.sqrt(0.25 + 0.25 * cot * cot)
        cos_b = 0.5 / jnp.sqrt(0.25 + 0.25 * tan * tan)
        c, s = jnp.where(small_r, sin_a * cot, cos_b), jnp.where(small_r, sin_a, cos_b * tan)
        sdiag = jnp.where(sd == 0.0, r, c * r + s * sd)
        x = safe_div(jnp.where(sd == 0.0, qtb, c * qtb), sdiag)
        return x, sdiag

    def body(carry):
        it, par, parl, paru, fp, _, _ = carry
        it = it + 1
        par = jnp.where(par == 0.0, jnp.maximum(_LM_DWARF, 0.001 * paru), par)
        x, sdiag = solve(par)
        dxn = jnp.abs(d * x)
        fp_old, fp = fp, dxn - delta
        done = (jnp.abs(fp) <= 0.1 * delta) | ((parl == 0.0) & (fp <= fp_old) & (fp_old < 0.0)) | (it == 10)
        w = safe_div(d * safe_div(d * x, dxn), sdiag)
        parc = safe_div(safe_div(fp, delta), w * w)
        parl2 = jnp.where(fp > 0.0, jnp.maximum(parl, par), parl)
        paru2 = jnp.where(fp < 0.0, jnp.minimum(paru, par), paru)
        par2 = jnp.maximum(parl2, par + parc)
        return (it, jnp.where(done, par, par2), parl2, paru2, fp, x, done)

    init = (jnp.int32(0), par, parl, paru, fp0, x_gn, gauss_newton)
    _, par, _, _, _, x, _ = jax.lax.while_loop(lambda c: ~c[-1], body, init)
    return jnp.where(gauss_newton, x_gn, x), jnp.where(gauss_newton, 0.0, par)


_INFO = 9  # where MINPACK's info code sits in the state (0 while it iterates)


def lmdif_1d(resid, args, skip=False, ftol=1e-4, xtol=1e-4, maxfev=500, factor=0.2):
    """The root (or least-squares point) of the scalar ``x -> resid(args, x)`` from x = 0
    by OpenSim's lmdif_C for one residual and one unknown (MINPACK's decisions, OpenSim's
    modifications); differentiable in forward mode (the derivative of the iterate it
    stops at).

    `skip` (may be traced): the caller does not read the result, and the lane makes no
    iteration (x = 0): under `vmap` (the segments of a path, the muscles of a pass) the
    loop runs while a lane that is read iterates, and the slowest lanes were often
    segments that no wrap could take. `resid(args, x)` is the residual, `args` a pytree
    of arrays."""
    zero = jnp.zeros((), jnp.result_type(*jax.tree.leaves(args)))
    f0 = resid(args, zero)
    state = (zero, f0, jnp.abs(f0), zero, zero, zero + 1.0, zero, jnp.int32(1), jnp.int32(1), jnp.int32(0), zero,
             zero)
    step = functools.partial(_lm_step, resid, ftol, xtol, maxfev, factor, args)
    # Gathering the iterating lanes (`iterate_lanes`) made no difference once the unread
    # ones skip, and its second loop compiles longer (docs/dev/performance.md).
    skip = jnp.asarray(skip, bool)
    c, _ = jax.lax.while_loop(lambda c: (c[0][_INFO] == 0) & ~skip, step, (state, jnp.asarray(True)))
    return c[0]


def _lm_step(resid, ftol, xtol, maxfev, factor, args, carry):
    """One step of `lmdif_1d` for one lane: a new Jacobian where the last step succeeded
    (MINPACK's outer loop), then one trial step (its inner loop); `lmdif_1d` stops once
    `info` (``carry[0][_INFO]``) is set."""
    def fun(x):
        return resid(args, x)

    def outer(c):
        # New Jacobian at x: MINPACK's qrfac of a 1x1 matrix gives R = -J, Q^T f = -f.
        x, fvec, fnorm, par, delta, diag, xnorm, it, nfev, _, _, _ = c
        jac = (fun(x + _LM_STEP) - fvec) / _LM_STEP
        acn = jnp.abs(jac)
        first = it == 1
        diag = jnp.where(first, jnp.where(acn == 0.0, 1.0, acn), diag)
        xnorm = jnp.where(first, jnp.abs(diag * x), xnorm)
        delta0 = factor * xnorm
        delta = jnp.where(first, jnp.where(jnp.abs(delta0) <= 1e-4, factor, delta0), delta)
        r = -jac
        qtf = jnp.where(jac != 0.0, -fvec, fvec)
        # MINPACK's scaled gradient norm (1 unless f or J is 0); gtol = 0 stops only at 0.
        gnorm = safe_div(jnp.abs(r * safe_div(qtf, fnorm)), acn)
        info = jnp.where(gnorm <= 0.0, 4, 0).astype(jnp.int32)
        diag = jnp.maximum(diag, acn)
        return (x, fvec, fnorm, par, delta, diag, xnorm, it, nfev, info, r, qtf)

    def inner(c):
        x, fvec, fnorm, par, delta, diag, xnorm, it, nfev, info, r, qtf = c
        xs, par = _lmpar_1d(r, diag, qtf, delta, par)
        p = -xs
        pnorm = jnp.abs(diag * p)
        delta = jnp.where(it == 1, jnp.minimum(delta, pnorm), delta)
        f1 = fun(x + p)
        nfev = nfev + 1
        fnorm1 = jnp.abs(f1)
        actred = jnp.where(0.1 * fnorm1 < fnorm, 1.0 - (fnorm1 / fnorm) ** 2, -1.0)
        t1 = jnp.abs(r * p) / fnorm
        t2 = sqrt0(par) * pnorm / fnorm
        prered = t1 * t1 + t2 * t2 / 0.5
        dirder = -(t1 * t1 + t2 * t2)
        ratio = jnp.where(prered != 0.0, actred / jnp.where(prered != 0.0, prered, 1.0), 0.0)
        shrink = ratio <= 0.25
        tmp = jnp.where(actred >= 0.0, 0.5, 0.5 * dirder / (dirder + 0.5 * actred))
        tmp = jnp.where((0.1 * fnorm1 >= fnorm) | (tmp < 0.1), 0.1, tmp)
        grow = (par == 0.0) | (ratio >= 0.75)
        delta = jnp.where(shrink, tmp * jnp.minimum(delta, pnorm / 0.1), jnp.where(grow, pnorm / 0.5, delta))
        par = jnp.where(shrink, par / tmp, jnp.where(grow, 0.5 * par, par))
        success = ratio >= 1e-4
        x = jnp.where(success, x + p, x)
        fvec = jnp.where(success, f1, fvec)
        xnorm = jnp.where(success, jnp.abs(diag * x), xnorm)
        fnorm = jnp.where(success, fnorm1, fnorm)
        it = jnp.where(success, it + 1, it)
        small = (jnp.abs(actred) <= ftol) & (prered <= ftol) & (0.5 * ratio <= 1.0)
        info = jnp.where(small, 1, 0)
        info = jnp.where(delta <= xtol * xnorm, 2, info)
        info = jnp.where(small & (info == 2), 3, info)
        tiny = (jnp.abs(actred) <= _LM_MACHEP) & (prered <= _LM_MACHEP) & (0.5 * ratio <= 1.0)
        info = jnp.where(info != 0, info, jnp.where(nfev >= maxfev, 5, 0))
        info = jnp.where(info != 0, info,
                         jnp.where(tiny, 6, jnp.where(delta <= _LM_MACHEP * xnorm, 7, 0)))
        return (x, fvec, fnorm, par, delta, diag, xnorm, it, nfev, info.astype(jnp.int32), r, qtf), success

    c, need_jac = carry
    c = jax.lax.cond(need_jac, outer, lambda c: c, c)
    c2, success = inner(c)
    # gnorm == 0 (info 4) stops before the inner step.
    c = jax.tree_util.tree_map(lambda a, b: jnp.where(c[_INFO] == 4, a, b), c, c2)
    return c, success
