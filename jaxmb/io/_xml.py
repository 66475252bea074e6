"""One reader for the XML of OpenSim files: elements with their file and line, and
typed getters whose errors name ``file:line``, the element and its ``name``.

Every OpenSim element jaxmb reads (the skeleton, the functions, the forces) goes
through `XmlReader`, so every malformed value is reported the same way:

```text
<location> of <PathPoint name='TRIlong-P1'> at arm26.osim:412: holds a non-finite
number ('nan 0.1 0'); write finite numbers.
```

Elements built from a string (``ET.fromstring``) have no file or line; the messages
then name the element alone.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from typing import NoReturn
from xml.parsers import expat

import numpy as np

from .._errors import ModelError

__all__ = ["REQUIRED", "XmlReader", "label"]


class _Required:
    def __repr__(self):
        return "REQUIRED"


REQUIRED = _Required()
"""The `default` of a getter whose element must be present."""


def label(el: ET.Element) -> str:
    """``<Tag name='x'>`` (the name only where the element has one)."""
    name = el.get("name")
    return f"<{el.tag}{f' name={name!r}' if name is not None else ''}>"


def _parse(path: str, locations: dict[ET.Element, tuple[str, int]]) -> ET.Element:
    """Parse `path` with expat into an ElementTree, recording each element's line."""
    builder = ET.TreeBuilder()
    parser = expat.ParserCreate()
    parser.buffer_text = True

    def start(tag, attrs):
        locations[builder.start(tag, attrs)] = (path, parser.CurrentLineNumber)

    parser.StartElementHandler = start
    parser.EndElementHandler = builder.end
    parser.CharacterDataHandler = builder.data
    try:
        with open(path, "rb") as fh:
            parser.ParseFile(fh)
    except expat.ExpatError as exc:
        raise ModelError(f"{path}: not well-formed XML ({exc}); is this an OpenSim file?") from None
    except OSError as exc:
        raise ModelError(f"{path}: cannot read the file ({exc}).") from None
    return builder.close()


class XmlReader:
    """The elements of one XML document (and the files it includes) with their
    locations, and getters that check what they read.

    Getters take the element that holds the property and the property's tag. A
    `default` of `REQUIRED` makes the property required; any other default
    (``None`` included) is returned when it is absent.
    """

    def __init__(self, root: ET.Element, locations: dict[ET.Element, tuple[str, int]] | None = None,
                 path: str | None = None):
        self.root = root
        self.locations = {} if locations is None else locations
        self.path = path

    @classmethod
    def parse(cls, path: str | os.PathLike) -> XmlReader:
        """Read the file at `path`; a ``ModelError`` names it if it is not XML."""
        path = os.fspath(path)
        locations: dict[ET.Element, tuple[str, int]] = {}
        return cls(_parse(path, locations), locations, path)

    # -- messages ------------------------------------------------------------
    def where(self, el: ET.Element) -> str:
        """``<Tag name='x'> at file:line`` (without the location where none is known)."""
        loc = self.locations.get(el)
        return f"{label(el)} at {loc[0]}:{loc[1]}" if loc else label(el)

    def fail(self, el: ET.Element, message: str, owner: ET.Element | None = None) -> NoReturn:
        """Raise [`jaxmb.ModelError`][jaxmb.ModelError] ``"<where el>: message"``; with `owner`,
        ``"<tag> of <Owner name='x'> at file:line: message"`` (a property of `owner`)."""
        if owner is not None and owner is not el:
            loc = self.locations.get(el) or self.locations.get(owner)
            at = f" at {loc[0]}:{loc[1]}" if loc else ""
            raise ModelError(f"<{el.tag}> of {label(owner)}{at}: {message}")
        raise ModelError(f"{self.where(el)}: {message}")

    def unsupported(self, el: ET.Element, context: str = "", hint: str = "") -> NoReturn:
        ctx = f" in {context}" if context else ""
        self.fail(el, f"element {el.tag!r}{ctx} is not supported by jaxmb's OpenSim importer"
                      f"{'; ' + hint if hint else ''}.")

    # -- structure -------------------------------------------------------------
    @staticmethod
    def children(el: ET.Element, tag: str | None = None) -> list[ET.Element]:
        """The element children of `el` (comments skipped), those named `tag` if given."""
        return [c for c in el if isinstance(c.tag, str) and (tag is None or c.tag == tag)]

    def child(self, el: ET.Element, tag: str, required: bool = True) -> ET.Element | None:
        """The one child `tag` of `el`; an error if it appears twice, or if it is
        missing and `required`."""
        found = self.children(el, tag)
        if len(found) > 1:
            self.fail(found[1], f"<{tag}> appears more than once; give it once.", owner=el)
        if not found:
            if required:
                self.fail(el, f"missing required <{tag}>; add it (OpenSim needs it here).")
            return None
        return found[0]

    def check_children(self, el: ET.Element, allowed: Iterable[str], context: str,
                       skip: Iterable[str] = ()) -> None:
        """An error naming the first child of `el` that is neither `allowed` nor in `skip`."""
        allowed, skip = set(allowed), set(skip)
        for c in self.children(el):
            if c.tag not in allowed and c.tag not in skip:
                self.fail(c, f"not supported by jaxmb's OpenSim importer in {context} (expected only "
                             f"{sorted(allowed)}); remove it, or check its spelling.", owner=el)

    def set_objects(self, el: ET.Element | None) -> list[ET.Element]:
        """The components of an OpenSim Set (``<XSet><objects>...</objects><groups/>``)."""
        if el is None:
            return []
        for c in self.children(el):
            if c.tag not in ("objects", "groups"):
                self.unsupported(c, f"<{el.tag}>")
        objs = self.child(el, "objects", required=False)
        return [] if objs is None else self.children(objs)

    # -- values ----------------------------------------------------------------
    def text(self, el: ET.Element, tag: str, default=REQUIRED) -> str | None:
        """The stripped text of the child `tag`."""
        c = self.child(el, tag, required=default is REQUIRED)
        if c is None:
            return default
        return (c.text or "").strip()

    def floats(self, el: ET.Element, tag: str, n: int | None = None, default=REQUIRED, *,
               blank_is_missing: bool = False) -> np.ndarray | None:
        """The numbers of the child `tag` as a float64 array, checked: numbers, `n` of
        them if `n` is given, all finite. `default` (converted to an array unless
        ``None``) when the child is absent, or blank with `blank_is_missing`."""
        c = self.child(el, tag, required=default is REQUIRED)
        raw = "" if c is None else (c.text or "").strip()
        if c is None or (blank_is_missing and not raw and default is not REQUIRED):
            return None if default is None else np.asarray(default, dtype=float)
        try:
            v = np.array([float(t) for t in raw.split()], dtype=float)
        except ValueError:
            self.fail(c, f"expected numbers, got {raw!r}; write numbers separated by spaces.", owner=el)
        if n is not None and v.size != n:
            self.fail(c, f"expected {n} number(s), got {v.size} ({raw!r}).", owner=el)
        if not np.all(np.isfinite(v)):
            self.fail(c, f"holds a non-finite number ({raw!r}); write finite numbers.", owner=el)
        return v

    def number(self, el: ET.Element, tag: str, default=REQUIRED, **kwargs) -> float | None:
        """The one number of the child `tag` (see `floats`)."""
        d = default if default is REQUIRED or default is None else (default,)
        v = self.floats(el, tag, 1, d, **kwargs)
        return None if v is None else float(v[0])

    def boolean(self, el: ET.Element, tag: str, default: bool) -> bool:
        """The child `tag` read as ``true``/``false`` (or 1/0), `default` when absent."""
        t = self.text(el, tag, "true" if default else "false").lower()
        if t not in ("true", "false", "1", "0"):
            self.fail(self.child(el, tag), f"expected true or false, got {t!r}.", owner=el)
        return t in ("true", "1")

    # -- files that include files ---------------------------------------------
    def include_files(self, el: ET.Element, _stack: tuple[str, ...] = ()) -> None:
        """Replace every element below `el` that has a ``file`` attribute by the element
        of the same tag that the file holds, as OpenSim does (``<ForceSet
        file="muscles.xml"/>``). The file is found relative to the folder of the file
        that names it; it holds the element itself or an ``<OpenSimDocument>`` around it."""
        for parent in list(el.iter()):
            for i, c in enumerate(list(parent)):
                if not isinstance(c.tag, str) or not c.get("file"):
                    continue
                parent[i] = self._included(c, _stack)

    def _included(self, el: ET.Element, stack: tuple[str, ...]) -> ET.Element:
        ref = el.get("file").strip()
        base = (self.locations.get(el) or (self.path or "", 0))[0]
        path = os.path.normpath(os.path.join(os.path.dirname(base), ref))
        inline = [c for c in self.children(el) if c.tag not in ("objects", "groups") or self.children(c)]
        if inline:
            self.fail(el, f"has both a file attribute ({ref!r}) and contents; keep one of them.")
        if path in stack:
            self.fail(el, f"file {ref!r} includes itself ({' -> '.join(stack + (path,))}).")
        if not os.path.isfile(path):
            self.fail(el, f"the file {ref!r} it names does not exist (looked for {path}); put it next to "
                          f"the file that names it, or inline the <{el.tag}>.")
        root = _parse(path, self.locations)
        found = root
        if root.tag == "OpenSimDocument":
            inner = self.children(root)
            if len(inner) != 1:
                self.fail(root, f"an included file must hold one <{el.tag}>, found {len(inner)} elements.")
            found = inner[0]
        if found.tag != el.tag:
            self.fail(found, f"{path} is included as a <{el.tag}> (by {self.where(el)}) but holds "
                             f"a <{found.tag}>.")
        self.include_files(found, stack + (path,))
        return found
