"""The ``jaxmb`` command line (``jaxmb simulate``, ``jaxmb moment-arms``, ``jaxmb info``)."""

from ._main import build_parser as build_parser
from ._main import main as main
