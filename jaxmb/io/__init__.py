"""Model file import: OpenSim ``.osim`` (the skeleton, and the muscles of its ForceSet).

The model itself is `jaxmb.load_osim(path)`; `read_osim` returns it with the import's
bookkeeping (coordinates, what was skipped)."""

from .._functions import GCVSpline as GCVSpline
from .._functions import PiecewiseConstant as PiecewiseConstant
from .._functions import PiecewiseLinear as PiecewiseLinear
from ._osim import OsimCoordinate as OsimCoordinate
from ._osim import OsimImport as OsimImport
from ._osim import read_osim as read_osim
from ._osim_functions import parse_function as parse_function
from ._report import moment_arm_report as moment_arm_report
