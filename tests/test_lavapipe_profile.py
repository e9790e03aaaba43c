"""benchmarks/lavapipe_profile.py's readings of a JIT function: its hottest instructions and llvm-mca's ceiling for
a multiply-add region (a synthetic region here, so the numbers are known)."""
from __future__ import annotations

import collections
import re
import shutil

from builders import benchmark


def script():
    return benchmark("lavapipe_profile")


# 8 independent multiply/add pairs on distinct registers, as objdump lists them, and a call in the middle
REGION = [(0x1000 + 8 * i, text) for i, text in enumerate(
    [f"vmulps %ymm{i},%ymm{i + 8},%ymm{i + 16}" for i in range(8)] + ["call   *%r13"]
    + [f"vaddps %ymm{i + 16},%ymm{i + 24},%ymm{i + 24}" for i in range(8)])]


def test_hot_spots_name_the_most_sampled_instructions_and_opcodes(capsys):
    samples = collections.Counter({0x1000: 6, 0x1008: 1, REGION[9][0]: 3})  # two vmulps and the first vaddps
    script().hot_spots(REGION, samples, 2)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["60.0%", "#0", "vmulps", "%ymm0,%ymm8,%ymm16"]
    assert lines[1].split() == ["30.0%", "#9", "vaddps", "%ymm16,%ymm24,%ymm24"]
    assert lines[2] == "  samples by opcode: vmulps 70%, vaddps 30%, call 0%"


def test_mca_times_the_region_without_its_calls():
    line = script().mca_line(REGION, "znver3")
    if not any(shutil.which(f"llvm-mca-{v}") for v in range(14, 31)) and not shutil.which("llvm-mca"):
        assert line == "  llvm-mca: not installed (apt-get install llvm)"
        return
    found = re.fullmatch(r"  llvm-mca -mcpu=znver3 \(llvm-mca(-\d+)?\), the region without its 1 calls and branches: "
                         r"(\d+) cycles a pass, ([\d.]+) multiply/add pairs a cycle", line)
    assert found, line
    # Zen 3 multiplies on two pipes and adds on two others: 8 independent pairs take about 4 cycles a pass
    assert 1.5 <= float(found.group(3)) <= 2.5, line
    # Skylake issues both on the same two ports: about one pair a cycle (why the probe's rate moves with the core)
    skylake = re.search(r"([\d.]+) multiply/add pairs a cycle", script().mca_line(REGION, "skylake"))
    assert skylake and 0.8 <= float(skylake.group(1)) <= 1.2
