"""Model file import: OpenSim ``.osim`` (skeleton; muscles when ``_osim_forces`` is present)."""

from ._osim import OsimCoordinate as OsimCoordinate
from ._osim import OsimImport as OsimImport
from ._osim import load_osim as load_osim
from ._osim import read_osim as read_osim
from ._osim_functions import GCVSpline as GCVSpline
from ._osim_functions import PiecewiseConstant as PiecewiseConstant
from ._osim_functions import PiecewiseLinear as PiecewiseLinear
from ._osim_functions import parse_function as parse_function
from ._report import moment_arm_report as moment_arm_report
