"""Built-in models: the examples of Watanabe and Duarte (double pendulum), Cesari et al.
(2001) (three-link arm), Ehsani (2016) (four-bar, five-bar) and Hairer & Wanner
(Andrews' squeezer)."""

from ._classic import double_pendulum as double_pendulum
from ._classic import double_pendulum_torques as double_pendulum_torques
from ._classic import planar_chain as planar_chain
from ._classic import three_link_arm as three_link_arm
from ._closed import ANDREWS_ANGLES as ANDREWS_ANGLES
from ._closed import ANDREWS_POINT as ANDREWS_POINT
from ._closed import ANDREWS_REFERENCE_T003 as ANDREWS_REFERENCE_T003
from ._closed import ANDREWS_Y0 as ANDREWS_Y0
from ._closed import FIVE_BAR_POINT as FIVE_BAR_POINT
from ._closed import FOUR_BAR_POINT as FOUR_BAR_POINT
from ._closed import andrews_angles as andrews_angles
from ._closed import andrews_squeezer as andrews_squeezer
from ._closed import andrews_tau as andrews_tau
from ._closed import closed_chain_forces as closed_chain_forces
from ._closed import five_bar as five_bar
from ._closed import four_bar as four_bar
from ._closed import without_loads as without_loads
