"""Validation of the `opencl` target: pack -> PoCL (pyopencl) -> unpack -> compare with numpy.

The source that runs is the one `kernelgen build` writes (render of the opencl target), its
kernels launched in the plan's order with the plan's NDRange. Intermediates and the output
start as NaN, so an element no kernel writes fails the comparison.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ... import reference
from ...config import Config
from ...plan import Plan
from ...planner import plan as make_plan
from ...validate import Inputs, Result, compare, make_inputs, not_run
from .args import Arg, BufferArg, ImageArg, Launch
from .options import NAME, half_arithmetic, opencl_options
from .plan import OpenCLPlan, check_device_limit, plan_opencl
from .toolchain import OpenCLRunner

Render = Callable[[Config, Plan], dict[str, str]]  # the target's render: config, plan -> {file name: text}

# Unit roundoff of IEEE binary16: half storage rounds each stored value by at most this factor,
# and full fp16 arithmetic rounds each operation by it.
HALF_UNIT_ROUNDOFF = 2.0 ** -11


def host_arrays(cplan: OpenCLPlan, logical: tuple[np.ndarray, ...]) -> dict[str, Arg]:
    """Every tensor of the launch plan as a harness argument; outputs pre-filled with NaN."""
    dtype = np.float16 if cplan.dtype == "float16" else np.float32
    n_filters = sum(s.role == "filter" for s in cplan.storages)
    # `logical` follows the plan's tensors: input, the filters, then the biases of the ops that have one
    filters, biases = iter(logical[1:1 + n_filters]), iter(logical[1 + n_filters:])
    args: dict[str, Arg] = {}
    for s in cplan.storages:
        if s.role == "input":
            array = s.layout.pack(logical[0])
        elif s.role == "filter":
            array = s.layout.pack(next(filters))
        elif s.role == "bias":
            array = s.layout.pack(next(biases))
        else:
            array = np.full(s.shape, np.nan, dtype=np.float32)
        array = np.ascontiguousarray(array.astype(dtype))
        wrap = ImageArg if s.kind == "image" else BufferArg
        args[s.name] = wrap(array, output=s.role == "output")
    return args


def launches(cplan: OpenCLPlan, source: str, *, half: bool = False) -> list[Launch]:
    kernels = cplan.half_kernels + tuple(k for k in cplan.kernels if not k.is_conv) if half else cplan.kernels
    return [Launch(source, k.name, k.args, k.global_size, k.local_size) for k in kernels]


def prepare(config: Config, runner: OpenCLRunner, render: Render) -> tuple[OpenCLPlan, str]:
    the_plan = make_plan(config)
    cplan = plan_opencl(config, the_plan)
    check_device_limit(config, cplan, runner.info.image2d_max, runner.info.name, runner.info.max_work_group_size)
    return cplan, render(config, the_plan)[f"{config.name}.cl"]


def validate_opencl(config: Config, seed: int, render: Render, *, device: int | str | None = None) -> Result:
    the_plan = make_plan(config)
    inputs = make_inputs(the_plan, np.random.default_rng(seed), config)
    if config.dtype == "float16":
        # Inputs exactly representable in half, so the reference sees what the device stores.
        logical = tuple(a.astype(np.float16).astype(np.float32) for a in inputs.logical)
        inputs = Inputs(logical, inputs.physical)
    half_math = half_arithmetic(config)
    with OpenCLRunner(device) as runner:
        cplan, source = prepare(config, runner, render)
        note = ""
        if cplan.half_kernels and not runner.info.has_fp16:
            note = f"full-fp16 kernels not run: {runner.info.name} lacks cl_khr_fp16"
            if half_math:
                return not_run(config, NAME, seed, "not run", note)
        result = runner.run_sequence(launches(cplan, source, half=half_math), host_arrays(cplan, inputs.logical))
    storage = HALF_UNIT_ROUNDOFF if config.dtype == "float16" else 0.0
    accumulate = HALF_UNIT_ROUNDOFF if half_math else reference.FLOAT32_UNIT_ROUNDOFF
    output = result.outputs["output"].astype(np.float32)
    checked = compare(config, the_plan, NAME, seed, inputs, output, accumulate_roundoff=accumulate,
                      storage_roundoff=storage)
    if note and checked.passed:
        return Result(config=checked.config, target=checked.target, status=checked.status,
                      max_abs_error=checked.max_abs_error, max_rel_error=checked.max_rel_error,
                      bound_ratio=checked.bound_ratio, seed=seed, detail=note)
    return checked
