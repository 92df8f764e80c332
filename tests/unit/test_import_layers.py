"""The packages of ``seq2seq`` form layers (see ``seq2seq/__init__.py``): a module imports only from its
own package or from a package of a lower layer, and no chain of imports, lazy ones inside functions
included, comes back to where it started. Parsed from the source, so nothing is imported to check it;
one test imports ``seq2seq.config`` in a fresh interpreter to show that the package's lazy exports of
the Python API (the one import that runs upward) load nothing on the way."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "seq2seq"
# Layer of each package; "" is the top level. Packages of one layer may not import each other.
LAYERS = {
    "": 0,
    "text": 1,  # the text stage: strings only, used by the data pipeline and every translating verb
    "model": 2,
    "data": 2,
    "interop": 3,  # converters from and to other toolkits' formats, used by loading, warm start and export
    "decode": 4,
    "evaluate": 5,
    "train": 6,
    "export": 7,
    "explain": 7,
    "serve": 8,
    "cli": 9,
    "api": 10,  # one module, seq2seq/api.py: the Python API
}
ENTRY_POINTS = {"seq2seq.__main__": "cli"}  # ``python -m seq2seq`` runs the command line
# The package's PEP 562 ``__getattr__`` imports the API on first use of ``seq2seq.load``: after every layer is
# importable, so this upward import is allowed, and test_the_config_imports_no_layer shows it stays lazy.
LAZY_EXPORTS = {("seq2seq", "seq2seq.api")}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_of(module: str) -> str:
    """The layer package a module belongs to ("" for the top-level modules)."""
    if module in ENTRY_POINTS:
        return ENTRY_POINTS[module]
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in LAYERS) else ""


def imports_of(path: Path, known: set[str]) -> set[str]:
    """The seq2seq modules ``path`` imports, anywhere in the file (``from seq2seq.a import b`` counts
    ``seq2seq.a.b`` when that is a module, else ``seq2seq.a``)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.split(".")[0] == "seq2seq"}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "seq2seq":
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.add(sub if sub in known else node.module)
    return found


def import_graph() -> dict[str, set[str]]:
    paths = sorted(PACKAGE.rglob("*.py"))
    known = {module_name(p) for p in paths}
    return {module_name(p): imports_of(p, known) - {module_name(p)} for p in paths}


def wrong_way(graph: dict[str, set[str]]) -> list[str]:
    """Imports from a package into one of a higher layer, or between two packages of one layer."""
    bad = []
    for module, imported in graph.items():
        here = package_of(module)
        for target in sorted(imported):
            there = package_of(target)
            if there != here and LAYERS[there] >= LAYERS[here] and (module, target) not in LAZY_EXPORTS:
                bad.append(f"{module} ({here or 'top'}) imports {target} ({there or 'top'})")
    return bad


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every import cycle found by a depth-first walk (each reported once, from its first module)."""
    found, state = [], {}  # state: 1 on the current path, 2 done

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in sorted(graph.get(module, ())):
            if state.get(target) == 1:
                found.append(path[path.index(target) :] + [target])
            elif target not in state:
                visit(target, [*path, target])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    return found


def test_every_package_has_a_layer():
    """Each package below the top has a layer; a subpackage (``data/sources``) belongs to its package's."""
    packages = {p.relative_to(PACKAGE).parts[0] for p in PACKAGE.rglob("__init__.py") if p.parent != PACKAGE}
    assert packages == set(LAYERS) - {"", "api"} and (PACKAGE / "api.py").is_file()


def test_imports_run_one_way():
    graph = import_graph()
    assert len(graph) > 40 and sum(map(len, graph.values())) > 100  # the parse saw the real package
    assert wrong_way(graph) == []


def test_no_import_cycles():
    assert cycles(import_graph()) == []


def test_the_config_imports_no_layer():
    """``import seq2seq.config`` (what a tool reading configs needs) loads neither torch nor any layer below
    the top, the API included."""
    probe = (
        "import sys, seq2seq.config; "
        "print(sorted(m for m in sys.modules if m == 'torch' or "
        "m.startswith('seq2seq.') and m.split('.')[1] in sys.argv[1:]))"
    )
    layers = [name for name in LAYERS if name]
    result = subprocess.run(
        [sys.executable, "-c", probe, *layers], capture_output=True, text=True, check=True, cwd=PACKAGE.parent
    )
    assert result.stdout.strip() == "[]"
    assert "model" in layers and "api" in layers  # the probe asked about every layer


@pytest.mark.parametrize(
    "graph, expected",
    [
        ({"seq2seq.model.layers": {"seq2seq.decode.search"}}, "seq2seq.model.layers (model) imports"),
        ({"seq2seq.model.layers": {"seq2seq.data.tokenizer"}}, "(model) imports seq2seq.data.tokenizer (data)"),
        ({"seq2seq.config": {"seq2seq.train.trainer"}}, "seq2seq.config (top) imports"),
        ({"seq2seq.train.trainer": {"seq2seq.cli"}}, "imports seq2seq.cli (cli)"),
    ],
)
def test_the_check_sees_a_wrong_way_import(graph, expected):
    (problem,) = wrong_way(graph)
    assert expected in problem


def test_the_check_sees_a_cycle():
    graph = {
        "seq2seq.decode.search": {"seq2seq.decode.constrained"},
        "seq2seq.decode.constrained": {"seq2seq.decode.search"},
    }
    assert cycles(graph) == [["seq2seq.decode.constrained", "seq2seq.decode.search", "seq2seq.decode.constrained"]]
    assert wrong_way(graph) == []  # within one package: only the cycle check catches it
