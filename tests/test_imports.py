"""The tree is the architecture: imports run one way, down the deployment, and never in a circle.

Layers, top to bottom: ``wiring`` -> ``lifecycle`` -> ``stack`` -> ``hardening`` -> ``operations`` -> ``workloads`` ->
``platform`` -> ``gcp`` -> ``tpu``
-> the shared helpers (``config_base``, ``naming``, ``manifests``, ``resources``). A module may import
its own layer and the layers below it; the workload folders do not import each other; the pure
modules (config, rules, objects, the TPU model, the shared helpers but ``resources``) import no Pulumi.
Type-only imports (under ``if TYPE_CHECKING:``) count like any other.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import PROJECT_ROOT

LAYERS = ("wiring", "lifecycle", "stack", "hardening", "operations", "workloads", "platform", "gcp", "tpu", "shared")
SHARED = ("config_base", "naming", "manifests", "resources")
PURE_ROLES = ("config", "rules", "objects")
IMPURE_SHARED = ("resources",)  # the Pulumi helpers the components share


def modules(root: Path, package: str) -> dict[str, Path]:
    """Dotted module name -> file, for every module of ``package`` under ``root`` (packages by __init__)."""
    found = {}
    for path in sorted((root / package.replace(".", "/")).rglob("*.py")):
        if {"node_modules", ".venv"} & set(path.parts):
            continue  # installed tools (Renovate's node, the policy pack's venv) are not ours
        parts = path.relative_to(root).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def imports_of(path: Path, name: str, known: set[str]) -> set[str]:
    """Every module of ``known`` that the file imports, at any depth (``from a import b`` means a.b if it is one)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                targets.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
    return {t for t in targets if t in known and t != name}


def import_graph(root: Path, package: str = "components") -> dict[str, set[str]]:
    found = modules(root, package)
    return {name: imports_of(path, name, set(found)) for name, path in found.items()}


def layer_of(name: str, package: str = "components") -> str:
    head = name.removeprefix(f"{package}.").split(".")[0]
    if head in SHARED:
        return "shared"
    if head in LAYERS:
        return head
    raise AssertionError(f"{name} belongs to no layer; add its folder to LAYERS in tests/test_imports.py")


def upward_imports(graph: dict[str, set[str]], package: str = "components") -> list[str]:
    problems = []
    for module, targets in sorted(graph.items()):
        if module == package:
            continue
        rank = LAYERS.index(layer_of(module, package))
        for target in sorted(targets):
            if LAYERS.index(layer_of(target, package)) < rank:
                problems.append(f"{module} imports {target}, a layer above it")
            elif layer_of(module, package) == layer_of(target, package) == "shared":
                problems.append(f"{module} imports {target}: the shared helpers stand alone")
    return problems


def sibling_workload_imports(graph: dict[str, set[str]], package: str = "components") -> list[str]:
    def folder(name: str) -> str | None:
        parts = name.removeprefix(f"{package}.").split(".")
        return parts[1] if parts[0] == "workloads" and len(parts) > 2 else None

    return [
        f"{module} imports {target}, another workload"
        for module, targets in sorted(graph.items())
        for target in sorted(targets)
        if folder(module) and folder(target) and folder(module) != folder(target)
    ]


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every import circle, each once, as the list of modules around it."""
    found: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                found.append([*path[path.index(target) :], target])
            elif target not in state:
                visit(target)
        path.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return found


def run_time_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The import graph as Python runs it: importing ``a.b.c`` also runs the packages ``a`` and ``a.b``."""
    return {
        name: targets
        | {p for p in (".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)) if p in graph}
        for name, targets in graph.items()
    }


def is_pure(name: str, package: str = "components") -> bool:
    """Config, rules and objects modules, the TPU model and the shared helpers but ``resources``."""
    if name == package:
        return False
    parts = name.removeprefix(f"{package}.").split(".")
    return parts[0] == "tpu" or parts[-1] in PURE_ROLES or (parts[0] in SHARED and parts[0] not in IMPURE_SHARED)


def _pulumi_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    return {n for n in names if n.split(".")[0].startswith("pulumi")}


def impure_modules(root: Path, package: str = "components") -> list[str]:
    problems = []
    for name, path in modules(root, package).items():
        if is_pure(name, package):
            problems += [f"{name} imports {n}" for n in sorted(_pulumi_imports(path))]
    return problems


def loaded_with(run_graph: dict[str, set[str]], module: str) -> set[str]:
    """Every module Python runs to import ``module`` (``run_graph`` from ``run_time_graph``), at any depth."""
    seen: set[str] = set()
    todo = [module]
    while todo:
        name = todo.pop()
        if name not in seen and name in run_graph:
            seen.add(name)
            todo += run_graph[name]
    return seen


def pure_modules_that_load_pulumi(root: Path, package: str = "components") -> list[str]:
    """A pure module is pure only if nothing Python runs to import it imports Pulumi: a package
    ``__init__`` that re-exports a component drags Pulumi into every module below it."""
    found = modules(root, package)
    run_graph = run_time_graph(import_graph(root, package))
    problems = []
    for name in sorted(found):
        if not is_pure(name, package):
            continue
        culprits = [m for m in loaded_with(run_graph, name) if m != name and _pulumi_imports(found[m])]
        if culprits:
            problems.append(f"importing {name} runs {', '.join(sorted(culprits))}, which import Pulumi")
    return problems


# --- The real tree ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph(PROJECT_ROOT)


def test_every_module_has_a_layer(graph):
    for module in graph:
        if module != "components":
            layer_of(module)


def test_imports_run_down_the_deployment(graph):
    assert upward_imports(graph) == []


def test_no_import_cycle(graph):
    assert cycles(graph) == []


def test_no_import_cycle_at_run_time(graph):
    """A package ``__init__`` that imports its own children closes a circle with every child it imports."""
    assert cycles(run_time_graph(graph)) == []


def test_workload_folders_do_not_import_each_other(graph):
    assert sibling_workload_imports(graph) == []


def test_no_block_imports_the_root(graph):
    importers = {module for module, targets in graph.items() if "components.stack" in targets}
    assert importers == {"components.wiring", "components.lifecycle"}


def test_pure_modules_import_no_pulumi():
    assert impure_modules(PROJECT_ROOT) == []


def test_nothing_a_pure_module_loads_imports_pulumi():
    assert pure_modules_that_load_pulumi(PROJECT_ROOT) == []


# Run in a fresh interpreter: any import of pulumi, pulumi_gcp, pulumi_kubernetes ... raises, and each pure
# module is imported on its own (sys.modules emptied of components between them), so one module cannot
# hide what another loads.
PURE_IMPORT_PROBE = textwrap.dedent(
    """
    import importlib, importlib.abc, json, sys

    class NoPulumi(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0].startswith("pulumi"):
                raise ImportError(f"{name} may not be imported by a pure module")
            return None

    sys.meta_path.insert(0, NoPulumi())
    failures = {}
    for module in json.load(sys.stdin):
        for loaded in [m for m in sys.modules if m == "components" or m.startswith("components.")]:
            del sys.modules[loaded]
        try:
            importlib.import_module(module)
        except Exception as error:
            failures[module] = f"{type(error).__name__}: {error}"
    loaded = sorted(m for m in sys.modules if m.split(".")[0].startswith("pulumi"))
    json.dump({"failures": failures, "pulumi_loaded": loaded}, sys.stdout)
    """
)


def probe_pure_imports(root: Path, names: list[str]) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", PURE_IMPORT_PROBE],
        input=json.dumps(names),
        capture_output=True,
        text=True,
        cwd=root,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_pure_modules_load_without_pulumi_in_a_fresh_interpreter():
    names = [name for name in modules(PROJECT_ROOT, "components") if is_pure(name)]
    assert {"components.workloads.serving.config", "components.gcp.config", "components.tpu.topology"} <= set(names)
    assert probe_pure_imports(PROJECT_ROOT, names) == {"failures": {}, "pulumi_loaded": []}


# --- The checks fail when the rule is broken (a small tree of the same shape) ----------------


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for relative, text in {"components/__init__.py": "", **files}.items():
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_an_upward_import_is_found(tmp_path):
    root = _tree(
        tmp_path,
        {
            "components/gcp/__init__.py": "",
            "components/gcp/config.py": "from components.platform.config import QueuesConfig\n",
            "components/platform/__init__.py": "",
            "components/platform/config.py": "from components.gcp import config\n",
        },
    )
    assert upward_imports(import_graph(root)) == [
        "components.gcp.config imports components.platform.config, a layer above it"
    ]


def test_a_type_only_cycle_is_found(tmp_path):
    root = _tree(
        tmp_path,
        {
            "components/stack.py": "from components.workloads.serving import config\n",
            "components/workloads/__init__.py": "",
            "components/workloads/serving/__init__.py": "",
            "components/workloads/serving/config.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from components.stack import StackConfig\n"
            ),
        },
    )
    graph = import_graph(root)
    assert cycles(graph) == [["components.stack", "components.workloads.serving.config", "components.stack"]]
    assert "components.workloads.serving.config imports components.stack, a layer above it" in upward_imports(graph)


def test_a_sibling_workload_import_and_pulumi_in_a_pure_module_are_found(tmp_path):
    root = _tree(
        tmp_path,
        {
            "components/workloads/__init__.py": "",
            "components/workloads/saxml/__init__.py": "",
            "components/workloads/saxml/objects.py": "import pulumi\nfrom components.workloads.serving.rules import x\n",
            "components/workloads/serving/__init__.py": "",
            "components/workloads/serving/rules.py": "x = 1\n",
        },
    )
    assert sibling_workload_imports(import_graph(root)) == [
        "components.workloads.saxml.objects imports components.workloads.serving.rules, another workload"
    ]
    assert impure_modules(root) == ["components.workloads.saxml.objects imports pulumi"]


def test_a_package_that_re_exports_a_component_is_found(tmp_path):
    root = _tree(
        tmp_path,
        {
            "components/workloads/__init__.py": "from components.workloads.serving.component import Serving\n",
            "components/workloads/serving/__init__.py": "",
            "components/workloads/serving/config.py": "X = 1\n",
            "components/workloads/serving/component.py": "import pulumi\nfrom components.workloads.serving import config\n",
        },
    )
    assert impure_modules(root) == []  # no pure file imports Pulumi itself
    circles = cycles(run_time_graph(import_graph(root)))
    assert ["components.workloads", "components.workloads.serving.component", "components.workloads"] in circles
    assert cycles(import_graph(root)) == []  # the circle exists only as Python runs the packages
    assert pure_modules_that_load_pulumi(root) == [
        "importing components.workloads.serving.config runs components.workloads.serving.component, which import Pulumi"
    ]
    result = probe_pure_imports(root, ["components.workloads.serving.config"])
    assert result["pulumi_loaded"] == []
    failures = result["failures"]
    assert isinstance(failures, dict)
    assert "may not be imported by a pure module" in failures["components.workloads.serving.config"]


# --- The top-level packages -------------------------------------------------------------------
#
# components/ is the program; policy/ the resource rules it is held to; tools/ what an operator runs (make render,
# verify, bench, sax, images, schemas, charts...); harness/ what runs the program and its tools without the cloud
# (the mock engine, its model of Google Cloud, the labs' stand-ins and benches); tests/ the suite. Each package may
# import the packages named here, and the two crossings between tools/ and harness/ go through one module each: the
# offline render (tools.render) is the program run under the harness's mocks, so it imports the harness; the
# harness reads stack files as operators' tools do, through tools.stack_file. The docs' CIS table is written from the
# pack's registry, so tools.cis_table alone imports policy/, and only policy.cis. The harness's model of what
# NetworkPolicies admit (harness.gke_network) selects the pods they isolate as the pack's rule does, so it alone
# imports policy/, and only policy.network. Nothing but tests/ imports tests/.
PACKAGES = ("components", "policy", "harness", "tools", "tests")
MAY_IMPORT = {
    "components": {"components"},
    "policy": {"policy", "components"},
    "harness": {"harness", "components", "tools", "policy"},
    "tools": {"tools", "components", "harness", "policy"},
    "tests": set(PACKAGES),
}
ONLY_THROUGH = {
    ("tools", "harness"): ("tools.render", None),
    ("harness", "tools"): (None, "tools.stack_file"),
    ("tools", "policy"): ("tools.cis_table", "policy.cis"),
    ("harness", "policy"): ("harness.gke_network", "policy.network"),
}


def package_graph(root: Path) -> dict[str, set[str]]:
    """The import graph of every module of the top-level packages (tests/ at any depth)."""
    found = {name: path for package in PACKAGES for name, path in modules(root, package).items()}
    return {name: imports_of(path, name, set(found) | set(PACKAGES)) for name, path in found.items()}


def package_crossings(graph: dict[str, set[str]]) -> list[str]:
    problems = []
    for module, targets in sorted(graph.items()):
        source = module.split(".")[0]
        for target in sorted(targets):
            into = target.split(".")[0]
            if into not in MAY_IMPORT[source]:
                problems.append(f"{module} imports {target}: {source}/ does not import {into}/")
            elif (source, into) in ONLY_THROUGH:
                importer, imported = ONLY_THROUGH[source, into]
                if module != (importer or module) or target != (imported or target):
                    through = f"only {importer} imports {into}/" if importer else f"{source}/ imports only {imported}"
                    problems.append(f"{module} imports {target}: {through}")
    return problems


def test_the_packages_import_one_way():
    graph = package_graph(PROJECT_ROOT)
    assert {"harness.mock_engine", "tools.render", "tools.stack_file"} <= set(graph)
    assert package_crossings(graph) == []


def test_a_crossing_of_the_packages_is_found(tmp_path):
    root = _tree(
        tmp_path,
        {
            "components/naming.py": "from tools import render\n",
            "harness/__init__.py": "",
            "harness/mock_engine.py": "from tools.stack_file import X\nfrom tests.conftest import run_stack\n",
            "harness/gcp_model.py": "from tools import render\n",
            "tools/__init__.py": "",
            "tools/render.py": "from harness.mock_engine import run_program\n",
            "tools/stack_file.py": "X = 1\n",
            "tools/verify.py": "from harness import mock_engine\n",
            "tests/conftest.py": "from harness.mock_engine import run_program\nfrom tools import render\n",
        },
    )
    assert package_crossings(package_graph(root)) == [
        "components.naming imports tools.render: components/ does not import tools/",
        "harness.gcp_model imports tools.render: harness/ imports only tools.stack_file",
        "harness.mock_engine imports tests.conftest: harness/ does not import tests/",
        "tools.verify imports harness.mock_engine: only tools.render imports harness/",
    ]
