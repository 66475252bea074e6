"""Converged wrap geometry (`load_osim(..., wrap_geometry="converged")`): on a muscle with
several PathWraps, the cylinder's sliding (its own, or a torus's inner cylinder's)
replaced by the point it aims at, the tangent-continuous helix, in closed form. With the
torus's converged search (an option of its own) such a path has no stopped iteration.

Oracles: the cylinder unrolled into the plane (the geodesic is one straight line there),
the helix's own tangent, OpenSim's restart test, perturbations (it is the shortest such
path), autodiff -dL/dq for the closed-form R, central differences. How far it lies from
OpenSim 4.6 is in test_muscle_parity.py.
"""

import dataclasses
import inspect
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_muscles import STATES, _arm, _sliding_case

import jaxmb as mb
# Private: the sliding's closed form and OpenSim's restart step, checked against each other.
from jaxmb._muscles._cylinder import _cyl_geodesic, _cyl_multi_adjust, _cyl_restart, _cyl_spiral, _cyl_spiral_point

NO = jnp.asarray(False)


def _span(p1, p2, r1, r2, radius):
    """Length of p1 -> r1 -> helix -> r2 -> p2 (cylinder frame)."""
    return float(jnp.linalg.norm(p1 - r1) + _cyl_spiral(r1, r2, radius, NO)[2] + jnp.linalg.norm(p2 - r2))


def test_geodesic_sliding_is_the_unrolled_straight_line_and_tangent_continuous():
    p1, p2, r1, r2, radius = _sliding_case()
    g1, g2 = _cyl_geodesic(p1, p2, r1, r2, radius, NO)
    # Only the axial coordinates move (OpenSim's sliding moves the points along the axis).
    np.testing.assert_array_equal(np.asarray(g1[:2]), np.asarray(r1[:2]))
    np.testing.assert_array_equal(np.asarray(g2[:2]), np.asarray(r2[:2]))
    # Unrolled into the plane, the path is the straight line of run h1 + arc + h2, rise dz.
    theta = _cyl_spiral(g1, g2, radius, NO)[0]
    run = float(jnp.linalg.norm((p1 - g1)[:2]) + radius * jnp.abs(theta) + jnp.linalg.norm((p2 - g2)[:2]))
    np.testing.assert_allclose(_span(p1, p2, g1, g2, radius), np.hypot(run, float(p2[2] - p1[2])), rtol=1e-14)
    # The straight parts continue the helix: its unit tangent at each end (d/dt of the
    # spiral point) is the direction of the straight part there.
    axial = g2[2] - g1[2]
    helix = jax.jacfwd(lambda t: _cyl_spiral_point(g1, theta, axial, 1.0, t))
    for t, inward in ((0.0, g1 - p1), (1.0, p2 - g2)):
        d = helix(jnp.asarray(t))
        np.testing.assert_allclose(np.asarray(d / jnp.linalg.norm(d)), np.asarray(inward / jnp.linalg.norm(inward)),
                                   atol=1e-12)


def test_geodesic_sliding_is_where_opensims_restarts_stop_and_the_shortest_such_path():
    p1, p2, r1, r2, radius = _sliding_case()
    g1, g2 = _cyl_geodesic(p1, p2, r1, r2, radius, NO)
    # OpenSim's restart test accepts it: no end needs sliding.
    (n1, n2), done = _cyl_restart((g1, g2), (p1, p2, radius, NO))
    assert bool(done)
    np.testing.assert_array_equal(np.asarray(n1), np.asarray(g1))
    # OpenSim's restarts stop near it (within 0.1 degree), a little longer.
    o1, o2 = _cyl_multi_adjust(p1, p2, r1, r2, radius, NO, NO)
    assert abs(float(o1[2] - g1[2])) < 2e-4 and abs(float(o2[2] - g2[2])) < 2e-4
    best = _span(p1, p2, g1, g2, radius)
    assert 0.0 < _span(p1, p2, o1, o2, radius) - best < 1e-6
    assert _span(p1, p2, r1, r2, radius) - best > 1e-4  # the unslid start is much longer
    # Any other axial position of either tangent point is longer.
    for dz1, dz2 in ((1e-4, 0.0), (-1e-4, 0.0), (0.0, 1e-4), (0.0, -1e-4), (1e-4, 1e-4)):
        assert _span(p1, p2, g1.at[2].add(dz1), g2.at[2].add(dz2), radius) > best


CONVERGED_MULTI = {
    "sphere_cylinder": [mb.WrapSphere("sph2", "ground", 0.02, translation=(0.0, 0.02, 0.0)),
                        mb.WrapCylinder("cyl", "upper", 0.02, 0.2, translation=(0, -0.3, 0), sliding="geodesic")],
    "sphere_torus": [mb.WrapSphere("sph3", "ground", 0.02, translation=(0.0, 0.02, 0.0)),
                     mb.WrapTorus("tor", "upper", 0.01, 0.04, translation=(0.05, -0.2, 0.0),
                              xyz_body_rotation=(np.pi / 2, 0.0, 0.0), search="converged", sliding="geodesic")],
}


def test_converged_geometry_has_no_stopped_iteration_and_its_closed_form_R_is_minus_dL_dq():
    model = _arm(CONVERGED_MULTI)
    assert all(not w.algorithm(len(m.wraps)).iterates for m in model.muscles for w in m.wraps)
    h = 1e-6
    shifts = jnp.concatenate([jnp.zeros((1, 2)), h * jnp.eye(2), -h * jnp.eye(2)])
    f = jax.jit(lambda qs: (
        jax.lax.map(lambda q: mb.moment_arms(model, q, method="autodiff"), qs),
        jax.lax.map(lambda q: mb.muscle_lengths_and_moment_arms(model, q),
                    (qs[None] + shifts[:, None]).reshape(-1, 2))))
    ra, (lengths, rc) = f(STATES)
    rc = np.asarray(rc)[:len(STATES)]
    lengths = np.asarray(lengths).reshape(5, len(STATES), -1)
    assert np.all(np.isfinite(rc)) and np.all(np.isfinite(lengths))
    np.testing.assert_allclose(rc, ra, atol=1e-10, rtol=0)
    for i in range(2):
        np.testing.assert_allclose(-(lengths[1 + i] - lengths[3 + i]) / (2 * h), rc[:, i], atol=1e-6)
    # The wraps engage, and the converged points are not OpenSim's iterates there: with
    # OpenSim's sliding and search the paths are a little longer at some state.
    bare = np.asarray(jax.jit(jax.vmap(lambda q: mb.muscle_lengths(_arm(None), q)))(STATES))
    assert np.all((lengths[0] > bare + 1e-9).any(axis=0))
    opensim = _arm({name: [dataclasses.replace(w, search="opensim", sliding="opensim")
                           if isinstance(w, mb.WrapTorus) else
                           dataclasses.replace(w, sliding="opensim") if isinstance(w, mb.WrapCylinder) else w
                           for w in ws] for name, ws in CONVERGED_MULTI.items()})
    iterates = np.asarray(jax.jit(jax.vmap(lambda q: mb.muscle_lengths(opensim, q)))(STATES))
    assert np.all((iterates - lengths[0] > 1e-9).any(axis=0)), iterates - lengths[0]


def test_wrap_geometry_is_checked_by_name():
    with pytest.raises(mb.ModelError, match="WrapCylinder 'c'.*sliding 'helix'"):
        mb.WrapCylinder("c", "upper", 0.02, 0.2, sliding="helix")
    with pytest.raises(mb.ModelError, match="WrapTorus 't'.*sliding"):
        mb.WrapTorus("t", "upper", 0.01, 0.04, sliding="converged")


def test_only_a_multi_wrap_path_slides_so_a_single_wrap_keeps_one_algorithm():
    makers = (lambda sliding: mb.WrapCylinder("c", "upper", 0.02, 0.2, sliding=sliding),
              lambda sliding: mb.WrapTorus("t", "upper", 0.01, 0.04, search="converged", sliding=sliding))
    for make in makers:
        opensim, geodesic = make("opensim"), make("geodesic")
        assert opensim.algorithm(1) is geodesic.algorithm(1)  # one program, one wrap group
        assert opensim.algorithm(2).iterates and opensim.algorithm(2).refines
        assert not geodesic.algorithm(2).iterates and not geodesic.algorithm(2).refines


def test_load_osim_sets_the_wrap_geometry_on_every_cylinder():
    path = pathlib.Path(mb.__file__).parent / "data" / "arm26.osim"
    for geometry, sliding in ((None, "geodesic"), ("converged", "geodesic"), ("opensim", "opensim")):
        model = mb.load_osim(path) if geometry is None else mb.load_osim(path, wrap_geometry=geometry)
        cylinders = [w for m in model.muscles for w in m.wraps if isinstance(w, mb.WrapCylinder)]
        assert len(cylinders) == 5 and {w.sliding for w in cylinders} == {sliding}
    # One default everywhere a user reaches the geometry from: the loaders, the report, the command line.
    from jaxmb.cli import build_parser

    defaults = {inspect.signature(fn).parameters["wrap_geometry"].default
                for fn in (mb.load_osim, mb.io.read_osim, mb.io.moment_arm_report)}
    cli = build_parser().parse_args(["moment-arms", "m.osim", "--coordinate", "c", "--out", "o"]).wrap_geometry
    assert defaults == {cli} == {"converged"}
    with pytest.raises(ValueError, match="arm26.osim: wrap_geometry must be one of 'converged', 'opensim'"):
        mb.load_osim(path, wrap_geometry="geodesic")
