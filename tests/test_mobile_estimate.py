"""`kernelgen stats` on the mobile profiles, issue 47: the estimated time of an op from its compiler's statistics
(targets/vulkan/estimate.py), the verdict flags (a spill, an occupancy under the profile's target), and a network
manifest's report (every kernel, the network's time the sum of its kernels'). The arithmetic is checked on known
statistics records, so most of this runs without Mesa's compilers; the last test compiles for real."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import require_tools, requires_tool

from kernelgen.api import jobs, load_config, with_device
from kernelgen.cli import main
from kernelgen.cli.stats_report import warnings
from kernelgen.measure.records import DeviceStats, KernelStats, OpEstimate
from kernelgen.targets import TARGETS
from kernelgen.targets.gpu.parts import PARTS
from kernelgen.targets.vulkan.estimate import estimate_kernel, invocations, passes, traffic_bytes
from kernelgen.targets.vulkan.mobilestats import parse_shaderdb, parse_turnip

# a 1x1 conv on 16 channels, then a 2x2 max pool: float32
SMALL = ("name: small_pair\ninput: {shape: [1, 8, 8, 16]}\nops:\n  - conv2d: {out_channels: 16, kernel: 1}\n"
         "  - maxpool: {kernel: 2, stride: 2}\ntargets: [vulkan]\n")
SHADERDB = ("Compute shader: 40 inst, 1.000000 cycles, 0.500000 fma, 0.250000 cvt, 0.000000 sfu, 0.000000 v, "
            "0.000000 t, 1.000000 ls, 12 quadwords, 2 threads, 1 loops, 0:0 spills:fills")
TURNIP = {"Registers used": 6, "Max Waves Per Core": 16, "Instruction Count": 100, "Code size": 200,
          "STP Count": 0, "LDP Count": 0, "Estimated cycles stalled on SS": 3, "Estimated cycles stalled on SY": 9,
          "NOPs Count": 20}


def _plan(device: str):
    return jobs(with_device(load_config(SMALL), device), ("vulkan",))["vulkan"].target_plan


def _rows(device: str, spills: int = 0, waves: int | None = None) -> tuple[DeviceStats, ...]:
    parsed = parse_shaderdb(SHADERDB) if device == "mali-valhall" else parse_turnip(TURNIP)
    parsed |= {"spilled_vgprs": spills} | ({"waves": waves} if waves is not None else {})
    return tuple(DeviceStats(op=op.index, label=op.label, **parsed) for op in _plan(device).ops)


def test_the_plan_gives_each_dispatchs_invocations_passes_and_traffic():
    conv, pool = _plan("mali-valhall").ops
    # 8x8 pixels x 16 channels at 1x1x4 per invocation, x workgroups of 16 (the 4 chunks rounded up): 1024
    assert (invocations(conv), passes(conv)) == (8 * 8 * 16, 16 // 4)  # 16 input channels, 4 per pass
    assert traffic_bytes(_plan("mali-valhall"), conv) == 4 * (8 * 8 * 16 + 16 * 16 + 8 * 8 * 16)  # x, filter, y
    assert (invocations(pool), passes(pool)) == (256, 4)  # 4x4x16 outputs, a 2x2 window each
    assert traffic_bytes(_plan("mali-valhall"), pool) == 4 * (8 * 8 * 16 + 4 * 4 * 16)


def test_the_valhall_estimate_is_its_busiest_unit_over_the_parts_cores_and_clock():
    conv, pool = estimate_kernel(_plan("mali-valhall"), _rows("mali-valhall"), PARTS["g610"])
    # fma: 0.5 cycles per thread and pass x 4 passes x 1024 invocations / 4 cores / 1 GHz; ls: Mesa's 1 cycle per
    # load/store instruction is a quarter cycle for a thread of a warp's vec4 access (4 of the unit's 64-byte lines
    # for 16 threads)
    assert dict(conv.unit_seconds) == pytest.approx({"fma": 0.5 * 4 * 1024 / 4 / 1e9, "cvt": 0.25 * 4 * 1024 / 4 / 1e9,
                                                     "sfu": 0.0, "v": 0.0, "t": 0.0,
                                                     "ls": 0.25 * 4 * 1024 / 4 / 1e9}, rel=1e-12)
    assert conv.memory_seconds == pytest.approx(9216 / 33.8e9, rel=1e-12)
    assert (conv.seconds, conv.bound) == (pytest.approx(5.12e-7, rel=1e-12), "fma")
    # the pool: fma 0.5 x 4 window positions x 256 invocations / 4 cores / 1 GHz = 128 ns, under its 5,120 bytes
    # over 33.8 GB/s
    assert dict(pool.unit_seconds)["fma"] == pytest.approx(1.28e-7, rel=1e-12)
    assert (pool.seconds, pool.bound) == (pytest.approx(5120 / 33.8e9, rel=1e-12), "dram")


def test_the_adreno_estimate_issues_an_instruction_per_lane_and_cycle_unless_dram_bounds_it():
    conv, _ = estimate_kernel(_plan("adreno-7xx"), _rows("adreno-7xx"), PARTS["a740"])
    # the conv's own tile, the profile's 2x2x4 for a 1x1 conv (the pool's stride 2 does not halve it): 4 x 4 x 4
    # invocations, in workgroups of 16x4x1: 256; 100 instructions x 4 passes x 256 invocations / (6 SPs x 256
    # lanes) / 680 MHz
    assert (_plan("adreno-7xx").ops[0].ivc_tile, conv.invocations) == ((2, 2, 1), 256)
    assert dict(conv.unit_seconds) == {"alu": pytest.approx(100 * 4 * 256 / 1536 / 680e6, rel=1e-12)}
    # 0.098 us of instructions against 0.135 us to move the op's 9,216 bytes at 68.3 GB/s: DRAM bounds this one
    assert (conv.bound, conv.seconds) == ("dram", conv.memory_seconds) and conv.memory_seconds > conv.compute_seconds
    slow_dram = OpEstimate(op=1, label="x", invocations=1, passes=1, unit_seconds=(("alu", 1e-6),),
                           traffic_bytes=1, memory_seconds=2e-6)
    assert (slow_dram.seconds, slow_dram.bound) == (2e-6, "dram")


def test_a_spill_and_an_occupancy_under_the_target_are_flagged():
    rows = _rows("adreno-7xx", spills=3, waves=4)
    kernel = KernelStats(name="k", rows=rows, target_occupancy=PARTS["a740"].target_occupancy, occupancy_unit="waves")
    assert kernel.flags(rows[0]) == ("SPILLS", "BELOW-TARGET") and kernel.flagged
    lines = warnings(kernel, "adreno-7xx")
    assert lines[0] == (f"k op 1 ({rows[0].label}) spills 3 registers, fills 0 at 6 registers on adreno-7xx")
    assert lines[1].endswith("holds 4 waves, under the target 8 at 6 registers on adreno-7xx")
    fine = KernelStats(name="k", rows=_rows("adreno-7xx", waves=8), target_occupancy=8)
    assert not fine.flagged and fine.flags(fine.rows[0]) == ()


def test_a_faster_tile_is_named_per_op_and_the_best_tiles_total_takes_it():
    estimates = tuple(OpEstimate(op=j, label="", invocations=1, passes=1, unit_seconds=(("ls", s),), traffic_bytes=0,
                                 memory_seconds=0.0) for j, s in ((1, 0.63e-3), (2, 0.2e-3)))
    kernel = KernelStats(name="k", rows=(), estimates=estimates,
                         variants=(("ivc_tile=[2, 2, 4]", (0.41e-3, 0.3e-3)), ("ivc_tile=[4, 4, 4]", (None, None))))
    ((default, label, seconds),) = kernel.faster_tiles()
    assert (default.op, label, seconds) == (1, "ivc_tile=[2, 2, 4]", 0.41e-3)
    assert kernel.best_tiles_seconds == pytest.approx(0.61e-3) and kernel.seconds == pytest.approx(0.83e-3)


@pytest.fixture
def small_network(tmp_path) -> Path:
    import onnx
    import onnx_models

    require_tools("py:onnx", "py:onnxruntime")
    onnx.save(onnx_models.small_resnet(), str(tmp_path / "sr.onnx"))
    result = CliRunner().invoke(main, ["import", str(tmp_path / "sr.onnx"), "-o", str(tmp_path / "sr"),
                                       "--target", "vulkan"])
    assert result.exit_code == 0, result.output
    return tmp_path / "sr" / "network.yaml"


def test_a_network_reports_every_kernel_and_the_sum_of_their_estimates(small_network, monkeypatch):
    """The compilers stood in for by one fixed record per op: the report's arithmetic, not Mesa, is checked."""
    target = TARGETS["vulkan"]

    def fixed_stats(job, device, gpu=None):
        return tuple(DeviceStats(op=op.index, label=op.label, **parse_shaderdb(SHADERDB)) for op in job.target_plan.ops)

    monkeypatch.setattr(type(target), "stats", lambda self, job, device, gpu=None: fixed_stats(job, device, gpu))
    result = CliRunner().invoke(main, ["stats", str(small_network), "--target", "vulkan", "--device", "mali-valhall",
                                       "--json"])
    assert result.exit_code == 0, result.output
    (answer,) = json.loads(result.stdout)["results"]
    kernels = answer["kernels"]
    assert [k["name"] for k in kernels] == ["stem", "block1_conv1_to_block1_conv2", "block2_down", "block2_conv1_to_fc"]
    for kernel in kernels:
        assert kernel["seconds"] == pytest.approx(sum(op["estimate"]["seconds"] for op in kernel["ops"]), rel=1e-12)
        assert all(op["flags"] == [] and op["estimate"]["bound"] in ("fma", "dram") for op in kernel["ops"])
    assert answer["seconds"] == pytest.approx(sum(k["seconds"] for k in kernels), rel=1e-12)
    assert answer["assumptions"] == PARTS["g610"].assumptions()
    text = CliRunner().invoke(main, ["stats", str(small_network), "--target", "vulkan", "--device", "mali-valhall"])
    assert text.exit_code == 0, text.output
    assert f"sr on mali-valhall: estimated {answer['seconds'] * 1e3:.4f} ms for {len(kernels)} kernels; 0 spills" in text.stdout
    assert "Mali-G610 MP4 (Rockchip RK3588): 4 cores x 64 FP32 lanes at 1000 MHz (512 GFLOP/s)" in text.stdout


def test_a_manifest_needs_a_device(small_network):
    result = CliRunner().invoke(main, ["stats", str(small_network), "--target", "vulkan"])
    assert result.exit_code == 2 and "is a network manifest: give --device" in result.output


@requires_tool("glslangValidator", "py:vulkan", "mesa:panvk", "mesa:turnip")
@pytest.mark.parametrize("device", ["adreno-7xx", "adreno-6xx", "mali-valhall"])
def test_the_compilers_counts_give_an_estimate_on_each_part(device):
    """Real compiles: the estimate comes out of Turnip's and PanVK's own counts, spill-free at the target."""
    from kernelgen.api import kernel_stats

    kernel = kernel_stats(load_config(SMALL), "vulkan", device)
    assert not kernel.flagged, [(r.op, r.vgprs, r.waves, r.spills) for r in kernel.rows]
    assert len(kernel.estimates) == 2 and all(e.compute_seconds > 0 for e in kernel.estimates)
    assert kernel.seconds == sum(e.seconds for e in kernel.estimates)
