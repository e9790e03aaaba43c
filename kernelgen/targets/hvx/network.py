"""network.c / network.h for hvx: a quantized network's kernels run in order over two planned memories.

- DDR: every uint8 tensor between steps, in the layout the kernels hold it in (nhwc-8h8w32c), in one arena the
  caller provides, at offsets from kernelgen.network.arena (TFLite's greedy plan, as the c driver's);
- VTCM: each kernel's workspace (its caches and the HVX helpers' scratch), at the start of one region the caller
  provides; kernels run one at a time, so the region is the largest workspace, which must fit the arch's VTCM;
- weights: the data section of `<network>.weights` (kernelgen/network/weights.py), each kernel's packed filters
  and int32 biases at the offsets its plan gives.

The network's own inputs and outputs are the model's float tensors (before its QuantizeLinear, after its
DequantizeLinear): the `convert` steps quantize and pack the input into the arena, and unpack and dequantize the
output from it, in C, as onnxruntime rounds. The channel steps (concat, slice, shuffle) copy between packed tensors,
requantizing where a quantized model's Concat does (channel_steps.py), and a quantized Resize resizes between them
(resize_step.py). A host step has no place here (nothing on the
DSP runs onnxruntime): it is refused at its key, as is a uint8 network input or output (no convert step at the
boundary).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ...errors import KernelgenError
from ...expr import Var
from ...layout import ACTIVATION_DIMS, parse_layout
from ...network.arena import Arena, plan_arena, tensor_bytes
from ...network.driver_text import check_c_name, comment_text, places, render
from ...network.manifest import Network, Step, Tensor
from ...network.weights import ALIGNMENT, WeightsPlan
from ...measure.tensors import expected_dtype
from ...plan_types import Plan
from ..base import Job
from .channel_steps import LAYOUT, CopyStep, copy_step
from .plan import HvxPlan
from .program import runtime_files
from .dequantize_vector import DequantizeVector, dequantize_plan
from .quantize_vector import QuantizeVector, quantize_plan
from .resize_step import ResizeStep, resize_step

TEMPLATES = ("hvx/network.h.j2", "hvx/network.c.j2")
FILES = tuple(Path(template).name.removesuffix(".j2") for template in TEMPLATES)  # network.h, network.c
ARENA_ALIGNMENT = 128  # bytes: an HVX vector; the kernels move activations in 128-byte vectors
VTCM_ALIGNMENT = 2048  # bytes: the kernels' caches sit at multiples of 2048 in their workspace
PIXEL_WORD_CHANNELS = 4  # channels a quantize writes a pixel's bytes of as one word (pixel_words)
DECLARED = ("run", "network", "quantize", "dequantize")  # what network.h declares after `<net>_`


@dataclass(frozen=True, slots=True, kw_only=True)
class TensorRow:
    """A tensor a step reads or writes: a network input or output (the caller's float buffer), or a uint8 tensor
    in the arena."""

    name: str  # the ONNX name, safe inside a C comment
    dtype: str
    shape: tuple[int, ...]
    elements: int
    layout: str  # as the kernels hold it ("NCHW": the caller's)
    bytes: int
    offset: int  # bytes from the arena's start; -1: the caller's buffer
    pointer: str  # its address inside <net>_run


@dataclass(frozen=True, slots=True, kw_only=True)
class ConvertRow:
    """ONNX's QuantizeLinear (a float network input -> a packed uint8 tensor) or DequantizeLinear (back): one
    function of network.c, named after the network input or output it reads or writes."""

    function: str
    quantize: bool
    float_tensor: TensorRow  # NCHW, the caller's
    uint8_tensor: TensorRow  # packed, in the arena
    scale: str  # the float32 scale as a C hex literal (exact)
    scale_text: str  # ... and as a number, for the comment
    zero_point: int
    extents: tuple[int, int, int, int]  # n, c, h, w
    packed_offset: str  # the C expression of (n, c, h, w)'s byte in the packed tensor
    vector: QuantizeVector | None = None  # a quantize's HVX form (quantize_vector.py); None: the scalar loop alone
    # the HVX form writes whole pixels: up to 4 channels (an image's RGB) in nhwc-8h8w32c, each pixel's bytes one
    # word, widened to its 32-byte block with the zero point in the layout's padding, 4 pixels a vector store
    pixel_words: bool = False
    # a dequantize's HVX form (dequantize_vector.py): 32 pixels x 32 channels transposed in registers, each channel's
    # 32 floats built in integers, one vector store; None: the scalar loop alone
    floats: DequantizeVector | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class StepRow:
    index: int
    label: str  # for comments
    inputs: tuple[TensorRow, ...]
    outputs: tuple[TensorRow, ...]
    call: str  # the C statement that runs it
    workspace_bytes: int  # a kernel's VTCM (0: a convert step)


def _host_steps(network: Network) -> list:
    """Steps the DSP driver has no code for: host steps, and a float resize (a uint8 one it computes)."""
    return [step for step in network.steps if step.is_host or (
        step.resize is not None and network.tensors[step.outputs[0]].dtype != "uint8")]


def refusal(network: Network) -> str:
    """Why the hvx driver cannot run this network ("" when it can): a host step (ONNX nodes onnxruntime runs) has no
    place on the DSP, and a callback to the application processor per inference is not what a DSP network is."""
    hosts = _host_steps(network)
    if not hosts:
        return ""
    what = "a float32 resize: the DSP's network runs uint8 tensors" if hosts[0].resize is not None else \
        "ONNX nodes onnxruntime runs"
    return (f"the hvx network driver runs kernels, convert and channel steps only: {hosts[0].label} ({what}) has no "
            f"place on the DSP")


def network_files(network: Network, jobs: Mapping[str, Job[HvxPlan]], weights: WeightsPlan, flags_line: str = ""
                  ) -> dict[str, str]:
    """{"network.h": ..., "network.c": ...} for a uint8 network whose kernels' hvx jobs are `jobs` (by config name)
    and whose weights file `weights` describes; `flags_line` in network.c's banner."""
    check_c_name(network)
    refused = refusal(network)
    if refused:
        first = _host_steps(network)[0]
        raise network.problem(f"steps[{first.index}].{first.kind}", refused)
    jobs_of = {step.index: _checked_job(network, step, jobs) for step in network.kernels}
    arch, vtcm_limit = _arch(network, jobs_of)
    vtcm = _vtcm_bytes(network, jobs_of, vtcm_limit, arch)
    arena = plan_arena(network, {}, alignment=ARENA_ALIGNMENT)  # workspaces live in VTCM, not in the arena
    tensors = _tensor_rows(network, arena)
    converts = {step.index: _convert_row(network, step, tensors) for step in network.steps if step.convert}
    copies = {step.index: _copy_row(network, step) for step in network.steps if step.moves_channels}
    resizes = {step.index: _resize_row(network, step) for step in network.steps if step.resize is not None}
    steps = tuple(_step_row(network, step, jobs_of.get(step.index), converts.get(step.index) or copies.get(step.index)
                            or resizes.get(step.index), tensors, weights) for step in network.steps)
    net = network.name
    context: dict[str, Any] = dict(
        net=net, upper=net.upper(), guard=f"KERNELGEN_{net.upper()}_NETWORK_H", arena=arena, arch=arch,
        vtcm_bytes=vtcm, vtcm_limit=vtcm_limit, vtcm_alignment=VTCM_ALIGNMENT, steps=steps,
        converts=tuple(converts.values()), copies=tuple(copies.values()), resizes=tuple(resizes.values()),
        vector_copies=any(part.vectors for copy in copies.values() for part in copy.parts),
        # the HVX headers: for the vector copies, resizes, input quantizes and output dequantizes
        hvx_intrinsics=any(r.vector is not None for r in resizes.values())
        or any(c.vector is not None or c.floats is not None for c in converts.values()), weights=weights,
        digest=weights.digest_hex, weights_alignment=ALIGNMENT,
        weight_rows=_weight_rows(weights, jobs_of),
        kernel_headers=tuple(dict.fromkeys(f"{job.plan.name}.h" for job in jobs_of.values())),
        inputs=tuple(tensors[t] for t in network.inputs), outputs=tuple(tensors[t] for t in network.outputs),
        manifest=comment_text(Path(network.path).name))
    files = {name: render(template, context, flags_line if name.endswith(".c") else "")
             for name, template in zip(FILES, TEMPLATES)}
    return files | runtime_files()  # kg_runtime.h, which the kernels include, and what the program links


def memory_note(network: Network, jobs: Mapping[str, Job[HvxPlan]]) -> str:
    """A line about the memories network.c runs in: the uint8 tensors' DDR arena and the kernels' VTCM region."""
    jobs_of = {step.index: jobs[step.config.name] for step in network.kernels}
    arch, limit = _arch(network, jobs_of)
    arena = plan_arena(network, {}, alignment=ARENA_ALIGNMENT)
    vtcm = _vtcm_bytes(network, jobs_of, limit, arch)
    return (f"{network.name}: network.c runs {len(network.steps)} steps with the tensors between them in a "
            f"{arena.size_bytes:,}-byte DDR arena and each kernel's workspace in a {vtcm:,}-byte VTCM region (of "
            f"the {limit:,} bytes {arch} allows)")


def _checked_job(network: Network, step: Step, jobs: Mapping[str, Job[HvxPlan]]) -> Job[HvxPlan]:
    """The kernel's job, after the checks that make it callable from network.c: uint8, and reading and writing its
    tensors in the layouts the manifest gives them."""
    config = step.config
    if config.dtype != "uint8":
        raise config.problem("dtype", f"the hvx network driver runs uint8 kernels; {config.name} is {config.dtype}")
    job = jobs.get(config.name)
    if job is None:
        raise KernelgenError(f"network {network.name}: no hvx job for kernel {config.name} (step {step.index})")
    plan = job.plan
    if any(plan.name == f"{network.name}_{word}" for word in DECLARED):
        raise config.problem("name", f"kernel {plan.name} would clash with network.h's {plan.name}: rename the "
                                     f"kernel or the network")
    names = ("input", *(side.param for side in config.side_inputs))
    keys = ("input.layout", *(f"side_inputs.{side.name}.layout" for side in config.side_inputs))
    wired = [*zip(keys, names, step.inputs), ("output.layout", "output", step.outputs[0])]
    for key, name, tensor_name in wired:
        tensor, kernel_tensor = network.tensors[tensor_name], plan.tensor(name)
        held = kernel_tensor.layout.layout
        wanted = parse_layout(tensor.layout, ACTIVATION_DIMS) if tensor.layout else None
        if wanted is None or held.outputs != wanted.outputs or held.separators != wanted.separators:
            raise config.problem(key, f"{config.name}'s {name} is {held.name}, but the manifest holds "
                                      f"{tensor_name!r} in {tensor.layout or 'NCHW'}: the kernels of one network "
                                      f"must agree on the layouts of the tensors they pass on")
        if kernel_tensor.elements > tensor_bytes(tensor):
            raise KernelgenError(f"kernel {plan.name}: its {name} takes {kernel_tensor.elements} bytes, the arena "
                                 f"gives {tensor_name!r} {tensor_bytes(tensor)}")
    return job


def _arch(network: Network, jobs: Mapping[int, Job[HvxPlan]]) -> tuple[str, int]:
    """The one arch every kernel is built for, and the VTCM the network may use: the smallest any kernel's config
    allows (hvx.vtcm_bytes, or the arch's default)."""
    arches = {job.target_plan.arch: job.plan.name for job in jobs.values()}
    if len(arches) > 1:
        (a, first), (b, second) = list(arches.items())[:2]
        raise KernelgenError(f"network {network.name}: kernel {first} is built for {a}, {second} for {b}; one "
                             f"program runs on one DSP: give every config the same hvx.arch")
    smallest = min(jobs.values(), key=lambda job: job.target_plan.vtcm_bytes)
    return smallest.target_plan.arch, smallest.target_plan.vtcm_bytes


def _vtcm_bytes(network: Network, jobs: Mapping[int, Job[HvxPlan]], limit: int, arch: str) -> int:
    """The VTCM region the caller provides: the largest kernel workspace (kernels run one at a time, each with the
    whole region), refused when a workspace does not fit the VTCM."""
    for index, job in jobs.items():
        need = job.target_plan.workspace_bytes
        if need > limit:
            raise network.problem(f"steps[{index}].kernel",
                                  f"kernel {job.plan.name} needs {need} bytes of VTCM for its workspace, more than "
                                  f"the {limit} bytes of {arch} the network may use: plan it under that budget "
                                  f"(schedule: auto, or a smaller hvx.vtcm_bytes / schedule.budget)")
    return _round_up(max(job.target_plan.workspace_bytes for job in jobs.values()), VTCM_ALIGNMENT)


def _tensor_rows(network: Network, arena: Arena) -> dict[str, TensorRow]:
    rows = {}
    for name, (offset, pointer) in places(network, arena).items():
        tensor = network.tensors[name]
        if offset < 0 and tensor.dtype != "float32":
            key = "inputs" if name in network.inputs else "outputs"
            raise network.problem(key, f"the hvx network driver takes and gives the model's float tensors (a convert "
                                       f"step at each end); {name!r} is {tensor.dtype}")
        rows[name] = TensorRow(name=comment_text(name), dtype=tensor.dtype, shape=tensor.shape,
                               elements=math.prod(tensor.shape), layout=tensor.layout or "NCHW", bytes=tensor_bytes(tensor), offset=offset,
                               pointer=pointer)
    return rows


def _convert_row(network: Network, step: Step, tensors: Mapping[str, TensorRow]) -> ConvertRow:
    quantize = step.convert == "quantize"
    float_name, uint8_name = (step.inputs[0], step.outputs[0]) if quantize else (step.outputs[0], step.inputs[0])
    ends = network.inputs if quantize else network.outputs
    if float_name not in ends:
        raise network.problem(f"steps[{step.index}].convert",
                              f"the hvx network driver converts the network's {'inputs' if quantize else 'outputs'}"
                              f" only; {float_name!r} is not one")
    quantized = network.tensors[uint8_name]
    n, c, h, w = _image(quantized)
    bound = parse_layout(quantized.layout, ACTIVATION_DIMS).bind((n, h, w, c))
    offset = bound.offset_c({d: Var(d) for d in ACTIVATION_DIMS}, bound.bounds)
    scale = np.float32(quantized.scale)
    end = "input" if quantize else "output"
    vector = quantize_plan(float(scale)) if quantize else None
    return ConvertRow(function=f"{network.name}_{step.convert}_{end}{ends.index(float_name)}", quantize=quantize,
                      float_tensor=tensors[float_name], uint8_tensor=tensors[uint8_name],
                      scale=f"{float(scale).hex()}f", scale_text=f"{float(scale):.9g}",
                      zero_point=int(quantized.zero_point), extents=(n, c, h, w), packed_offset=offset,
                      vector=vector, pixel_words=vector is not None and c <= PIXEL_WORD_CHANNELS
                      and quantized.layout == LAYOUT,
                      floats=None if quantize or quantized.layout != LAYOUT else dequantize_plan(float(scale)))


def _resize_row(network: Network, step: Step) -> ResizeStep:
    """A uint8 resize step, once its tensors are known to be packed as the kernels hold them."""
    _packed(network, step, "resizes")
    return resize_step(network, step)


def _copy_row(network: Network, step: Step) -> CopyStep:
    """A channel step's copy, once its tensors are known to be packed as the kernels hold them."""
    _packed(network, step, "copies channels")
    return copy_step(network, step)


def _packed(network: Network, step: Step, does: str) -> None:
    for key, names in (("inputs", step.inputs), ("outputs", step.outputs)):
        for i, name in enumerate(names):
            tensor = network.tensors[name]
            if tensor.dtype != "uint8" or tensor.layout != LAYOUT:
                raise network.problem(f"steps[{step.index}].{key}[{i}]",
                                      f"the hvx network driver {does} between uint8 tensors in {LAYOUT} (the "
                                      f"kernels' layout); {name!r} is {tensor.dtype} in {tensor.layout or 'NCHW'}")


def _image(tensor: Tensor) -> tuple[int, int, int, int]:
    """A tensor's NCHW extents: [N, C] (a classifier's) is [N, C, 1, 1]."""
    return tuple((*tensor.shape, 1, 1)[:4]) if len(tensor.shape) == 2 else tensor.shape


@dataclass(frozen=True, slots=True, kw_only=True)
class WeightRow:
    """One packed weight in the data section, for network.h's table."""

    kernel: str
    tensor: str
    ctype: str  # what the kernel takes it as: int8_t / uint8_t filters, int32_t biases
    shape: tuple[int, ...]  # packed
    offset: int
    nbytes: int
    initializers: str  # the ONNX initializers it was made from, for the comment


def _weight_rows(weights: WeightsPlan, jobs: Mapping[int, Job[HvxPlan]]) -> tuple[WeightRow, ...]:
    rows = []
    for w in weights.tensors:
        params = {p.name: p.ctype for p in jobs[w.step].target_plan.kernel.params}
        rows.append(WeightRow(kernel=w.kernel, tensor=w.tensor, ctype=_pointee(params[w.tensor]), shape=w.shape,
                              offset=w.offset, nbytes=w.nbytes,
                              initializers=comment_text(", ".join(w.initializers) or "-")))
    return tuple(rows)


def _step_row(network: Network, step: Step, job: Job[HvxPlan] | None,
              convert: ConvertRow | CopyStep | ResizeStep | None,
              tensors: Mapping[str, TensorRow], weights: WeightsPlan) -> StepRow:
    inputs = tuple(tensors[t] for t in step.inputs)
    outputs = tuple(tensors[t] for t in step.outputs)
    if isinstance(convert, (CopyStep, ResizeStep)):
        args = [f"(const uint8_t *)({t.pointer})" for t in inputs] + [f"(uint8_t *)({outputs[0].pointer})"]
        return StepRow(index=step.index, label=step.kind, inputs=inputs, outputs=outputs,
                       call=f"{convert.function}({', '.join(args)});", workspace_bytes=0)
    if convert is not None:
        src, dst = (inputs[0], outputs[0])
        cast_src = "(const float *)" if convert.quantize else "(const uint8_t *)"
        cast_dst = "(uint8_t *)" if convert.quantize else "(float *)"
        call = f"{convert.function}({cast_src}({src.pointer}), {cast_dst}({dst.pointer}));"
        return StepRow(index=step.index, label=step.label, inputs=inputs, outputs=outputs, call=call,
                       workspace_bytes=0)
    plan: Plan = job.plan
    kernel = job.target_plan.kernel
    packed = weights.of(step.index)
    sides = {side.param: row.pointer for side, row in zip(step.config.side_inputs, inputs[1:])}
    places = {"input": inputs[0].pointer, "output": outputs[0].pointer, "workspace": "vtcm", **sides,
              **{name: f"weights + {w.offset}" for name, w in packed.items()}}
    missing = [p.name for p in kernel.params if p.name not in places]
    if missing:
        raise KernelgenError(f"kernel {plan.name}: network.c has nothing to pass as {missing[0]!r} (the weights "
                             f"file holds {', '.join(packed) or 'none of its tensors'})")
    args = tuple(f"({_pointee(p.ctype)} *)({places[p.name]})" for p in kernel.params)
    return StepRow(index=step.index, label=f"kernel {plan.name}", inputs=inputs, outputs=outputs,
                   call=f"{kernel.name}({', '.join(args)});", workspace_bytes=job.target_plan.workspace_bytes)


def _pointee(ctype: str) -> str:
    """`const int8_t *restrict` -> `const int8_t`."""
    return ctype.replace("restrict", "").replace("*", "").strip()


def _round_up(value: int, alignment: int) -> int:
    return -(-value // alignment) * alignment



def pack_weights(job: Job[HvxPlan], logical: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Each weight as the kernel takes it: filters packed by the layout engine in the plan's filter layout
    (oihw-8i32o4i), in the weights' own type (int8 or uint8; padding zeros, which no kernel reads), biases int32 as
    they are (one per output channel): the arrays validation packs (measure/tensors.pack), padding aside."""
    out = {}
    for name, values in logical.items():
        tensor = job.plan.tensor(name)
        array = np.asarray(values).reshape(tensor.logical_shape)
        dtype = expected_dtype(job.config, tensor)
        if not np.array_equal(array.astype(dtype), array):
            raise KernelgenError(f"kernel {job.plan.name}: {name} holds values outside {dtype} (the model's "
                                 f"weights must be quantized as the config says)")
        array = array.astype(dtype)
        out[name] = array if name.startswith("bias") else tensor.layout.pack(array, sentinel=0).reshape(
            tensor.layout.physical_shape)
    return out
