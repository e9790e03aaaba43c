"""`kernelgen run`: the generated kernel on the user's own tensors.

The tensors come as the config lists them: the input and side inputs in the order of their layout's letters (an
imported NCHW config takes NCHW arrays, as its model does; NHWC and blocked nhwc layouts NHWC), OIHW filters, one
bias value per output channel; named as the plan names the kernel's arguments (input, side_<name>, filter<j>,
bias<j>). The layout engine packs them into the physical layouts, the target runs the kernel once (its output
poisoned first) and the output comes back unpacked, in the order of the output layout's letters. An imported
config's weights default to the model's. (Validation and network runs pass logical NHWC arrays: listed=False.)

A quantized (uint8) config takes its tensors as integers (uint8 input, the weight type's filters, int32 biases),
or as real values, which are quantized as the config says: the input at quant.input_scale / input_zero_point,
filters at each op's weight scale (per channel where it has several) and zero point, biases at
input_scale * weight_scale[k] - round half to even, saturated to the type, as onnxruntime's QuantizeLinear does.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import numpy as np

from ..config import Config
from ..errors import ConfigError, ConfigProblem, KernelgenError
from ..layout import ACTIVATION_DIMS, listed_of_logical, listed_order as layout_order
from ..onnx import oracle as onnx_oracle
from ..plan_types import Plan
from ..quant import op_quants
from .primitives import Job, Primitives
from .tensors import KernelArgs, expected_dtype, input_tensors, pack, poisons


@dataclass(frozen=True, slots=True)
class RunResult:
    outputs: dict[str, np.ndarray]  # "output": the kernel's result in the logical layout (NHWC)
    ran: str  # what ran where, for the user


class InputsRefused(ConfigError):
    """Tensors the user gave that the kernel cannot take: each problem's key is `--input NAME`, the argument to
    blame (cli/run.py reports them as that option's invalid value)."""


def listed_order(config: Config, name: str) -> tuple[str, ...] | None:
    """The order of an activation's axes as the config lists its shape (its layout's letters: NCHW for an imported
    config); None for a filter (OIHW) or a bias."""
    if name == "input":
        return layout_order(config.input_layout.source)
    sides = {side.param: side for side in config.side_inputs}
    return layout_order(sides[name].layout.source) if name in sides else None


def output_order(config: Config) -> tuple[str, ...]:
    """The order the output comes back in: its layout's letters (output.layout's)."""
    return layout_order(config.ops[-1].output_layout.source)


def as_listed(config: Config, logical: np.ndarray) -> np.ndarray:
    """The kernel's output (logical NHWC) in the order the config lists its output layout's letters."""
    return np.ascontiguousarray(logical.transpose([ACTIVATION_DIMS.index(d) for d in output_order(config)]))


def checked_inputs(config: Config, plan: Plan, given: Mapping[str, np.ndarray], listed: bool = False) -> KernelArgs:
    """The user's tensors checked against what the kernel takes and packed; InputsRefused naming each tensor that
    is missing, unknown, of the wrong shape or type, or not finite where it must be quantized. listed: the input and
    side inputs come in the order of their layout's letters (kernelgen run's), not in logical NHWC."""
    tensors = {t.name: t for t in input_tensors(plan)}
    model = onnx_oracle.weights(config) if config.source is not None else {}
    problems = []
    for name in given:
        if name not in tensors:
            problems.append(_problem(config, name, f"unknown tensor (the kernel takes: {', '.join(tensors)})"))
    logical = {}
    for name, tensor in tensors.items():
        want = expected_dtype(config, tensor)
        order = listed_order(config, name) if listed else None
        shape = tuple(tensor.logical_shape) if order is None else listed_of_logical(tensor.logical_shape, order)
        if name not in given:
            if name in model:
                logical[name] = model[name].reshape(tensor.logical_shape).astype(want)
            else:
                problems.append(_problem(config, name, f"missing: expected {_what(shape, want)} "
                                                       f"({_layout_of(name, order)})"))
            continue
        array = np.asarray(given[name])
        if tuple(array.shape) != shape:
            problems.append(_problem(config, name, f"expected {_what(shape, want)} ({_layout_of(name, order)}), "
                                                   f"got shape {list(array.shape)}"))
            continue
        if order is not None:  # to the logical NHWC the references and the layout engine read
            array = np.ascontiguousarray(array.transpose([order.index(d) for d in ACTIVATION_DIMS]))
        converted = _converted(config, name, array, want)
        if isinstance(converted, str):
            problems.append(_problem(config, name, converted))
        else:
            logical[name] = converted
    if problems:
        raise InputsRefused(problems)
    return pack(config, plan, logical)


def run(target: Primitives, job: Job, args: KernelArgs) -> RunResult:
    """Compile the job and run it once on `args`; the output unpacked to the logical layout."""
    import tempfile

    config = job.config
    with tempfile.TemporaryDirectory(prefix=f"kernelgen-run-{target.name}-{config.name}-") as tmp, \
            target.compile(job, Path(tmp)) as exe:
        if exe.compile_only or exe.cannot_run:
            raise KernelgenError(f"{config.name}: the {target.name} kernel cannot run here: "
                                 f"{exe.compile_only or exe.cannot_run}")
        output = target.run(exe, args, poisons(config.dtype)[0])
    tools = "; ".join(s.version if s.version.lower().startswith(s.name.lower()) else f"{s.name} {s.version}"
                      for s in target.toolchain() if s.found and not s.stats_only)  # its compilers, and the device
    logical = job.plan.tensors[-1].layout.unpack(output)
    return RunResult(outputs={"output": np.ascontiguousarray(logical)},
                     ran=f"{config.name}: {target.name} kernel ({tools})")


def _converted(config: Config, name: str, array: np.ndarray, want: np.dtype) -> np.ndarray | str:
    """The array as the kernel's logical type, or what is wrong with it."""
    if array.dtype == want:
        return array
    if config.dtype != "uint8":
        if np.issubdtype(array.dtype, np.floating):
            return array.astype(np.float32)  # float16 or float64 values: the kernel computes in float32
        return f"expected floating-point values ({want}), got dtype {array.dtype}"
    if not np.issubdtype(array.dtype, np.floating):
        return f"expected dtype {want} (or real values to quantize), got dtype {array.dtype}"
    if not np.isfinite(array).all():
        bad = int((~np.isfinite(array)).sum())
        return f"{bad} value(s) are NaN or infinite: real values must be finite to quantize to {want}"
    return _quantize(config, name, array.astype(np.float64), want)


def _quantize(config: Config, name: str, values: np.ndarray, want: np.dtype) -> np.ndarray:
    quants = op_quants(config)
    if name == "input":
        scale, zero = np.float64(config.quant.input_scale), config.quant.input_zero_point
    else:
        oq = quants[int(name.removeprefix("filter").removeprefix("bias")) - 1]
        per_channel = np.asarray(oq.s_w, dtype=np.float64)
        if name.startswith("bias"):
            scale, zero = oq.s_in * per_channel, 0
        else:
            scale, zero = per_channel.reshape(-1, 1, 1, 1), oq.z_w
    info = np.iinfo(want)
    return np.clip(np.rint(values / scale) + zero, info.min, info.max).astype(want)


def _what(shape: tuple[int, ...], dtype: np.dtype) -> str:
    return f"shape {list(shape)} dtype {dtype}"


def _layout_of(name: str, order: tuple[str, ...] | None) -> str:
    if name.startswith("filter"):
        return "OIHW"
    if name.startswith("bias"):
        return "one per output channel"
    return "".join(order or ACTIVATION_DIMS).upper()


def _problem(config: Config, name: str, message: str) -> ConfigProblem:
    return ConfigProblem(config.path, 1, 1, f"--input {name}", message)


def load_npy(name: str, path: Path) -> np.ndarray:
    """A tensor file the user named; ConfigError when it is not a readable .npy (pickles are refused)."""
    problem = None
    if path.suffix != ".npy":
        problem = f"expected a .npy file (numpy.save), got {path.name!r}"
    else:
        try:
            return np.load(path, allow_pickle=False)
        except FileNotFoundError:
            problem = f"no such file: {path}"
        except (OSError, ValueError) as error:
            problem = f"{path} is not a readable .npy file ({error})"
    raise ConfigError([ConfigProblem(str(path), 1, 1, f"--input {name}", problem)])
