"""The layout keeps its promises: imports run one way between the role packages and
never round a cycle, the public API is exactly what it is, and loading the plugin at
pytest start-up imports next to nothing.

The import graph is read from the source (every ``import`` statement, at module
level, inside functions and under ``if TYPE_CHECKING:``), so a function-local
import that reaches upward counts as much as a top-level one.

Type-only imports count for the layers and for cycles alike. They never run, but a
module that names an upper layer's types depends on that layer all the same, and a
cycle closed only by a type-only import is a cycle a later runtime import would make
real. (Two things the reading cannot see: ``importlib.import_module`` with a computed
name, which only the lazy root ``__init__`` and the ``module:attr`` spec loader use,
and implicit parent-package imports, which any ``a.b`` import makes and which are
checked as ``a``'s own imports.)
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

import pytest_sandtable

PACKAGE_DIR = Path(pytest_sandtable.__file__).resolve().parent

# The layers, lowest first, and what each may import of the package (its own layer
# included). The importing module's layer is the first name under the package.
MAY_IMPORT: Mapping[str, tuple[str, ...]] = {
    "domain": ("domain",),
    "sequential": ("sequential",),
    "engine": ("engine", "domain"),
    "report": ("report", "sequential", "engine", "domain"),
    "adapters": ("adapters", "engine", "domain"),
    "authoring": ("authoring", "adapters", "report", "engine", "domain"),
    "serve": ("serve", "engine", "domain"),
    "plugin": ("plugin", "serve", "proxy", "judge", "adapters", "mutate", "sequential", "policy_coverage", "report",
               "telemetry", "engine", "domain"),
    "importer": ("importer", "report", "engine", "domain"),
    "mutate": ("mutate", "policy_coverage", "report", "engine", "domain"),
    "policy_coverage": ("policy_coverage", "report", "engine", "domain"),
    "judge": ("judge", "adapters", "report", "engine", "domain"),
    "proxy": ("proxy", "adapters", "report", "engine", "domain"),
    "telemetry": ("telemetry", "report", "engine", "domain"),
    "cli": ("cli", "authoring", "importer", "mutate", "policy_coverage", "judge", "adapters", "sequential", "report",
            "engine", "domain"),
}

# The root ``__init__`` (the lazy public API) and ``__main__`` sit outside the
# layers: they exist to reach into them, so they are exempt as importers. The root
# is importable from anywhere (``from .. import __version__``): importing any module
# of the package runs the root first anyway, and the root imports nothing at
# import time.
ROOT, MAIN = "", "__main__"

_NOT_PYTEST = ("pytest", "_pytest", "xdist")
_NOT_HTTP = ("anthropic", "httpx")
# Third-party top-level modules a layer must not import: the core runs outside
# pytest (the CLI, a notebook), and only adapters talk to models over HTTP.
FORBIDDEN: Mapping[str, tuple[str, ...]] = {
    "domain": _NOT_PYTEST + _NOT_HTTP,
    "engine": _NOT_PYTEST + _NOT_HTTP,
    "report": _NOT_PYTEST + _NOT_HTTP,
    "adapters": _NOT_PYTEST,
    "authoring": _NOT_PYTEST,
    "serve": _NOT_PYTEST,
    "policy_coverage": _NOT_PYTEST + _NOT_HTTP,
    "sequential": _NOT_PYTEST + _NOT_HTTP,
    "judge": _NOT_PYTEST,
    "proxy": _NOT_PYTEST,
    "telemetry": _NOT_PYTEST + _NOT_HTTP,
}


@dataclass(frozen=True)
class Import:
    """One imported module, resolved to its absolute dotted name."""

    importer: str
    file: str  # the importer's path, as the messages show it
    line: int
    target: str
    type_only: bool

    def where(self) -> str:
        return f"{self.file}:{self.line}: {self.importer}"

    def what(self) -> str:
        return self.target + (" (under TYPE_CHECKING)" if self.type_only else "")


def package_modules(package_dir: Path) -> dict[str, Path]:
    """Every module of the package under ``package_dir``, by dotted name."""
    package = package_dir.name
    found: dict[str, Path] = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = path.relative_to(package_dir).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join((package, *parts))] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_nodes(node: ast.AST, type_only: bool = False) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement in ``node``, and whether only a type checker runs it."""
    if isinstance(node, ast.Import | ast.ImportFrom):
        yield node, type_only
    elif isinstance(node, ast.If) and _is_type_checking(node.test):
        for stmt in node.body:
            yield from _import_nodes(stmt, True)
        for stmt in node.orelse:
            yield from _import_nodes(stmt, type_only)
    else:
        for child in ast.iter_child_nodes(node):
            yield from _import_nodes(child, type_only)


def _known(name: str, modules: Mapping[str, Path]) -> str:
    """The longest prefix of ``name`` that is a module of the package."""
    while name not in modules and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


def _targets(node: ast.Import | ast.ImportFrom, importer: str, modules: Mapping[str, Path]) -> Iterator[str]:
    """The modules one import statement imports; ``from m import x`` imports ``m.x``
    where that is a module of the package, else ``m``."""
    package = importer.split(".")[0]
    if isinstance(node, ast.Import):
        for alias in node.names:
            inside = alias.name.split(".")[0] == package
            yield _known(alias.name, modules) if inside else alias.name
        return
    base = node.module or ""
    if node.level:
        here = importer if modules[importer].name == "__init__.py" else importer.rsplit(".", 1)[0]
        anchor = here.rsplit(".", node.level - 1)[0]  # each level past the first goes one package up
        base = f"{anchor}.{base}" if base else anchor
    if base.split(".")[0] != package:
        yield base
        return
    for alias in node.names:
        yield _known(f"{base}.{alias.name}", modules)


def package_imports(package_dir: Path) -> list[Import]:
    """Every import of every module of the package, in file and line order."""
    modules = package_modules(package_dir)
    found = []
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        file = path.relative_to(package_dir.parent).as_posix()
        for node, type_only in _import_nodes(tree):
            found.extend(Import(name, file, node.lineno, target, type_only)
                         for target in _targets(node, name, modules))
    return sorted(set(found), key=lambda i: (i.file, i.line, i.target))  # set: `from m import a, b`


def layer_of(module: str) -> str:
    """The first name under the package: the layer, or ROOT or MAIN for the shells."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ROOT


def layer_problems(package_dir: Path) -> list[str]:
    """Modules in no layer, imports of a layer the importer's may not import, and
    third-party imports a layer must not make; one line each."""
    package = package_dir.name
    problems = [
        f"{path.relative_to(package_dir.parent).as_posix()}: {name} is in no layer ({', '.join(MAY_IMPORT)})"
        for name, path in package_modules(package_dir).items()
        if layer_of(name) not in (*MAY_IMPORT, ROOT, MAIN)
    ]
    for imp in package_imports(package_dir):
        layer = layer_of(imp.importer)
        if layer not in MAY_IMPORT:
            continue  # a shell, or in no layer (reported above)
        if imp.target.split(".")[0] == package:
            target_layer = layer_of(imp.target)
            if target_layer != ROOT and target_layer not in MAY_IMPORT[layer]:
                problems.append(f"{imp.where()} imports {imp.what()}: "
                                f"{layer} may import only {', '.join(MAY_IMPORT[layer])}")
        elif imp.target.split(".")[0] in FORBIDDEN.get(layer, ()):
            problems.append(f"{imp.where()} imports {imp.what()}: "
                            f"{layer} must not import {', '.join(FORBIDDEN[layer])}")
    return problems


def _strongly_connected(graph: Mapping[str, Mapping[str, Import]]) -> list[list[str]]:
    """Tarjan's strongly connected components of ``graph``, in a stable order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for succ in graph.get(node, {}):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while not component or component[-1] != node:
                component.append(stack.pop())
            components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


def _cycle_through(start: str, graph: Mapping[str, Mapping[str, Import]], members: set[str]) -> list[Import]:
    """The shortest chain of imports from ``start`` back to ``start`` within ``members``."""
    paths: dict[str, list[Import]] = {start: []}
    queue = [start]
    for node in queue:
        for succ, imp in sorted(graph.get(node, {}).items()):
            if succ == start:
                return [*paths[node], imp]
            if succ in members and succ not in paths:
                paths[succ] = [*paths[node], imp]
                queue.append(succ)
    raise AssertionError(f"{start} is in a cycle with no way back")  # Tarjan says there is one


def cycle_problems(package_dir: Path) -> list[str]:
    """One line per import cycle between modules of the package, with the line of
    each import on the way. Of each set of modules that import each other round, the
    shortest cycles that between them pass through every module of the set."""
    package = package_dir.name
    graph: dict[str, dict[str, Import]] = {}
    for imp in package_imports(package_dir):
        inside = imp.target.split(".")[0] == package
        if inside and layer_of(imp.importer) not in (ROOT, MAIN) and imp.target != imp.importer:
            graph.setdefault(imp.importer, {}).setdefault(imp.target, imp)
    problems = []
    for component in sorted(c for c in _strongly_connected(graph) if len(c) > 1):
        covered: set[str] = set()
        for start in component:
            if start in covered:
                continue
            chain = _cycle_through(start, graph, set(component))
            covered.update(imp.importer for imp in chain)
            path = " -> ".join([start, *(imp.target for imp in chain)])
            steps = "; ".join(f"{imp.where()} imports {imp.what()}" for imp in chain)
            problems.append(f"import cycle {path} ({steps})")
    return problems


# --------------------------------------------------------------------------- the package


def test_imports_run_one_way_between_the_layers() -> None:
    problems = layer_problems(PACKAGE_DIR)
    assert not problems, "layering broken:\n" + "\n".join(problems)


def test_only_telemetry_imports_opentelemetry_and_only_lazily() -> None:
    """OpenTelemetry is an optional extra (``otel``): outside ``telemetry/`` nothing imports
    it, and in it only functions do (importing the package never needs it)."""
    found = [f"{imp.where()} imports {imp.what()}" for imp in package_imports(PACKAGE_DIR)
             if imp.target.split(".")[0] == "opentelemetry" and layer_of(imp.importer) != "telemetry"]
    for path in sorted((PACKAGE_DIR / "telemetry").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:  # module level: what importing the module runs
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            found += [f"{path.name}:{node.lineno} imports {n} at module level" for n in names
                      if n.split(".")[0] == "opentelemetry"]
    assert found == []


def test_no_import_cycles_between_modules() -> None:
    problems = cycle_problems(PACKAGE_DIR)
    assert not problems, "\n".join(problems)


# --------------------------------------------------------------------------- the checker


def write_package(root: Path, files: Mapping[str, str]) -> Path:
    """A package ``toy`` under ``root`` from {relative path: source}; a folder without
    an ``__init__.py`` gets an empty one."""
    package_dir = root / "toy"
    for rel, source in files.items():
        path = package_dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source), encoding="utf-8")
    for folder in [package_dir, *(p for p in package_dir.rglob("*") if p.is_dir())]:
        (folder / "__init__.py").touch()
    return package_dir


def test_the_checker_finds_upward_imports_forbidden_libraries_and_stray_modules(tmp_path: Path) -> None:
    toy = write_package(tmp_path, {
        "__init__.py": "from .plugin import hooks\n",  # a shell: exempt
        "__main__.py": "from .cli import main\n",  # a shell: exempt
        "domain/model.py": """\
            from .. import __version__
            from ..domain import files

            def f():
                from ..engine import world  # upward, inside a function
            """,
        "domain/files.py": "",
        "engine/world.py": """\
            from typing import TYPE_CHECKING
            import pytest_sandtable  # another package: not ours, not forbidden
            from ..domain.model import Table
            if TYPE_CHECKING:
                from ..report import summary
            """,
        "report/summary.py": "import httpx\nfrom _pytest.nodes import Item\nfrom ..engine import world\n",
        "adapters/claude.py": "import anthropic\nfrom ..report.summary import summarize\n",
        "cli/main.py": "import toy.plugin.hooks\nfrom ..adapters import claude\n",
        "plugin/hooks.py": "import pytest\nfrom ..cli import main\nfrom ..adapters import claude\n",
        "helpers.py": "",
    })
    assert layer_problems(toy) == [
        "toy/helpers.py: toy.helpers is in no layer (domain, sequential, engine, report, adapters, authoring, serve, "
        "plugin, importer, mutate, policy_coverage, judge, proxy, telemetry, cli)",
        "toy/adapters/claude.py:2: toy.adapters.claude imports toy.report.summary: "
        "adapters may import only adapters, engine, domain",
        "toy/cli/main.py:1: toy.cli.main imports toy.plugin.hooks: cli may import only cli, authoring, importer, "
        "mutate, policy_coverage, judge, adapters, sequential, report, engine, domain",
        "toy/domain/model.py:5: toy.domain.model imports toy.engine.world: domain may import only domain",
        "toy/engine/world.py:5: toy.engine.world imports toy.report.summary (under TYPE_CHECKING): "
        "engine may import only engine, domain",
        "toy/plugin/hooks.py:2: toy.plugin.hooks imports toy.cli.main: plugin may import only plugin, serve, "
        "proxy, judge, adapters, mutate, sequential, policy_coverage, report, telemetry, engine, domain",
        "toy/report/summary.py:1: toy.report.summary imports httpx: "
        "report must not import pytest, _pytest, xdist, anthropic, httpx",
        "toy/report/summary.py:2: toy.report.summary imports _pytest.nodes: "
        "report must not import pytest, _pytest, xdist, anthropic, httpx",
    ]


def test_the_checker_finds_a_cycle_and_names_its_path(tmp_path: Path) -> None:
    toy = write_package(tmp_path, {
        "plugin/__init__.py": """\
            from .artifacts import register

            def hook():
                from .items import DomainFile
            """,
        "plugin/items.py": "from . import run_state\n",
        "plugin/artifacts.py": "def register():\n    from . import _K\n",
        "engine/a.py": "from .b import x\n",
        "engine/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .c import y\n",
        "engine/c.py": "from . import a\n",
        "engine/d.py": "from . import d\nfrom .a import x\n",  # a self-import is no cycle; d is outside it
    })
    assert cycle_problems(toy) == [
        "import cycle toy.engine.a -> toy.engine.b -> toy.engine.c -> toy.engine.a ("
        "toy/engine/a.py:1: toy.engine.a imports toy.engine.b; "
        "toy/engine/b.py:3: toy.engine.b imports toy.engine.c (under TYPE_CHECKING); "
        "toy/engine/c.py:1: toy.engine.c imports toy.engine.a)",
        # one set of modules, two cycles: between them they name every module of the set
        "import cycle toy.plugin -> toy.plugin.artifacts -> toy.plugin ("
        "toy/plugin/__init__.py:1: toy.plugin imports toy.plugin.artifacts; "
        "toy/plugin/artifacts.py:2: toy.plugin.artifacts imports toy.plugin)",
        "import cycle toy.plugin.items -> toy.plugin -> toy.plugin.items ("
        "toy/plugin/items.py:1: toy.plugin.items imports toy.plugin; "
        "toy/plugin/__init__.py:4: toy.plugin imports toy.plugin.items)",
    ]
    assert layer_problems(toy) == []


def test_the_checker_passes_a_clean_package(tmp_path: Path) -> None:
    toy = write_package(tmp_path, {
        "domain/model.py": "import re\nimport yaml\n",
        "engine/trial.py": "from ..domain import model\nfrom ..domain.model import Task\n",
        "report/text.py": "from .. import __version__\n"
                          "from ..domain.model import Task\nfrom ..engine.trial import run\n",
        "adapters/http.py": "import httpx\nfrom ..engine import trial\n",
        "plugin/__init__.py": "import pytest\nfrom ..adapters import http\nfrom ..report import text\n",
        "cli/__init__.py": "from . import runs\n",
        "cli/runs.py": "from ..report.text import failure\n",
    })
    assert (layer_problems(toy), cycle_problems(toy)) == ([], [])


# --------------------------------------------------------------------------- the public API

PUBLIC_API = [
    "Agent",
    "AgentError",
    "Domain",
    "DomainError",
    "HandlerContext",
    "ReferenceAgent",
    "ScriptedUser",
    "ToolError",
    "ToolResult",
    "ToolSpec",
    "TrialInfo",
    "TrialResult",
    "Turn",
    "Usage",
    "UserError",
    "UserReply",
    "UserTurn",
    "WorldHandle",
    "__version__",
    "arun_trial",
    "load_domain",
    "run_trial",
    "summarize",
]


def test_the_public_api_is_exactly_these_names_and_each_resolves() -> None:
    assert pytest_sandtable.__all__ == PUBLIC_API
    assert dir(pytest_sandtable) == PUBLIC_API
    assert [name for name in PUBLIC_API if not hasattr(pytest_sandtable, name)] == []


# --------------------------------------------------------------------------- start-up cost

# What importing the plugin may add to a process that has imported pytest.
STARTUP_MODULES = {"pytest_sandtable", "pytest_sandtable.plugin", "pytest_sandtable.plugin.config"}
STARTUP_LIBRARIES = set(sys.stdlib_module_names) | {"pytest", "_pytest", "pluggy", "iniconfig", "packaging"}

NEW_MODULES = """\
import json, sys
import pytest
before = set(sys.modules)
import pytest_sandtable.plugin
print(json.dumps(sorted(set(sys.modules) - before)))
"""


def test_importing_the_plugin_imports_next_to_nothing(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-c", NEW_MODULES], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60, check=True)
    new = set(json.loads(proc.stdout))
    ours = {m for m in new if m.split(".")[0] == "pytest_sandtable"}
    assert sorted(ours - STARTUP_MODULES) == []
    assert sorted(m for m in new - ours if m.split(".")[0] not in STARTUP_LIBRARIES) == []


# A project that has the plugin but no domain files pays for none of the machinery:
# no report, no adapter, none of the libraries they and the loader need. (The engine's
# stdlib-only helpers may load: the report header names the agent through one.)
RECORD_MODULES = """\
import json, sys

def pytest_unconfigure(config):
    with open("modules.json", "w") as f:
        json.dump(sorted(sys.modules), f)
"""
UNUSED_LAYERS = ("report", "adapters", "cli")
UNUSED_LIBRARIES = ("yaml", "jsonschema", "tabulate", "httpx", "anthropic")


def test_a_run_without_domain_files_loads_no_machinery(pytester: pytest.Pytester,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    # the plugin by -p alone, so that no other installed plugin pulls anything in
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makeconftest(RECORD_MODULES)
    pytester.makepyfile(test_plain="def test_plain():\n    assert True\n")
    result = pytester.runpytest_subprocess("-p", "pytest_sandtable.plugin", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    loaded = json.loads(pytester.path.joinpath("modules.json").read_text(encoding="utf-8"))
    assert [m for m in loaded if m.split(".")[0] == "pytest_sandtable" and layer_of(m) in UNUSED_LAYERS] == []
    assert [m for m in loaded if m.split(".")[0] in UNUSED_LIBRARIES] == []
