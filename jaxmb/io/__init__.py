"""OpenSim files: ``.osim`` models (the skeleton, and the forces of its ForceSet) and
``.mot``/``.sto`` motion data.

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
from ._storage import coordinates_from_motion as coordinates_from_motion
from ._storage import MotionData as MotionData
from ._storage import read_storage as read_storage
from ._storage import rotational_coordinates as rotational_coordinates
from ._storage import write_storage as write_storage
from ._external_loads import read_external_loads as read_external_loads
from ._actuator_file import read_actuators as read_actuators
from ._function_paths import write_function_paths as write_function_paths
