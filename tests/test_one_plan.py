"""One plan per command (issue 26): `kernelgen validate` plans each config once and each target renders it once,
then compiles and runs those same files; build plans once for sources and binaries alike."""
from __future__ import annotations

import pytest
from click.testing import CliRunner
from builders import toolchain
from conftest import SMALL_UINT8, requires_tool

import kernelgen.api as api
from kernelgen.cli import main
from kernelgen.targets.base import Target

CONFIG = SMALL_UINT8.format(name="counted", bias="")


@pytest.fixture
def counts(monkeypatch):
    """How often the planner and each target's plan-and-render run."""
    seen = {"plan": 0, "build": 0}
    real_plan, real_build = api.plan, Target.build

    def plan(config):
        seen["plan"] += 1
        return real_plan(config)

    def build(self, config, the_plan):
        seen["build"] += 1
        return real_build(self, config, the_plan)

    monkeypatch.setattr(api, "plan", plan)
    monkeypatch.setattr(Target, "build", build)
    return seen


def test_nothing_outside_the_api_calls_the_planner():
    """Targets and the measuring loops take the job they are handed; only api (and `kernelgen plan`, which prints
    the plan, and a sweep's child process, which plans its own variant) call the planner."""
    import ast
    from pathlib import Path

    package = Path(api.__file__).parent
    callers = set()
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.endswith("planner") and \
                    any(alias.name == "plan" for alias in node.names):
                callers.add(str(path.relative_to(package)))
    assert callers == {"api.py", "cli/commands.py", "measure/sweep.py"}


@requires_tool(*toolchain("hvx"))
def test_validate_plans_and_renders_once(counts, tmp_path):
    path = tmp_path / "counted.yaml"
    path.write_text(CONFIG)
    result = CliRunner().invoke(main, ["validate", str(path), "--target", "hvx"])
    assert result.exit_code == 0 and " pass " in result.output, result.output
    assert counts == {"plan": 1, "build": 1}


def test_build_plans_and_renders_once(counts, tmp_path):
    path = tmp_path / "counted.yaml"
    path.write_text(CONFIG)
    result = CliRunner().invoke(main, ["build", str(path), "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert counts == {"plan": 1, "build": 1}
