"""jaxmb's exceptions. Each subclasses ``ValueError`` so callers may catch either."""


class ModelError(ValueError):
    """A model is malformed: the message names the offending object and the fix."""


class SimulationError(RuntimeError):
    """An integration failed (step-size collapse, too many steps, non-finite state)."""
