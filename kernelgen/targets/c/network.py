"""network.c / network.h: a whole network's c kernels run in order over one caller-provided arena.

The arena's offsets come from kernelgen.network.arena (TFLite's greedy plan); this module only turns the manifest,
the arena and each kernel's plan into rows the templates print: the tensors, the steps (a kernel call with its
arguments ready-made, or a host step handed to the caller's callback), and the weights `<net>_pack_weights` packs.

A kernel's output is the next step's input byte for byte, with no repacking between steps, so each kernel reads
and writes its tensors unpadded in the layout the manifest gives them: NCHW (ONNX's own), or NHWC for a tensor only
kernels touch (`kernelgen import` writes that where every target computes channels innermost: onnx/layouts.py). The
caller and a host step see tensors as ONNX does: the network's inputs and outputs and a host step's tensors are
NCHW. Anything else is a ConfigError at the config's layout key.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ...errors import KernelgenError
from ...expr import Var
from ...network.arena import Arena, plan_arena
from ...network.channel_copy import ChannelPart, copy_parts, strides as _strides
from ...network.driver_text import check_c_name, c_string, comment_text, places, render as _render
from ...network.manifest import Network, Step
from ...network.program import ProgramBuild
from ...network.resize import AxisTaps, axis_taps, float_literal
from ...network.weights import ALIGNMENT, WeightsPlan
from ...plan_types import Plan, Tensor as PlanTensor
from ..base import Job
from .options import c_options, speed_flags
from .toolchain import compiler_name

NCHW = (Var("n"), Var("c"), Var("h"), Var("w"))  # the physical axes of logical NHWC stored as ONNX stores it
NHWC = (Var("n"), Var("h"), Var("w"), Var("c"))
AXES = {None: NCHW, "NCHW": NCHW, "NHWC": NHWC}  # by the manifest's tensor layout: what network.c passes
TEMPLATES = ("c/network.h.j2", "c/network.c.j2")
FILES = tuple(Path(template).name.removesuffix(".j2") for template in TEMPLATES)  # network.h, network.c
# What network.h declares after `<net>_` (and `network`: its include guard): a kernel of such a name would clash.
DECLARED = ("run", "set_threads", "step_seconds", "pack_weights", "host_step", "tensor", "tensors", "step", "steps", "weight", "weights", "network",
            "embedded_weights")


@dataclass(frozen=True, slots=True, kw_only=True)
class TensorRow:
    """One entry of `<net>_tensors`: every tensor a step reads or writes, in the manifest's order."""

    index: int
    name: str  # the ONNX name as a C string literal
    comment: str  # the ONNX name, safe inside a C comment
    dtype: str
    shape: tuple[int, ...]
    elements: int
    bytes: int
    offset: int  # bytes from the arena's start; -1: the caller's buffer
    pointer: str  # the C expression of its address inside <net>_run (void *, const for network inputs)
    where: str  # where it lives, for comments: "arena + 4096", "inputs[0]"
    layout: str  # NCHW, or NHWC between kernels (_held)


@dataclass(frozen=True, slots=True, kw_only=True)
class WeightRow:
    """One weight a kernel takes: at `offset` bytes into the weights' data section (the weights file's, or what
    `<net>_pack_weights` packs from logical[index])."""

    index: int
    step: int  # the kernel step it belongs to
    kernel: str
    tensor: str  # filter1, bias1, ...
    initializers: str  # the ONNX initializers it is made from, safe inside a C comment and a string literal
    shape: tuple[int, ...]  # logical: OIHW filters, O biases (as ONNX stores them)
    elements: int  # logical elements
    offset: int  # bytes from the data section's start
    nbytes: int  # packed
    pack: str  # the kernel's pack function


@dataclass(frozen=True, slots=True, kw_only=True)
class StepRow:
    index: int
    host: bool
    name: str  # for the steps table, a C string literal: the kernel's config name, or the host step's op types
    function: str  # a kernel's function ("" for a host step)
    label: str  # for comments: "kernel conv1_conv", "host MaxPool"
    nodes: tuple[str, ...]  # the ONNX nodes it computes, as C string literals
    node_comments: tuple[str, ...]
    inputs: tuple[TensorRow, ...]
    outputs: tuple[TensorRow, ...]
    workspace_bytes: int  # a kernel's (0 for a host step)
    workspace_offset: int  # bytes from the arena's start; -1: none
    args: tuple[str, ...]  # a kernel's call, argument by argument
    threads: int = 1  # a kernel's OpenMP team by default (>1: it has <kernel>_set_threads)
    copies: tuple[tuple[TensorRow, ChannelPart], ...] = ()  # a concat, slice or shuffle: each part's input and copy
    resize: ResizeRow | None = None  # a resize step: network.c's loops over its tables


@dataclass(frozen=True, slots=True)
class TapsText:
    """network/resize.AxisTaps as C initializers: indices, and float32 weights that read back as the same floats."""

    first: str
    second: str
    first_weight: str
    second_weight: str

    @classmethod
    def of(cls, taps: AxisTaps) -> TapsText:
        def weights(values: tuple[float, ...]) -> str:  # the shortest decimal of each float32, 1.0f not 1f
            return _rows([float_literal(v) + "f" for v in values])
        return cls(_rows([str(i) for i in taps.first]), _rows([str(i) for i in taps.second]),
                   weights(taps.first_weight), weights(taps.second_weight))


def _rows(items: list[str], per_row: int = 16) -> str:
    """An initializer's items, `per_row` to a line."""
    return ",\n  ".join(", ".join(items[k:k + per_row]) for k in range(0, len(items), per_row))


@dataclass(frozen=True, slots=True, kw_only=True)
class ResizeRow:
    """A resize step as network.c computes it: per output row and column the two input rows (columns) read and
    their weights (network/resize.axis_taps), and each tensor's element strides in its layout."""

    what: str  # for the comment: "linear, half_pixel, scales 8 x 8"
    linear: bool  # else nearest: the first tap alone
    batch: int
    channels: int
    out_h: int
    out_w: int
    in_w: int
    channels_inner: bool  # the output is NHWC: channels innermost (else NCHW: channel planes outermost)
    rows: TapsText
    cols: TapsText
    from_strides: dict[str, int]  # elements between consecutive n, c, h, w of the input
    to_strides: dict[str, int]


def network_files(network: Network, jobs: Mapping[str, Job], packed: WeightsPlan, flags_line: str = ""
                  ) -> dict[str, str]:
    """{"network.h": ..., "network.c": ...} for a network whose kernels' c jobs are `jobs` (by config name) and
    whose weights `packed` places (network/weights.py); `flags_line` in network.c's banner."""
    check_c_name(network)
    plans = {step.index: _checked_plan(network, step, jobs) for step in network.kernels}
    spaces = {step.index: workspace_bytes(jobs[step.config.name]) for step in network.kernels}
    arena = plan_arena(network, spaces)
    tensors = _tensor_rows(network, arena)
    weights = _weight_rows(network, plans, packed)
    layouts = {name: row.layout for name, row in tensors.items()}
    steps = tuple(_copy_row(network, step, tensors, layouts) if step.moves_channels else
                  _resize_row(network, step, tensors) if step.resize is not None else
                  _step_row(step, plans.get(step.index), tensors, weights, arena, spaces.get(step.index, 0))
                  for step in network.steps)
    teams = {step.index: jobs[step.config.name].target_plan.threads for step in network.kernels}
    steps = tuple(replace(s, threads=teams.get(s.index, 1)) for s in steps)
    net = network.name
    context: dict[str, Any] = dict(
        net=net, upper=net.upper(), guard=f"KERNELGEN_{net.upper()}_NETWORK_H", arena=arena,
        tensors=tuple(tensors.values()), weights=weights, steps=steps,
        host_steps=tuple(s for s in steps if s.host), kernel_headers=tuple(dict.fromkeys(
            f"{p.name}.h" for p in plans.values())),
        inputs=tuple(tensors[t] for t in network.inputs), outputs=tuple(tensors[t] for t in network.outputs),
        weights_bytes=packed.data_bytes, weights_alignment=ALIGNMENT, digest=packed.digest_hex,
        max_rank=max(len(t.shape) for t in tensors.values()), threads=max(teams.values(), default=1),
        manifest=comment_text(Path(network.path).name))
    return {name: _render(template, context, flags_line if name.endswith(".c") else "")
            for name, template in zip(FILES, TEMPLATES)}


# The rounds a waiting libgomp thread of the program spins before it sleeps (templates/c/program_main.c.j2 says why)
SPIN_COUNT = 3000


def workspace_bytes(job: Job) -> int:
    """What a kernel's workspace takes in the arena: its caches, a copy for each thread when its threads share out
    whole stripes (the config's `threads`: <net>_set_threads gives a kernel no more)."""
    return job.target_plan.workspace_elements * job.plan.element_bytes


def network_program(network: Network, jobs: Mapping[str, Job]) -> ProgramBuild:
    """The program is built as the kernels are (the config's or the default optimisation flags: speed_flags, what
    CMake's kernelgen_add_kernels gives them too), in C99, by the compiler the c target uses; a kernel whose flags
    differ from the first kernel's keeps its own. Not -Werror: kernelgen's own builds hold the generated code to
    no warnings under its gcc, and a user's newer compiler may warn of something new, which must not stop them."""
    flags = {step.config.name: ("-std=c99", "-Wall", "-Wextra", *speed_flags(c_options(jobs[step.config.name].config)))
             for step in network.kernels}
    common = next(iter(flags.values()))
    openmp = any("-fopenmp" in f for f in flags.values())
    return ProgramBuild(compiler=compiler_name(), flags=common,
                        kernel_flags={name: f for name, f in flags.items() if f != common},
                        kernel_sources={name: tuple(f for f in jobs[name].files if f.endswith(".c")) for name in flags},
                        link=("-lm", *(("-fopenmp",) if openmp else ())), main_template="c/program_main.c.j2",
                        main_values={"spin_count": SPIN_COUNT})


def pack_weights(job: Job, logical: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Each weight packed by the layout engine (numpy: the loops of the kernel's own <kernel>_pack_<tensor>, which
    network.c's <net>_pack_weights calls; the same bytes, tests/test_network_weights.py). Padding that no pad value
    fills is zeros: the kernel never reads it, and the file is the same bytes on every build."""
    names = {t.name for t in job.plan.tensors[1:-1]}
    out = {}
    for name, values in logical.items():
        if name not in names:
            raise KernelgenError(f"kernel {job.plan.name} takes no {name!r} (its weights: {', '.join(sorted(names))})")
        tensor = job.plan.tensor(name)
        packed = tensor.layout.pack(np.asarray(values, np.float32).reshape(tensor.logical_shape), sentinel=0.0)
        out[name] = packed.reshape(tensor.layout.physical_shape)
    return out


def _checked_plan(network: Network, step: Step, jobs: Mapping[str, Job]) -> Plan:
    """The kernel's plan, after the checks that make it callable from network.c."""
    config = step.config
    if config.dtype != "float32":
        raise config.problem("dtype", f"network.c drives float32 kernels on the c target; {config.name} is "
                                      f"{config.dtype} (a uint8 network runs on hvx, which writes no network.c)")
    job = jobs.get(config.name)
    if job is None:
        raise KernelgenError(f"network {network.name}: no c job for kernel {config.name} (step {step.index})")
    plan = job.plan
    net = network.name
    if any(plan.name == f"{net}_{word}" for word in DECLARED):
        raise config.problem("name", f"kernel {plan.name} would clash with network.h's {plan.name}: rename the "
                                     f"kernel or the network")
    boundaries = [("input.layout", plan.tensors[0]), ("output.layout", plan.tensors[-1])]
    boundaries += [(f"side_inputs.{side.name}.layout", plan.tensor(side.param)) for side in config.side_inputs]
    for (key, tensor), name in zip(boundaries, (step.inputs[0], step.outputs[0], *step.inputs[1:])):
        bound, held = tensor.layout, _held(network, name)
        if bound.layout.outputs != AXES[held] or bound.layout.separators or bound.padding:
            raise config.problem(key, f"network.c passes {name!r} as the manifest holds it ({held or 'NCHW'}, "
                                      f"unpadded) from step to step; {config.name}'s {tensor.name} is "
                                      f"{bound.layout.name}{' with padding' if bound.padding else ''}: give it "
                                      f"`{key.split('.')[0]}: {{layout: {held or 'NCHW'}}}` (kernelgen import "
                                      f"writes that)")
    return plan


def _held(network: Network, name: str) -> str | None:
    """The layout the manifest holds a tensor in, when network.c can pass it so: NCHW (or none said) anywhere, NHWC
    only between kernels (the caller's buffers and a host step's tensors are as ONNX holds them)."""
    layout = network.tensors[name].layout
    if layout not in AXES:
        raise network.problem(f"tensors.{name}.layout", f"network.c holds tensors NCHW or, between kernels, NHWC; "
                                                        f"{name!r} is {layout}")
    outside = {*network.inputs, *network.outputs} | {t for s in network.steps if s.is_host
                                                     for t in (*s.inputs, *s.outputs)}
    if layout == "NHWC" and name in outside:
        raise network.problem(f"tensors.{name}.layout", f"{name!r} is NHWC, but the caller or a host step reads or "
                                                        f"writes it, as ONNX holds it: NCHW")
    return layout


def _tensor_rows(network: Network, arena: Arena) -> dict[str, TensorRow]:
    rows = {}
    for name, (offset, pointer) in places(network, arena).items():  # base: the arena, as unsigned char *
        tensor = network.tensors[name]
        rows[name] = TensorRow(index=len(rows), name=c_string(name), comment=comment_text(name), dtype=tensor.dtype,
                               shape=tensor.shape, elements=math.prod(tensor.shape), bytes=tensor.nbytes,
                               offset=offset, pointer=pointer, where=pointer if offset < 0 else f"arena + {offset}",
                               layout=_held(network, name) or "NCHW")
    return rows


def _weight_rows(network: Network, plans: Mapping[int, Plan], packed: WeightsPlan) -> tuple[WeightRow, ...]:
    """Kernel by kernel in step order, each op's filter then its bias (filter1, bias1, filter2, ...), as ONNX
    lists a Conv's inputs, where the weights plan put them."""
    rows: list[WeightRow] = []
    for step in network.kernels:
        plan = plans[step.index]
        helpers = {fn.name for fn in plan.helpers}
        placed = packed.of(step.index)
        weights = [t for t in plan.tensors[1:-1] if not t.name.startswith("side_")]  # side inputs: from the arena
        if {t.name for t in weights} != set(placed):
            raise KernelgenError(f"kernel {plan.name} takes {', '.join(sorted(t.name for t in weights))}; the weights "
                                 f"plan has {', '.join(sorted(placed)) or 'none'} for it")
        for tensor in sorted(weights, key=_op_order):
            pack = f"{plan.name}_pack_{tensor.name}"
            if pack not in helpers:
                raise KernelgenError(f"kernel {plan.name} has no {pack} (network.c packs weights through it)")
            where = placed[tensor.name]
            rows.append(WeightRow(index=len(rows), step=step.index, kernel=plan.name, tensor=tensor.name,
                                  initializers=comment_text(", ".join(where.initializers)).replace('"', "'"),
                                  shape=tensor.logical_shape, elements=tensor.layout.logical_size,
                                  offset=where.offset, nbytes=where.nbytes, pack=pack))
    return tuple(rows)


def _op_order(tensor: PlanTensor) -> tuple[int, int]:
    match = re.fullmatch(r"(filter|bias)(\d+)", tensor.name)
    if match is None:
        raise KernelgenError(f"network.c knows a kernel's filter<j> and bias<j> arguments, not {tensor.name!r}")
    return int(match.group(2)), match.group(1) == "bias"


def _copy_row(network: Network, step: Step, tensors: Mapping[str, TensorRow], layouts: dict[str, str]) -> StepRow:
    """A concat, slice or shuffle step: network.c copies channels of its inputs into the output
    (network/channel_copy.py)."""
    parts = copy_parts(network, step, layouts)
    return StepRow(index=step.index, host=False, name=c_string(step.kind), function="", label=step.kind, nodes=(),
                   node_comments=(), inputs=tuple(tensors[t] for t in step.inputs),
                   outputs=(tensors[step.outputs[0]],), workspace_bytes=0, workspace_offset=-1, args=(),
                   copies=tuple((tensors[part.source], part) for part in parts))


def _resize_row(network: Network, step: Step, tensors: Mapping[str, TensorRow]) -> StepRow:
    """A resize step: network.c reads the taps' tables it prints and blends (linear) or picks (nearest)."""
    source, result = tensors[step.inputs[0]], tensors[step.outputs[0]]
    resize = step.resize
    n, channels, out_h, out_w = result.shape
    scales = " x ".join(f"{x:g}" for x in resize.scales)
    rounding = f", {resize.rounding}" if resize.mode == "nearest" else ""
    row = ResizeRow(what=f"{resize.mode}, {resize.coordinates}{rounding}, scales {scales}",
                    linear=resize.mode == "linear", batch=n, channels=channels, out_h=out_h, out_w=out_w,
                    in_w=source.shape[3],
                    channels_inner=result.layout == "NHWC",
                    rows=TapsText.of(axis_taps(resize, 0, source.shape[2], out_h)),
                    cols=TapsText.of(axis_taps(resize, 1, source.shape[3], out_w)),
                    from_strides={a: b // 4 for a, b in _strides(source.layout, source.shape, 4).items()},
                    to_strides={a: b // 4 for a, b in _strides(result.layout, result.shape, 4).items()})
    return StepRow(index=step.index, host=False, name=c_string(step.kind), function="", label=step.kind, nodes=(),
                   node_comments=(), inputs=(source,), outputs=(result,), workspace_bytes=0, workspace_offset=-1,
                   args=(), resize=row)


def _step_row(step: Step, plan: Plan | None, tensors: Mapping[str, TensorRow], weights: tuple[WeightRow, ...],
              arena: Arena, space: int) -> StepRow:
    inputs = tuple(tensors[t] for t in step.inputs)
    outputs = tuple(tensors[t] for t in step.outputs)
    nodes = step.nodes or (tuple(step.config.source.nodes) if step.config and step.config.source else ())
    common = dict(index=step.index, nodes=tuple(c_string(n) for n in nodes),
                  node_comments=tuple(comment_text(n) for n in nodes), inputs=inputs, outputs=outputs)
    if plan is None:
        ops = ", ".join(dict.fromkeys(step.op_types)) or step.convert or "nodes"
        return StepRow(host=True, name=c_string(ops), function="", label=f"host {comment_text(ops)}",
                       workspace_bytes=0, workspace_offset=-1, args=(), **common)
    workspace = arena.workspaces.get(step.index, 0)
    packed = {w.tensor: f"(const float *)(weights + {w.offset})" for w in weights if w.step == step.index}
    sides = {side.param: f"(const float *)({row.pointer})" for side, row in zip(step.config.side_inputs, inputs[1:])}
    pointers = {"input": f"(const float *)({inputs[0].pointer})", "output": f"(float *)({outputs[0].pointer})",
                "workspace": f"(float *)(base + {workspace})", **sides, **packed}
    missing = [p.name for p in plan.kernel.params if p.name not in pointers]
    if missing:
        raise KernelgenError(f"kernel {plan.name}: network.c has nothing to pass as {missing[0]!r}")
    return StepRow(host=False, name=c_string(plan.name), function=plan.kernel.name, label=f"kernel {plan.name}",
                   workspace_bytes=space, workspace_offset=workspace,
                   args=tuple(pointers[p.name] for p in plan.kernel.params), **common)
