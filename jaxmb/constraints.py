"""Closed kinematic chains beyond the implicit joint functions (Ehsani 2016, section 3-3).

Loop-closure equations ``g(f, q) = 0`` define dependent joint variables as
implicit functions of ``q`` ([`jaxmb.LoopClosure`][jaxmb.LoopClosure],
[`jaxmb.ImplicitJointFunction`][jaxmb.ImplicitJointFunction], at the top level);
their gradients and Hessians come from implicit differentiation (default) or,
from this module, Ehsani's analytical projection method (Eq. 100-120), a
computational molecule (Fig. 2) or pre-modeling (fitted splines). The traditional
constraint-Jacobian route and an index-1 DAE baseline with Lagrange multipliers are
here for comparison. See the how-to on closed chains.
"""

from ._loops._dae import consistent_velocities as consistent_velocities
from ._loops._dae import dae_vector_field as dae_vector_field
from ._loops._dae import loop_constraints as loop_constraints
from ._loops._dae import simulate_dae as simulate_dae
from ._loops._derivative_routes import molecule_derivatives as molecule_derivatives
from ._loops._derivative_routes import projection_derivatives as projection_derivatives
from ._loops._premodel import natural_spline_fit as natural_spline_fit
from ._loops._premodel import premodel as premodel
from ._loops._premodel import premodeled as premodeled
from ._loops._premodel import TensorSpline as TensorSpline
from ._loops._traditional import constraint_function as constraint_function
from ._loops._traditional import constraint_kinematics as constraint_kinematics
from ._loops._traditional import open_tree as open_tree
from ._loops._traditional import traditional_point_kinematics as traditional_point_kinematics
