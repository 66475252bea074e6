"""Coordinates smoothed and differentiated as OpenSim's tools do (NumPy, on times only).

OpenSim 4.6's InverseDynamicsTool (and the AnalyzeTool) turns a table of coordinates
into ``q, q', q''`` at the frames it solves:

1. With a low-pass cutoff ``f_c`` (``lowpass_cutoff_frequency_for_coordinates >= 0``):
   ``Storage::pad(n / 2)`` reflects and negates ``n // 2`` samples about each end
   (``s_{-k} = 2 x_0 - x_k``, times alike), preserving value and slope at the ends;
   ``Storage::lowpassIIR`` resamples at the smallest time step ``dt`` where the steps
   are not uniform (an interpolating quintic ``GCVSpline`` per column, evaluated at
   ``t_0, t_0 + dt, ...`` while ``<= t_end``, accumulated as OpenSim accumulates), then
   runs a third-order Butterworth low-pass filter forward and backward
   (``Signal::LowpassIIR``: bilinear transform with warped ``ω_a = tan(π f_c dt)``; the
   first three samples of each pass are copied, not filtered; a cutoff at or above half
   the sampling rate is lowered to ``0.49/dt``, as OpenSim does, with a warning).
2. An interpolating quintic ``GCVSpline`` (``GCVSplineSet(5, ...)``, Woltring 1986)
   through each filtered column gives ``q`` and its first two derivatives.
3. The frames solved are those of the (padded, resampled) table from the last one at
   or before the start of the time range to the last one at or before its end
   (``Storage::findIndex``).

Every step is linear in the data, so the whole pipeline is three matrices
``W_0, W_1, W_2`` (frames x samples) that depend on the times alone:
``q = W_0 x``, ``q' = W_1 x``, ``q'' = W_2 x``. They are built here once in NumPy and
applied in JAX, where they are differentiable with respect to the data and batch
over columns.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ._functions._gcvspl import gcvspline_interpolation_operators
from ._errors import warn

__all__ = ["lowpass_iir", "pad_reflect", "opensim_coordinate_operators", "opensim_states_operators"]

_EPS = np.finfo(float).eps  # SimTK::Eps, OpenSim's test of a uniform time step
# The operators are dense (frames x samples): beyond this many samples (after padding
# and resampling) they would take gigabytes.
_MAX_SAMPLES = 6000


def pad_reflect(x: np.ndarray, n_pad: int) -> np.ndarray:
    """OpenSim's ``Signal::Pad``: `n_pad` samples reflected and negated about each end,
    ``[2 x_0 - x_p, ..., 2 x_0 - x_1, x_0, ..., x_{n-1}, 2 x_{n-1} - x_{n-2}, ...]``,
    along axis 0. Raises ``ValueError`` for ``n_pad > len(x)``."""
    x = np.asarray(x, dtype=float)
    n = x.shape[0]
    if n_pad < 0 or (n_pad > 0 and n_pad > n - 1):
        raise ValueError(f"pad_reflect: pad of {n_pad} samples for a signal of {n} (at most n - 1).")
    if n_pad == 0:
        return x.copy()
    before = 2.0 * x[0] - x[n_pad:0:-1]
    after = 2.0 * x[-1] - x[n - 2:n - 2 - n_pad:-1] if n - 2 - n_pad >= 0 else 2.0 * x[-1] - x[n - 2::-1]
    return np.concatenate([before, x, after], axis=0)


def lowpass_iir(x: np.ndarray, dt: float, cutoff_hz: float) -> np.ndarray:
    """OpenSim's ``Signal::LowpassIIR`` along axis 0: a third-order Butterworth low-pass
    filter (bilinear transform, warped cutoff) run forward then backward (zero phase);
    each pass copies its first three samples. `dt` is the sampling interval (s)."""
    x = np.asarray(x, dtype=float)
    if x.shape[0] < 4:
        raise ValueError(f"lowpass_iir: {x.shape[0]} samples; the filter needs at least 4.")
    if not dt > 0 or not cutoff_hz > 0:
        raise ValueError(f"lowpass_iir: dt ({dt}) and cutoff ({cutoff_hz} Hz) must be > 0.")
    fs = 1.0 / dt
    if cutoff_hz >= 0.5 * fs:
        warn(f"low-pass cutoff {cutoff_hz} Hz is not below half the sampling rate ({0.5 * fs} Hz); "
             f"lowered to {0.49 * fs} Hz as OpenSim does.")
        cutoff_hz = 0.49 * fs
    wa = math.tan(2.0 * math.pi * cutoff_hz * dt / 2.0)
    wa2, wa3 = wa * wa, wa * wa * wa
    den = (wa + 1.0) * (wa2 + wa + 1.0)
    a = np.array([wa3, 3 * wa3, 3 * wa3, wa3]) / den
    b = np.array([1.0, (3 * wa3 + 2 * wa2 - 2 * wa - 3) / den, (3 * wa3 - 2 * wa2 - 2 * wa + 3) / den,
                  (wa - 1.0) * (wa2 - wa + 1.0) / den])

    def one_pass(s):
        out = s.copy()
        for i in range(3, s.shape[0]):
            out[i] = (a[0] * s[i] + a[1] * s[i - 1] + a[2] * s[i - 2] + a[3] * s[i - 3]
                      - b[1] * out[i - 1] - b[2] * out[i - 2] - b[3] * out[i - 3])
        return out

    return one_pass(one_pass(x)[::-1])[::-1].copy()


def _find_index(times: np.ndarray, t: float) -> int:
    """``Storage::findIndex``: the last frame at or before `t` (0 if none)."""
    return max(int(np.searchsorted(times, t, side="right")) - 1, 0)


def opensim_coordinate_operators(time, *, lowpass_hz: float | None = None,
                                 time_range: tuple[float, float] | None = None):
    """The frames and linear maps of OpenSim's coordinate processing (module docstring).

    **Arguments:**

    - `time`: the table's times (n,), strictly increasing, s.
    - `lowpass_hz`: the low-pass cutoff (Hz), or ``None`` for no filter.
    - `time_range`: ``(start, end)`` (s); ``None`` for the table's own first and last
      times. (OpenSim's default, ``(-inf, inf)``, also solves the padded frames.)

    **Returns:**

    ``(frames, W0, W1, W2)``: the times solved (k,) and three (k, n) matrices with
    ``q = W0 @ x``, ``q' = W1 @ x``, ``q'' = W2 @ x`` for data ``x`` (n, ...).
    """
    return _operators(*_key(time, lowpass_hz, time_range))


def _key(time, lowpass_hz, time_range) -> tuple:
    """The hashable arguments of the cached operator builders."""
    time = np.asarray(time, dtype=float)
    if time.ndim != 1:
        raise ValueError(f"the motion's times must be 1-D, got shape {time.shape}.")
    return (tuple(time.tolist()), None if lowpass_hz is None else float(lowpass_hz),
            None if time_range is None else _time_pair(time_range))


def _time_pair(time_range) -> tuple[float, float]:
    """`time_range` as ``(start, end)``: two numbers, neither NaN (a third was ignored, a
    scalar failed with Python's 'not subscriptable', NaN was told it exceeded the end)."""
    try:
        pair = tuple(float(v) for v in time_range)
    except (TypeError, ValueError):
        pair = ()
    if len(pair) != 2 or any(math.isnan(v) for v in pair):
        raise ValueError(f"time_range must be two times (start, end) in s, each a number or +-inf, got "
                         f"{time_range!r}.")
    return pair


def _grid(time: tuple, lowpass_hz, time_range):
    """The (padded, filtered, resampled) samples' times, the map from the data to them, and
    the frames solved."""
    time = np.array(time)
    n = time.size
    if n > _MAX_SAMPLES // (1 if lowpass_hz is None else 2):
        raise ValueError(f"a motion of {n} frames: jaxmb's spline operators are dense and handle at most "
                         f"{_MAX_SAMPLES} samples (after the filter's padding); split the motion.")
    if n < 6:
        raise ValueError(f"a motion of {n} frames: OpenSim's quintic splines need at least 6.")
    if not np.all(np.diff(time) > 0):
        raise ValueError("the motion's times must be strictly increasing.")
    start, end = (time[0], time[-1]) if time_range is None else (float(time_range[0]), float(time_range[1]))
    if not start <= end:
        raise ValueError(f"time range ({start}, {end}): the start must not exceed the end.")
    if end < time[0] or start > time[-1]:
        raise ValueError(f"time range ({start}, {end}) s lies outside the motion's times [{time[0]:g}, "
                         f"{time[-1]:g}] s: no frame to solve.")
    if lowpass_hz is None:
        grid, to_grid = time, np.eye(n)
    else:
        if not lowpass_hz > 0:
            raise ValueError(f"lowpass_hz must be > 0 (or None for no filter), got {lowpass_hz}.")
        if lowpass_hz * (time[-1] - time[0]) < 1.0:  # a period given for a frequency, say
            warn(f"low-pass cutoff {lowpass_hz:g} Hz is below one cycle over the motion's {time[-1] - time[0]:g} s: "
                 "the filter removes the motion itself (a cutoff of a few Hz is usual for movements).")
        n_pad = n // 2
        padded_t = pad_reflect(time, n_pad)
        to_grid = pad_reflect(np.eye(n), n_pad)
        dt = float(np.min(np.diff(padded_t)))
        average = (padded_t[-1] - padded_t[0]) / (padded_t.size - 1)
        grid = padded_t
        if average - dt > _EPS:  # Storage::resample(dt, 5) at OpenSim's accumulated times
            steps, x = [], padded_t[0]
            while x <= padded_t[-1]:
                steps.append(x)
                if x < padded_t[-1]:
                    x += dt
                else:
                    break
                if len(steps) > _MAX_SAMPLES:
                    raise ValueError(f"resampling the padded motion at its smallest time step ({dt:g} s) gives "
                                     f"more than {_MAX_SAMPLES} samples; remove near-repeated times, or filter "
                                     "shorter pieces of the motion.")
            grid = np.array(steps)
            (resample,) = gcvspline_interpolation_operators(padded_t, 3, grid, orders=(0,))
            to_grid = resample @ to_grid
        to_grid = lowpass_iir(to_grid, dt, lowpass_hz)
    first, last = _find_index(grid, max(grid[0], start)), _find_index(grid, min(grid[-1], end))
    return grid, to_grid, grid[first:last + 1]


@functools.lru_cache(maxsize=8)
def _operators(time: tuple, lowpass_hz, time_range):
    """`opensim_coordinate_operators` for hashable arguments (read-only arrays, cached:
    building them is the costly part of a repeated call on one motion)."""
    grid, to_grid, frames = _grid(time, lowpass_hz, time_range)
    w = gcvspline_interpolation_operators(grid, 3, frames, orders=(0, 1, 2))
    return _frozen((frames, *(wd @ to_grid for wd in w)))


@functools.lru_cache(maxsize=8)
def _states_operators(time: tuple, lowpass_hz, time_range):
    """`opensim_states_operators` for hashable arguments (read-only, cached)."""
    grid, to_grid, frames = _grid(time, lowpass_hz, time_range)
    w0, w1 = gcvspline_interpolation_operators(grid, 3, frames, orders=(0, 1))
    (speeds,) = gcvspline_interpolation_operators(grid, 3, grid, orders=(1,))
    return _frozen((frames, w0 @ to_grid, w1 @ to_grid, w1 @ (speeds @ to_grid)))


def _frozen(arrays):
    for a in arrays:
        a.setflags(write=False)
    return arrays


def opensim_states_operators(time, *, lowpass_hz: float | None = None,
                             time_range: tuple[float, float] | None = None):
    """As `opensim_coordinate_operators`, with OpenSim's AnalyzeTool's accelerations: the
    tool stores the speeds as the coordinate splines' first derivative at every (filtered)
    sample (``SimbodyEngine::formCompleteStorages``), and an analysis such as
    StaticOptimization takes ``q''`` as the first derivative of the interpolating quintic
    ``GCVSpline`` through those speeds (``GCVSplineSet(5, states).constructStorage(1)``),
    not as the second derivative of the coordinates' spline.

    **Returns:** ``(frames, W0, W1, W2)`` as `opensim_coordinate_operators`, with
    ``W2 = D_frames D_grid`` (the speeds' spline derivative at the frames of the coordinates'
    spline derivative at the samples).
    """
    return _states_operators(*_key(time, lowpass_hz, time_range))
