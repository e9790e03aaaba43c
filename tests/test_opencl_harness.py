"""The OpenCL harness against numpy: buffers, RGBA float/half images, kernel sequences, errors.

Inputs are small integers so every result is exact in float32 and in float16 storage
(|values| <= 24 < 2048, the largest range of consecutive integers half represents).
"""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from conftest import requires_tool
from kernelgen.errors import ToolchainError
from kernelgen.targets.opencl import toolchain as opencl
from kernelgen.targets.opencl.toolchain import BufferArg, ImageArg, Launch, ScalarArg

SAXPY = """\
__kernel void saxpy(const float a, __global const float *x, __global const float *y,
                    __global float *out)
{
    const size_t i = get_global_id(0);
    out[i] = a * x[i] + y[i];
}
"""

# CLK_ADDRESS_CLAMP returns the border colour (0,0,0,0) for RGBA outside the image: the
# zero padding the conv target relies on, so the test reads one texel past the right edge.
SAMPLER = "CLK_NORMALIZED_COORDS_FALSE | CLK_ADDRESS_CLAMP | CLK_FILTER_NEAREST"

SHIFT_ADD = f"""\
__kernel void shift_add(__read_only image2d_t src, __write_only image2d_t dst)
{{
    const sampler_t smp = {SAMPLER};
    const int2 p = (int2)(get_global_id(0), get_global_id(1));
    const float4 v = 2.0f * read_imagef(src, smp, p) + read_imagef(src, smp, p + (int2)(1, 0));
    write_imagef(dst, p, v);
}}
"""

CHAIN = f"""\
__kernel void scale_bias(__read_only image2d_t src, __write_only image2d_t dst, const float scale)
{{
    const sampler_t smp = {SAMPLER};
    const int2 p = (int2)(get_global_id(0), get_global_id(1));
    write_imagef(dst, p, scale * read_imagef(src, smp, p) + 1.0f);
}}

__kernel void image_to_buffer(__read_only image2d_t src, __global float4 *dst)
{{
    const sampler_t smp = {SAMPLER};
    const int2 p = (int2)(get_global_id(0), get_global_id(1));
    dst[p.y * get_global_size(0) + p.x] = read_imagef(src, smp, p) - 3.0f;
}}
"""


@pytest.fixture(scope="module")
def runner():
    with opencl.OpenCLRunner() as r:
        yield r


def small_ints(rng: np.random.Generator, shape: tuple[int, ...], dtype=np.float32) -> np.ndarray:
    return rng.integers(-8, 9, size=shape).astype(dtype)


def test_import_does_not_import_pyopencl():
    code = "import sys, kernelgen.targets.opencl.toolchain; assert 'pyopencl' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_status_never_raises():
    statuses = opencl.status()
    assert statuses[0].name == "pyopencl"
    assert all(s.install_hint for s in statuses)


def test_image_arg_rejects_bad_shapes():
    with pytest.raises(ToolchainError, match=r"\[height, width\*4\]"):
        ImageArg(np.zeros((4, 6), np.float32))
    with pytest.raises(ToolchainError, match="float32 or float16"):
        ImageArg(np.zeros((4, 8), np.float64))


@requires_tool("py:pyopencl")
def test_saxpy_buffer_matches_numpy(runner):
    rng = np.random.default_rng(1)
    n = 1000
    x, y = small_ints(rng, (n,)), small_ints(rng, (n,))
    # one element more than the launch covers: it must keep the NaN sentinel uploaded with it
    out = np.full(n + 1, np.nan, np.float32)
    args = [ScalarArg(2.0), BufferArg(x), BufferArg(y), BufferArg(out, output=True)]
    result = runner.run(SAXPY, "saxpy", args, (n,), None, repeat=3)
    assert sorted(result.outputs) == [3]
    np.testing.assert_array_equal(result.outputs[3][:n], 2.0 * x + y)  # exact: small integers
    assert np.isnan(result.outputs[3][n])
    assert len(result.kernel_times_ns) == 3
    assert all(t > 0 for t in result.kernel_times_ns)


@requires_tool("py:pyopencl")
@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["CL_FLOAT", "CL_HALF_FLOAT"])
def test_image_round_trip_matches_numpy(runner, dtype):
    if dtype == np.float16 and not runner.info.half_images:
        pytest.skip("device has no RGBA CL_HALF_FLOAT images")
    rng = np.random.default_rng(2)
    height, width = 5, 7
    src = small_ints(rng, (height, width * 4), dtype)
    # one column wider than the launch: that column is never written and must stay NaN
    dst = np.full((height, (width + 1) * 4), np.nan, dtype)
    args = [ImageArg(src), ImageArg(dst, output=True)]
    out = runner.run(SHIFT_ADD, "shift_add", args, (width, height), None).outputs[1]

    texels = src.astype(np.float32).reshape(height, width, 4)
    right = np.zeros_like(texels)
    right[:, :-1] = texels[:, 1:]  # the clamp-to-border read past the edge is zero
    expected = (2.0 * texels + right).reshape(height, width * 4)
    assert out.dtype == dtype and out.shape == dst.shape
    np.testing.assert_array_equal(out[:, : width * 4], expected.astype(dtype))
    assert np.isnan(out[:, width * 4 :]).all()


@requires_tool("py:pyopencl")
def test_sequence_keeps_intermediate_image_on_device(runner):
    rng = np.random.default_rng(3)
    height, width = 6, 9
    src = small_ints(rng, (height, width * 4))
    tensors = {
        "src": ImageArg(src),
        "mid": ImageArg(np.full_like(src, np.nan)),  # intermediate: never read back
        "out": BufferArg(np.full(height * width * 4, np.nan, np.float32), output=True),
    }
    launches = [
        Launch(CHAIN, "scale_bias", ("src", "mid", ScalarArg(3.0)), (width, height)),
        Launch(CHAIN, "image_to_buffer", ("mid", "out"), (width, height)),
    ]
    result = runner.run_sequence(launches, tensors, repeat=2)
    assert sorted(result.outputs) == ["out"]
    np.testing.assert_array_equal(result.outputs["out"], (3.0 * src + 1.0 - 3.0).ravel())
    assert len(result.kernel_times_ns) == 2


@requires_tool("py:pyopencl")
def test_build_error_carries_build_log(runner):
    source = "__kernel void broken(__global float *a) { a[0] = undeclared_thing_42; }\n"
    with pytest.raises(ToolchainError, match="build failed") as info:
        runner.compile(source)
    assert "undeclared_thing_42" in str(info.value)  # the compiler's own diagnostic line


@requires_tool("py:pyopencl")
def test_oversized_image_names_the_limit(runner):
    max_w, max_h = runner.info.image2d_max
    too_wide = ImageArg(np.zeros((1, (max_w + 1) * 4), np.float32))
    fits = ImageArg(np.zeros((1, 4), np.float32))
    with pytest.raises(ToolchainError, match=f"image2d limit {max_w}x{max_h}"):
        runner.run(SHIFT_ADD, "shift_add", [too_wide, fits], (1, 1))


@requires_tool("py:pyopencl")
def test_mismatched_arguments_are_refused_before_launch(runner):
    x = np.zeros(4, np.float32)
    # a scalar where the kernel takes a pointer would segfault PoCL; a float64 array would be
    # silently reinterpreted as float32
    bad = [ScalarArg(2.0), BufferArg(x), ScalarArg(0, "int64"), BufferArg(x.astype(np.float64))]
    with pytest.raises(ToolchainError) as info:
        runner.run(SAXPY, "saxpy", bad, (4,))
    message = str(info.value)
    assert "y (float*) needs a BufferArg, got ScalarArg" in message
    assert "out (float*) needs float32 data, got float64" in message
