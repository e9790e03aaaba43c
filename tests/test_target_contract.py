"""The contracts every registered target keeps with the core's loops, tested once over all of them (and the plugin
target of tests/plugin_target): an output the kernel never writes is caught, the output starts from the poison
the core asks for, validate's and bench's JSON have one shape, a missing toolchain is named with what to
install. A target added to the registry without an entry in KERNELS below fails test_every_target_is_covered."""
from __future__ import annotations

import json
import re
from dataclasses import replace

import numpy as np
import pytest
from click.testing import CliRunner
from builders import toolchain
from conftest import SMALL_UINT8, require_tools
from plugin_target import CArgs

from kernelgen import api
from kernelgen.cli import main
from kernelgen.measure.records import Status
from kernelgen.measure.tensors import random_inputs
from kernelgen.measure.validate import validate
from kernelgen.targets import TARGETS
from kernelgen.targets.base import Job
from kernelgen.toolstatus import ToolStatus

FLOAT = """\
name: contract_{target}
input: {{shape: [1, 6, 7, 8]}}
ops:
  - conv2d: {{out_channels: 8, kernel: 3, pad: 1}}
targets: [{target}]
"""


def float_config(target: str) -> str:
    return FLOAT.format(target=target)


def vulkan_config(target: str) -> str:
    """A tile of 2x4 pixels, so that the 6x7 output takes several workgroups (lavapipe's default 8x8 takes one)."""
    return FLOAT.format(target=target) + "vulkan: {ivc_tile: [2, 4, 8]}\n"


def uint8_config(target: str) -> str:
    return SMALL_UINT8.format(name=f"contract_{target}", bias="").replace("[hvx]", f"[{target}]")


def _drop_first(pattern: str):
    """The job with the first store the pattern finds removed from its source: those outputs are never written."""
    def broken(job: Job) -> Job:
        files = dict(job.files)
        for name, text in files.items():
            new = re.sub(pattern, ";", text, count=1)
            if new != text:
                files[name] = new
                return replace(job, files=files)
        raise AssertionError(f"no store matches {pattern!r}")
    return broken


def _c_store_into_the_cache(job: Job) -> Job:
    # every store into the output: the c target writes a conv's store twice (whole 32-channel blocks unguarded, a
    # channel tail guarded), and only one of them runs for a given block
    files = {k: v.replace("output[", "(void)output; output_cache[") if k.endswith(".c") else v
             for k, v in job.files.items()}
    assert files != dict(job.files)
    return replace(job, files=files)


def _vulkan_too_few_workgroups(job: Job) -> Job:
    """A dispatch of one workgroup for a plan that needs several."""
    vk = job.target_plan
    assert vk.ops[-1].groups != (1, 1, 1)
    short = replace(vk, ops=tuple(replace(op, groups=(1, 1, 1)) for op in vk.ops))
    return replace(job, target_plan=short)


# target -> (config template, tools it needs, how to break its kernel so that outputs go unwritten)
KERNELS = {
    "c": (float_config, toolchain("c"), _c_store_into_the_cache),
    "c_args": (float_config, toolchain("c"), _c_store_into_the_cache),
    "hvx": (uint8_config, toolchain("hvx"),
            _drop_first(r"kg_write_back\(output_cache, output, 0, ko_outer, ho_outer\);")),
    "opencl": (float_config, toolchain("opencl"), _drop_first(r"vstore\d*\([^;]*output \+[^;]*\);|write_imagef\(output,[^;]*\);")),
    "vulkan": (vulkan_config, toolchain("vulkan"), _vulkan_too_few_workgroups),
}
TOOLS = {name: tools for name, (_, tools, _) in KERNELS.items()}


@pytest.fixture
def registry(monkeypatch):
    """The registry with the plugin target added, as a program embedding kernelgen would add it."""
    monkeypatch.setitem(TARGETS, "c_args", CArgs())
    return TARGETS


def _job(target: str) -> Job:
    config = api.parse_config(KERNELS[target][0](target), f"contract_{target}.yaml")
    return api.jobs(config, (target,))[target]


def _require(target: str) -> None:
    require_tools(*TOOLS[target])


def test_every_target_is_covered():
    assert set(TARGETS) | {"c_args"} == set(KERNELS)


@pytest.mark.slow
@pytest.mark.parametrize("target", list(KERNELS))
def test_an_unwritten_output_is_caught(registry, target):
    """The real kernel passes; the same kernel with a store removed fails, naming what it saw."""
    _require(target)
    job = _job(target)
    good = validate(registry[target], job, seed=3)
    assert good.status is Status.PASS, good.detail
    bad = validate(registry[target], KERNELS[target][2](job), seed=3)
    assert bad.status is Status.FAIL
    assert ("outputs differ" if job.config.dtype == "uint8" else "never written") in bad.detail
    assert bad.failure[0] == "unwritten"  # what failed, where err/bound cannot say it (issue 33)


@pytest.mark.slow
@pytest.mark.parametrize("target", list(KERNELS))
def test_the_output_starts_from_the_poison_the_core_asks_for(registry, target, tmp_path):
    """Run the broken kernel from two poison bytes: the elements it never writes hold exactly those bytes."""
    _require(target)
    t = registry[target]
    job = KERNELS[target][2](_job(target))
    args = random_inputs(job.config, job.plan, np.random.default_rng(0))
    with t.compile(job, tmp_path) as exe:
        outputs = t.run_poisoned(exe, args, (0x00, 0x5A))
    zero, other = (outputs[p].view(np.uint8).reshape(outputs[p].size, -1) for p in (0x00, 0x5A))
    unwritten = (zero != other).any(axis=1)
    assert unwritten.any()
    assert (zero[unwritten] == 0x00).all() and (other[unwritten] == 0x5A).all()


@pytest.mark.slow
@pytest.mark.parametrize("target", list(KERNELS))
def test_validate_and_bench_json_have_one_shape(registry, target, tmp_path):
    _require(target)
    path = tmp_path / f"contract_{target}.yaml"
    path.write_text(KERNELS[target][0](target))
    shown = CliRunner().invoke(main, ["validate", str(path), "--json", "--seed", "4"])
    assert shown.exit_code == 0, shown.output
    data = json.loads(shown.stdout)
    assert set(data) == {"context", "results"} and data["context"]["kernelgen_version"]
    (row,) = data["results"]
    assert list(row) == ["config", "target", "status", "max_abs_error", "max_rel_error", "bound_ratio", "seed",
                         "oracles", "threshold", "checked", "detail", "failure"]
    assert (row["config"], row["target"], row["status"], row["seed"]) == (f"contract_{target}", target, "pass", 4)
    timed = CliRunner().invoke(main, ["bench", str(path), "--json", "--repeat", "2"])
    assert timed.exit_code == 0, timed.output
    bench = json.loads(timed.stdout)
    assert set(bench) == {"context", "results"}
    first = bench["results"][0]
    assert list(first)[:13] == ["config", "target", "label", "seconds", "seconds_min", "seconds_median",
                                "seconds_max", "flops", "gflops", "bytes", "gbs", "best", *list(first)[12:13]]
    assert first["flops"] == api.plan(api.load_config(path)).flops
    # a clock, or counters instead of one (hvx under QEMU): never neither
    assert (first["seconds"] or 0) > 0 or first.get("packets", 0) > 0


@pytest.mark.parametrize("target", list(KERNELS))
def test_a_missing_toolchain_is_named_with_what_to_install(registry, target, tmp_path, monkeypatch):
    path = tmp_path / f"contract_{target}.yaml"
    path.write_text(KERNELS[target][0](target))
    monkeypatch.setattr(registry[target], "toolchain",
                        lambda: (ToolStatus("some-compiler", False, "", "apt-get install some-compiler"),))
    shown = CliRunner().invoke(main, ["validate", str(path), "--skip-missing"])
    assert shown.exit_code == 0, shown.output
    lines = shown.output.splitlines()
    assert lines[1].split()[:3] == [f"contract_{target}", target, "skipped"]
    assert lines[-1] == (f"{target}: skipped for 1 config(s), missing some-compiler; install: apt-get install "
                         f"some-compiler")
