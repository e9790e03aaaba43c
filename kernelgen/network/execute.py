"""Running a network: its steps in order over the tensors they pass on, and the end-to-end check against
onnxruntime running the original model on the same input.

Tensors live here in ONNX's own layout (NCHW) and type; a kernel step gets its input as the config's logical NHWC
(the layout engine packs it into the kernel's physical layout and unpacks its output) and gives back NHWC. How a
kernel runs is the caller's (kernelgen.api passes the registered target's run, or its validation); host steps run
in onnxruntime on their nodes cut out of the model.

End to end, every tensor a step wrote is compared with the model's own value of it:
- float: the largest difference over the tensor's largest magnitude must stay within FLOAT_AGREEMENT. Each kernel
  is held to the rigorous rounding bound on its real input by its own check; what is left end to end is two correct
  float32 implementations drifting apart through the network (measured around 1e-6 of the magnitude on MobileNetV2
  and ResNet18), while a wiring mistake (a wrong tensor, layout or step) shows as a difference of order 1.
- uint8: the share of bytes that agree and the largest difference are reported; each kernel is bit-exact against
  numpy and op by op against onnxruntime in its own check, and a byte that differs end to end comes from a residual
  add (onnxruntime's QLinearAdd rounds as its platform does) carried on by the layers after it. A difference beyond
  UINT8_AGREEMENT fails.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator

import numpy as np

from ..config import Config
from ..onnx import subgraph
from ..onnx.graph import OnnxError
from .manifest import Network, Step

FLOAT_AGREEMENT = 1e-3  # of the tensor's largest magnitude
UINT8_AGREEMENT = 16  # steps of the quantized tensor's scale

# A kernel step: (its config, its input as logical NHWC) -> (its output as logical NHWC or None when the kernel could
# not run here, a record of how it went)
# (config, its input and side inputs by the plan's names, NHWC) -> (its output NHWC or None, the run's record)
KernelRunner = Callable[[Config, dict[str, np.ndarray]], tuple[np.ndarray | None, object]]


@dataclass(frozen=True, slots=True)
class Agreement:
    tensor: str
    dtype: str
    max_abs: float  # the largest difference (uint8: in steps of the scale)
    relative: float  # float: max_abs over the reference's largest magnitude; uint8: share of elements that differ
    passed: bool

    def text(self) -> str:
        if self.dtype == "uint8":
            return (f"{1 - self.relative:.2%} of bytes equal to onnxruntime's, largest difference {self.max_abs:.0f}"
                    if self.relative else "bit-exact with onnxruntime")
        return f"within {self.relative:.2e} of onnxruntime's largest magnitude (limit {FLOAT_AGREEMENT:g})"


@dataclass(frozen=True, slots=True)
class StepRun:
    step: Step
    seconds: float
    record: object | None  # the kernel runner's record (a ValidationResult when validating)
    agreement: tuple[Agreement, ...]  # its outputs against the whole model's
    ran: bool  # False: the kernel could not run here (the network stops)


def network_input(network: Network, seed: int) -> dict[str, np.ndarray]:
    """Inputs drawn from `seed`: standard normal values, as a normalized image's pixels are."""
    rng = np.random.default_rng(seed)
    out = {}
    for name in network.inputs:
        tensor = network.tensors[name]
        values = rng.standard_normal(tensor.shape)
        if tensor.dtype in ("uint8", "int8"):
            info = np.iinfo(tensor.dtype)
            values = rng.integers(info.min, info.max + 1, tensor.shape)
        out[name] = values.astype(tensor.dtype)
    return out


def reference(network: Network, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """onnxruntime running the whole model, every tensor the manifest names among its outputs."""
    with _blamed_on(network, "model"):
        graph = subgraph.graph_of(network.model)
        inner = {t: np.dtype(network.tensors[t].dtype) for t in network.tensors if t not in network.inputs}
        return subgraph.run(subgraph.session(subgraph.whole_model(graph, inner)), feeds)


def host_runner(network: Network, step: Step):
    """A host or convert step as a function {input name: array} -> {output name: array} (a host step: one
    onnxruntime session)."""
    if step.convert:
        return lambda values: {step.outputs[0]: convert(network, step, values[step.inputs[0]])}
    key = f"steps[{step.index}].host"
    with _blamed_on(network, key):
        graph = subgraph.graph_of(network.model)
        inputs = {t: np.dtype(network.tensors[t].dtype) for t in step.inputs}
        outputs = {t: np.dtype(network.tensors[t].dtype) for t in step.outputs}
        session = subgraph.session(subgraph.nodes_model(graph, step.nodes, inputs, outputs))

    def run(values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        with _blamed_on(network, key):
            return subgraph.run(session, {t: values[t] for t in step.inputs})
    return run


@contextmanager
def _blamed_on(network: Network, key: str):
    """onnxruntime refusing a model kernelgen made from the manifest is the manifest's problem, at `key`."""
    try:
        yield
    except OnnxError as error:
        raise network.problem(key, str(error)) from None


def run_steps(network: Network, feeds: dict[str, np.ndarray], kernel: KernelRunner,
              expected: dict[str, np.ndarray] | None = None) -> Iterator[StepRun]:
    """Each step in order on the tensors the ones before it produced; with `expected` (reference()), each
    output compared as it is made. Stops after a kernel that could not run."""
    values = dict(feeds)
    for step in network.steps:
        start = time.perf_counter()
        if step.config is not None:
            # the kernel's input, then its side inputs in the config's order (the manifest checked the count)
            names = ("input", *(side.param for side in step.config.side_inputs))
            arrays = {name: np.ascontiguousarray(_image(values[t]).transpose(0, 2, 3, 1))
                      for name, t in zip(names, step.inputs)}
            got, record = kernel(step.config, arrays)
            if got is None:
                yield StepRun(step, time.perf_counter() - start, record, (), False)
                return
            out = network.tensors[step.outputs[0]]
            values[step.outputs[0]] = np.ascontiguousarray(got.transpose(0, 3, 1, 2)).reshape(out.shape).astype(
                out.dtype)
        else:
            record = None
            values.update(host_runner(network, step)(values))
        seconds = time.perf_counter() - start
        agreement = tuple(agree(network, t, values[t], expected[t]) for t in step.outputs) if expected else ()
        yield StepRun(step, seconds, record, agreement, True)


def convert(network: Network, step: Step, value: np.ndarray) -> np.ndarray:
    """ONNX's QuantizeLinear (saturate(rint(x / scale) + zero_point), rounding half to even) or DequantizeLinear
    ((q - zero_point) * scale), per tensor, in float32 as onnxruntime computes them."""
    quantized = network.tensors[step.outputs[0] if step.convert == "quantize" else step.inputs[0]]
    scale = np.float32(quantized.scale)
    if step.convert == "quantize":
        with np.errstate(all="ignore"):
            q = np.rint(value.astype(np.float32) / scale) + np.float32(quantized.zero_point)
        return np.clip(np.nan_to_num(q), 0, 255).astype(np.uint8)
    return ((value.astype(np.int32) - quantized.zero_point).astype(np.float32) * scale).astype(np.float32)


def _image(value: np.ndarray) -> np.ndarray:
    """A tensor as the NCHW image a kernel reads: [N, C] (a classifier's) is [N, C, 1, 1]."""
    return value.reshape(*value.shape, 1, 1) if value.ndim == 2 else value


def agree(network: Network, name: str, got: np.ndarray, want: np.ndarray) -> Agreement:
    tensor = network.tensors[name]
    if tensor.dtype in ("uint8", "int8"):
        apart = np.abs(got.astype(np.int64) - want.astype(np.int64))
        worst = int(apart.max(initial=0))
        return Agreement(name, tensor.dtype, float(worst), float(np.mean(apart > 0)), worst <= UINT8_AGREEMENT)
    got64, want64 = got.astype(np.float64), want.astype(np.float64)
    apart = np.abs(got64 - want64)
    worst = float(np.nan_to_num(apart, nan=np.inf).max(initial=0.0))
    relative = worst / max(float(np.abs(want64).max(initial=0.0)), 1e-30)
    return Agreement(name, tensor.dtype, worst, relative, relative <= FLOAT_AGREEMENT)
