"""What lavapipe's host observation reads: the width in its device name, the CPU's vector flags as llvmpipe sees
them (GALLIUM_OVERRIDE_CPU_CAPS), and the live device's agreement with both."""
from __future__ import annotations

import pytest

from kernelgen.targets.vulkan.lavapipe_host import LavapipeHost, cpu_info, llvmpipe_flags, vector_bits
from tests.conftest import requires_tool
from tests.test_vulkan_target import VULKAN

ZEN3 = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 7763 64-Core Processor
flags\t\t: fpu sse sse2 avx f16c fma avx2 bmi2

processor\t: 1
model name\t: not the first
flags\t\t: avx512f
"""


def test_vector_bits_from_the_device_name():
    assert vector_bits("llvmpipe (LLVM 15.0.6, 256 bits)") == 256
    assert vector_bits("llvmpipe (LLVM 15.0.6, 128 bits)") == 128
    assert vector_bits("AMD Radeon RX 6800 (RADV NAVI21)") == 0


def test_cpu_info_reads_the_first_processor_only():
    assert cpu_info(ZEN3) == ("AMD EPYC 7763 64-Core Processor", ("avx", "avx2", "fma"))
    assert cpu_info("") == ("unknown CPU", ())


@pytest.mark.parametrize("override, left", [(None, ("avx", "avx2", "fma", "avx512f", "avx512vl")),
                                            ("avx", ("avx", "avx2", "fma")), ("sse4.1", ()),
                                            ("bogus", ("avx", "avx2", "fma", "avx512f", "avx512vl"))])
def test_override_takes_features_away_as_llvmpipe_does(override, left):
    assert llvmpipe_flags(("avx", "avx2", "fma", "avx512f", "avx512vl"), override) == left


def test_registers_follow_avx512vl_and_the_line_names_everything():
    host = LavapipeHost(cpu="AMD EPYC 7763", flags=("avx", "avx2", "fma"), vector_bits=256, subgroup=8,
                        l1d_bytes=32768, driver="llvmpipe Mesa 22.3.6 (LLVM 15.0.6)")
    assert host.vector_registers == 16
    assert host.describe() == ("AMD EPYC 7763 (avx avx2 fma; L1d 32 KiB); llvmpipe Mesa 22.3.6 (LLVM 15.0.6), "
                               "256-bit vectors, subgroup 8, 16 vector registers")
    wide = LavapipeHost(cpu="Xeon", flags=("avx2", "avx512f", "avx512vl"), vector_bits=256, subgroup=8,
                        l1d_bytes=49152, driver="d")
    assert wide.vector_registers == 32 and wide.key() != host.key()


@requires_tool(*VULKAN)
@pytest.mark.parametrize("width, subgroup", [("128", 4), ("256", 8)])
def test_live_lavapipe_width_matches_its_subgroup(width, subgroup, monkeypatch):
    """LP_NATIVE_VECTOR_WIDTH sets llvmpipe's width: the name and the subgroup size say the same."""
    monkeypatch.setenv("LP_NATIVE_VECTOR_WIDTH", width)
    from kernelgen.targets.vulkan.lavapipe_host import current

    host = current()
    assert host is not None
    assert (host.vector_bits, host.subgroup) == (int(width), subgroup)
    assert "Mesa" in host.driver


def test_calibration_is_kept_per_host_and_read_back_only_there(tmp_path, monkeypatch):
    from kernelgen.targets.vulkan.calibration import Calibration, cache_path, load, store

    monkeypatch.setenv("KERNELGEN_CACHE_DIR", str(tmp_path))
    zen3 = LavapipeHost(cpu="AMD EPYC 7763", flags=("avx", "avx2", "fma"), vector_bits=256, subgroup=8,
                        l1d_bytes=32768, driver="llvmpipe Mesa 22.3.6 (LLVM 15.0.6)")
    xeon = LavapipeHost(cpu="Xeon", flags=("avx", "avx2", "fma", "avx512f", "avx512vl"), vector_bits=256,
                        subgroup=8, l1d_bytes=49152, driver="llvmpipe Mesa 22.3.6 (LLVM 15.0.6)")
    assert load(zen3) is None
    kept = Calibration(host=zen3.describe(), key=zen3.key(), tiles={"pointwise": (4, 4, 16)},
                       ratios={"pointwise": {"4,8,16": 0.4, "4,4,16": 0.5}})
    path = store(kept, zen3)
    assert path == cache_path(zen3) and path.parent == tmp_path / "lavapipe"
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temp file left
    assert load(zen3) == kept
    assert load(xeon) is None and cache_path(xeon) != path
    path.write_text(path.read_text().replace(zen3.key(), xeon.key()))  # a file copied from another host
    assert load(zen3) is None


def test_best_takes_the_highest_median_and_the_default_on_a_tie():
    from kernelgen.targets.vulkan.calibration import best

    assert best({"4,8,16": [0.5, 0.1, 0.4], "4,4,16": [0.45, 0.46, 0.0]}) == (
        (4, 4, 16), {"4,8,16": 0.4, "4,4,16": 0.45})
    assert best({"4,8,16": [0.5], "4,4,16": [0.5]})[0] == (4, 8, 16)


def test_tiles_are_fitted_to_the_l1d_by_their_stack_estimate():
    from kernelgen.targets.vulkan.lavapipe_host import fitting_tile, plan_tile_notes, stack_kib, tile_note

    assert round(stack_kib((4, 8, 16)), 1) == 43.2 and round(stack_kib((4, 4, 16)), 1) == 23.7
    assert fitting_tile((4, 8, 16), 49152) == (4, 8, 16)  # 43.2 KiB in 48
    assert fitting_tile((4, 8, 16), 32768) == (4, 4, 16)  # 23.7 in 32
    assert fitting_tile((8, 8, 8), 32768) == (8, 4, 8)  # 23.7: ow first on a tie
    assert fitting_tile((4, 16, 8), 32768) == (4, 8, 8)
    assert fitting_tile((4, 8, 16), 0) == (4, 8, 16)  # an unknown L1d keeps it
    assert fitting_tile((1, 1, 512), 16384) == (1, 1, 512)  # no pixel left to halve
    zen3 = LavapipeHost(cpu="AMD EPYC 7763", flags=("avx", "avx2", "fma"), vector_bits=256, subgroup=8,
                        l1d_bytes=32768, driver="d")
    assert tile_note(zen3, (4, 8, 16)) == (
        "lavapipe: the invocation tile [4, 8, 16]'s multiply-add region touches ~43 KiB of stack, past this host's "
        "32 KiB L1d; vulkan: {ivc_tile: [4, 4, 16]} fits it (~24 KiB), or run benchmarks/lavapipe_calibrate.py")
    assert tile_note(zen3, (4, 4, 16)) is None
    # a benchmark's plans: each distinct conv tile once ([oh, ow, vec4 chunks] as the plan keeps them)
    assert plan_tile_notes(zen3, [(4, 8, 4), (4, 4, 4), (4, 8, 4)]) == [tile_note(zen3, (4, 8, 16))]
    assert plan_tile_notes(zen3, [(4, 4, 4)]) == []


SMALL_1X1 = ("name: small\ninput: {shape: [1, 8, 8, 16], layout: NHWC}\nops:\n  - conv2d: {out_channels: 64, kernel: 1}\n"
             "output: {layout: NHWC}\ntargets: [vulkan]\n")


@requires_tool(*VULKAN)
def test_a_narrow_lavapipe_is_told_the_workgroup_that_runs_the_default_kernel(monkeypatch):
    """At 128 bits (an SSE4-only host) lavapipe's subgroups hold 4 lanes, the profile's rows 8: the dense conv's
    shuffles cannot run there, and the error names the wg_size that can."""
    from kernelgen.api import bench, parse_config
    from kernelgen.errors import ToolchainError

    monkeypatch.setenv("LP_NATIVE_VECTOR_WIDTH", "128")
    with pytest.raises(ToolchainError, match=r"subgroups of 4 do not hold whole rows of 8 invocations, which op 1's "
                                             r"input shuffles need: set vulkan.wg_size to \[4, 1, 1\] for this device"):
        bench(parse_config(SMALL_1X1, "small.yaml"), "vulkan", repeat=1)


def _probe(shape: str, gflop: float):
    from kernelgen.measure.primitives import FMA, Probe

    return Probe(kind=FMA, work=int(gflop * 1e9), device="llvmpipe", shape=shape, kernel=None)


def test_probe_shape_is_each_shapes_best_round_and_kept_per_host(tmp_path, monkeypatch):
    """Rounds interleave the shapes and each keeps its best (a busy moment reads low, never high); the winner is
    stored under the host's key and reused there without timing anything; another host chooses again."""
    from kernelgen.targets.vulkan.probe_choice import ROUNDS, best_rates, cache_path, fastest, load, probe_note

    monkeypatch.setenv("KERNELGEN_CACHE_DIR", str(tmp_path))
    one, three = _probe("1x4x64", 1.0), _probe("3x4x64", 1.0)
    # seconds per run, round by round: 3x4x64 is slowed in its first round only (1 GFLOP in 0.02 s = 50 GFLOP/s)
    runs = {"1x4x64": iter([[0.01] * 3] * ROUNDS), "3x4x64": iter([[0.02, 0.02, 0.001]] + [[0.0075] * 3] * 9)}
    timed = []

    def seconds(probe):
        timed.append(probe.shape)
        return next(runs[probe.shape])

    assert best_rates([one, three], seconds, rounds=2) == {"1x4x64": 100.0, "3x4x64": pytest.approx(133.33, 0.01)}
    assert timed == ["1x4x64", "3x4x64", "1x4x64", "3x4x64"]
    host = LavapipeHost(cpu="Xeon", flags=("avx2", "avx512f", "avx512vl"), vector_bits=256, subgroup=8,
                        l1d_bytes=49152, driver="llvmpipe Mesa 22.3.6 (LLVM 15.0.6)")
    runs = {"1x4x64": iter([[0.01] * 3] * ROUNDS), "3x4x64": iter([[0.0075] * 3] * ROUNDS)}
    timed.clear()
    assert fastest(host, [one, three], seconds) is three and len(timed) == 2 * ROUNDS
    assert load(host) == "3x4x64" and [p.name for p in cache_path(host).parent.iterdir()] == [cache_path(host).name]
    timed.clear()
    assert fastest(host, [one, three], seconds) is three and timed == []  # kept: nothing timed again
    zen3 = LavapipeHost(cpu="AMD EPYC 7763", flags=("avx", "avx2", "fma"), vector_bits=256, subgroup=8,
                        l1d_bytes=32768, driver="llvmpipe Mesa 22.3.6 (LLVM 15.0.6)")
    assert load(zen3) is None
    runs = {"1x4x64": iter([[0.01] * 3] * ROUNDS), "3x4x64": iter([[0.03] * 3] * ROUNDS)}
    assert fastest(zen3, [one, three], seconds) is one and load(zen3) == "1x4x64" and load(host) == "3x4x64"
    assert probe_note(host) == (f"lavapipe: ratios against the FMA probe 3x4x64, this host's fastest shape, chosen "
                                f"once and kept in {cache_path(host)} (delete it to choose again)")
    cache_path(host).unlink()
    assert probe_note(host) == ("lavapipe: no FMA probe shape chosen on this host yet (the first run with a probe "
                                "chooses one)")


@requires_tool(*VULKAN)
def test_lavapipe_runs_the_probe_shape_kept_for_its_host(tmp_path, monkeypatch):
    """A kept choice is the one FMA probe a lavapipe program offers the core (nothing timed to choose); the
    bandwidth probe is untouched."""
    from kernelgen.api import TARGETS, jobs, parse_config
    from kernelgen.measure.primitives import BANDWIDTH, FMA
    from kernelgen.targets.vulkan.lavapipe_host import current
    from kernelgen.targets.vulkan.probe_choice import store

    monkeypatch.setenv("KERNELGEN_CACHE_DIR", str(tmp_path))
    host = current()
    assert host is not None
    store(host, "2x4x64", {"2x4x64": 1.0})
    job = jobs(parse_config(SMALL_1X1, "small.yaml"), ("vulkan",))["vulkan"]
    with TARGETS["vulkan"].compile(job, tmp_path, None) as program:
        assert [p.shape for p in program.probes(FMA)] == ["2x4x64"]
        assert [p.shape for p in program.probes(BANDWIDTH)] == ["triad"]
