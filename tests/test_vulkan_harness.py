"""The Vulkan toolchain harness: GLSL -> SPIR-V, runs on lavapipe, timing, device facts.

Float results are compared exactly: the inputs are small integers and halves, so every
product and sum below is exactly representable in float32 and rounding cannot occur.
"""
from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from conftest import requires_tool

from kernelgen.errors import ToolchainError
from kernelgen.targets.gpu.profiles import VULKAN_FMA_SHAPES, VULKAN_PROBE_SIZES
from kernelgen.targets.vulkan import device, probes, runtime, toolchain

GLSL_TOOLS = ("glslangValidator", "spirv-val")
DEVICE_TOOLS = (*GLSL_TOOLS, "py:vulkan")

# y[i] = A * x[i] + y[i]: A is a specialization constant, n a push constant.
SAXPY = """#version 450
layout(local_size_x = 64) in;
layout(constant_id = 0) const float A = 1.0;
layout(push_constant) uniform Push { uint n; } p;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) buffer Y { float y[]; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < p.n) {
        y[i] = A * x[i] + y[i];
    }
}
"""

# dst[i] = src[i] * SCALE + OFFSET, for chaining stages.
AFFINE = """#version 450
layout(local_size_x = 64) in;
layout(constant_id = 0) const float SCALE = 1.0;
layout(constant_id = 1) const float OFFSET = 0.0;
layout(push_constant) uniform Push { uint n; } p;
layout(std430, binding = 0) readonly buffer Src { float src[]; };
layout(std430, binding = 1) writeonly buffer Dst { float dst[]; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < p.n) {
        dst[i] = src[i] * SCALE + OFFSET;
    }
}
"""

# Counts loop trips; lavapipe cuts every invocation off after 65,535 back-edges in total.
COUNTER = """#version 450
layout(local_size_x = 1) in;
layout(push_constant) uniform Push { uint trips; } p;
layout(std430, binding = 0) buffer Count { uint count[]; };
void main() {
    uint k = 0u;
    for (uint i = 0u; i < p.trips; ++i) {
        k += 1u;
    }
    count[0] = k;
}
"""


def _u32(*values: int) -> bytes:
    return np.array(values, np.uint32).tobytes()


@pytest.fixture(scope="module")
def runner():
    with runtime.VulkanRunner() as r:
        yield r


def test_status_never_raises_and_names_every_tool():
    names = [s.name for s in toolchain.status()]
    assert names == ["glslangValidator", "spirv-val", "spirv-dis", "python:vulkan", "vulkan-device"]
    assert all(s.install_hint for s in toolchain.status())


def test_importing_the_toolchain_does_not_import_the_binding():
    code = "import sys, kernelgen.targets.vulkan.toolchain, kernelgen.targets.vulkan.runtime, kernelgen.targets.vulkan.probes; print('vulkan' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@requires_tool(*GLSL_TOOLS, "spirv-dis")
def test_compile_and_disassemble_are_deterministic():
    first = toolchain.compile_glsl(SAXPY)
    assert first[:4] == b"\x03\x02\x23\x07"  # SPIR-V magic, little-endian
    assert toolchain.compile_glsl(SAXPY) == first
    text = toolchain.disassemble(first)
    assert "OpEntryPoint GLCompute %main \"main\"" in text
    assert "SpecId 0" in text
    assert toolchain.disassemble(first) == text


@requires_tool(*GLSL_TOOLS)
def test_defines_reach_the_preprocessor():
    source = "#version 450\nlayout(local_size_x = WIDTH) in;\nvoid main() {}\n"
    with pytest.raises(ToolchainError):
        toolchain.compile_glsl(source)
    assert toolchain.compile_glsl(source, defines={"WIDTH": "32"})


@requires_tool(*GLSL_TOOLS)
def test_compile_error_carries_glslang_error_line():
    broken = SAXPY.replace("y[i] = A * x[i] + y[i];", "y[i] = A * z[i];")
    with pytest.raises(ToolchainError) as err:
        toolchain.compile_glsl(broken)
    assert "ERROR: kernel.comp:10: 'z' : undeclared identifier" in str(err.value)


@requires_tool(*DEVICE_TOOLS)
def test_device_info_describes_lavapipe(runner):
    info = runner.info
    assert info in device.list_devices()
    assert info.subgroup_size >= 1 and info.timestamp_period_ns > 0
    if "llvmpipe" in info.name:  # facts the planner relies on, for this driver only
        assert info.subgroup_size == 8
        assert info.shader_float16 and info.storage_16bit and info.storage_8bit


@requires_tool(*DEVICE_TOOLS)
def test_saxpy_matches_numpy_exactly(runner):
    n = 1000  # not a multiple of the 64-wide workgroup: the tail is masked by `n`
    x = (np.arange(n) % 97).astype(np.float32)
    y = (np.arange(n) % 13 - 6).astype(np.float32)
    result = runner.run(toolchain.compile_glsl(SAXPY), [x, y], (16, 1, 1),
                        spec_constants={0: 2.5}, push_constants=_u32(n))
    out_x, out_y = result.outputs
    np.testing.assert_array_equal(out_x, x)
    np.testing.assert_array_equal(out_y, np.float32(2.5) * x + y)
    assert out_y.dtype == np.float32 and out_y.shape == (n,)


# dst[i] = texel[i] * u[i % 4] + offset: a uniform texel buffer and a uniform buffer beside a storage one.
BINDING_KINDS = """#version 450
layout(local_size_x = 64) in;
layout(binding = 0) uniform samplerBuffer texel;
layout(std140, binding = 1) uniform U { vec4 u[4]; };
layout(std430, binding = 2) writeonly buffer Dst { vec4 dst[]; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    dst[i] = texelFetch(texel, int(i)) * u[i % 4u] + vec4(0.5);
}
"""


@requires_tool(*DEVICE_TOOLS)
def test_uniform_and_texel_bindings(runner):
    n = 128
    texel = (np.arange(4 * n) % 29).astype(np.float32).reshape(n, 4)
    u = (np.arange(16) % 5 - 2).astype(np.float32).reshape(4, 4)
    result = runner.run(toolchain.compile_glsl(BINDING_KINDS), [texel, u, np.zeros((n, 4), np.float32)], (2, 1, 1),
                        kinds=("texel", "uniform", "storage"))
    np.testing.assert_array_equal(result.outputs[2], texel * u[np.arange(n) % 4] + np.float32(0.5))
    with pytest.raises(ToolchainError, match="kinds"):
        runtime.Stage(toolchain.compile_glsl(BINDING_KINDS), (0, 1, 2), (1, 1, 1), kinds=("texel", "image", "storage"))
    with pytest.raises(ToolchainError, match="texel buffers"):
        runner.run(toolchain.compile_glsl(BINDING_KINDS), [texel.astype(np.int32), u, np.zeros((n, 4), np.float32)],
                   (2, 1, 1), kinds=("texel", "uniform", "storage"))


@requires_tool(*DEVICE_TOOLS)
def test_buffers_keep_dtype_and_shape(runner):
    # A 2-D int16 buffer bound to a shader that only reads binding 0 comes back as is.
    x = np.arange(64, dtype=np.float32)
    extra = np.arange(12, dtype=np.int16).reshape(3, 4)
    y = np.zeros(64, np.float32)
    stage = runtime.Stage(toolchain.compile_glsl(SAXPY), (0, 2), (1, 1, 1), {0: 1.0}, _u32(64))
    result = runner.run_sequence([stage], [x, extra, y])
    assert result.outputs[1].dtype == np.int16 and result.outputs[1].shape == (3, 4)
    np.testing.assert_array_equal(result.outputs[1], extra)
    np.testing.assert_array_equal(result.outputs[2], x)  # y = 1 * x + 0


@requires_tool(*DEVICE_TOOLS)
def test_two_stage_sequence_reads_the_first_stage_output(runner):
    # lavapipe finishes each dispatch before starting the next, so this passes there even
    # without the barrier; test_runs_are_clean_under_the_validation_layer proves it.
    n = 4096
    spirv = toolchain.compile_glsl(AFFINE)
    src = np.arange(n, dtype=np.float32)
    mid = np.full(n, np.nan, np.float32)  # sentinel: stage 2 must never see it
    dst = np.full(n, np.nan, np.float32)
    stages = [runtime.Stage(spirv, (0, 1), (n // 64, 1, 1), {0: 2.0, 1: 1.0}, _u32(n)),
              runtime.Stage(spirv, (1, 2), (n // 64, 1, 1), {0: 0.5, 1: -3.0}, _u32(n))]
    result = runner.run_sequence(stages, [src, mid, dst], repeat=2)
    np.testing.assert_array_equal(result.outputs[1], src * 2 + 1)
    np.testing.assert_array_equal(result.outputs[2], (src * 2 + 1) * 0.5 - 3)
    assert len(result.gpu_times_ns) == 2
    # One time per stage and repeat (bench pairs the FMA probe with a kernel this way);
    # a repeat's time is the sum of its stages'.
    assert [len(t) for t in result.stage_times_ns] == [2, 2]
    assert all(t > 0 for times in result.stage_times_ns for t in times)
    assert result.gpu_times_ns == tuple(sum(t) for t in result.stage_times_ns)


@requires_tool(*DEVICE_TOOLS)
def test_gpu_times_has_one_positive_entry_per_repeat(runner):
    x = np.ones(256, np.float32)
    y = np.zeros(256, np.float32)
    result = runner.run(toolchain.compile_glsl(SAXPY), [x, y], (4, 1, 1),
                        spec_constants={0: 1.0}, push_constants=_u32(256), repeat=4)
    assert len(result.gpu_times_ns) == 4
    assert all(t > 0 for t in result.gpu_times_ns)
    np.testing.assert_array_equal(result.outputs[1], 4 * x)  # in-place: applied 4 times


@requires_tool(*DEVICE_TOOLS)
@pytest.mark.parametrize("shape", VULKAN_FMA_SHAPES, ids=lambda s: s.name)
def test_every_fma_probe_shape_runs_the_steps_it_counts(runner, shape):
    """Each accumulator a_n = m * a_{n-1} + c with m = 0.999, c = 0.001 tends to c / (1 - m) = 1 as
    1 + (a_0 - 1) * m^n: after the 16,384 steps the flop count assumes, |a - 1| < 1e-7 * |a_0 - 1|; a probe that
    lavapipe stopped early (its 65,535 back-edge limit) or that skipped trips stays visibly below 1 (1,000 steps:
    0.37 of the distance left). The result sums the accumulators."""
    assert shape.trips * shape.unroll == 16384 and shape.trips < 65535
    fma = probes.fma_probe(runner.info, shape, replace(VULKAN_PROBE_SIZES, fma_groups=2))
    assert fma.work == 2 * 64 * 16384 * shape.accumulators * shape.lanes * 2
    result = runner.run_sequence([fma.kernel.stage(0)], list(fma.kernel.arrays), repeat=1)
    np.testing.assert_allclose(result.outputs[0], shape.accumulators, rtol=1e-4)


@requires_tool(*DEVICE_TOOLS)
def test_lavapipe_stops_loops_after_65535_back_edges(runner):
    """Documents the device fact the planner must respect: on lavapipe, an invocation's
    loops end silently after 65,535 back-edges in total, whatever the loop bound says."""
    if "llvmpipe" not in runner.info.name:
        pytest.skip("a lavapipe fact")
    spirv = toolchain.compile_glsl(COUNTER)

    def trips(n: int) -> int:
        return int(runner.run(spirv, [np.zeros(1, np.uint32)], (1, 1, 1),
                              push_constants=_u32(n)).outputs[0][0])

    assert trips(60_000) == 60_000
    assert trips(100_000) < 100_000
    assert trips(100_000) == 65_535


@requires_tool(*DEVICE_TOOLS)
def test_bad_arguments_raise_toolchain_errors(runner):
    spirv = toolchain.compile_glsl(SAXPY)
    with pytest.raises(ToolchainError, match="only 1 were given"):
        runner.run_sequence([runtime.Stage(spirv, (0, 1), (1, 1, 1))], [np.zeros(4, np.float32)])
    with pytest.raises(ToolchainError, match="groups"):
        runner.run(spirv, [np.zeros(4, np.float32)] * 2, (0, 1, 1))
    with pytest.raises(ToolchainError, match="no Vulkan device"):
        runtime.VulkanRunner("no such device")


@requires_tool(*DEVICE_TOOLS)
def test_closed_runner_refuses_to_run():
    spirv = toolchain.compile_glsl(SAXPY)
    with runtime.VulkanRunner(0) as r:
        pass
    r.close()  # closing twice is harmless
    with pytest.raises(ToolchainError, match="closed"):
        r.run(spirv, [np.zeros(4, np.float32)] * 2, (1, 1, 1))


_LAYER_DIRS = ("/usr/share/vulkan/explicit_layer.d", "/etc/vulkan/explicit_layer.d")
_VALIDATED_RUNS = f"""
import sys
sys.path.insert(0, {str(Path(__file__).parent)!r})
import test_vulkan_harness as t
from kernelgen.targets.vulkan import device, probes, runtime, toolchain
from kernelgen.targets.gpu.profiles import VULKAN_FMA_SHAPES
with runtime.VulkanRunner() as runner:
    t.test_saxpy_matches_numpy_exactly(runner)
    t.test_buffers_keep_dtype_and_shape(runner)
    t.test_two_stage_sequence_reads_the_first_stage_output(runner)
    fma = probes.fma_probe(runner.info, VULKAN_FMA_SHAPES[0])
    runner.run_sequence([fma.kernel.stage(0)], list(fma.kernel.arrays), repeat=2)
print("runs done")
"""


@requires_tool(*DEVICE_TOOLS)
def test_runs_are_clean_under_the_validation_layer():
    """The Khronos validation layer, with synchronization validation, reports API misuse
    and missing barriers that lavapipe silently tolerates (it once caught a 129-byte
    push-constant update)."""
    if not any(Path(d, "VkLayer_khronos_validation.json").exists() for d in _LAYER_DIRS):
        pytest.skip("no Vulkan validation layer: apt-get install vulkan-validationlayers")
    env = dict(os.environ, VK_INSTANCE_LAYERS="VK_LAYER_KHRONOS_validation",
               VK_LAYER_ENABLES="VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT")
    done = subprocess.run([sys.executable, "-c", _VALIDATED_RUNS], capture_output=True,
                          text=True, env=env, timeout=120, check=False)
    log = done.stdout + done.stderr
    assert done.returncode == 0 and "runs done" in log, log
    assert "Validation Error" not in log and "SYNC-HAZARD" not in log, log
