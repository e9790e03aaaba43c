"""The package's shape, kept by tests: a core that never imports a target, one folder per
target, no import cycle, no oversized module (STYLE.md, issue "one folder per target")."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "kernelgen"
MAX_LINES = 450
# Outside kernelgen/targets/, only these import a target's code (kernelgen/registry.py names them as text only).
REGISTRY_USERS = {"kernelgen.cli.commands", "kernelgen.api", "kernelgen.__main__"}
# The public API sits above everything but the command line and the package itself: only these import it.
API = "kernelgen.api"
ABOVE_API = ("kernelgen", "kernelgen.__main__", "kernelgen.cli")


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


MODULES = _modules()


def _imports(name: str) -> set[str]:
    return _imports_of(name, MODULES[name])


def _imports_of(name: str, path: Path) -> set[str]:
    """kernelgen modules `name` (whose source is `path`) imports anywhere in its file (function-level imports too);
    `from .. import api` counts as an import of the module kernelgen.api."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            candidates = [module] + [f"{module}.{alias.name}" for alias in node.names]
        else:
            continue
        for candidate in candidates:
            while candidate and candidate not in MODULES:
                candidate = candidate.rpartition(".")[0]
            if candidate and candidate != name:
                targets.add(candidate)
    return targets


GRAPH = {name: _imports(name) for name in MODULES}


def test_every_bundled_target_is_a_package_of_its_own():
    for target in ("c", "hvx", "opencl", "vulkan"):
        assert (PACKAGE / "targets" / target / "__init__.py").is_file(), target


def test_no_import_cycle():
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(name: str, path: list[str]) -> None:
        state[name] = 1
        for nxt in sorted(GRAPH[name]):
            if state.get(nxt) == 1:
                pytest.fail("import cycle: " + " -> ".join(path[path.index(nxt):] + [name, nxt]))
            if nxt not in state:
                visit(nxt, path + [name])
        state[name] = 2

    for name in sorted(GRAPH):
        if name not in state:
            visit(name, [])


def test_the_core_never_imports_a_target():
    offenders = {name: sorted(t for t in deps if t.startswith("kernelgen.targets"))
                 for name, deps in GRAPH.items() if not name.startswith("kernelgen.targets")
                 and name not in REGISTRY_USERS}
    assert {k: v for k, v in offenders.items() if v} == {}


def _is_above_api(name: str) -> bool:
    return name in ABOVE_API or name.startswith("kernelgen.cli.")


def test_nothing_below_the_api_imports_it():
    """However spelled: `import kernelgen.api`, `from .. import api`, `from ..api import x`, `from kernelgen import
    api`, at module level or inside a function."""
    assert sorted(name for name, deps in GRAPH.items() if API in deps and not _is_above_api(name)) == []


@pytest.mark.parametrize("source", ["import kernelgen.api", "from .. import api", "from ..api import TARGETS",
                                    "from kernelgen import api", "def f():\n    from kernelgen.api import jobs"])
def test_every_spelling_of_an_import_of_the_api_is_seen(source, tmp_path):
    path = tmp_path / "context.py"
    path.write_text(source + "\n", encoding="utf-8")
    assert API in _imports_of("kernelgen.measure.context", path)


def test_no_module_is_oversized():
    sizes = {name: len(path.read_text(encoding="utf-8").splitlines()) for name, path in MODULES.items()}
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}


def test_no_name_in_a_package_hides_one_of_its_modules():
    """`import kernelgen.x.y` must give the module y: a function of the same name bound in x's __init__ (as the
    API's `plan` once hid plan.py, and the planner's `geometry` hid geometry.py) makes `kernelgen.x.y` that function
    after the first import, whatever imported the module."""
    import importlib
    import pkgutil
    import types

    import kernelgen

    hidden = []
    for info in pkgutil.walk_packages(kernelgen.__path__, "kernelgen."):
        if "templates" in info.name or info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        parent, _, leaf = info.name.rpartition(".")
        if getattr(importlib.import_module(parent), leaf) is not module:
            hidden.append(info.name)
    assert hidden == []
