"""Built-in models: the examples of Watanabe and Duarte (double pendulum), Cesari et al.
(2001) (three-link arm), Ehsani (2016) (four-bar, five-bar) and Hairer & Wanner
(Andrews' squeezer)."""

from ._classic import double_pendulum as double_pendulum
from ._classic import double_pendulum_torques as double_pendulum_torques
from ._classic import planar_chain as planar_chain
from ._classic import three_link_arm as three_link_arm
from ._closed import andrews_squeezer as andrews_squeezer
from ._closed import five_bar as five_bar
from ._closed import four_bar as four_bar
