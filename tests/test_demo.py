"""Issue 22: a newcomer's `make demo` on a machine with Python and a C compiler only.

A clean clone, a PATH without glslang, the SPIR-V tools, QEMU or clang: the demo builds every config (sources
only for Vulkan), plans, validates a representative set of them (make demo-all: every one) with what it has and
names, in one line per skipped target, what to install."""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

# The GPU/DSP toolchains a fresh machine does not have.
ABSENT = re.compile(r"^(glslang|spirv-|qemu-|clang|ld\.lld|lld|llvm-)")


def _path_without_toolchains(bin_dir: Path) -> str:
    """A single folder of links to every program on PATH except the toolchains above."""
    bin_dir.mkdir()
    for folder in os.environ.get("PATH", "/usr/bin:/bin").split(os.pathsep):
        if not os.path.isdir(folder):
            continue
        for name in sorted(os.listdir(folder)):
            link, program = bin_dir / name, Path(folder) / name
            if ABSENT.match(name) or link.exists() or not (program.is_file() and os.access(program, os.X_OK)):
                continue
            link.symlink_to(program.resolve())
    return str(bin_dir)


@pytest.mark.slow
def test_make_demo_from_a_clean_clone_without_gpu_or_dsp_toolchains(tmp_path):
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout: no clean clone to make")  # an unpacked sdist; CI always has one
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True, timeout=120)
    path = _path_without_toolchains(tmp_path / "bin")
    for tool in ("glslangValidator", "spirv-val", "qemu-hexagon", "clang-19"):
        assert shutil.which(tool, path=path) is None
    assert shutil.which("cc", path=path) or shutil.which("gcc", path=path)
    # The interpreter itself, not a pyenv shim or this test's venv: the demo makes its own .venv.
    python = getattr(sys, "_base_executable", sys.executable)
    env = {**os.environ, "PATH": path}
    env.pop("KERNELGEN_REQUIRE_TOOLCHAINS", None)  # the demo skips what is missing; the test suite never does
    done = subprocess.run(["make", "demo", f"PYTHON={python}"], cwd=clone, env=env, capture_output=True, text=True,
                          timeout=1500)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    # issue 33: no warning anywhere, the editable install's included (setuptools' come framed by "!!" banners)
    warnings = [line for line in output.splitlines() if re.search(r"[A-Za-z]+Warning\b|^\s*!!", line)]
    assert warnings == [], "\n".join(warnings[:10])
    assert "vulkan: glslangValidator not found, wrote the GLSL sources only" in output
    assert list((clone / "out" / "seed002_vulkan" / "vulkan").glob("*.comp"))
    assert not list((clone / "out").rglob("*.spv"))
    assert "kernelgen plan: seed000_3x3" in output
    rows = [line.split() for line in done.stdout.splitlines() if re.match(r"^[a-z][a-z0-9_]* +(c|hvx|opencl|vulkan) ", line)]
    assert rows and all(row[2] in ("pass", "skipped") for row in rows), [r for r in rows if r[2] not in ("pass", "skipped")]
    assert {row[1] for row in rows if row[2] == "pass"} >= {"c"}
    assert {row[1] for row in rows if row[2] == "skipped"} >= {"hvx", "vulkan"}
    summary = [line for line in done.stdout.splitlines() if ": skipped for " in line]
    assert sorted(line.split(":")[0] for line in summary) == sorted({row[1] for row in rows if row[2] == "skipped"})
    hvx = next(line for line in summary if line.startswith("hvx:"))
    assert hvx.endswith("install: apt-get install clang-19 lld-19 qemu-user")
    # issue 49: a representative set, not the whole matrix (make demo-all): every target once, the seeds' cases and
    # an imported block, each of its configs on all of its targets; the table's last line counts the rows
    demo = _demo_configs(clone / "Makefile")
    assert {row[0] for row in rows} == {Path(c).stem for c in demo}
    assert {row[1] for row in rows} == {"c", "hvx", "opencl", "vulkan"}
    assert {"seed000_baseline", "seed001_tiles", "mobilenet_v2_block"} <= {row[0] for row in rows}
    assert len(rows) < len(list((clone / "configs").glob("*.yaml")))
    count = {status: sum(row[2] == status for row in rows) for status in ("pass", "skipped")}
    assert done.stdout.splitlines()[-1] == f"{len(rows)} rows: {count['pass']} passed, 0 failed, {count['skipped']} skipped"


def _demo_configs(makefile: Path) -> list[str]:
    """DEMO_CONFIGS as the Makefile spells it (continuation lines joined)."""
    text = makefile.read_text().replace("\\\n", " ")
    match = re.search(r"^DEMO_CONFIGS := (.*)$", text, re.MULTILINE)
    assert match, "no DEMO_CONFIGS in the Makefile"
    return match.group(1).split()


def test_the_demos_configs_exist_and_cover_every_target():
    """The quick half of the above: the set make demo validates names real configs, every target among them."""
    import kernelgen

    demo = _demo_configs(REPO / "Makefile")
    assert all((REPO / c).is_file() for c in demo), demo
    targets = {t for c in demo for t in kernelgen.load_config(REPO / c).targets}
    assert targets == {"c", "hvx", "opencl", "vulkan"}
