"""Studies: published simulations reproduced end to end on jaxmb's building blocks
(the shoulder study of Ehsani (2016), section 4-4 C)."""

from ._shoulder import DISTAL_COORDINATES as DISTAL_COORDINATES
from ._shoulder import computed_torque as computed_torque
from ._shoulder import ElevationTrajectory as ElevationTrajectory
from ._shoulder import SHOULDER_COORDINATES as SHOULDER_COORDINATES
from ._shoulder import locked_coordinates as locked_coordinates
from ._shoulder import SHOULDER_MUSCLES as SHOULDER_MUSCLES
from ._shoulder import shoulder_model as shoulder_model
from ._shoulder import ShoulderTracking as ShoulderTracking
from ._shoulder import track_shoulder as track_shoulder
from ._shoulder_dae import CoupledDAE as CoupledDAE
from ._shoulder_muscles import compliant_static_optimization as compliant_static_optimization
from ._shoulder_dae import track_shoulder_dae as track_shoulder_dae
from ._shoulder_report import plot_elevation as plot_elevation
from ._shoulder_report import plot_muscle_forces as plot_muscle_forces
from ._shoulder_report import plot_torques as plot_torques
from ._shoulder_report import report_markdown as report_markdown
from ._shoulder_report import shoulder_muscle_forces as shoulder_muscle_forces
from ._shoulder_report import write_csv as write_csv
