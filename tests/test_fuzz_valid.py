"""Random valid configs: every notation the loader takes, planned with the planner's invariants
held, and validated against numpy on the c target (built by gcc and by clang-19, and a sample built with
AddressSanitizer and UndefinedBehaviorSanitizer: issue 44); a sampled few on opencl, vulkan and hvx (float32, and
uint8 chains around issue 32's crash: a residual op, then a grouped, strided and dilated one, batch 2, uint8 weights).

The geometry each config implies is computed by the strategy itself (tests/strategies.py),
independently of kernelgen, so a planner that gets a shape or a flop count wrong fails here.
"""
from __future__ import annotations

import pytest
import yaml
from builders import toolchain
from conftest import requires_tool
from hypothesis import given
from hypothesis import strategies as st
from strategies import fuzz_settings, hvx_uint8_configs, valid_configs
from test_c_compilers import COMPILERS, SANITIZED, compiler

from kernelgen.api import parse_config, validate, with_device
from kernelgen.errors import ConfigError, ToolchainError
from kernelgen.measure.records import Status
from kernelgen.planner import plan

# What a target documents it cannot do, and refuses with a clean config error (exit 2): a
# random valid config that hits one of these is not a defect. Anything else is.
DOCUMENTED_LIMITS = {
    "vulkan": ("writes pad_value only into channel padding",),
    "opencl": (),
    "hvx": (),
}


def _planned(case):
    config = parse_config(case.text, "fuzz.yaml")
    the_plan = plan(config)
    assert tuple(op.in_shape for op in the_plan.ops) == case.shapes[:-1]
    assert tuple(op.out_shape for op in the_plan.ops) == case.shapes[1:]
    assert the_plan.flops == case.flops
    if len(the_plan.ops) == 1 and not any(the_plan.ops[0].pad):
        # halos only add work; (padding taps are skipped, and a chain skips intermediate rows and
        # columns a strided op never reads, so neither compares)
        assert the_plan.executed_flops >= the_plan.flops
    # caches lie inside the workspace and do not overlap unless one is declared to reuse another
    caches = sorted(the_plan.caches, key=lambda c: (c.offset, c.elements, c.name))
    assert all(c.offset + c.elements <= the_plan.workspace_elements for c in caches)
    for first, second in zip(caches, caches[1:]):
        shared = second.aliases == first.name or first.aliases == second.name
        assert first.offset + first.elements <= second.offset or shared, (first.name, second.name)
    if config.schedule.budget is not None and the_plan.search is not None:
        assert the_plan.workspace_bytes <= config.schedule.budget
    # every output element is stored at least once; every filter is read at least once
    output = the_plan.tensors[-1]
    assert the_plan.traffic.output_bytes >= output.layout.logical_size * the_plan.element_bytes
    filters = sum(t.layout.logical_size for t in the_plan.tensors[1:-1] if t.name.startswith(("filter", "bias")))
    assert the_plan.traffic.filter_bytes >= filters * the_plan.element_bytes
    return config


def _validates(case, target: str, device: str | None = None) -> None:
    config = _planned(case)
    if device is not None:  # the profile's defaults: pocl-cpu keeps texture maps in buffers, adreno-7xx in textures
        config = with_device(config, device)
    try:
        result = validate(config, target, seed=1234)
    except ConfigError as error:
        if any(limit in str(error) for limit in DOCUMENTED_LIMITS[target]):
            return
        raise
    # "not run": a device feature this machine lacks (vulkan float16 on some devices; opencl fp16 arithmetic, which
    # the adreno-7xx profile asks for, on PoCL without cl_khr_fp16)
    assert result.passed or result.status is Status.NOT_RUN, f"{result.detail}\n{case.text}"


@requires_tool(*COMPILERS)
@fuzz_settings(ci_examples=60)
@given(case=valid_configs())
def test_random_configs_plan_soundly_and_match_numpy_on_c(case):
    """Each kernel built by gcc and by clang-19 at the target's default flags: right under one compiler is not
    enough (issue 44's max pool was wrong under gcc 12 only)."""
    config = _planned(case)
    for cc in COMPILERS:
        with compiler(cc):
            result = validate(config, "c", seed=1234)
        assert result.passed, f"{cc}: {result.detail}\n{case.text}"


@requires_tool(*toolchain("c"))
@fuzz_settings(ci_examples=24)
@given(case=valid_configs())
def test_random_configs_run_clean_under_sanitizers_on_c(case):
    """Built with AddressSanitizer and UndefinedBehaviorSanitizer (a finding ends the run: -fno-sanitize-recover)
    and run in a child process, each argument in an allocation of exactly its size, then held to numpy: undefined
    behaviour in the generated C is a failure naming the config, before some compiler turns it into a wrong
    output."""
    text = yaml.safe_dump({**case.data, "c": {"cflags": list(SANITIZED)}}, sort_keys=False)
    config = parse_config(text, "fuzz.yaml")
    try:
        result = validate(config, "c", seed=1234)
    except ToolchainError as error:
        pytest.fail(f"{error}\n{text}")
    assert result.passed, f"{result.detail}\n{text}"


@pytest.mark.slow
@requires_tool("py:pyopencl")
@fuzz_settings(ci_examples=12)
@given(case=valid_configs(dtypes=("float32", "float16"), max_side=9, max_channels=24, chain=2, target="opencl"),
       device=st.sampled_from(["pocl-cpu", "adreno-7xx"]))
def test_random_configs_match_numpy_on_opencl(case, device):
    _validates(case, "opencl", device)


@pytest.mark.slow
@requires_tool("py:vulkan", "glslangValidator")
@fuzz_settings(ci_examples=10)
@given(case=valid_configs(dtypes=("float32", "float16"), max_side=9, max_channels=24, chain=2, target="vulkan"))
def test_random_configs_match_numpy_on_vulkan(case):
    _validates(case, "vulkan")


@pytest.mark.slow
@requires_tool("clang-19", "qemu-hexagon")
@fuzz_settings(ci_examples=6)
@given(case=valid_configs(max_side=8, max_channels=12, chain=2, target="hvx"))
def test_random_configs_match_numpy_on_hvx(case):
    _validates(case, "hvx")


@pytest.mark.slow
@requires_tool("clang-19", "qemu-hexagon")
@fuzz_settings(ci_examples=8)
@given(case=hvx_uint8_configs())
def test_random_uint8_chains_are_bit_exact_on_hvx(case):
    """Bit-exact op by op in two poisoned runs, every buffer between guard pages: the read before the chain's
    input that issue 32 found died here by SIGSEGV."""
    _validates(case, "hvx")
