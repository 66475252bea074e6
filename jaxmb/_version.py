"""jaxmb's version, from the installed package's metadata (pyproject.toml's ``version``)."""

from importlib import metadata

try:
    __version__ = metadata.version("jaxmb")
except metadata.PackageNotFoundError:  # a source tree on PYTHONPATH, never installed
    __version__ = "0+unknown"
