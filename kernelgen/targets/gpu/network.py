"""A whole network on a GPU, in API-neutral terms: what the OpenCL and Vulkan `<network>_run` programs allocate,
bind and dispatch. Each API's host code only spells this plan out.

Every tensor is a region of one of four device allocations:
- `input` and `output`: the network's own ends, which the host uploads and reads back;
- `arena`: every other tensor between steps and each kernel's own intermediates (temp<j> of a fused chain), at
  offsets from kernelgen/network/arena.py's greedy plan over their lifetimes counted in dispatches, not steps
  (a kernel's temp<j> lives only from the dispatch that first binds it to the last that does);
- `weights`: the weights file's data section, uploaded once, each tensor at an offset aligned for binding (the
  file aligns to 64 bytes, less than some devices' sub-buffer or storage-buffer offset alignment).

The dispatches are every kernel's launches (the target's `launches(job)`) in step order, each binding a region,
and each says whether it needs a barrier before it: when it touches a region overlapping one written since the
last barrier (read-after-write, write-after-write), or writes one overlapping a region read since then
(write-after-read). A kernel's temp<j> and output bindings count as writes in every dispatch that binds them: the
API-neutral launch does not say which argument a kernel writes, and a barrier too many costs time, one too few a
wrong answer. (An in-order OpenCL queue orders every launch anyway; Vulkan needs the barriers.)
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping

from ...errors import KernelgenError
from ...network.arena import Buffer, place_buffers, round_up
from ...network.manifest import Network, Step
from ...network.program import ProgramBuild
from ...network.weights import WeightsPlan
from ...plan_types import TextEnum
from .channel_copies import CopyPart, copied_steps, copy_parts, copy_refusal
from .resize_parts import ResizePart, resize_part
from .concat_alias import Alias, concat_aliases
from .dispatch import GpuDispatch, GpuTensor, Role, TensorKind, role_of

if TYPE_CHECKING:
    from ...measure.primitives import Job

# bytes: every region starts at a multiple of it. OpenCL's CL_DEVICE_MEM_BASE_ADDR_ALIGN (a sub-buffer's origin) is
# 1024 bits on PoCL and Adreno; Vulkan's minStorageBufferOffsetAlignment is at most 256 by the spec's limits table.
ALIGNMENT = 256
ELEMENT_BYTES = {"float32": 4, "float16": 2}  # a GPU kernel's storage type, by its config's dtype
# a dispatch, its step, its tensors' region names, and the part it copies (None: a kernel's launch)
Launched = tuple[Step, GpuDispatch, dict[str, str], CopyPart | None]


class Allocation(TextEnum):
    """The device allocations a network's regions live in."""

    INPUT = "input"  # the network's input(s), uploaded before each run
    OUTPUT = "output"  # its output(s), read back after each run
    ARENA = "arena"  # every other tensor and each kernel's intermediates
    WEIGHTS = "weights"  # every kernel's filters and biases, uploaded once


@dataclass(frozen=True, slots=True, kw_only=True)
class Region:
    """A byte range of one allocation that some dispatch binds."""

    index: int  # position in GpuNetworkPlan.regions
    name: str  # a network tensor's ONNX name; a kernel's own: "<kernel>.temp1", "<kernel>.filter1"
    allocation: Allocation
    offset: int  # bytes from the allocation's start, a multiple of the plan's alignment
    size_bytes: int
    kind: TensorKind  # how kernels reach it (an image: the API's image object over these bytes)
    source_offset: int = -1  # a weight's: bytes from the weights file's data section's start; -1: none
    tensor: GpuTensor | None = None  # as the first kernel binding it declares it (kind, shape of an image)

    def __post_init__(self) -> None:
        if self.size_bytes <= 0 or self.offset < 0:
            raise ValueError(f"region {self.name!r}: {self.size_bytes} bytes at {self.offset}")

    @property
    def end(self) -> int:
        return self.offset + self.size_bytes

    def overlaps(self, other: Region) -> bool:
        return self.allocation == other.allocation and self.offset < other.end and other.offset < self.end


@dataclass(frozen=True, slots=True, kw_only=True)
class Binding:
    """One argument (OpenCL) or binding (Vulkan) of a dispatch: the kernel's tensor and the region behind it."""

    tensor: str  # the kernel's own name: input, side_<name>, filter<j>, bias<j>, temp<j>, output
    region: Region
    writes: bool  # the kernel may write it (its temp<j> and output)
    span: tuple[int, int] | None = None  # the bytes of the region it touches, from its start (None: all of them)

    @property
    def touched(self) -> tuple[Allocation, int, int]:
        """(allocation, first byte, one past the last) of what it touches: what the barriers compare."""
        start, end = self.span or (0, self.region.size_bytes)
        return self.region.allocation, self.region.offset + start, self.region.offset + end


@dataclass(frozen=True, slots=True, kw_only=True)
class NetworkDispatch:
    index: int  # position in the network's dispatch order
    step: int  # the manifest step whose kernel it is
    kernel: str  # that kernel's config name (its job, its program or shader modules)
    dispatch: GpuDispatch  # the launch as the target plans it (dispatch.kernel: the function or shader module)
    bindings: tuple[Binding, ...]  # in dispatch.tensors order
    barrier: bool  # wait for the earlier dispatches' writes (and reads of what it writes) before it starts
    # a channel step's part it copies (channel_copies.py) or a resize (resize_parts.py); None: a kernel's launch
    copy: CopyPart | ResizePart | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuNetworkPlan:
    network: str
    input_bytes: int  # each allocation's size, a multiple of ALIGNMENT
    output_bytes: int
    arena_bytes: int
    weights_bytes: int
    regions: tuple[Region, ...]  # ends first, then the arena's in placement order, then the weights'
    dispatches: tuple[NetworkDispatch, ...]
    naive_arena_bytes: int  # every arena region in its own allocation: what the plan saves
    alignment: int = ALIGNMENT

    def __post_init__(self) -> None:
        sizes = self.allocation_bytes
        for k, region in enumerate(self.regions):
            if region.index != k or region.end > sizes[region.allocation] or region.offset % self.alignment:
                raise ValueError(f"region {region.name!r} ({region.index}) at {region.offset}..{region.end}: past the "
                                 f"{sizes[region.allocation]}-byte {region.allocation} allocation or not aligned to "
                                 f"{self.alignment}")

    @property
    def allocation_bytes(self) -> dict[Allocation, int]:
        return {Allocation.INPUT: self.input_bytes, Allocation.OUTPUT: self.output_bytes,
                Allocation.ARENA: self.arena_bytes, Allocation.WEIGHTS: self.weights_bytes}

    @property
    def barriers(self) -> int:
        return sum(d.barrier for d in self.dispatches)

    def region(self, name: str) -> Region:
        return next(r for r in self.regions if r.name == name)


def host_program(network: Network, *, link: tuple[str, ...], main_template: str, cache: str) -> ProgramBuild:
    """How a GPU network's `<network>_run` builds: C99 host code over the API's loader (`link`), no kernel C
    sources (network.c embeds the kernels), and `make clean` removing the program or pipeline cache (`cache`, a
    name beside the program) it writes at run time."""
    import shutil

    return ProgramBuild(compiler="gcc" if shutil.which("gcc") else "cc", flags=("-std=c99", "-O2", "-Wall", "-Wextra"),
                        kernel_sources={step.config.name: () for step in network.kernels}, link=link,
                        main_template=main_template, clean=(cache,))


def plan_gpu_network(network: Network, target: Any, jobs: Mapping[str, Job], weights: WeightsPlan | None = None,
                     alignment: int = ALIGNMENT) -> GpuNetworkPlan:
    """The plan of `network` on a GPU target (anything with `launches(job)`: targets/gpu/program.py's GpuTarget),
    `jobs` its jobs by config name, `weights` the weights file's plan (the target's pack_weights; None: the weights
    placed in the order dispatches first bind them, with no source offsets, for a note that needs no packing).
    Every step must be a kernel or a channel step: a concat its kernels write in place (concat_alias.py), else
    copied by dispatches as a slice or shuffle is (channel_copies.py); a host step's tensors would have to come
    back to the host (the targets refuse such a network)."""
    hosts = [s.label for s in network.steps if s.kind in ("host", "convert")]
    if hosts:
        raise KernelgenError(f"network {network.name}: a GPU network plan runs kernels and copies, not {hosts[0]}")
    placement = concat_aliases(network, element_sizes(network), alignment)
    why = copy_refusal(network, placement, element_sizes(network))
    if why:
        raise KernelgenError(f"network {network.name}: {why}")
    copied = {step.index for step in copied_steps(network, placement)}
    launched: list[Launched] = []
    shapes: dict[str, tuple[GpuTensor, int]] = {}  # region name -> (its first declaration, its bytes)
    laid: dict[str, int] = {}  # region name -> its layout's bytes (a binding's slack for whole texels aside)
    for step in network.steps:
        if step.index in copied or step.resize is not None:
            for part in copy_parts(network, step) if step.index in copied else (resize_part(network, step),):
                names = {"input": part.source, "output": part.output}
                for tensor in part.tensors(network):
                    shapes.setdefault(names[tensor.name], (tensor, tensor.elements * 4))
                    laid.setdefault(names[tensor.name], tensor.elements * 4)
                launched.append((step, part.dispatch, names, part))
            continue
        if not step.is_kernel:
            continue
        job = jobs.get(step.config.name)
        if job is None:
            raise KernelgenError(f"network {network.name}: no {target.name} job for kernel {step.config.name}")
        tensors, dispatches = target.launches(job)
        element = ELEMENT_BYTES[job.config.dtype]
        names = _region_names(step, tensors)
        for tensor in tensors:
            name, size = names[tensor.name], (tensor.elements - tensor.slack) * element
            if laid.setdefault(name, size) != size:
                raise KernelgenError(f"network {network.name}: kernel {step.config.name} holds {name!r} in {size} "
                                     f"bytes, an earlier kernel in {laid[name]}: their layouts differ")
            first = shapes.setdefault(name, (tensor, tensor.elements * element))  # the most any binding reads
            shapes[name] = (first[0], max(first[1], tensor.elements * element))
        launched += [(step, dispatch, names, None) for dispatch in dispatches]
    for _, _, names, part in launched:
        for tensor in part.tensors(network) if part else ():
            held = laid[names[tensor.name]]
            if held != tensor.elements * 4:
                raise KernelgenError(f"network {network.name}: a kernel holds {names[tensor.name]!r} in {held} "
                                     f"bytes; step {part.step}'s copy reads and writes it as NCHW float32 "
                                     f"({tensor.elements * 4} bytes)")
    aliases = placement.aliases
    regions = _regions(network, launched, shapes, weights, alignment, aliases)
    dispatches: list[NetworkDispatch] = []
    pending_writes: list[tuple[Allocation, int, int]] = []
    pending_reads: list[tuple[Allocation, int, int]] = []
    for k, (step, dispatch, names, part) in enumerate(launched):
        spans = part.spans if part else {}
        bindings = tuple(Binding(tensor=t, region=regions[names[t]], writes=_written(t), span=spans.get(t))
                         for t in dispatch.tensors)
        touched = [b.touched for b in bindings]
        written = [b.touched for b in bindings if b.writes]
        barrier = k > 0 and (any(_overlap(r, w) for r in touched for w in pending_writes) or
                             any(_overlap(w, r) for w in written for r in pending_reads))
        if barrier:
            pending_writes, pending_reads = [], []
        pending_writes += written
        pending_reads += touched
        dispatches.append(NetworkDispatch(index=k, step=step.index, kernel=part.name if part else step.config.name,
                                          dispatch=dispatch, bindings=bindings, barrier=barrier, copy=part))
    ordered = tuple(sorted(regions.values(), key=lambda r: r.index))
    sizes = {a: round_up(max((r.end for r in ordered if r.allocation == a), default=0), alignment)
             for a in Allocation}
    naive = sum(round_up(r.size_bytes, alignment) for r in ordered
                if r.allocation == Allocation.ARENA and r.name not in aliases)  # a concat's inputs: its bytes
    return GpuNetworkPlan(network=network.name, input_bytes=sizes[Allocation.INPUT],
                          output_bytes=sizes[Allocation.OUTPUT], arena_bytes=sizes[Allocation.ARENA],
                          weights_bytes=sizes[Allocation.WEIGHTS], regions=ordered, dispatches=tuple(dispatches),
                          naive_arena_bytes=naive, alignment=alignment)


def concat_refusal(network: Network, alignment: int = ALIGNMENT) -> str:
    """Why the network's channel steps cannot run on the device ("" when they can, or it has none): a concat whose
    inputs cannot sit inside its output, a slice and a shuffle are dispatched copies of NCHW float32 buffers."""
    if not any(s.moves_channels or s.resize is not None for s in network.steps):
        return ""
    return copy_refusal(network, concat_aliases(network, element_sizes(network), alignment), element_sizes(network))


def placement_note(network: Network, alignment: int = ALIGNMENT) -> str:
    """What build says of the channel steps: how many concats the kernels write in place, how many are copied."""
    moves = [s for s in network.steps if s.moves_channels]
    if not moves:
        return ""
    placement = concat_aliases(network, element_sizes(network), alignment)
    copied = copied_steps(network, placement)
    parts = sum(len(copy_parts(network, s)) for s in copied)
    placed = sum(s.concat for s in moves) - len(placement.copied)
    first = f" (first: {next(iter(placement.copied.values()))})" if placement.copied else ""
    return (f"{placed} concat(s) written in place by their kernels, {len(copied)} channel step(s) copied by "
            f"{parts} dispatch(es){first}")


def element_sizes(network: Network) -> Callable[[str], int]:
    """A network tensor's device element size: its kernels' storage type (the network's first kernel's for a tensor
    only concats touch)."""
    sizes = {name: ELEMENT_BYTES[step.config.dtype] for step in network.kernels
             for name in (*step.inputs, *step.outputs)}
    default = ELEMENT_BYTES.get(network.kernels[0].config.dtype, 4) if network.kernels else 4
    return lambda name: sizes.get(name, default)


def _overlap(a: tuple[Allocation, int, int], b: tuple[Allocation, int, int]) -> bool:
    return a[0] == b[0] and a[1] < b[2] and b[1] < a[2]


def _written(tensor: str) -> bool:
    return role_of(tensor) in (Role.TEMP, Role.OUTPUT)


def _region_names(step: Step, tensors: tuple[GpuTensor, ...]) -> dict[str, str]:
    """Each of a kernel's tensors -> the region it binds: the network tensor its step wires it to (input, side
    inputs in the config's order, output), or its own (`<kernel>.filter1`, `<kernel>.temp1`)."""
    config = step.config
    wired = {"input": step.inputs[0], "output": step.outputs[0]}
    wired |= {side.param: name for side, name in zip(config.side_inputs, step.inputs[1:])}
    names = {}
    for tensor in tensors:
        if tensor.role in (Role.INPUT, Role.OUTPUT, Role.SIDE):
            if tensor.name not in wired:
                raise KernelgenError(f"kernel {config.name}: its {tensor.name} is wired to no tensor of step "
                                     f"{step.index}")
            names[tensor.name] = wired[tensor.name]
        else:
            names[tensor.name] = f"{config.name}.{tensor.name}"
    return names


def _regions(network: Network, launched: list[Launched], shapes: Mapping[str, tuple[GpuTensor, int]],
             weights: WeightsPlan | None, alignment: int, aliases: Mapping[str, Alias]) -> dict[str, Region]:
    """Every region: the ends stacked in their allocations, the arena by the greedy plan over the dispatches that
    bind each region (a concat's inputs inside its output's, which lives while any of them does), the weights
    re-aligned in the order of the file."""
    regions: dict[str, Region] = {}
    sizes = element_sizes(network)
    shapes = {**{alias.within: (None, math.prod(network.tensors[alias.within].shape) * sizes(alias.within))
                 for alias in aliases.values()}, **shapes}  # a concat's output no kernel binds still has bytes

    def add(name: str, allocation: Allocation, offset: int, source_offset: int = -1) -> None:
        tensor, size = shapes[name]
        if tensor is not None and name in {*aliases, *(a.within for a in aliases.values())} and \
                tensor.kind is not TensorKind.BUFFER:
            raise KernelgenError(f"network {network.name}: {name!r} is a concat's, but a kernel binds it as an "
                                 f"{tensor.kind}: only buffers share their bytes")
        regions[name] = Region(index=len(regions), name=name, allocation=allocation, offset=offset, size_bytes=size,
                               kind=TensorKind.BUFFER if tensor is None else tensor.kind,
                               source_offset=source_offset, tensor=tensor)

    for allocation, ends in ((Allocation.INPUT, network.inputs), (Allocation.OUTPUT, network.outputs)):
        offset = 0
        for name in ends:
            if name in shapes:  # a network input no kernel reads takes no device memory
                add(name, allocation, offset)
                offset = round_up(offset + shapes[name][1], alignment)
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for k, (step, dispatch, names, _) in enumerate(launched):
        for tensor in dispatch.tensors:
            name = aliases[names[tensor]].within if names[tensor] in aliases else names[tensor]
            if name not in regions and role_of(tensor) not in (Role.FILTER, Role.BIAS):
                first.setdefault(name, k)
                last[name] = k
    arena = place_buffers([Buffer(name=name, size_bytes=shapes[name][1], first=first[name], last=last[name], offset=0)
                           for name in first], alignment)
    for buffer in arena:
        add(buffer.name, Allocation.ARENA, buffer.offset)
    for name, alias in aliases.items():  # inside the region holding it, at its channels
        within = regions[alias.within]
        add(name, within.allocation, within.offset + alias.offset)
    if weights is None:
        files = [(name, -1) for _, dispatch, names, _ in launched for name in (names[t] for t in dispatch.tensors)
                 if name not in regions and shapes[name][0].role in (Role.FILTER, Role.BIAS)]
    else:
        files = [(f"{placed.kernel}.{placed.tensor}", placed.offset) for placed in weights.tensors]
        for placed in weights.tensors:
            name = f"{placed.kernel}.{placed.tensor}"
            if name not in shapes:
                raise KernelgenError(f"network {network.name}: the weights file holds {name}, which no dispatch "
                                     f"binds")
            if shapes[name][1] != placed.nbytes:
                raise KernelgenError(f"network {network.name}: {name} takes {shapes[name][1]} bytes on the device, "
                                     f"{placed.nbytes} in the weights file")
    offset = 0
    for name, source_offset in dict(files).items():
        add(name, Allocation.WEIGHTS, offset, source_offset)
        offset = round_up(offset + shapes[name][1], alignment)
    unbound = [name for name, (tensor, _) in shapes.items()
               if name not in regions and tensor.role in (Role.FILTER, Role.BIAS)]
    if unbound:
        raise KernelgenError(f"network {network.name}: nothing holds {unbound[0]!r} (a weight missing from the "
                             f"weights file)")
    return regions
