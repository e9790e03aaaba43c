"""The shared GPU layer (kernelgen/targets/gpu) and the probes the core times (kernelgen/measure/probes.py): one
pool grid, one sweep, one probe description for both APIs, each API's differences as its record's values; the core
chooses a probe's fastest shape once per device and turns each repeat's probe time into the peak it pairs with."""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from kernelgen import api
from kernelgen.measure import probes as core_probes
from kernelgen.measure.bench import bench, row_of
from kernelgen.measure.primitives import BANDWIDTH, FMA, Executable, Probe
from kernelgen.measure.records import BenchOptions, Timings
from kernelgen.targets import TARGETS
from kernelgen.targets.base import Target
from kernelgen.targets.gpu.api import OPENCL, VULKAN
from kernelgen.targets.gpu.pool import pool_work
from kernelgen.targets.gpu.probes import OPENCL_TEXT, VULKAN_TEXT, FmaShape, fma_source, triad_grid
from kernelgen.targets.gpu.profiles import LAVAPIPE_SWEEP, OPENCL_FMA_SHAPES, OPENCL_SWEEPS, VULKAN_FMA_SHAPES

POOL = ("name: pools\ninput: {{shape: [1, {h}, {w}, 64], layout: NHWC}}\nops:\n"
        "  - maxpool: {{kernel: 3, stride: 1, pad: 1}}\n  - avgpool: {{kernel: 2, stride: 2}}\n")


def _pool_geometry(h: int, w: int):
    config = api.load_config(POOL.format(h=h, w=w))
    plan = api.plan(config)
    return plan, plan.ops


@pytest.mark.parametrize(("h", "w"), [(8, 8), (512, 512)])
def test_a_pool_is_one_grid_cut_by_each_apis_group_limit(h, w):
    """One work-item per output element, in groups of 64; Vulkan's 65,535 groups along x push the rest to y,
    OpenCL's NDRange takes them all along x. Both index the same elements; each spells them its own way."""
    plan, (maxpool, avgpool) = _pool_geometry(h, w)
    source = plan.tensors[0].layout  # the input, NHWC: the maxpool keeps its shape
    items = h * w  # 64 channels a pixel: one group of 64 work-items
    cl, vk = (pool_work(a, maxpool, source, source) for a in (OPENCL, VULKAN))
    assert cl.source_index == vk.source_index == f"((n*{h * w * 64})+(ih*{w * 64})+(iw*64)+c)"
    assert cl.dest_index == vk.dest_index == f"((n*{h * w * 64})+(oh*{w * 64})+(ow*64)+c)"
    assert cl.total == vk.total == h * w * 64
    assert cl.groups == (items, 1)
    assert vk.groups == ((items, 1) if items <= 65535 else (65535, -(-items // 65535)))
    assert cl.global_items == items * 64 and vk.row_items == vk.groups[0] * 64
    # the max pool's record: its step and start, and no divisor
    assert (cl.step, vk.step) == ("fmax(acc, x)", "max(acc, x)")
    assert cl.start == vk.start == -3.4028234663852886e38 and cl.divisor == vk.divisor == ""
    mean = [pool_work(a, avgpool, source, plan.tensors[1].layout) for a in (OPENCL, VULKAN)]
    assert [m.divisor for m in mean] == ["(float)count", "float(count)"]  # count_include_pad off: the inside ones
    assert {(m.step, m.start) for m in mean} == {("acc + x", 0.0)}


def test_each_api_renders_the_same_fma_chains():
    shape = FmaShape(4, 3, 2, 8)
    sources = {api_.name: fma_source(api_, text, shape) for api_, text in ((OPENCL, OPENCL_TEXT), (VULKAN, VULKAN_TEXT))}
    for name, source in sources.items():
        assert source.count("fma(") == 3 * 2, name  # accumulators x unroll steps a trip
        assert source.count(" = fma(a2, m, c);") == 2
    assert "float4 a0 = (float4)(x + 0.0f);" in sources["opencl"]
    assert "vec4 a0 = vec4(x + 0.0 / 64.0);" in sources["vulkan"]
    assert shape.trips == 4 and shape.flops(10) == 2 * 4 * 3 * 8 * 10


def test_the_triad_grid_is_whole_groups_within_the_apis_limit():
    assert triad_grid(OPENCL, 256).vectors == triad_grid(VULKAN, 64).vectors == 1 << 21  # 32 MiB of float4
    assert triad_grid(VULKAN, 64).groups == 32768 and triad_grid(OPENCL, 256).bytes == 3 << 25
    assert triad_grid(VULKAN, 1, array_bytes=1 << 24).groups == 65535  # capped: Vulkan's groups along x
    assert triad_grid(OPENCL, 1, array_bytes=1 << 24).groups == 1 << 20


def test_profiles_keep_every_probe_shape_inside_lavapipes_loop_limit():
    assert all(s.trips < 65535 and s.trips * s.unroll == s.steps for s in OPENCL_FMA_SHAPES + VULKAN_FMA_SHAPES)
    assert len({s.name for s in VULKAN_FMA_SHAPES}) == len(VULKAN_FMA_SHAPES)  # the core tells them apart by name
    assert len(LAVAPIPE_SWEEP.tiles) * len(LAVAPIPE_SWEEP.sizes) == 30
    assert set(OPENCL_SWEEPS) == {"vectors", "vectors+images", "texels"}


class _Probed(Target):
    """A stand-in whose clock is made up: probe shape 'slow' takes 2 s a run, 'fast' 1 s, the kernel 0.5 s."""

    name = "probed"
    summary = "a stand-in that times made-up probes"
    files = ()

    def __init__(self):
        self.alone = 0  # runs of a probe alone (the shape choice)

    def toolchain(self):
        return ()

    def compile(self, job, workdir, device=None):
        return Executable(job)

    def run(self, executable, args, poison):
        raise NotImplementedError

    def probes(self, executable, kind):
        if kind == FMA:
            return tuple(Probe(kind=FMA, work=4_000_000_000, device="dev", shape=s, kernel=t)
                         for s, t in (("slow", 2.0), ("fast", 1.0)))
        return (Probe(kind=BANDWIDTH, work=3_000_000_000, device="dev", shape="triad", kernel=0.25),)

    def time(self, executable, args, repeat, probes=()):
        beside = {p.kind: (p.kernel,) * repeat for p in probes}
        if args is None:
            self.alone += 1
            return (Timings(label="probes", probe_seconds=beside),)
        return (Timings(label="kernel", seconds=(0.5,) * repeat, probe_seconds=beside),)


def test_the_core_chooses_the_fastest_shape_once_per_device_and_pairs_its_peak_with_each_repeat(monkeypatch):
    monkeypatch.setattr(core_probes, "_CHOSEN", {})
    target = _Probed()
    job = api.jobs(api.load_config("name: probed\ninput: {shape: [1, 6, 5, 4]}\nops:\n"
                                   "  - conv2d: {out_channels: 3, kernel: 3, pad: 1}\n"), ("c",))["c"]
    (row,) = [r for r in bench(target, job, BenchOptions(repeat=3)) if r.label == "kernel"]
    assert target.alone == 4  # two readings of each of the two shapes
    assert row.peak_gflops == 4.0  # 4 GFLOP in the fast shape's 1 s
    assert row.ratio == job.plan.flops / 0.5 / 1e9 / 4.0
    assert row.peak_gbs is None  # a compute-bound kernel: no triad beside it
    bench(target, job, BenchOptions(repeat=3))
    assert target.alone == 4  # the choice is kept for the device


def test_probe_times_become_the_peaks_a_row_pairs():
    probes = (Probe(kind=FMA, work=2_000_000_000, device="d", shape="s", kernel=None),
              Probe(kind=BANDWIDTH, work=6_000_000_000, device="d", shape="t", kernel=None))
    timings = Timings(label="k", seconds=(1.0, 2.0), probe_seconds={FMA: (1.0, 0.5), BANDWIDTH: (2.0, 3.0)})
    paired = core_probes.peaks(timings, probes)
    assert paired.peak_gflops == (2.0, 4.0) and paired.peak_gbs == (3.0, 2.0) and not paired.probe_seconds
    job = api.jobs(api.load_config("name: p\ninput: {shape: [1, 6, 5, 4]}\nops:\n"
                                   "  - conv2d: {out_channels: 3, kernel: 3, pad: 1}\n"), ("c",))["c"]
    row = row_of(job, "x", paired, {})
    assert row.peak_gflops == 3.0 and row.ratio == (job.plan.flops / 1e9 / 2.0 + job.plan.flops / 2 / 1e9 / 4.0) / 2


REPO = Path(__file__).resolve().parent.parent


def _golden_configs(target: str) -> list[Path]:
    return sorted(p for p in (REPO / "configs").glob("*.yaml") if (REPO / "out" / p.stem / target).is_dir())


@pytest.mark.parametrize("config", _golden_configs("opencl"), ids=lambda p: p.stem)
def test_opencl_launches_are_the_ndranges_its_launch_json_lists(config):
    """The API-neutral records against the committed launch file (written by a template from the same plan):
    groups x work-group = the NDRange, the tensors its arguments, in order."""
    job = api.jobs(api.load_config(config.read_text()), ("opencl",))["opencl"]
    tensors, dispatches = TARGETS["opencl"].launches(job)
    launch = json.loads((REPO / "out" / config.stem / "opencl" / f"{config.stem}.launch.json").read_text())["launch"]
    assert [(d.kernel, list(d.tensors), list(d.global_size), list(d.work_group)) for d in dispatches] == \
        [(k["name"], k["args"], [*k["global_size"], *[1] * (3 - len(k["global_size"]))],
          [*k["local_size"], *[1] * (3 - len(k["local_size"]))]) for k in launch["kernels"]]
    assert [(t.name, t.kind, t.elements) for t in tensors] == \
        [(t["name"], t["kind"], math.prod(t["shape"])) for t in launch["tensors"]]
    k = launch["kernels"][0]
    ndrange, local = (k[key] + [1] * (3 - len(k[key])) for key in ("global_size", "local_size"))
    assert dispatches[0].describe(TARGETS["opencl"].api) == \
        f"{k['name']}: NDRange {ndrange} / local size {local}"  # OpenCL counts work-items


@pytest.mark.parametrize("config", _golden_configs("vulkan"), ids=lambda p: p.stem)
def test_vulkan_launches_are_the_dispatches_its_dispatch_file_lists(config):
    job = api.jobs(api.load_config(config.read_text()), ("vulkan",))["vulkan"]
    tensors, dispatches = TARGETS["vulkan"].launches(job)
    text = (REPO / "out" / config.stem / "vulkan" / f"{config.stem}.dispatch.txt").read_text()
    listed = [(int(op), [int(v) for v in groups.split(",")], [int(v) for v in local.split(",")])
              for op, groups, local in re.findall(r"op (\d+): dispatch \[([\d, ]+)\] x local \[([\d, ]+)\]", text)]
    assert listed and [(j + 1, list(d.groups), list(d.work_group)) for j, d in enumerate(dispatches)] == listed
    (_, groups, local) = listed[0]
    assert dispatches[0].describe(TARGETS["vulkan"].api) == \
        f"{config.stem}.op1: dispatch {groups} / workgroup size {local}"  # Vulkan counts groups
    names = {t.name for t in tensors}
    assert all(set(d.tensors) <= names for d in dispatches) and "output" in dispatches[-1].tensors
