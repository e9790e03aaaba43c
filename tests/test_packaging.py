"""Issue 22: the wheel is what users install. It builds without a warning, holds every template and the JSON
Schema, and a kernelgen run from it (no source tree) writes a starter config whose `$schema` exists and plans.
Issue 33: an editable install (`make demo`'s) prints no warning either, and a checkout runs with its own templates,
installed or not (kernelgen/templates and kernelgen/schema are links to the top-level folders)."""
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
from conftest import REPO, requires_tool

# Each test builds a wheel, an editable install or a fresh checkout copy and runs kernelgen from it in a child
# process (seconds of pip and interpreter start-up each): slow.
pytestmark = pytest.mark.slow

SOURCES = ("pyproject.toml", "README.md", "kernelgen", "templates", "schema")
MARK = "/* this checkout's template */"


def _source_copy(root: Path, configs: tuple[str, ...] = ()) -> Path:
    """The sources as a clone has them (links kept as links), `configs` beside them, and a mark in the c kernel's
    template that tells this copy's templates from any other kernelgen's."""
    root.mkdir(parents=True, exist_ok=True)
    for name in SOURCES:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, root / name, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(REPO / name, root / name)
    (root / "configs").mkdir()
    for name in configs:
        shutil.copy2(REPO / "configs" / name, root / "configs" / name)
    template = root / "templates" / "c" / "kernel.c.j2"
    template.write_text(template.read_text() + MARK + "\n")
    return root


def _without_pythonpath() -> dict[str, str]:
    """This environment, but nothing on PYTHONPATH ahead of what the test installs."""
    return {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}


def _warnings(log: str) -> list[str]:
    # setuptools' warnings are Python warnings (BuildBackendWarning, SetuptoolsDeprecationWarning, ...) framed by
    # "!!" banners; "warning: build_py: byte-compiling is disabled" is its note on PYTHONDONTWRITEBYTECODE
    return [line for line in log.splitlines() if re.search(r"[A-Za-z]+Warning\b|^\s*!!", line)]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> tuple[Path, str]:
    """The wheel built from a copy of the sources (the checkout keeps no build/ or egg-info from it)."""
    source = _source_copy(tmp_path_factory.mktemp("wheel") / "source")
    dist = tmp_path_factory.mktemp("dist")
    # --no-build-isolation: the test extra brings setuptools and wheel, so the build needs no network
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "--no-build-isolation",
                           "-w", str(dist), str(source)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    (built,) = dist.glob("kernelgen-*.whl")
    return built, done.stdout + done.stderr


def test_the_wheel_builds_without_warnings(wheel):
    _, log = wheel
    warnings = _warnings(log)
    assert warnings == [], "\n".join(warnings[:10])


def test_the_wheel_holds_every_template_and_the_schema(repo, wheel):
    built, _ = wheel
    names = set(zipfile.ZipFile(built).namelist())
    templates = {f"kernelgen/templates/{p.relative_to(repo / 'templates').as_posix()}"
                 for p in (repo / "templates").rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    assert len(templates) >= 15 and templates <= names, sorted(templates - names)
    # every module and data file of the package (rglob does not follow the links to templates/ and schema/)
    package = {p.relative_to(repo).as_posix() for p in (repo / "kernelgen").rglob("*")
               if p.is_file() and "__pycache__" not in p.parts}
    assert len(package) >= 100 and package <= names, sorted(package - names)
    assert "kernelgen/py.typed" in names  # the API's annotations reach type checkers
    schema = zipfile.ZipFile(built).read("kernelgen/schema/kernelgen.schema.json")
    assert json.loads(schema) == json.loads((repo / "schema" / "kernelgen.schema.json").read_text())


def test_init_from_the_wheel_points_at_a_schema_that_exists_and_plans_and_builds(wheel, tmp_path):
    built, _ = wheel
    site = tmp_path / "site"
    zipfile.ZipFile(built).extractall(site)  # the installed package, without the source tree beside it
    # -S: no .pth of this environment runs, so an editable kernelgen installed here cannot fill in what the wheel
    # lacks; the dependencies come from this environment's site-packages, after the wheel
    paths = dict.fromkeys([str(site), sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    env = {"PYTHONPATH": ":".join(paths), "PATH": "/usr/bin:/bin"}
    work = tmp_path / "work"
    work.mkdir()

    def kernelgen(*args: str) -> subprocess.CompletedProcess[str]:
        main = "import sys, kernelgen.cli; sys.exit(kernelgen.cli.main())"
        return subprocess.run([sys.executable, "-S", "-c", main, *args], cwd=work, env=env, capture_output=True,
                              text=True, timeout=120)

    done = kernelgen("init", "starter")
    assert done.returncode == 0, done.stderr
    config = work / "configs" / "starter.yaml"
    first = config.read_text().splitlines()[0]
    assert first == "# yaml-language-server: $schema=kernelgen.schema.json"
    schema = json.loads((config.parent / "kernelgen.schema.json").read_text())
    assert schema["title"] and "ops" in schema["properties"]
    check = subprocess.run([sys.executable, "-S", "-c", "import kernelgen; print(kernelgen.__file__)"], cwd=work, env=env,
                           capture_output=True, text=True)
    assert check.stdout.startswith(str(site))  # the run above used the wheel, not the checkout
    planned = kernelgen("plan", str(config))
    assert planned.returncode == 0, planned.stderr
    assert "kernelgen plan: starter" in planned.stdout
    shutil.copy2(REPO / "configs" / "seed000_3x3.yaml", config.parent)
    built = kernelgen("build", "configs/seed000_3x3.yaml", "-o", "out")
    assert built.returncode == 0, built.stderr
    assert MARK in (work / "out" / "seed000_3x3" / "c" / "seed000_3x3.c").read_text()  # the wheel's templates


def test_the_editable_install_prints_no_warning_and_runs_on_the_checkouts_templates(tmp_path):
    """`make demo`'s `pip install -e .`, into a venv of its own: setuptools warns of "folders in your working
    directory with the same name as your package" whenever the package folders are not where their import names
    put them (a package-dir mapping of kernelgen.templates); laid out plainly, the install is one .pth naming the
    checkout, and kernelgen run from elsewhere reads the checkout's templates."""
    source = _source_copy(tmp_path / "source", ("seed000_3x3.yaml",))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    (site,) = (venv / "lib").glob("python*/site-packages")
    # kernelgen's dependencies (and setuptools for the build) from this interpreter's environment, after the install
    (site / "zz_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-v", "--no-deps",
                           "--no-build-isolation", "--no-index", "-e", str(source)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    warnings = _warnings(done.stdout + done.stderr)
    assert warnings == [], "\n".join(warnings[:10])
    assert [p.name for p in site.glob("__editable__*")] == ["__editable__.kernelgen-0.1.0.pth"]  # no finder module
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    built = subprocess.run([str(python), "-m", "kernelgen", "build", str(source / "configs" / "seed000_3x3.yaml"),
                            "-o", "out"], cwd=elsewhere, env=_without_pythonpath(), capture_output=True, text=True,
                           timeout=300)
    assert built.returncode == 0, built.stdout + built.stderr
    assert MARK in (elsewhere / "out" / "seed000_3x3" / "c" / "seed000_3x3.c").read_text()


def test_python_m_kernelgen_in_a_checkout_runs_on_its_own_templates(tmp_path):
    """`python -m kernelgen` in a checkout that was never installed (the checkout on sys.path): the templates are
    the checkout's top-level templates/, never a missing kernelgen.templates, nor another install's templates."""
    source = _source_copy(tmp_path / "source", ("seed000_3x3.yaml",))
    built = subprocess.run([sys.executable, "-m", "kernelgen", "build", "configs/seed000_3x3.yaml", "-o", "out"],
                           cwd=source, env=_without_pythonpath(), capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stdout + built.stderr
    assert MARK in (source / "out" / "seed000_3x3" / "c" / "seed000_3x3.c").read_text()


@requires_tool("cmake", "ninja")
def test_the_wheel_installs_a_cmake_package_that_finds_its_own_kernelgen(wheel, tmp_path):
    """Issue 34: `pip install` of the wheel into a fresh venv; `kernelgen --cmake-dir`, run from another folder, names
    the package's CMake folder, and find_package(kernelgen) there finds that venv's kernelgen command by itself (it
    is not on PATH), which checks out as belonging to the package."""
    built, _ = wheel
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    (site,) = (venv / "lib").glob("python*/site-packages")
    (site / "zz_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")  # kernelgen's dependencies
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install",
                           "--no-deps", "--no-index", str(built)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**_without_pythonpath(), "PATH": "/usr/bin:/bin"}
    printed = subprocess.run([str(venv / "bin" / "kernelgen"), "--cmake-dir"], cwd=elsewhere, env=env,
                             capture_output=True, text=True, timeout=120)
    assert printed.returncode == 0, printed.stderr
    folder = Path(printed.stdout.strip())
    assert folder == (site / "kernelgen" / "cmake").resolve()
    assert {"kernelgenConfig.cmake", "kernelgenConfigVersion.cmake"} <= {p.name for p in folder.iterdir()}
    (elsewhere / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.20)\nproject(p NONE)\nfind_package(kernelgen 0.1 CONFIG REQUIRED)\n"
        'message(STATUS "kernelgen ${kernelgen_VERSION}: ${KERNELGEN_EXECUTABLE}")\n')
    configured = subprocess.run(["cmake", "-S", str(elsewhere), "-B", str(elsewhere / "build"), "-G", "Ninja",
                                 f"-Dkernelgen_DIR={printed.stdout.strip()}"], env=env, capture_output=True,
                                text=True, timeout=300)
    assert configured.returncode == 0, configured.stdout + configured.stderr
    assert f"kernelgen 0.1.0: {venv / 'bin' / 'kernelgen'}" in " ".join(configured.stdout.split()), configured.stdout
