"""Joint functions ``f_i(q)``: a joint variable as a smooth function of the coordinates.

Ehsani (2016), section 3-1: every joint variable is a smooth function of the minimal
generalized coordinates ``q``; kinematics and dynamics need its value, gradient and
Hessian. Gradients and Hessians come from JAX autodiff by default; splines and
Fourier series also have closed forms, which the tests check against autodiff.

- ``_base``: `AbstractJointFunction`, the univariate family, shared helpers.
- ``_basic``: coordinates, constants, affine and polynomial maps, composition.
- ``_splines``: cubic and quintic splines; ``_fourier``: Fourier series.
- ``_opensim`` (with ``_gcvspl``): OpenSim's own function classes.
"""

from ._base import AbstractJointFunction as AbstractJointFunction
from ._base import _AbstractUnivariateFunction as _AbstractUnivariateFunction
from ._base import _check_finite as _check_finite
from ._base import _univariate_outputs as _univariate_outputs
from ._base import _univariate_rates as _univariate_rates
from ._basic import Composed as Composed
from ._basic import Constant as Constant
from ._basic import Coordinate as Coordinate
from ._basic import JaxFunction as JaxFunction
from ._basic import Linear as Linear
from ._basic import Polynomial as Polynomial
from ._basic import Scaled as Scaled
from ._fourier import FourierSeries as FourierSeries
from ._fourier import _harmonics as _harmonics
from ._gcvspl import gcvspline_fit as gcvspline_fit
from ._opensim import GCVSpline as GCVSpline
from ._opensim import PiecewiseConstant as PiecewiseConstant
from ._opensim import PiecewiseLinear as PiecewiseLinear
from ._opensim import fmm_spline_coefficients as fmm_spline_coefficients
from ._splines import CubicSpline as CubicSpline
from ._splines import QuinticSpline as QuinticSpline
