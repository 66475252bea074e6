"""The suite's one comparison helper: pytrees of arrays compared leaf by leaf."""

import jax
import numpy as np


def assert_tree_allclose(actual, expected, *, rtol: float = 1e-10, atol: float = 0.0, normwise: bool = False,
                         what: str = ""):
    """Assert that two pytrees have the same structure and leaves equal to within
    ``|a - e| <= atol + rtol |e|``; the message names the leaf's path and the worst
    relative and absolute errors. With ``normwise=True`` the relative part is taken of
    each leaf's largest entry, ``|a - e| <= atol + rtol max|e|`` (the norm-wise error of
    a matrix whose small entries are round-off of its large ones). Tolerances are named
    at the call, never defaulted looser than the float64 round-off this suite promises."""
    pa, ta = jax.tree_util.tree_flatten_with_path(actual)
    pe, te = jax.tree_util.tree_flatten_with_path(expected)
    assert ta == te, f"{what}: tree structures differ:\n{ta}\n{te}"
    for (path, a), (_, e) in zip(pa, pe):
        a, e = np.asarray(a), np.asarray(e)
        where = f"{what}{jax.tree_util.keystr(path)}"
        assert a.shape == e.shape, f"{where}: shape {a.shape} != {e.shape}"
        err = np.abs(a - e)
        scale = np.max(np.abs(e), initial=0.0) if normwise else np.abs(e)
        bad = ~(err <= atol + rtol * scale)
        if np.any(bad):
            rel = np.max(err / np.maximum(np.abs(e), np.finfo(float).tiny))
            raise AssertionError(f"{where}: {int(bad.sum())} of {a.size} entries differ (max abs {np.max(err):.3e}, "
                                 f"max rel {rel:.3e}, largest |expected| {np.max(np.abs(e), initial=0.0):.3e}; "
                                 f"rtol={rtol}, atol={atol}, normwise={normwise})")
