"""OpenSim motion data: ``.mot`` and ``.sto`` files (Storage, version 1 and 2 headers).

A file is a header ended by ``endheader``, a line of column labels (tab separated;
whitespace where there is no tab) whose first is ``time``, and one row of numbers per
frame. The header holds ``key=value`` lines, of which jaxmb reads ``version``,
``nRows`` (or ``datarows``), ``nColumns`` (or ``datacolumns``, both counting the time
column) and ``inDegrees`` (``yes``/``no``; OpenSim assumes ``no`` when absent); a first
line without ``=`` is the table's name.

Units follow OpenSim's tools (``Model::getSimbodyEngine().convertDegreesToRadians``):
where ``inDegrees=yes``, the columns of *rotational* coordinates are converted from
degrees, translational coordinates never. A coordinate is rotational where a revolute
joint of the model is driven by it alone (OpenSim's ``Coordinate::Rotational``: the
knee of gait2392, whose translations are splines of the knee angle, is rotational;
``pelvis_tx`` is translational).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
import difflib
import math
import os

import numpy as np
import numpy.typing as npt

from .._checks import flag
from .._errors import ModelError
from .._model import Model

__all__ = ["MotionData", "read_storage", "write_storage", "coordinates_from_motion",
           "rotational_coordinates"]


@dataclasses.dataclass(frozen=True)
class MotionData:
    """One OpenSim ``.mot``/``.sto`` table (host data; NumPy arrays).

    **Arguments:**

    - `time`: the time column (n,), s.
    - `labels`: the other columns' labels (m,), in file order (``time`` excluded).
    - `values`: the data (n, m), in the file's units.
    - `in_degrees`: the header's ``inDegrees``: rotational coordinates are in degrees.
    - `name`: the table's name (the header's first line).
    - `source`: the file it was read from, if any.

    **Raises:** ``ValueError`` (as `read_storage` refuses a file) for times that are not
    finite and increasing, values of another shape, duplicate labels or one named
    ``time``, labels given as one string, an `in_degrees` that is not a bool, a name of
    more than one line.
    """

    # Annotated as what the constructor accepts; stored as float NumPy arrays and a tuple.
    time: npt.ArrayLike
    labels: Sequence[str]
    values: npt.ArrayLike
    in_degrees: bool = False
    name: str = ""
    source: str | None = None

    def __post_init__(self):
        where = f" ({self.source})" if self.source else ""
        if isinstance(self.labels, str):  # its characters would become the labels
            raise ValueError(f"MotionData{where}: labels must be a sequence of column names, got the string "
                             f"{self.labels!r}; write [{self.labels!r}] for one column.")
        flag(self.in_degrees, f"MotionData{where}: in_degrees")  # 'no' would read as true
        if "\n" in str(self.name) or "\r" in str(self.name):  # the header's first line: a second one breaks the file
            raise ValueError(f"MotionData{where}: name must be one line, got {self.name!r}.")
        try:
            time = np.asarray(self.time, dtype=float)
            values = np.asarray(self.values, dtype=float)
        except (TypeError, ValueError) as e:
            raise ValueError(f"MotionData{where}: time and values must be numbers ({e}).") from None
        labels = tuple(str(s) for s in self.labels)
        if time.ndim != 1:
            raise ValueError(f"MotionData{where}: time must be 1-D, got shape {time.shape}.")
        if not np.all(np.isfinite(time)) or np.any(np.diff(time) <= 0.0):
            # as read_storage refuses: the tools interpolate and filter over time
            raise ValueError(f"MotionData{where}: time must be finite and increasing, got {time[:8].tolist()}"
                             f"{' ...' if time.size > 8 else ''}.")
        if "time" in labels:
            raise ValueError(f"MotionData{where}: 'time' is the time column, not one of labels {labels}.")
        if values.shape != (time.size, len(labels)):
            raise ValueError(f"MotionData{where}: values must have shape (n, m) = ({time.size}, {len(labels)}) "
                             f"for {time.size} times and {len(labels)} labels, got {values.shape}.")
        if len(set(labels)) != len(labels):
            dup = sorted({s for s in labels if labels.count(s) > 1})
            raise ValueError(f"MotionData{where}: duplicate column labels {dup}; labels must be unique.")
        object.__setattr__(self, "time", time)
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "labels", labels)

    def column(self, label: str) -> np.ndarray:
        """The column `label` (n,), in the file's units."""
        try:
            return self.values[:, self.labels.index(label)]
        except ValueError:
            raise KeyError(f"no column {label!r}; columns: {self.labels}") from None


def _fail(path, line, message) -> ModelError:
    return ModelError(f"{path}:{line}: {message}")


def _header_flag(text: str) -> bool | None:
    t = text.strip().lower()
    if t in ("yes", "true", "1"):
        return True
    if t in ("no", "false", "0"):
        return False
    return None


def read_storage(path: str | os.PathLike) -> MotionData:
    """Read an OpenSim ``.mot`` or ``.sto`` file (version 1 or 2 header).

    **Arguments:**

    - `path`: the file.

    **Returns:**

    A [`jaxmb.io.MotionData`][jaxmb.io.MotionData], values in the file's units
    (`in_degrees` tells which; [`jaxmb.io.coordinates_from_motion`][jaxmb.io.coordinates_from_motion]
    converts).

    **Raises:**

    [`jaxmb.ModelError`][jaxmb.ModelError] naming ``file:line`` for an XML file, a missing
    ``endheader``, a first column not named ``time``, no data rows, a row of the wrong
    length or with a non-number, ``nRows``/``nColumns`` that disagree with the data, and a
    header key given twice with different values.
    """
    path = os.fspath(path)
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            lines = fh.read().splitlines()
    except OSError as exc:
        raise ModelError(f"{path}: cannot read the file ({exc}).") from None
    first = next((line.strip() for line in lines if line.strip()), "")
    if first.startswith("<"):  # else its attributes read as header lines, and no 'endheader' is found
        raise ModelError(f"{path}: an XML file (it begins {first[:40]!r}), not an OpenSim .mot/.sto table; give "
                         "the motion file (a header ended by 'endheader', then columns).")
    header: dict[str, tuple[str, int]] = {}
    name = ""
    end = None
    for i, raw in enumerate(lines):
        line = raw.strip()
        if line.lower() == "endheader":
            end = i
            break
        if "=" in line:
            key, _, value = line.partition("=")
            key, value = key.strip(), value.strip()
            if key.lower() in header and header[key.lower()][0] != value:  # else the last line would win silently
                raise _fail(path, i + 1, f"{key}={value!r}, but line {header[key.lower()][1]} says "
                                         f"{key}={header[key.lower()][0]!r}; keep one of the two lines.")
            header[key.lower()] = (value, i + 1)
        elif i == 0 and line:
            name = line
    if end is None:
        raise _fail(path, len(lines), "no 'endheader' line: an OpenSim .mot/.sto file has a header ended by "
                                      "'endheader', then the column labels, then the data.")
    k = end + 1
    while k < len(lines) and not lines[k].strip():
        k += 1
    if k >= len(lines):
        raise _fail(path, end + 1, "no column labels after 'endheader' (expected a line 'time<TAB>...').")
    label_line = lines[k].rstrip("\r\n")
    labels = [s.strip() for s in label_line.split("\t")] if "\t" in label_line else label_line.split()
    while labels and not labels[-1]:  # trailing tabs
        labels.pop()
    if "" in labels[1:]:  # two tabs in a row: the rows' count would look wrong instead
        i = labels.index("", 1)
        raise _fail(path, k + 1, f"an empty column label after {labels[i - 1]!r} (two tabs in a row); name "
                                 "every column.")
    labels = [s for s in labels if s]
    if not labels or labels[0].lower() != "time":
        first = labels[0] if labels else ""
        raise _fail(path, k + 1, f"the first column is {first!r}, not 'time': OpenSim's tools read the first "
                                 "column as time; put the time column first and label it 'time'.")
    rows, row_lines = [], []
    for j in range(k + 1, len(lines)):
        text = lines[j].strip()
        if not text:
            continue
        fields = text.split()
        if len(fields) != len(labels):
            raise _fail(path, j + 1, f"a row of {len(fields)} numbers under {len(labels)} column labels.")
        try:
            rows.append([float(v) for v in fields])
        except ValueError:
            bad = next(v for v in fields if not _is_float(v))
            raise _fail(path, j + 1, f"{bad!r} is not a number.") from None
        row_lines.append(j + 1)
    if not rows:
        raise _fail(path, k + 1, "no data rows after the column labels: a motion needs at least one sample.")
    data = np.array(rows, dtype=float).reshape(len(rows), len(labels))
    for key, expected, what in (("nrows", data.shape[0], "data rows"), ("datarows", data.shape[0], "data rows"),
                                ("ncolumns", len(labels), "columns (time included)"),
                                ("datacolumns", len(labels), "columns (time included)")):
        if key in header:
            value, line_no = header[key]
            try:
                n = int(value)
            except ValueError:
                raise _fail(path, line_no, f"{key}={value!r} is not an integer.") from None
            if n != expected:
                raise _fail(path, line_no, f"the header says {key}={n} but the file has {expected} {what}; "
                                           "correct the header.")
    in_degrees = False
    if "indegrees" in header:
        value, line_no = header["indegrees"]
        flag = _header_flag(value)
        if flag is None:
            raise _fail(path, line_no, f"inDegrees={value!r}: write 'yes' or 'no'.")
        in_degrees = flag
    if not np.all(np.isfinite(data[:, 0])):
        raise _fail(path, row_lines[int(np.argmin(np.isfinite(data[:, 0])))], "a time that is not finite.")
    if data.shape[0] > 1 and not np.all(np.diff(data[:, 0]) > 0):
        i = int(np.argmin(np.diff(data[:, 0]) > 0))
        raise _fail(path, row_lines[i + 1], (f"time {float(data[i + 1, 0])!r} does not increase (previous "
                                             f"{float(data[i, 0])!r}); times must be strictly increasing."))
    try:
        return MotionData(data[:, 0], tuple(labels[1:]), data[:, 1:], in_degrees=in_degrees, name=name,
                          source=path)
    except ValueError as exc:
        raise _fail(path, k + 1, str(exc)) from None


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def write_storage(path: str | os.PathLike, motion: MotionData) -> None:
    """Write `motion` as an OpenSim Storage file (``.sto`` or ``.mot``; version 1 header).

    The header is ``name``, ``version=1``, ``nRows``, ``nColumns`` (time included),
    ``inDegrees`` and ``endheader``; columns are tab separated; numbers are written
    with 17 significant digits, so that reading the file back gives the same floats.
    OpenSim 4.6's ``Storage`` and ``TimeSeriesTable`` read it.

    **Arguments:**

    - `path`: the file to write.
    - `motion`: a [`jaxmb.io.MotionData`][jaxmb.io.MotionData].
    """
    if not isinstance(motion, MotionData):
        raise TypeError(f"write_storage: motion must be a jaxmb.io.MotionData, got {type(motion).__name__}.")
    for s in motion.labels:
        if not s or any(c.isspace() for c in s):
            raise ValueError(f"write_storage: column label {s!r} is empty or holds white space; OpenSim "
                             "splits labels at tabs and readers at any white space.")
    n, m = motion.values.shape
    lines = [motion.name or "jaxmb", "version=1", f"nRows={n}", f"nColumns={m + 1}",
             f"inDegrees={'yes' if motion.in_degrees else 'no'}", "endheader",
             "\t".join(("time",) + motion.labels)]
    table = np.column_stack([motion.time, motion.values]) if n else np.zeros((0, m + 1))
    lines += ["\t".join(f"{v:.17g}" for v in row) for row in table]
    with open(os.fspath(path), "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")


def rotational_coordinates(model: Model) -> tuple[bool, ...]:
    """Which coordinates are rotational (OpenSim's motion files give them in degrees when
    ``inDegrees=yes``): those that some revolute joint is a function of alone, and those
    that revolute joints read and no prismatic joint does (the double pendulum's absolute
    angle θ2, which the elbow reads as θ2 - θ1).

    **Arguments:**

    - `model`: the `jaxmb.Model`.

    **Returns:**

    A tuple of `model.nq` booleans in coordinate order: ``True`` for a rotational
    coordinate (rad), ``False`` for a translational one (m).
    """
    alone, read = set(), {"revolute": set(), "prismatic": set()}
    for joint in model.joints:
        idx = tuple(joint.function.coordinate_indices())
        read[joint.kind].update(idx)
        if joint.kind == "revolute" and len(idx) == 1:
            alone.add(idx[0])
    return tuple(k in alone or (k in read["revolute"] and k not in read["prismatic"]) for k in range(model.nq))


def _column_coordinate(label: str) -> tuple[str, str | None]:
    """``(name, kind)`` of a column: a plain label is a name; an OpenSim 4 state path
    ``/jointset/<joint>/<coordinate>/value`` names the coordinate and its ``value``/``speed``."""
    if "/" in label:
        parts = [p for p in label.split("/") if p]
        if len(parts) >= 2:
            return parts[-2], parts[-1]
    return label, None


def coordinates_from_motion(model: Model, motion: MotionData, *, ignore=(), missing: str = "error",
                            check_units: bool = True) -> np.ndarray:
    """The model's coordinates ``q`` (n, nq) from a motion, in the model's order, in rad and m.

    Columns are matched to coordinates by name (or by OpenSim 4 state path
    ``/jointset/<joint>/<coordinate>/value``; ``.../speed`` columns are skipped). Where
    ``in_degrees``, rotational coordinates are converted to radians, translational ones
    never (as OpenSim's tools do).

    **Arguments:**

    - `model`: the [`jaxmb.Model`][jaxmb.Model].
    - `motion`: a [`jaxmb.io.MotionData`][jaxmb.io.MotionData].
    - `ignore`: other column names that are not an error (for example an ``.osim``'s
      locked and coupled coordinates, ``read_osim(path).all_coordinate_names``). Columns
      named after a muscle of the model are always ignored.
    - `missing`: ``"error"`` (default) for a model coordinate without a column, or
      ``"default"`` to hold it at ``model.q_default`` as OpenSim's tools do.
    - `check_units`: refuse ``inDegrees=no`` with a rotational column beyond ±2π
      (a file in degrees labelled as radians). Pass ``False`` for motions that turn
      more than a revolution.

    **Returns:**

    ``q`` (n, nq), float64 NumPy array.

    **Raises:**

    [`jaxmb.ModelError`][jaxmb.ModelError] naming the file for columns that are no
    coordinate of the model (with the closest coordinate names), missing coordinates,
    a coordinate that is not finite at some frame, and values that look like degrees in
    a file labelled ``inDegrees=no``; ``TypeError`` for arguments that are not a model and
    a `MotionData`.
    """
    if not isinstance(model, Model) or not isinstance(motion, MotionData):  # an AttributeError on .source before
        raise TypeError(f"coordinates_from_motion: takes a jaxmb.Model and a MotionData (jaxmb.io.read_storage(file)), "
                        f"got {type(model).__name__} and {type(motion).__name__}.")
    if missing not in ("error", "default"):
        raise ValueError(f"coordinates_from_motion: missing must be 'error' or 'default', got {missing!r}.")
    src = motion.source or "motion"
    names = model.coordinate_names
    if isinstance(ignore, str):  # one name, not its characters
        ignore = (ignore,)
    known = set(names) | {str(s) for s in ignore} | set(model.muscle_names)
    column_of: dict[str, int] = {}
    unknown = []
    for j, label in enumerate(motion.labels):
        coord, kind = _column_coordinate(label)
        if kind not in (None, "value") and coord in known:
            continue  # a speed, an activation, a fibre length, ... of a known name
        if coord in names and kind in (None, "value"):
            if coord in column_of:
                raise ModelError(f"{src}: coordinate {coord!r} has two columns "
                                 f"({motion.labels[column_of[coord]]!r} and {label!r}); keep one.")
            column_of[coord] = j
        elif coord not in known and label not in known:
            unknown.append(label)
    if unknown:
        hints = []
        for label in unknown:
            close = difflib.get_close_matches(_column_coordinate(label)[0], names, n=3, cutoff=0.5)
            hints.append(f"{label!r}" + (f" (closest coordinates: {', '.join(close)})" if close else ""))
        raise ModelError(f"{src}: columns that are no coordinate of model {model.name!r}: {'; '.join(hints)}. "
                         f"Rename them to the model's coordinates {names}, or skip them (ignore=[...] in Python; "
                         "remove them from the file for the jaxmb commands).")
    absent = [c for c in names if c not in column_of]
    if absent and missing == "error":
        raise ModelError(f"{src}: no column for the model's coordinates {absent}; add them to the file, or "
                         "pass missing='default' to hold them at the model's default values (as OpenSim does).")
    rotational = rotational_coordinates(model)
    n = motion.time.size
    q = np.tile(np.asarray(model.q_default, dtype=float), (n, 1))
    scale = math.pi / 180.0
    for k, c in enumerate(names):
        if c not in column_of:
            continue
        col = motion.values[:, column_of[c]]
        bad = np.flatnonzero(~np.isfinite(col))
        if bad.size:  # a NaN cell of the file (read_storage keeps them): the tools' splines would spread it
            raise ModelError(f"{src}: coordinate {c!r} is not finite at {bad.size} frame{'s' if bad.size > 1 else ''} "
                             f"(first at t = {', '.join(f'{t:g}' for t in motion.time[bad[:5]])} s): fill the gaps "
                             "(e.g. by interpolation) or cut the motion before them.")
        if rotational[k] and motion.in_degrees:
            col = col * scale
        elif rotational[k] and check_units and col.size and np.max(np.abs(col)) > 2 * math.pi:
            raise ModelError(
                f"{src}: inDegrees=no, but rotational coordinate {c!r} reaches {np.max(np.abs(col)):.4g} "
                f"(beyond 2π rad): the file looks like degrees. Set 'inDegrees=yes' in its header if it is in "
                "degrees, or pass check_units=False if the motion really turns more than a revolution.")
        q[:, k] = col
    return q
