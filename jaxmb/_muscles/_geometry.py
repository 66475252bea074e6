"""Which wrap geometry a model's wrap objects compute: OpenSim's iterates or converged points."""

import dataclasses

import jax

from ._cylinder import WrapCylinder
from ._torus import WrapTorus

DEFAULT_WRAP_GEOMETRY = "converged"  # load_osim's, read_osim's and the command line's
WRAP_GEOMETRIES = (DEFAULT_WRAP_GEOMETRY, "opensim")


def with_wrap_geometry(tree, geometry: str):
    """`tree` (a model, a muscle, any pytree of them) with every wrap object set to compute
    `geometry`.

    - ``"converged"`` (`load_osim`'s default): the point OpenSim's restarts converge to,
      in closed form (``sliding="geodesic"``, `WrapCylinder`): no per-lane loop, faster to
      run and to compile; it differs from OpenSim where OpenSim stops short
      (docs/opensim-parity.md, "Converged wrap geometry").
    - ``"opensim"``: OpenSim 4.6's iterates: on a muscle with several PathWraps the
      cylinders (and the cylinder inside each torus) slide their tangent points by
      OpenSim's restarts, stopped at 0.1 degree (``sliding="opensim"``). Lengths and
      moment arms match OpenSim's to round-off (docs/opensim-parity.md).

    Spheres and single-wrap cylinders have no iteration; ellipsoids keep OpenSim's
    algorithm in both; each torus keeps its own `search` (its converged search is an
    option of its own: at a few wrist angles of MoBL-ARMS its root is a path 0.24 m
    longer than OpenSim's).

    `geometry` is one of `WRAP_GEOMETRIES`, checked by the caller (`read_osim` names the file).
    """
    sliding = "geodesic" if geometry == "converged" else "opensim"

    def one(x):
        return dataclasses.replace(x, sliding=sliding) if isinstance(x, (WrapCylinder, WrapTorus)) else x

    return jax.tree.map(one, tree, is_leaf=lambda x: isinstance(x, (WrapCylinder, WrapTorus)))
