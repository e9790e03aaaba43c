"""Issue 49: a network's generated C files (network.c, <network>_run.c, <network>_weights.c) say the flags they were
validated with, as each kernel's .c does: the third banner line is the flags `kernelgen build --list-flags` prints for
their folder, line for line; headers and the Makefile (which spells its CFLAGS out) carry none."""
from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from kernelgen.cli import main

onnx_models = pytest.importorskip("onnx_models")


def _imported(root: Path, threads: int) -> Path:
    """A 3x3 conv + Relu and a 1x1 conv imported for c, its config given `c: {threads: N}` when N > 1."""
    b = onnx_models.Builder(seed=31)
    t = b.relu("relu1", b.conv("conv1", "x", 6, 8, 3, pad=1))
    model = onnx_models.save(b.model("x", [1, 6, 9, 7], b.conv("conv2", t, 8, 4, 1)), root / "tiny.onnx")
    result = CliRunner().invoke(main, ["import", str(model), "-o", str(root / "net"), "--target", "c"])
    assert result.exit_code == 0, result.output
    if threads > 1:
        (config,) = [p for p in (root / "net").glob("*.yaml") if p.name != "network.yaml"]
        config.write_text(config.read_text().replace("targets: [c]", f"c: {{threads: {threads}}}\ntargets: [c]"))
    return root / "net" / "network.yaml"


@pytest.mark.parametrize("threads, link", [(1, ""), (2, "; link with -fopenmp")])
def test_network_c_and_the_programs_sources_name_the_flags_list_flags_gives(tmp_path, threads, link):
    manifest = _imported(tmp_path, threads)
    out = tmp_path / "out"
    listed = CliRunner().invoke(main, ["build", str(manifest), "-o", str(out), "--target", "c", "--list-flags"])
    assert listed.exit_code == 0, listed.output
    flags: dict[str, dict[str, list[str]]] = {}
    for line in listed.stdout.splitlines():
        folder, kind, flag = line.split("\t")
        flags.setdefault(folder, {"compile": [], "link": []})[kind].append(flag)
    built = CliRunner().invoke(main, ["build", str(manifest), "-o", str(out), "--target", "c", "--embed-weights"])
    assert built.exit_code == 0, built.output
    folder = out / "tiny" / "c"
    listed_here = flags[str(folder)]
    assert listed_here["link"] == (["-fopenmp"] if threads > 1 else [])
    expected = (f"   Compile with {' '.join(listed_here['compile'])}{link} (as validated; kernelgen build "
                f"--list-flags). */")
    sources = sorted(p.name for p in folder.glob("*.c"))
    assert sources == ["network.c", "tiny_run.c", "tiny_weights.c"]
    for name in sources:
        assert (folder / name).read_text().splitlines()[2] == expected, name
    for name in ("network.h", "Makefile", "kg_npy.h"):
        assert "Compile with" not in (folder / name).read_text(), name
    # the kernel's own .c, in its folder, names the same flags: the driver is built as the kernels it calls
    (kernel,) = [p for p in out.glob("*/c/*.c") if p.parent != folder]
    assert kernel.read_text().splitlines()[2] == expected
