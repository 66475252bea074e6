"""``python -m jaxmb.cli ARGS``, as ``jaxmb ARGS``."""

import sys

from ._main import main

sys.exit(main())
