"""Issue 21: sweeps that keep what they measured. Each variant runs in a process of its own; its result is in the
--output JSON Lines file as soon as it exists; a second run measures only what the file lacks; a variant over
--variant-timeout is recorded as timed out and the sweep goes on; Ctrl-C keeps everything measured so far."""
from __future__ import annotations

import json
import time

from click.testing import CliRunner
from conftest import requires_tool

from kernelgen.api import parse_config
from kernelgen.measure.records import BenchOptions, Timings
from kernelgen.cli import main
from kernelgen.measure.sweep import VariantStatus, read_records, sweep
from kernelgen.targets import TARGETS
from kernelgen.targets.gpu.profiles import SweepSpace
from kernelgen.targets.base import Executable, Target

SMALL = ("name: small\ninput: {shape: [1, 8, 8, 16]}\nops: [{conv2d: {out_channels: 16, kernel: 3, pad: 1}}]\n"
         "targets: [opencl, vulkan]\n")


class Sleepy(Target):
    """A stand-in target: variant "slow" never finishes in time, the others answer at once (picklable: the
    variant's process imports this module). It writes no files and times nothing: its clock is made up."""

    name = "sleepy"
    summary = "a stand-in whose variant 'slow' never finishes"
    files = ()

    def toolchain(self):
        return ()

    def compile(self, job, workdir, device=None):
        return Executable(job)

    def run(self, executable, args, poison):
        raise NotImplementedError("sleepy only times")

    def time(self, executable, args, repeat):
        name = executable.job.config.name
        if name == "slow":
            time.sleep(60)
        return (Timings(label=name, seconds=(0.5 if name == "a" else 0.25,)),)


# A variant's time limit counts its process's start (kernelgen and this module imported in a fresh interpreter): 3 s
# was missed on a 2-core host at load 5-9, where "a" then timed out too; "slow" sleeps far past this.
TIMEOUT = 15


def _variants(*names: str):
    return [(name, parse_config(SMALL.replace("name: small", f"name: {name}"), f"{name}.yaml")) for name in names]


def test_a_variant_over_its_timeout_is_recorded_and_the_sweep_goes_on(tmp_path):
    output = tmp_path / "sweep.jsonl"
    config = parse_config(SMALL, "small.yaml")
    results = sweep(config, Sleepy(), _variants("a", "slow", "b"), BenchOptions(), output, timeout=TIMEOUT)
    assert [(r.variant, r.status) for r in results] == [("a", VariantStatus.MEASURED),
                                                        ("slow", VariantStatus.TIMED_OUT),
                                                        ("b", VariantStatus.MEASURED)]
    assert [r.row.best for r in results if r.row] == [False, True]  # b is faster
    lines = [json.loads(line) for line in output.read_text().splitlines()]
    assert [(r["variant"], r["status"]) for r in lines] == [("a", "measured"), ("slow", "timed out"),
                                                            ("b", "measured")]
    assert f"no result within {TIMEOUT} s" in lines[1]["detail"]
    # resumed: every variant is in the file already, nothing is measured again
    import kernelgen.measure.sweep as sweeping

    def measured(*args, **kwargs):
        raise AssertionError("a variant the file holds was measured again")

    original, sweeping.measure_variant = sweeping.measure_variant, measured
    try:
        again = sweep(config, Sleepy(), _variants("a", "slow", "b"), BenchOptions(), output, timeout=TIMEOUT)
    finally:
        sweeping.measure_variant = original
    assert [(r.variant, r.status) for r in again] == [(r.variant, r.status) for r in results]
    assert len(output.read_text().splitlines()) == 3


def test_ctrl_c_keeps_what_was_measured_and_a_torn_line_is_measured_again(tmp_path):
    output = tmp_path / "sweep.jsonl"
    config = parse_config(SMALL, "small.yaml")

    def interrupt(done, total, result):
        if done == 1:
            raise KeyboardInterrupt

    results = sweep(config, Sleepy(), _variants("a", "b"), BenchOptions(), output, progress=interrupt)
    assert [r.variant for r in results] == ["a"] and results[0].row.best
    assert list(read_records(output)) == [("small", "sleepy", "a")]
    with open(output, "a") as out:
        out.write('{"config": "small", "target": "sleepy", "vari')  # killed mid-line
    assert list(read_records(output)) == [("small", "sleepy", "a")]
    results = sweep(config, Sleepy(), _variants("a", "b"), BenchOptions(), output)
    assert [r.status for r in results] == [VariantStatus.MEASURED, VariantStatus.MEASURED]


@requires_tool("py:pyopencl")
def test_cli_sweep_streams_jsonl_and_resumes(tmp_path, monkeypatch):
    """The opencl sweep through the command line, cut to three variants: one JSON line each, a best one, and a
    second run that measures nothing."""
    from kernelgen.targets.opencl import sweep as opencl_sweep

    # the variants are listed in this process (the command's), so the patch holds; each one runs in a child
    monkeypatch.setattr(opencl_sweep, "OPENCL_SWEEPS", {k: SweepSpace(v.tiles[:1], v.sizes)
                                                        for k, v in opencl_sweep.OPENCL_SWEEPS.items()})
    config = tmp_path / "small.yaml"
    config.write_text(SMALL)
    output = tmp_path / "sweep.jsonl"
    args = ["bench", str(config), "--target", "opencl", "--sweep", "--repeat", "2", "--output", str(output),
            "--variant-timeout", "120", "--json"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in output.read_text().splitlines()]
    assert len(lines) == len(opencl_sweep.OPENCL_SWEEPS["vectors"].sizes) and all(r["status"] == "measured" for r in lines)
    rows = [r for r in json.loads(result.stdout)["results"] if r["target"] == "opencl"]
    assert sum(r["best"] for r in rows) == 1 and all(r["seconds"] > 0 for r in rows)
    again = CliRunner().invoke(main, args)
    assert again.exit_code == 0 and len(output.read_text().splitlines()) == len(lines)
    assert "[1/3] opencl small tile=" in again.stderr


@requires_tool("glslangValidator", "py:vulkan")
def test_a_rdna2_sweep_ranks_by_aco_and_puts_spilling_variants_last(tmp_path, monkeypatch):
    """No RDNA2 GPU here: with the rdna2 profile each variant is compiled by RADV's ACO for a null device and
    ranked by its estimate (inverse throughput x waves); a variant that spills ranks after every clean one."""
    from kernelgen.targets.vulkan import sweep as vulkan_sweep

    # the variants are listed in this process (target.sweep_variants below), so the patch holds
    monkeypatch.setattr(vulkan_sweep, "GPU_SWEEP", SweepSpace(((2, 4, 4), (4, 8, 8)), ((16, 4, 1),)))
    config = parse_config(SMALL.replace("targets: [opencl, vulkan]", "vulkan: {device: rdna2}\ntargets: [vulkan]")
                          .replace("shape: [1, 8, 8, 16]", "shape: [1, 34, 34, 64]").replace("out_channels: 16",
                                                                                          "out_channels: 64"), "r.yaml")
    target = TARGETS["vulkan"]
    results = sweep(config, target, target.sweep_variants(config), BenchOptions())
    by_key = {r.variant: r.row for r in results}
    small, big = by_key["ivc_tile=[2, 4, 4] wg_size=[16, 4, 1]"], by_key["ivc_tile=[4, 8, 8] wg_size=[16, 4, 1]"]
    assert small.metrics["spilled_vgprs"] == 0 and big.metrics["spilled_vgprs"] > 0
    assert small.best and not big.best and small.rank < big.rank
    assert small.seconds != small.seconds and "(ACO estimate)" in small.label  # no wall time: an estimate
