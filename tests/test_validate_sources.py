"""Issue 44: `kernelgen validate CONFIG --target T --sources DIR` validates the kernel sources in DIR, as `kernelgen
build` wrote them and perhaps edited by hand, with the same tensors, oracles and verdicts: a freshly built kernel
passes, the same kernel with one accumulation's sign flipped fails at the op that holds it, and a folder that does
not hold what the target writes is exit 2 before anything runs."""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from builders import toolchain
from conftest import require_tools, requires_tool

import kernelgen
from kernelgen.api import jobs, load_config, with_sources
from kernelgen.cli import main
from kernelgen.measure.sources import SourcesError

runner = CliRunner()

# Three convs, so that an edit in the second is found at the second (the last op's error is the output's).
CHAIN = """\
name: chain3
dtype: float32
input: {shape: [1, 6, 7, 8], layout: NHWC}
ops:
  - conv2d: {out_channels: 8, kernel: 3, pad: 1, bias: true, activation: relu}
  - conv2d: {out_channels: 8, kernel: 1}
  - conv2d: {out_channels: 4, kernel: 3, pad: 1}
output: {layout: NHWC}
targets: [c, hvx, opencl, vulkan]
"""
SOURCE = {"c": "chain3.c", "hvx": "chain3.c", "opencl": "chain3.cl", "vulkan": "chain3.comp"}
# Where the second conv's code starts in each target's source, and its first accumulation: the edit negates one
# product of it (`acc += x * w` becomes `acc -= x * w`; in the fma() of OpenCL and GLSL, fma(-x, w, acc)).
# In c the edit negates every product of the second conv's tiles (pixel 0 of a tile may be a padding column the
# next conv never reads), in both of its variants (a k_block that is a multiple of 16 has a 16-float one).
SECOND_CONV = {"c": ("/* conv2d #2 into", "KG_FMA(a0_0, x0[ch], w0);", "KG_FMA(a0_0, -x0[ch], w0);"),
               "hvx": ("/* conv2d #2 into", "acc[ki] += x *", "acc[ki] -= x *"),
               "opencl": ("/* conv2d #2:", "= fma(", "= fma(-"),
               "vulkan": ("// conv2d #2:", "= fma(", "= fma(-")}


@pytest.fixture
def built(tmp_path) -> Path:
    """chain3.yaml built into tmp_path/out/ for every target; returns tmp_path."""
    (tmp_path / "chain3.yaml").write_text(CHAIN)
    result = runner.invoke(main, ["build", str(tmp_path / "chain3.yaml"), "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    return tmp_path


def _validate(root: Path, target: str, sources: Path, *extra: str):
    result = runner.invoke(main, ["validate", str(root / "chain3.yaml"), "--target", target, "--sources", str(sources),
                                  "--seed", "7", "--json", *extra])
    return result, (json.loads(result.stdout)["results"] if result.exit_code in (0, 1) else None)


def _flip_second_conv(path: Path, target: str) -> None:
    marker, old, new = SECOND_CONV[target]
    text = path.read_text()
    start = text.index(marker)  # a template change that moves these fails here, not as a silent pass
    at = text.index(old, start)
    if target == "c":
        end = text.index("/* conv2d #3", start)
        section, count = re.subn(r"KG_FMA(16)?\((a\d+_\d+), ", r"KG_FMA\1(\2, -", text[start:end])
        assert count >= 2, count
        path.write_text(text[:start] + section + text[end:])
        return
    path.write_text(text[:at] + new + text[at + len(old):])


def _fresh_passes_and_flipped_sign_fails(root: Path, target: str) -> None:
    folder = root / "out" / "chain3" / target
    result, (row,) = _validate(root, target, folder)
    assert result.exit_code == 0 and row["status"] == "pass", result.output
    assert f"sources from {folder}/ (as generated)" in row["detail"]
    _flip_second_conv(folder / SOURCE[target], target)
    result, (row,) = _validate(root, target, folder)
    assert result.exit_code == 1 and row["status"] == "FAIL", result.output
    # found at the op that holds the edit, by the same op-by-op check a generated kernel gets
    assert row["failure"] == ["conv2d #2"] and row["checked"] == "op-by-op", row
    assert f"{SOURCE[target]} edited" in row["detail"]


@requires_tool(*toolchain("c"))
def test_c_sources_pass_fresh_and_fail_at_the_op_whose_accumulation_is_flipped(built):
    _fresh_passes_and_flipped_sign_fails(built, "c")


@requires_tool(*toolchain("c"))
def test_c_every_accumulation_flipped_fails_at_the_first_op(built):
    """The edit the issue names: `+=` -> `-=` in the c kernel's accumulation (its FMA macros, every op's)."""
    path = built / "out" / "chain3" / "c" / "chain3.c"
    text = path.read_text()
    flipped = text.replace("((acc) += (x) * (w))", "((acc) -= (x) * (w))").replace("acc->lane[i] += ", "acc->lane[i] -= ")
    assert flipped.count("-=") - text.count("-=") >= 4
    path.write_text(flipped)
    result, (row,) = _validate(built, "c", built / "out")
    assert result.exit_code == 1 and row["failure"][0] == "conv2d #1", result.output


@pytest.mark.slow
@pytest.mark.parametrize("target", ["hvx", "opencl", "vulkan"])
def test_sources_pass_fresh_and_fail_edited_on(target, built):
    require_tools(*toolchain(target))
    _fresh_passes_and_flipped_sign_fails(built, target)


@requires_tool(*toolchain("c"))
def test_dir_may_be_the_config_folder_or_builds_output_and_the_api_takes_it(built):
    for given in (built / "out" / "chain3", built / "out"):
        result, (row,) = _validate(built, "c", given)
        assert row["status"] == "pass" and f"sources from {built / 'out' / 'chain3' / 'c'}/" in row["detail"]
    # a copy of one's own, anywhere (here in a folder named like the config, as build's layout is)
    shutil.copytree(built / "out" / "chain3" / "c", built / "chain3" / "tuned")
    result, (row,) = _validate(built, "c", built / "chain3" / "tuned")
    assert row["status"] == "pass" and f"sources from {built / 'chain3' / 'tuned'}/ (as generated)" in row["detail"]
    config = load_config(built / "chain3.yaml")
    assert kernelgen.validate(config, "c", seed=3, sources=built / "out").passed


def test_a_folder_without_the_sources_is_exit_2_naming_what_is_missing(built):
    folder = built / "out" / "chain3" / "c"
    (folder / "chain3.c").unlink()
    result = runner.invoke(main, ["validate", str(built / "chain3.yaml"), "--target", "c", "--sources", str(folder)])
    assert result.exit_code == 2
    assert f"error: {folder} has no chain3.c; `kernelgen build` writes chain3.h, chain3.c here for chain3 on c" \
        in result.stderr
    assert result.stdout == ""  # nothing ran: no table, no row
    empty = built / "empty"
    empty.mkdir()
    result = runner.invoke(main, ["validate", str(built / "chain3.yaml"), "--target", "c", "--sources", str(empty)])
    assert result.exit_code == 2 and f"{empty} has no chain3.h, chain3.c" in result.stderr
    result = runner.invoke(main, ["validate", str(built / "chain3.yaml"), "--target", "c", "--sources",
                                  str(built / "nowhere")])
    assert result.exit_code == 2 and f"{built / 'nowhere'}: no such folder" in result.stderr


def test_every_folder_is_checked_before_the_first_kernel_runs(built, monkeypatch):
    """Two configs, the second's folder incomplete: exit 2 and no kernel compiled (nothing half done)."""
    other = CHAIN.replace("name: chain3", "name: other")
    (built / "other.yaml").write_text(other)
    assert runner.invoke(main, ["build", str(built / "other.yaml"), "-o", str(built / "out")]).exit_code == 0
    (built / "out" / "other" / "c" / "other.h").unlink()
    compiled = []
    monkeypatch.setattr(kernelgen.api.TARGETS["c"], "compile", lambda *a, **k: compiled.append(a))
    result = runner.invoke(main, ["validate", str(built / "chain3.yaml"), str(built / "other.yaml"), "--target", "c",
                                  "--sources", str(built / "out")])
    assert result.exit_code == 2 and "other/c has no other.h" in result.stderr
    assert compiled == [] and result.stdout == ""


def test_another_targets_folder_is_refused(built):
    """hvx and c both write chain3.c and chain3.h: out/chain3/c/ given for hvx is refused, not compiled as HVX."""
    result = runner.invoke(main, ["validate", str(built / "chain3.yaml"), "--target", "hvx", "--sources",
                                  str(built / "out" / "chain3" / "c")])
    assert result.exit_code == 2
    assert f"the hvx target's are in {built / 'out' / 'chain3' / 'hvx'}/" in result.stderr


@pytest.mark.parametrize("target, name", [("opencl", "chain3.launch.json"), ("vulkan", "chain3.dispatch.txt")])
def test_an_edited_launch_file_is_refused(built, target, name):
    """The launch comes from the config: an edit there would not take effect, so it is refused before anything
    runs (no device needed)."""
    path = built / "out" / "chain3" / target / name
    path.write_text(path.read_text() + " ")
    job = jobs(load_config(built / "chain3.yaml"), (target,))[target]
    with pytest.raises(SourcesError, match=re.escape(f"{path} differs from what")):
        with_sources(job, target, built / "out")
    result, _ = _validate(built, target, built / "out")
    assert result.exit_code == 2 and "was " in result.stderr and "another --device?" in result.stderr


def test_the_job_read_holds_the_edited_text_and_says_so(built):
    folder = built / "out" / "chain3" / "c"
    (folder / "chain3.h").write_text((folder / "chain3.h").read_text() + "/* tuned by hand */\n")
    job = jobs(load_config(built / "chain3.yaml"), ("c",))["c"]
    read = with_sources(job, "c", folder)
    assert read.files["chain3.h"].endswith("/* tuned by hand */\n") and read.files["chain3.c"] == job.files["chain3.c"]
    assert read.origin == f"sources from {folder}/ (chain3.h edited)" and job.origin == ""
    assert (read.plan, read.target_plan, read.config) == (job.plan, job.target_plan, job.config)


def test_a_network_manifest_takes_no_sources(tmp_path):
    """A network's kernels are validated on each other's outputs: --sources applies to kernel configs only (refused
    before the manifest is read)."""
    (tmp_path / "network.yaml").write_text("network: n\nmodel: m.onnx\nsteps: []\n")
    result = runner.invoke(main, ["validate", str(tmp_path / "network.yaml"), "--sources", str(tmp_path)])
    assert result.exit_code == 2 and "--sources takes kernel configs, not a network manifest" in result.output
