"""Issue 22: the wheel is what users install. It builds without a warning, holds every template and the JSON
Schema, and a kernelgen run from it (no source tree) writes a starter config whose `$schema` exists and plans."""
import json
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import REPO

SOURCES = ("pyproject.toml", "README.md", "kernelgen", "templates", "schema")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> tuple[Path, str]:
    """The wheel built from a copy of the sources (the checkout keeps no build/ or egg-info from it)."""
    source = tmp_path_factory.mktemp("source")
    for name in SOURCES:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(REPO / name, source / name)
    dist = tmp_path_factory.mktemp("dist")
    # --no-build-isolation: the test extra brings setuptools and wheel, so the build needs no network
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "--no-build-isolation",
                           "-w", str(dist), str(source)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    (built,) = dist.glob("kernelgen-*.whl")
    return built, done.stdout + done.stderr


def test_the_wheel_builds_without_warnings(wheel):
    _, log = wheel
    # setuptools' warnings are Python warnings (BuildBackendWarning, SetuptoolsDeprecationWarning, ...) framed by
    # "!!" banners; "warning: build_py: byte-compiling is disabled" is its note on PYTHONDONTWRITEBYTECODE
    warnings = [line for line in log.splitlines() if re.search(r"[A-Za-z]+Warning\b|^\s*!!", line)]
    assert warnings == [], "\n".join(warnings[:10])


def test_the_wheel_holds_every_template_and_the_schema(repo, wheel):
    built, _ = wheel
    names = set(zipfile.ZipFile(built).namelist())
    templates = {f"kernelgen/templates/{p.relative_to(repo / 'templates').as_posix()}"
                 for p in (repo / "templates").rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    assert len(templates) >= 15 and templates <= names, sorted(templates - names)
    assert "kernelgen/py.typed" in names  # the API's annotations reach type checkers
    schema = zipfile.ZipFile(built).read("kernelgen/schema/kernelgen.schema.json")
    assert json.loads(schema) == json.loads((repo / "schema" / "kernelgen.schema.json").read_text())


def test_init_from_the_wheel_points_at_a_schema_that_exists_and_plans(wheel, tmp_path):
    built, _ = wheel
    site = tmp_path / "site"
    zipfile.ZipFile(built).extractall(site)  # the installed package, without the source tree beside it
    env = {"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"}
    work = tmp_path / "work"
    work.mkdir()

    def kernelgen(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", "import sys, kernelgen.cli; sys.exit(kernelgen.cli.main())", *args],
                              cwd=work, env=env, capture_output=True, text=True, timeout=120)

    done = kernelgen("init", "starter")
    assert done.returncode == 0, done.stderr
    config = work / "configs" / "starter.yaml"
    first = config.read_text().splitlines()[0]
    assert first == "# yaml-language-server: $schema=kernelgen.schema.json"
    schema = json.loads((config.parent / "kernelgen.schema.json").read_text())
    assert schema["title"] and "ops" in schema["properties"]
    check = subprocess.run([sys.executable, "-c", "import kernelgen; print(kernelgen.__file__)"], cwd=work, env=env,
                           capture_output=True, text=True)
    assert check.stdout.startswith(str(site))  # the run above used the wheel, not the checkout
    planned = kernelgen("plan", str(config))
    assert planned.returncode == 0, planned.stderr
    assert "kernelgen plan: starter" in planned.stdout
