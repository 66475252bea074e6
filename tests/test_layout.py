"""The package's shape as a specification: strict layers without cycles, small modules,
``__init__`` files that only re-export, citations instead of internal names."""

import ast
import pathlib
import re

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "jaxmb"
MAX_LINES = 600

# Lowest layer first. A module may import from its own layer or the layers before it;
# a module is placed by the longest prefix of its dotted name listed here.
LAYERS = (
    ("jaxmb._errors", "jaxmb._typing", "jaxmb._results", "jaxmb._checks", "jaxmb._solvers", "jaxmb._batching",
     "jaxmb._eager"),
    ("jaxmb._spatial", "jaxmb._safe"),
    ("jaxmb._functions", "jaxmb._signal"),
    ("jaxmb._loop_closure", "jaxmb._loop_solve"),
    ("jaxmb._model", "jaxmb._builder"),
    ("jaxmb._kinematics", "jaxmb._point_kinematics"),
    ("jaxmb._loads",),
    ("jaxmb._rigid_body",),
    ("jaxmb._dynamics", "jaxmb.matrix_calculus"),
    ("jaxmb._loops", "jaxmb._muscles", "jaxmb.constraints"),
    ("jaxmb._forces", "jaxmb._path_fitting"),
    ("jaxmb._simulate", "jaxmb._control", "jaxmb.control", "jaxmb._motion"),
    ("jaxmb._static_optimization", "jaxmb._static_optimization_compliant", "jaxmb._identify"),
    ("jaxmb.io",),
    ("jaxmb.models",),
    ("jaxmb.studies",),
    ("jaxmb.cli",),
)


def _modules() -> dict[str, pathlib.Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _imports(name: str, path: pathlib.Path) -> set[str]:
    """The jaxmb modules that module `name` imports (a package's __init__ for a name in it)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                stem = ".".join(base + ([node.module] if node.module else []))
            else:
                stem = node.module or ""
            candidates = [stem] + [f"{stem}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        else:
            continue
        found.update(c for c in candidates if c in MODULES and c != name)
    return found


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _layer(name: str) -> int:
    best, rank = "", None
    for r, prefixes in enumerate(LAYERS):
        for p in prefixes:
            if (name == p or name.startswith(p + ".") or name.startswith(p + "_")) and len(p) > len(best):
                best, rank = p, r
    if rank is None:
        raise AssertionError(f"module {name} is in no layer: add it to LAYERS in {__file__}")
    return rank


def test_every_module_has_a_layer():
    for name in MODULES:
        if name != "jaxmb":
            _layer(name)


@pytest.mark.parametrize("name", sorted(n for n in MODULES if n != "jaxmb"))
def test_imports_point_down_the_layers(name):
    mine = _layer(name)
    for target in GRAPH[name]:
        if target == "jaxmb" or name.startswith(target + "."):
            continue  # a package's own __init__, re-exporting its children
        assert _layer(target) <= mine, f"{name} (layer {mine}) imports {target} (layer {_layer(target)})"


def test_no_import_cycles():
    graph = {m: {t for t in ts if t != "jaxmb" and not m.startswith(t + ".")} for m, ts in GRAPH.items()}
    state: dict[str, int] = {}

    def visit(m, path):
        state[m] = 1
        for t in sorted(graph[m]):
            if state.get(t) == 1:
                cycle = path[path.index(t):] + [t]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if t not in state:
                visit(t, path + [t])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])


@pytest.mark.parametrize("name", sorted(MODULES))
def test_modules_are_small(name):
    n = len(MODULES[name].read_text().splitlines())
    assert n <= MAX_LINES, f"{name} has {n} lines (at most {MAX_LINES}): split it by concept"


@pytest.mark.parametrize("name", sorted(n for n, p in MODULES.items() if p.name == "__init__.py"))
def test_init_files_only_reexport(name):
    tree = ast.parse(MODULES[name].read_text())
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # the module docstring
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if all(isinstance(t, ast.Name) and t.id in ("__version__", "__all__") for t in targets):
                continue
        raise AssertionError(f"{name}/__init__.py holds code at line {node.lineno}: move it to a module")


def test_library_cites_papers_not_internal_names():
    hits = [f"{p.relative_to(PACKAGE.parent)}:{i}" for p in PACKAGE.rglob("*.py")
            for i, line in enumerate(p.read_text().splitlines(), 1) if re.search(r"(?i)\bseeds?\b\s*0\d\d", line)]
    assert not hits, "cite the paper (author, year, equation) instead of 'seed 00x': " + ", ".join(hits)


def test_library_docstrings_quote_no_timings():
    pattern = re.compile(r"\d\s?(µs|us|ms)\b|scripts/check_")
    hits = [f"{p.relative_to(PACKAGE.parent)}:{i}" for p in PACKAGE.rglob("*.py")
            for i, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line)]
    assert not hits, "library code says what, not how fast a past version was: " + ", ".join(hits)
