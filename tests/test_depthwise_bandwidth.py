"""Depthwise convs as memory-bound ops (issue 30): the bandwidth probes of every target move the bytes they claim and
read a positive, finite GB/s; `kernelgen bench` reports peak_gbs and bandwidth_ratio for depthwise kernels only;
the c target's depthwise path (a tile over the stripe's channels, the input read in place) matches numpy
around its edges and falls back where it does not fit. No timings are asserted: benchmarks/depthwise.py measures."""
from __future__ import annotations

import json
import math
import platform
import shutil
from pathlib import Path

import numpy as np
import pytest
from builders import Case, config_text, make_config, toolchain
from click.testing import CliRunner
from conftest import requires_tool

from kernelgen.api import jobs, validate
from kernelgen.cli import main
from kernelgen.measure.compare import compare
from kernelgen.measure.tensors import random_inputs
from kernelgen.targets.c import C
from kernelgen.targets.c.toolchain import Library, build_shared

C_TOOLS, OPENCL, VULKAN = (toolchain(target) for target in ("c", "opencl", "vulkan"))  # each target's own list
ROW_RUN = "/* one run of consecutive elements per window row */"

# conv2d ops on NHWC (input and output) for the c target; the schedule each case tests
DEPTHWISE_C = Case((), (), schedule="auto", targets="[c]")
CASES = {
    "s1_channels_20_odd_size": DEPTHWISE_C.with_(shape=[1, 13, 11, 20], ops=[
        "{out_channels: 20, kernel: 3, pad: 1, groups: 20, bias: true, activation: relu6}"]),
    "s2_channels_96_k_split_3": DEPTHWISE_C.with_(shape=[1, 15, 17, 96], ops=[
        "{out_channels: 96, kernel: 3, stride: 2, pad: 1, groups: 96, bias: true, activation: relu6}"],
        schedule="{k_block: 16, k_split: 3, h_block: 4}"),
    # one channel stripe wider than the op (5 blocks of 32 > 144): only the op's 18 vectors are summed, read in place
    "s1_channels_144_stripe_160": DEPTHWISE_C.with_(shape=[1, 9, 10, 144], ops=[
        "{out_channels: 144, kernel: 3, pad: 1, groups: 144, bias: true, activation: relu6}"],
        schedule="{k_block: 32, k_split: 5}"),
    # channels no vector width divides: the planner's loops (channel vectors need whole runs of 8), still right
    "s2_channels_100_planner_loops": DEPTHWISE_C.with_(shape=[1, 15, 17, 100], ops=[
        "{out_channels: 100, kernel: 3, stride: 2, pad: 1, groups: 100, bias: true, activation: relu6}"]),
    "pad_0_no_epilogue": DEPTHWISE_C.with_(shape=[1, 9, 14, 24], ops=["{out_channels: 24, kernel: 3, groups: 24}"],
                                           schedule="{k_block: 8, k_split: 2}"),
    "dilation_2_batch_2": DEPTHWISE_C.with_(shape=[2, 12, 9, 16], ops=[
        "{out_channels: 16, kernel: 3, dilation: 2, pad: 2, groups: 16, bias: true}"],
        schedule="{k_block: 8, w_block: 4, w_split: 1}"),
    "s2_pad_0_channel_stripes": DEPTHWISE_C.with_(shape=[1, 16, 16, 40], ops=[
        "{out_channels: 40, kernel: 3, stride: 2, groups: 40, activation: relu6}"], schedule="{k_block: 8, k_split: 2}"),
    "depthwise_chain_residual": DEPTHWISE_C.with_(shape=[1, 10, 11, 24], ops=[
        "{out_channels: 24, kernel: 3, pad: 1, groups: 24, bias: true, activation: relu6}",
        "{out_channels: 24, kernel: 3, pad: 1, groups: 24, bias: true, residual: input}"],
        schedule="{k_block: 8, k_split: 3, h_block: 3}"),
    "nchw_pixel_vectors_fall_back": DEPTHWISE_C.with_(shape=[1, 9, 12, 16], ops=[
        "{out_channels: 16, kernel: 3, pad: 1, groups: 16, bias: true, activation: relu6}"], input_layout="NCHW",
        output_layout="NCHW", schedule="{k_block: 8}"),
}


def _text(name: str) -> str:
    return jobs(make_config(name, CASES[name]), ("c",))["c"].files[f"{name}.c"]


def test_a_depthwise_tile_holds_the_stripes_channels_and_stores_whole_pixels():
    text = _text("s2_channels_96_k_split_3")
    tile = text.index("for (int owb = 0;")
    # the planner's channel blocks (ko_inner) are the tile's: each accumulator vector's block is worked out in its
    # pixel's store (its epilogue in registers, depthwise_epilogue.py), no ko_inner loop around the rows
    assert "const int ko_inner = (kv + 0) * 8 / 16;" in text[tile:]  # the planner's k_block of 16
    assert "for (int ko_inner" not in text[text.index("(register-blocked micro-kernel)"):]
    assert "float tile[" not in text and "KG_FMAV(a0_0, KG_LOAD(x0_0 + 0), KG_LOAD(w0 + 0));" in text
    # op 1 reads the input itself, zeros for the padding taps: no input cache read at all
    assert "kg_zeros" in text and ROW_RUN not in text and "input_cache[" not in text
    # a dense conv over the same input still reads its window as row runs
    dense = make_config("dense", DEPTHWISE_C.with_(shape=[1, 15, 17, 96], ops=["{out_channels: 16, kernel: 3, pad: 1}"],
                                                   schedule="{k_block: 16}"))
    assert ROW_RUN in jobs(dense, ("c",))["c"].files["dense.c"]


def test_a_store_whose_block_lies_inside_the_channels_runs_without_the_channel_test():
    # 40 channels in stripes of 16: the third stripe's second block is past them; the others store unguarded
    text = _text("s2_pad_0_channel_stripes")
    fast = text.index("if (KG_LIKELY(")
    assert "for (int ki = 0; ki < 8; ++ki)" in text[fast:fast + 200]
    assert "if (!(" in text[fast:] and "< 40)" in text[fast:]


def test_the_input_read_keeps_the_planners_loops_where_a_row_is_not_one_run():
    # NCHW: a window row's columns of one channel are a run, but not its channels: per-pixel reads stay
    text = _text("nchw_pixel_vectors_fall_back")
    assert ROW_RUN not in text
    assert "(register-blocked micro-kernel)" in text
    # input-channel chunks: the window holds a chunk of the channels, a row of the input more
    chunked = make_config("chunked", DEPTHWISE_C.with_(shape=[1, 8, 8, 32], ops=["{out_channels: 8, kernel: 3, pad: 1}"],
                                                       schedule="{k_block: 8, c_split: 2}"))
    assert ROW_RUN not in jobs(chunked, ("c",))["c"].files["chunked.c"]


@requires_tool(*C_TOOLS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_depthwise_tiles_match_numpy(name):
    result = validate(make_config(name, CASES[name]), "c")
    assert result.passed, f"{result.detail} (seed {result.seed})"


@requires_tool(*C_TOOLS)
@pytest.mark.parametrize("name", ["s2_channels_96_k_split_3", "depthwise_chain_residual"])
def test_the_scalar_vector_macros_match_numpy(tmp_path, name):
    config = make_config(name, CASES[name])
    job = jobs(config, ("c",))["c"]
    exe = C().compile(job, tmp_path)
    library = Library(build_shared([tmp_path / f"{name}.c"], tmp_path / "libscalar.so",
                                   flags=(*exe.flags, "-DKG_SCALAR")))
    args = random_inputs(config, job.plan, np.random.default_rng(5))
    arrays = exe.arguments(args, 0xFF)
    library.call(name, arrays)
    assert compare(config, job.plan, "c", 5, args, {0xFF: arrays[-2]}).passed


@requires_tool(*C_TOOLS)
def test_the_c_triad_moves_its_arrays(tmp_path):
    from kernelgen.measure.primitives import BANDWIDTH, FMA
    from kernelgen.measure.probes import rate
    from kernelgen.targets.c import C
    from kernelgen.targets.c.roofline import Probes, triad_array_bytes

    probes = Probes(tmp_path, iterations=1000)
    (fma,), (triad,) = probes.records(FMA), probes.records(BANDWIDTH)
    # 8 chains x 2 FLOPs a step of the widest vectors the micro-kernels use: 16 floats where -march=native has AVX-512F
    assert fma.work == 8 * probes.lanes * 2 * 1000 and triad.work == 3 * triad_array_bytes()
    assert probes.lanes == (16 if " avx512f" in Path("/proc/cpuinfo").read_text() else 8)
    assert fma.shape == f"8x{probes.lanes}" and f"{probes.lanes}-float" in probes.describe
    gbs = rate(C(), None, triad, repeat=2)  # timed as beside a kernel: the c target's time primitive
    assert math.isfinite(gbs) and gbs > 0
    assert np.all(probes._a == 7.0)  # a = b + 3 c with b = 1, c = 2: every element written


@requires_tool(*C_TOOLS)
@pytest.mark.skipif(platform.machine() != "x86_64" or not shutil.which("objdump"), reason="x86-64 objdump")
def test_the_fma_probe_keeps_its_eight_chains_apart(tmp_path):
    """The FMA peak's loop is eight FMAs into eight accumulators a step. Chains started equal were merged by gcc -O3
    into one dependent FMA a step, which read twice the peak of a core with one zmm FMA a cycle (Zen 4)."""
    import re
    import subprocess

    from kernelgen.targets.c.roofline import CHAINS, Probes

    Probes(tmp_path, iterations=1000)
    listing = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(tmp_path / "libprobes.so")], check=True,
                             capture_output=True, text=True).stdout
    peak = listing.split("<peak>:", 1)[1].split(">:", 1)[0]
    fmas = re.findall(r"vfmadd\w+\s+\S+,(%[xyz]mm\d+)$", peak, flags=re.M)
    assert len(fmas) == CHAINS and len(set(fmas)) == CHAINS, peak


@requires_tool(*C_TOOLS)
def test_the_roofline_peaks_are_the_probes_the_core_times(monkeypatch):
    """bench --plot's roofs: the FMA chains and the triad, each through the core's probe timing (no loop of its
    own), `repeat` runs each."""
    from kernelgen.measure.primitives import BANDWIDTH, FMA
    from kernelgen.targets.c import C, roofline

    timed = []

    def rate(target, executable, probe, *, repeat):
        timed.append((target.name, probe.kind, probe.work, repeat))
        return {FMA: 100.0, BANDWIDTH: 20.0}[probe.kind]

    monkeypatch.setattr(roofline, "rate", rate)
    peaks = roofline.measure_peaks(C(), repeat=3)
    assert (peaks.gflops, peaks.bandwidth_gbs) == (100.0, 20.0)
    lanes = 16 if " avx512f" in Path("/proc/cpuinfo").read_text() else 8  # -march=native's widest vectors
    assert timed == [("c", FMA, 8 * lanes * 2 * 20_000_000, 3), ("c", BANDWIDTH, 3 * roofline.triad_array_bytes(), 3)]


@requires_tool(*OPENCL)
def test_the_opencl_triad_moves_the_bytes_it_claims():
    from kernelgen.targets.opencl.probes import bandwidth_probe
    from kernelgen.targets.opencl.toolchain import OpenCLRunner

    with OpenCLRunner() as runner:
        assert runner.info.cpu  # PoCL: its triad passes the host's last-level cache (test_cpu_devices_triad...)
        probe = bandwidth_probe(runner.info, array_bytes=1 << 20, read_back=True)
        result = runner.run_sequence([probe.kernel.launch], probe.kernel.tensors, repeat=2)
    written = result.outputs["bandwidth_a"]
    assert probe.kind == "bandwidth" and probe.work == 3 * written.nbytes == 3 << 20
    assert np.all(written == 7.0)
    gbs = probe.work / result.launch_times_ns[-1][0]
    assert math.isfinite(gbs) and gbs > 0


@requires_tool(*VULKAN)
def test_the_vulkan_triad_moves_the_bytes_it_claims():
    from dataclasses import replace

    from kernelgen.targets.vulkan.probes import bandwidth_probe
    from kernelgen.targets.vulkan.runtime import VulkanRunner

    with VulkanRunner() as runner:
        assert runner.info.cpu  # lavapipe
        for texels in (0, runner.info.max_texel_buffer_elements):  # storage-buffer reads, texel-buffer reads
            probe = bandwidth_probe(replace(runner.info, max_texel_buffer_elements=texels), array_bytes=1 << 20)
            stage = probe.kernel.stage(0)
            result = runner.run_sequence([stage], list(probe.kernel.arrays), repeat=2)
            assert stage.kinds == (("storage", "texel", "texel") if texels else ("storage",) * 3)
            assert probe.work == 3 * result.outputs[0].nbytes == 3 << 20
            assert np.all(result.outputs[0] == 7.0)
            gbs = probe.work / result.stage_times_ns[-1][0]
            assert math.isfinite(gbs) and gbs > 0


def _bench_json(tmp_path, ops: str, target: str) -> dict:
    config = tmp_path / "bw.yaml"
    config.write_text(config_text("bw", Case([1, 10, 12, 16], [ops], schedule=None, targets="[c, opencl, vulkan]")))
    result = CliRunner().invoke(main, ["bench", str(config), "--target", target, "--repeat", "2", "--json"])
    assert result.exit_code == 0, result.output
    (row, *_) = json.loads(result.output)["results"]
    return row


DEPTHWISE = "{out_channels: 16, kernel: 3, pad: 1, groups: 16, bias: true, activation: relu6}"


@requires_tool(*C_TOOLS)
def test_bench_reports_bandwidth_for_depthwise_only(tmp_path):
    row = _bench_json(tmp_path, DEPTHWISE, "c")
    assert row["peak_gbs"] > 0 and row["bandwidth_ratio"] > 0 and row["gbs"] > 0
    assert math.isclose(row["bytes"], 4 * (10 * 12 * 16 * 2 + 16 * 9 + 16))
    dense = _bench_json(tmp_path, "{out_channels: 16, kernel: 3, pad: 1}", "c")
    assert "peak_gbs" not in dense and "bandwidth_ratio" not in dense and dense["gbs"] > 0


@requires_tool(*OPENCL)
def test_opencl_bench_reports_bandwidth_for_depthwise(tmp_path):
    row = _bench_json(tmp_path, DEPTHWISE, "opencl")
    assert row["peak_gbs"] > 0 and row["bandwidth_ratio"] > 0 and row["peak_gflops"] > 0


@requires_tool(*VULKAN)
def test_vulkan_bench_reports_bandwidth_for_depthwise(tmp_path):
    row = _bench_json(tmp_path, DEPTHWISE, "vulkan")
    assert row["peak_gbs"] > 0 and row["bandwidth_ratio"] > 0 and row["peak_gflops"] > 0


def test_a_stripe_wider_than_the_ops_channels_sums_only_the_ops_vectors():
    job = jobs(make_config("s1_channels_144_stripe_160", CASES["s1_channels_144_stripe_160"]), ("c",))["c"]
    (tile,) = job.target_plan.tiles
    assert (tile.k_block, tile.live_vectors, tile.groups, tile.direct is not None) == (160, 18, 2, True)
    text = job.files["s1_channels_144_stripe_160.c"]
    assert "for (int kg = 0; kg < 9; ++kg)" in text
    # the last block's 16 channels: a loop over them alone, without the channel test, vectorized like the others
    tail = text.index("if (KG_LIKELY(!(")
    assert "for (int ki = 0; ki < 16; ++ki)" in text[tail:tail + 200]


def test_cpu_devices_triad_passes_the_host_cache_gpus_keep_32_mib():
    """PoCL's and lavapipe's memory is the host's: their triad arrays are at least half its last-level cache (PoCL
    read 33 GB/s over 32 MiB arrays, 28 over 128 or 512 MiB, on a host with a 480 MiB L3); a GPU's stay 32 MiB."""
    from dataclasses import replace

    from kernelgen.measure.probes import triad_array_bytes
    from kernelgen.targets.gpu.api import VULKAN
    from kernelgen.targets.gpu.probes import TRIAD_ARRAY_BYTES, device_triad_array_bytes, triad_grid
    from kernelgen.targets.gpu.profiles import VULKAN_PROBE_SIZES
    from kernelgen.targets.vulkan.device import DeviceInfo
    from kernelgen.targets.vulkan.probes import bandwidth_probe

    assert device_triad_array_bytes(False) == TRIAD_ARRAY_BYTES == 32 << 20
    assert device_triad_array_bytes(True) == triad_array_bytes(32 << 20) >= 32 << 20
    assert triad_array_bytes(32 << 20, llc_bytes=480 << 20) == 240 << 20
    assert triad_array_bytes(32 << 20, llc_bytes=8 << 20) == 32 << 20
    gpu = DeviceInfo(index=0, name="gpu", driver="", shader_float16=False, storage_16bit=False, subgroup_size=32,
                     timestamp_period_ns=1.0, max_workgroup_size=(1024, 1024, 64), max_workgroup_invocations=1024,
                     max_texel_buffer_elements=1 << 27)
    assert bandwidth_probe(gpu).work == 3 * TRIAD_ARRAY_BYTES
    # lavapipe's grows as far as one axis of work-groups (65,535 of 64 vec4s: 64 MiB an array) reaches
    cpu = bandwidth_probe(replace(gpu, cpu=True)).work
    assert cpu == triad_grid(VULKAN, VULKAN_PROBE_SIZES.triad_work_group, device_triad_array_bytes(True)).bytes
    assert 3 * TRIAD_ARRAY_BYTES <= cpu <= 3 * 65535 * VULKAN_PROBE_SIZES.triad_work_group * 16
