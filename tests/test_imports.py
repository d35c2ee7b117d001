"""How the packages import one another, read from the source (every import, at module level or inside a
function): no module-level import cycle, and the layering rules of the architecture hold."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("hetero_dse", "cost_models", "gpu_cpu")


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def _imports(path: Path, name: str, top_only: bool) -> set[str]:
    tree = ast.parse(path.read_text())
    nodes = tree.body if top_only else list(ast.walk(tree))
    out = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            base = node.module
            if node.level:  # relative import
                pkg = name.split(".")[: -node.level] if not path.name == "__init__.py" else name.split(".")
                base = ".".join([*pkg, node.module])
            out.add(base)
            out |= {f"{base}.{a.name}" for a in node.names}
    return {m for m in out if m.split(".")[0] in PACKAGES}


def _resolve(target: str, modules: dict[str, Path]) -> str | None:
    while target and target not in modules:
        target = target.rpartition(".")[0]
    return target or None


def _graph(top_only: bool) -> dict[str, set[str]]:
    modules = _modules()
    graph = {}
    for name, path in modules.items():
        edges = {_resolve(t, modules) for t in _imports(path, name, top_only)}
        graph[name] = {e for e in edges if e and e != name}
    return graph


def test_no_module_level_import_cycle():
    graph = _graph(top_only=True)
    # a package's __init__ importing its own submodules is how a package presents them, not a cycle
    for name in graph:
        is_package = (ROOT / name.replace(".", "/")).is_dir()
        graph[name] = {t for t in graph[name] if not (is_package and t.startswith(name + "."))}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycle = stack[stack.index(nxt):] + [nxt]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)


def test_no_import_cycle_at_any_level():
    """Imports inside functions and under TYPE_CHECKING count too: a circle hidden in a function-level import is
    still two modules that cannot be understood (or moved) one without the other."""
    graph = _graph(top_only=False)
    for name in graph:
        is_package = (ROOT / name.replace(".", "/")).is_dir()
        graph[name] = {t for t in graph[name] if not (is_package and t.startswith(name + "."))}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def connect(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    assert circles == []


def test_no_private_name_is_imported_across_modules():
    """A name with a leading underscore is its module's own: another module that needs it gets it public."""
    found = []
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in PACKAGES:
                    found += [f"{path.relative_to(ROOT)}:{node.lineno} imports {node.module}.{a.name}"
                              for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
    assert found == []


def _violations(source_prefixes: tuple[str, ...], forbidden: tuple[str, ...]) -> list[str]:
    graph = _graph(top_only=False)
    return [f"{m} imports {t}" for m, targets in sorted(graph.items()) if m.startswith(source_prefixes)
            for t in sorted(targets) if t.startswith(forbidden)]


def test_spaces_never_import_cost_models():
    assert _violations(("hetero_dse.space",), ("cost_models",)) == []


def test_cost_models_never_import_the_engine_above_them():
    forbidden = ("hetero_dse.targets", "hetero_dse.cli", "hetero_dse.explore", "hetero_dse.hls",
                 "hetero_dse.report", "hetero_dse.history", "gpu_cpu")
    assert _violations(("cost_models",), forbidden) == []


def test_the_engine_below_the_targets_never_imports_the_tvm_backend_or_a_cost_model():
    """Spaces, hardware, analysis, explorers and the search loop, history, the HLS generator and the reference
    are the engine's lower layers: the targets put a device's cost model or the TVM backend (gpu_cpu)
    behind them."""
    lower = ("hetero_dse.hls", "hetero_dse.analysis", "hetero_dse.space", "hetero_dse.reference",
             "hetero_dse.hardware", "hetero_dse.explore", "hetero_dse.history", "hetero_dse.testing")
    assert _violations(lower, ("gpu_cpu",)) == []
    # the transfer-learning explorer's own learned model (XGBoost over the knobs) is its tool, not a target's
    assert [v for v in _violations(("hetero_dse.explore", "hetero_dse.space", "hetero_dse.history"), ("cost_models",))
            if not v.endswith("imports cost_models.learned")] == []


def test_nothing_below_the_targets_imports_them():
    """Targets sit above the engine's layers and the backends; only the run, the report and the CLI use them."""
    above = ("hetero_dse.targets", "hetero_dse.cli", "hetero_dse.report", "hetero_dse.run", "hetero_dse.__main__")
    graph = _graph(top_only=False)
    assert [f"{m} imports {t}" for m, targets in sorted(graph.items()) if not m.startswith(above)
            for t in sorted(targets) if t.startswith(above)] == []


def test_the_tvm_backend_never_imports_the_engine_above_it():
    assert _violations(("gpu_cpu",), ("hetero_dse.cli", "hetero_dse.targets", "hetero_dse.hls",
                                      "hetero_dse.explore", "hetero_dse.report")) == []


#: the layers of the architecture, bottom first: a module imports only from its own layer or those below
LAYERS = (
    ("hetero_dse", "hetero_dse.errors", "hetero_dse.units", "hetero_dse.atomic", "hetero_dse.resources",
     "hetero_dse.guard", "hetero_dse.process", "hetero_dse.yamlfile"),
    ("hetero_dse.operator", "hetero_dse.epilogue", "hetero_dse.ops", "hetero_dse.loader",
     "hetero_dse.hardware", "hetero_dse.analysis",
     "hetero_dse.reference", "hetero_dse.space", "hetero_dse.history", "hetero_dse.model"),
    ("cost_models",),
    ("hetero_dse.explore", "hetero_dse.testing", "hetero_dse.hls"),
    ("gpu_cpu",),
    ("hetero_dse.evaluate",),
    ("hetero_dse.targets",),
    ("hetero_dse.crossdevice", "hetero_dse.network_report", "hetero_dse.report_html", "hetero_dse.report"),
    ("hetero_dse.run",),
    ("hetero_dse.cli", "hetero_dse.__main__"),
)


def _layer(module: str) -> int:
    best, found = -1, -1
    for i, layer in enumerate(LAYERS):
        for prefix in layer:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, found = len(prefix), i
    assert found >= 0, f"{module} is in no layer of LAYERS"
    return found


def test_imports_flow_one_way_through_the_layers():
    """Operators, hardware, analysis, spaces and history at the bottom; cost models; explorers, the search loop
    and the HLS generator; the TVM backend; the evaluators; the targets; the report; the CLI. No module imports
    upwards."""
    graph = _graph(top_only=False)
    # a package presenting its submodules (``hetero_dse`` re-exporting the operator decorator) is not a layer's import
    upward = [f"{m} (layer {_layer(m)}) imports {t} (layer {_layer(t)})" for m, targets in sorted(graph.items())
              for t in sorted(targets) if _layer(t) > _layer(m) and not t.startswith(m + ".")]
    assert upward == []


def test_every_bench_script_imports():
    """A benchmark is run by hand, months apart: a name it imports that moved (``hls.synth._read_back`` did)
    must fail here, not on the day its figure is needed."""
    import importlib.util
    import sys

    sys.path.insert(0, str(ROOT / "bench"))  # the scripts import their shared helpers by module name
    try:
        for path in sorted((ROOT / "bench").glob("*.py")):
            spec = importlib.util.spec_from_file_location(f"bench_{path.stem}", path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module  # a dataclass looks its module up there
            try:
                spec.loader.exec_module(module)  # each runs its work under `if __name__ == "__main__"` only
            finally:
                del sys.modules[spec.name]
    finally:
        sys.path.remove(str(ROOT / "bench"))


#: one job per module: past this a module is two that have not been told apart yet
MAX_MODULE_LINES = 400


def test_no_module_is_over_400_lines():
    paths = sorted(path for package in PACKAGES for path in (ROOT / package).rglob("*.py"))
    long = [f"{path.relative_to(ROOT)}: {n} lines" for path in paths
            if (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES]
    assert long == []
