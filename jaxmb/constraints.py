"""Closed kinematic chains as joint functions (seed 001, section 3-3).

Loop-closure equations ``g(f, q) = 0`` define dependent joint variables as
implicit functions of ``q``; their gradients and Hessians come from implicit
differentiation (default), the seed's analytical projection method
(Eq. 100-120), a computational molecule (Fig. 2) or pre-modeling (fitted
splines). The traditional constraint-Jacobian route and an index-1 DAE baseline
with Lagrange multipliers are here for comparison. See docs/closed_chains.md.
"""

from ._constraints import ImplicitJointFunction as ImplicitJointFunction
from ._constraints import LoopClosure as LoopClosure
from ._constraints import LoopClosureError as LoopClosureError
from ._constraints import LoopSolution as LoopSolution
from ._constraints import TensorSpline as TensorSpline
from ._constraints import constraint_function as constraint_function
from ._constraints import constraint_kinematics as constraint_kinematics
from ._constraints import implicit_joint_functions as implicit_joint_functions
from ._constraints import molecule_derivatives as molecule_derivatives
from ._constraints import natural_spline_fit as natural_spline_fit
from ._constraints import open_tree as open_tree
from ._constraints import premodel as premodel
from ._constraints import premodeled as premodeled
from ._constraints import projection_derivatives as projection_derivatives
from ._constraints import traditional_point_kinematics as traditional_point_kinematics
from ._dae import consistent_velocities as consistent_velocities
from ._dae import dae_rhs_numpy as dae_rhs_numpy
from ._dae import dae_vector_field as dae_vector_field
from ._dae import loop_constraints as loop_constraints
from ._dae import ode_rhs_numpy as ode_rhs_numpy
from ._dae import simulate_dae as simulate_dae
