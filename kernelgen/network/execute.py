"""Running a network: its steps in order over the tensors they pass on, and the end-to-end check against
onnxruntime running the original model on the same input.

Tensors live here in ONNX's own layout (NCHW) and type; a kernel step gets its input as the config's logical NHWC
(the layout engine packs it into the kernel's physical layout and unpacks its output) and gives back NHWC. How a
kernel runs is the caller's (kernelgen/measure/network_run.py validates it on a target); host steps run in
onnxruntime on their nodes cut out of the model.

End to end, every tensor a step wrote is compared with the model's own value of it:
- float: the largest difference over the tensor's largest magnitude must stay within FLOAT_AGREEMENT. Each kernel
  is held to the rigorous rounding bound on its real input by its own check; what is left end to end is two correct
  float32 implementations drifting apart through the network (measured around 1e-6 of the magnitude on MobileNetV2
  and ResNet18), while a wiring mistake (a wrong tensor, layout or step) shows as a difference of order 1.
- uint8: bit for bit against the whole model run by the onnxruntime session that is exact on this host
  (onnx/u8s8.py: its default one, or its u8u8 precision mode on x86 without VNNI, where the default's u8s8
  convolution saturates on full-range int8 weights); the oracle is named in the output. A step whose inputs are
  onnxruntime's bytes must give onnxruntime's bytes, unless its kernel holds an op whose own check allows a
  difference of 1 on the op's own input (u8s8.allowed_difference: a residual add, a fixed-point requantization):
  then its bytes may differ, each op of it having been held to that op by op (a kernel that failed that check
  claims no allowance). A tensor computed from bytes that
  already differ carries that difference on (through a conv it can grow past 1); it is reported with the step it
  comes from, each kernel on it still held op by op to the oracle in its own check. Anything else that differs
  fails: a step whose input matched and whose arithmetic has no allowance (a wrong kernel, tensor or wiring).
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Iterator, Mapping

import numpy as np

from ..config import Config
from ..measure.records import ValidationResult
from ..onnx import subgraph
from ..onnx.graph import OnnxError
from ..onnx.oracle import OracleFailed, float_arithmetic
from ..onnx.u8s8 import QuantOracle, allowed_difference, quant_oracle
from ..quant import op_quants
from .channel_copy import input_tables
from .manifest import Network, Step
from .resize import quantized_resized, resized

FLOAT_AGREEMENT = 1e-3  # of the tensor's largest magnitude

# A kernel step: (its config, its input and side inputs by the plan's names, logical NHWC) -> (its output as logical
# NHWC, or None when the kernel could not run here; the validation's record, or None for a runner that keeps none)
KernelRunner = Callable[[Config, dict[str, np.ndarray]], tuple[np.ndarray | None, ValidationResult | None]]


@dataclass(frozen=True, slots=True)
class Agreement:
    tensor: str
    dtype: str
    max_abs: float  # the largest difference (uint8: in steps of the scale)
    relative: float  # float: max_abs over the reference's largest magnitude; uint8: share of elements that differ
    passed: bool
    oracle: str = "onnxruntime"  # the session that computed the reference (u8s8.QuantOracle.name)
    why: str = ""  # a difference that passes: where it comes from; one that fails: why it may not be there

    def text(self) -> str:
        if self.dtype == "uint8" and not self.relative:
            return f"bit-exact with {self.oracle}"
        if self.dtype == "uint8":
            return (f"{1 - self.relative:.2%} of bytes equal to {self.oracle}'s, largest difference "
                    f"{self.max_abs:.0f}" + (f" ({self.why})" if self.why else ""))
        text = f"within {self.relative:.2e} of {self.oracle}'s largest magnitude (limit {FLOAT_AGREEMENT:g})"
        return text + (f" ({self.why})" if self.why else "")


@dataclass(frozen=True, slots=True)
class StepRun:
    step: Step
    seconds: float
    record: ValidationResult | None  # the kernel's validation (None: a host step, or a runner that keeps none)
    agreement: tuple[Agreement, ...]  # its outputs against the whole model's
    ran: bool  # False: the kernel could not run here (the network stops)
    values: Mapping[str, np.ndarray] = field(default_factory=dict, compare=False, repr=False)  # what it wrote


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


def network_oracle(network: Network) -> QuantOracle:
    """The onnxruntime session that is exact for this model on this host (u8s8.quant_oracle over every int8
    constant of the model: a QDQ model's weights; a float model has none and gets the default session)."""
    with _blamed_on(network, "model"):
        return quant_oracle(subgraph.graph_of(network.model).constants.values())


def reference(network: Network, feeds: dict[str, np.ndarray], oracle: QuantOracle | None = None,
              fallbacks: list[str] | None = None) -> dict[str, np.ndarray]:
    """onnxruntime running the whole model (in `oracle`'s session, by default network_oracle's), every tensor the
    manifest names among its outputs (where onnxruntime's fusions refuse those outputs, without its fusions:
    subgraph.session, which says so in `fallbacks`)."""
    entries = (oracle or network_oracle(network)).entries
    with _blamed_on(network, "model"):
        graph = subgraph.graph_of(network.model)
        inner = {t: np.dtype(network.tensors[t].dtype) for t in network.tensors if t not in network.inputs}
        return subgraph.run(subgraph.session(subgraph.whole_model(graph, inner), entries=entries,
                                             basic_if_refused=True, fallbacks=fallbacks), feeds)


def host_runner(network: Network, step: Step, oracle: QuantOracle | None = None):
    """A host, convert, channel or resize step as a function {input name: array} -> {output name: array} (a host
    step: one onnxruntime session, `oracle`'s, by default network_oracle's: a quantized conv left to the host
    computes what the reference does)."""
    if step.convert:
        return lambda values: {step.outputs[0]: convert(network, step, values[step.inputs[0]])}
    if step.resize is not None:
        source, result = network.tensors[step.inputs[0]], network.tensors[step.outputs[0]]
        if result.dtype == "uint8":
            quant = (source.scale, source.zero_point), (result.scale, result.zero_point)
            return lambda values: {result.name: quantized_resized(step.resize, values[source.name], result.shape,
                                                                  *quant)}
        return lambda values: {result.name: resized(step.resize, values[source.name], result.shape)}
    if step.moves_channels:
        tables = input_tables(network, step)
        return lambda values: {step.outputs[0]: moved_channels(step, [values[t] for t in step.inputs], tables)}
    key = f"steps[{step.index}].host"
    entries = (oracle or network_oracle(network)).entries
    with _blamed_on(network, key):
        graph = subgraph.graph_of(network.model)
        inputs = {t: np.dtype(network.tensors[t].dtype) for t in step.inputs}
        outputs = {t: np.dtype(network.tensors[t].dtype) for t in step.outputs}
        session = subgraph.session(subgraph.nodes_model(graph, step.nodes, inputs, outputs), entries=entries)

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
              expected: dict[str, np.ndarray] | None = None, oracle: QuantOracle | None = None
              ) -> Iterator[StepRun]:
    """Each step in order on the tensors the ones before it produced; with `expected` (reference(), computed by
    `oracle`'s session, by default network_oracle's), each output compared as it is made. Stops after a kernel that
    could not run."""
    oracle = oracle or network_oracle(network)
    values = dict(feeds)
    differs: dict[str, str] = {}  # a tensor that differs from the reference: the step the difference comes from
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
            values.update(host_runner(network, step, oracle)(values))
        seconds = time.perf_counter() - start
        agreement = ()
        if expected:
            carried = next((differs[t] for t in step.inputs if t in differs), "")
            moved = not carried and any(network.tensors[t].dtype in ("uint8", "int8") and
                                        not np.array_equal(values[t], expected[t]) for t in step.outputs)
            # (asks onnxruntime: only when it matters; a kernel that failed its own check has none to claim)
            allowance = _allowance(step, oracle) if moved and (record is None or record.passed) else ""
            agreement = tuple(agree(network, t, values[t], expected[t], oracle.name, carried, allowance)
                              for t in step.outputs)
            for a in agreement:
                if a.max_abs and a.dtype in ("uint8", "int8"):
                    differs[a.tensor] = carried or (f"{step.label}'s {allowance}" if allowance else step.label)
        yield StepRun(step, seconds, record, agreement, True, {t: values[t] for t in step.outputs})


def _allowance(step: Step, oracle: QuantOracle) -> str:
    """What in a kernel step may differ from onnxruntime on the step's own input (the first op whose own check
    allows a difference of 1: a residual add, a fixed-point requantization; or float32 arithmetic onnxruntime kept
    for the step's nodes), or "" (must be bit-exact)."""
    if step.config is None or step.config.dtype != "uint8":
        return ""
    if step.config.source is not None:
        try:
            kept = float_arithmetic(step.config, oracle)
        except OracleFailed:  # onnxruntime refuses the step's nodes alone: its own check says so; none known here
            kept = ()
        if kept:
            return (f"float32 arithmetic onnxruntime kept for its nodes ({', '.join(kept)}; held op by op to a "
                    f"rounding and its float32 sums' bound)")
    for j, oq in enumerate(op_quants(step.config), start=1):
        allowed, form = allowed_difference(oq)
        if allowed:
            return f"{form} (op #{j}; within 1 of onnxruntime on its own input, op by op)"
    return ""


def moved_channels(step: Step, values: list[np.ndarray], tables: list[tuple[int, ...] | None] | None = None
                   ) -> np.ndarray:
    """What a concat, slice or shuffle step makes of its NCHW inputs, as ONNX's nodes compute it; `tables`: each
    uint8 input's requantization into the output (channel_copy.input_tables; None: copied as it is)."""
    if tables:
        values = [v if t is None else np.asarray(t, np.uint8)[v] for v, t in zip(values, tables)]
    if step.concat:
        return np.concatenate(values, axis=1)
    (x,) = values
    if step.slice is not None:
        return np.ascontiguousarray(x[:, step.slice[0]:step.slice[1]])
    n, c, h, w = x.shape
    return np.ascontiguousarray(x.reshape(n, step.shuffle, c // step.shuffle, h, w).transpose(0, 2, 1, 3, 4)
                                ).reshape(n, c, h, w)


def convert(network: Network, step: Step, value: np.ndarray) -> np.ndarray:
    """ONNX's QuantizeLinear (saturate(rint(x / scale) + zero_point), rounding half to even) or DequantizeLinear
    ((q - zero_point) * scale), per tensor, in float32 as onnxruntime computes them."""
    quantized = network.tensors[step.outputs[0] if step.convert == "quantize" else step.inputs[0]]
    scale = np.float32(quantized.scale)
    if step.convert == "quantize":
        with np.errstate(all="ignore"):
            q = np.rint(value.astype(np.float32) / scale) + np.float32(quantized.zero_point)
        return np.clip(np.nan_to_num(q), 0, 255).astype(np.uint8).reshape(network.tensors[step.outputs[0]].shape)
    real = ((value.astype(np.int32) - quantized.zero_point).astype(np.float32) * scale).astype(np.float32)
    return real.reshape(network.tensors[step.outputs[0]].shape)  # [N, C] of an [N, C, 1, 1] image: the same bytes


def _image(value: np.ndarray) -> np.ndarray:
    """A tensor as the NCHW image a kernel reads: [N, C] (a classifier's) is [N, C, 1, 1]."""
    return value.reshape(*value.shape, 1, 1) if value.ndim == 2 else value


def agree(network: Network, name: str, got: np.ndarray, want: np.ndarray, oracle: str = "onnxruntime",
          carried: str = "", allowance: str = "") -> Agreement:
    """A tensor a step wrote against the reference's. carried: the step an earlier difference on the step's inputs
    comes from ("": its inputs were the reference's); allowance: what in the step may differ on its own input."""
    tensor = network.tensors[name]
    quantized = tensor.dtype in ("uint8", "int8")
    if quantized:
        apart = np.abs(got.astype(np.int64) - want.astype(np.int64))
        worst = int(apart.max(initial=0))
        share = float(np.mean(apart > 0))
        if not worst:
            return Agreement(name, tensor.dtype, 0.0, 0.0, True, oracle)
        explained = f"carried from {carried}" if carried else f"from {allowance}" if allowance else ""
        return Agreement(name, tensor.dtype, float(worst), share, bool(explained), oracle,
                         explained or "its input was the reference's and its arithmetic must match it exactly")
    got64, want64 = got.astype(np.float64), want.astype(np.float64)
    apart = np.abs(got64 - want64)
    worst = float(np.nan_to_num(apart, nan=np.inf).max(initial=0.0))
    relative = worst / max(float(np.abs(want64).max(initial=0.0)), 1e-30)
    if carried and relative > FLOAT_AGREEMENT:  # a quantized network's output, dequantized from differing bytes
        return Agreement(name, tensor.dtype, worst, relative, not np.isnan(apart).any(), oracle,
                         f"carried from {carried}")
    return Agreement(name, tensor.dtype, worst, relative, relative <= FLOAT_AGREEMENT, oracle)
