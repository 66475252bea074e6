"""The API reference covers the public surface, and public functions document their arguments.

The public surface is what `jaxmb/__init__.py` re-exports plus the public submodules it
imports (`jaxmb.models`, `jaxmb.io`, ...): each module's `__all__` where it has one, else
its public, non-module attributes. The API pages are `docs/api/*.md`, whose
`::: dotted.name` blocks mkdocstrings renders (`mkdocs build --strict` in `.ci/run`
fails on a block that does not resolve).
"""

import importlib
import inspect
import pathlib
import re
import types

import pytest

import jaxmb

API_PAGES = pathlib.Path(__file__).resolve().parents[1] / "docs" / "api"


def public_modules():
    """`{dotted name: module}` for jaxmb and the public submodules it imports. The
    command line (`jaxmb.cli`, documented on the Getting started page) is not library
    API; it appears in `vars(jaxmb)` only once some test has imported it."""
    modules = {"jaxmb": jaxmb}
    for name, obj in vars(jaxmb).items():
        if (isinstance(obj, types.ModuleType) and not name.startswith("_") and obj.__name__.startswith("jaxmb.")
                and obj.__name__ != "jaxmb.cli"):
            modules.setdefault(obj.__name__, obj)
    return modules


def public_names(module):
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n, obj in vars(module).items()
                 if not n.startswith("_") and not isinstance(obj, types.ModuleType)]
    return sorted(names)


def public_objects():
    """`[(dotted name, object)]` of every public name."""
    return [(f"{mod_name}.{name}", getattr(module, name))
            for mod_name, module in public_modules().items() for name in public_names(module)]


def resolve(dotted):
    parts = dotted.split(".")
    for k in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:k]))
        except ImportError:
            continue
        for attr in parts[k:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(dotted)


def documented():
    """`{dotted name: object}` of every `::: name` block of the API pages."""
    paths = {m for page in sorted(API_PAGES.glob("*.md"))
             for m in re.findall(r"^:::\s+(\S+)", page.read_text(), re.M)}
    return {path: resolve(path) for path in paths}


def is_documented(dotted, obj, blocks):
    if dotted in blocks:
        return True
    # A re-export (the same object under another public name) is documented once.
    if inspect.isclass(obj) or inspect.isfunction(obj) or callable(obj):
        return any(o is obj for o in blocks.values())
    return False


def test_every_public_name_has_an_api_entry():
    blocks = documented()
    missing = [dotted for dotted, obj in public_objects() if not is_documented(dotted, obj, blocks)]
    assert not missing, f"public names without a '::: name' block in docs/api/*.md: {missing}"


def test_api_pages_document_only_public_names():
    public = {dotted for dotted, _ in public_objects()}
    stray = [path for path in documented() if path not in public and not path.rsplit(".", 1)[-1].startswith("_")
             and path not in public_modules()]
    assert not stray, f"API blocks for names that are not public: {stray}"


def test_each_public_object_has_one_public_path():
    """One public path per object (issue 34, item 8): a re-export under a second public
    name (``jaxmb.constraints.LoopClosure`` beside ``jaxmb.LoopClosure``) doubles the
    surface to learn and to document."""
    paths: dict[int, list[str]] = {}
    for dotted, obj in public_objects():
        if callable(obj):
            paths.setdefault(id(obj), []).append(dotted)
    doubled = [p for p in paths.values() if len(p) > 1]
    assert not doubled, f"objects exported under several public names: {doubled}"


def test_models_export_models_not_reference_data():
    """`jaxmb.models` offers model constructors; the data that tests check them against
    (Test Set references, points of figures) live in tests/closed_oracles.py."""
    data = [n for n in public_names(jaxmb.models) if not callable(getattr(jaxmb.models, n))]
    assert not data, f"reference data in jaxmb.models: {data}"


def docstring_problems():
    """Public classes without a docstring of their own; functions without `**Arguments:**`."""
    problems, seen = [], []
    for dotted, obj in public_objects():
        if any(obj is other for other in seen):
            continue   # a re-export: reported under its first public name
        seen.append(obj)
        if inspect.isclass(obj):
            doc = vars(obj).get("__doc__") or ""
            # dataclasses (and equinox modules) fill a missing docstring with the signature.
            if not doc.strip() or doc.startswith(f"{obj.__name__}("):
                problems.append(f"{dotted}: no docstring")
        elif callable(obj):
            doc = inspect.getdoc(obj) or ""
            try:
                takes_arguments = bool(inspect.signature(obj).parameters)
            except (TypeError, ValueError):
                takes_arguments = True
            if not doc.strip():
                problems.append(f"{dotted}: no docstring")
            elif takes_arguments and "**Arguments:**" not in doc:
                problems.append(f"{dotted}: no **Arguments:** section")
    return problems


def test_public_functions_document_their_arguments():
    problems = docstring_problems()
    assert not problems, "\n".join(problems)
