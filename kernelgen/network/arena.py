"""The memory plan of a network: one arena holding every tensor that passes between steps and each kernel's
workspace, at offsets chosen as TFLite's arena planner chooses them (its `GreedyMemoryPlanner`).

A buffer lives from the step that writes it to the last step that reads it (a workspace: its kernel's step only,
since one kernel runs at a time); two buffers whose lifetimes share a step never share a byte, which also keeps a
kernel's input, output and workspace apart, as its `restrict` parameters require. Buffers are placed largest first
(ties: earlier first, then by name, so the plan is the same on every machine), each at the lowest aligned offset
that overlaps no already placed buffer alive at the same time. The network's own inputs and outputs are not in the
arena: they are the caller's buffers.

Pure and target-free: a kernel's workspace size comes in as data (step index -> bytes).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

from ..layout import ACTIVATION_DIMS, parse_layout
from .manifest import Network, Tensor

ALIGNMENT = 64  # bytes: a cache line, and a whole vector register of every SIMD ISA the c target meets


@dataclass(frozen=True, slots=True, kw_only=True)
class Buffer:
    """One region of the arena: a tensor (by its ONNX name) or a kernel step's workspace (`workspace_of`)."""

    name: str
    size_bytes: int
    first: int  # the step that writes it
    last: int  # the last step that reads it (a workspace, or a tensor nobody reads: `first`)
    offset: int
    workspace_of: int | None = None  # the kernel step whose workspace it is

    def __post_init__(self) -> None:
        if self.size_bytes <= 0 or self.offset < 0 or self.first > self.last:
            raise ValueError(f"buffer {self.name!r}: size {self.size_bytes}, offset {self.offset}, "
                             f"steps {self.first}..{self.last}")

    @property
    def end(self) -> int:
        return self.offset + self.size_bytes

    def alive_with(self, other: "Buffer") -> bool:
        """Whether some step sees both (the step that writes one may be the last that reads the other)."""
        return self.first <= other.last and other.first <= self.last

    def overlaps(self, other: "Buffer") -> bool:
        return self.offset < other.end and other.offset < self.end


@dataclass(frozen=True, slots=True, kw_only=True)
class Arena:
    size_bytes: int  # the arena the caller provides (a multiple of `alignment`)
    offsets: dict[str, int]  # tensor name -> byte offset, for every tensor in the arena
    workspaces: dict[int, int]  # kernel step index -> byte offset of its workspace
    buffers: tuple[Buffer, ...]  # every placed region, in placement order (largest first)
    naive_bytes: int  # every tensor in its own buffer plus one workspace of the largest size: no planning
    peak_bytes: int  # the most bytes alive at one step: no plan can use less (the greedy one may use more)
    alignment: int

    def __post_init__(self) -> None:
        for k, a in enumerate(self.buffers):
            if a.offset % self.alignment or a.end > self.size_bytes:
                raise ValueError(f"buffer {a.name!r} at {a.offset} (+{a.size_bytes}) in an arena of "
                                 f"{self.size_bytes} bytes aligned to {self.alignment}")
            for b in self.buffers[:k]:
                if a.alive_with(b) and a.overlaps(b):
                    raise ValueError(f"buffers {a.name!r} and {b.name!r} are alive together and overlap")


def plan_arena(network: Network, workspace_bytes: Mapping[int, int], alignment: int = ALIGNMENT) -> Arena:
    """The arena of `network`; `workspace_bytes`: each kernel step's workspace (by step index; a kernel missing
    from it, or 0, has none)."""
    if alignment <= 0 or alignment & (alignment - 1):
        raise ValueError(f"alignment must be a power of two, got {alignment}")
    unplaced = _lifetimes(network) + [
        Buffer(name=f"workspace of step {k}", size_bytes=size, first=k, last=k, offset=0, workspace_of=k)
        for k, size in sorted(workspace_bytes.items()) if size > 0]
    placed = place_buffers(unplaced, alignment)
    size = round_up(max((b.end for b in placed), default=0), alignment)
    tensors = [b for b in placed if b.workspace_of is None]
    workspaces = [b for b in placed if b.workspace_of is not None]
    naive = (sum(round_up(b.size_bytes, alignment) for b in tensors)
             + max((round_up(b.size_bytes, alignment) for b in workspaces), default=0))
    peak = max((sum(b.size_bytes for b in placed if b.first <= k <= b.last) for k in range(len(network.steps))),
               default=0)
    return Arena(size_bytes=size, offsets={b.name: b.offset for b in tensors},
                 workspaces={b.workspace_of: b.offset for b in workspaces}, buffers=tuple(placed),
                 naive_bytes=naive, peak_bytes=peak, alignment=alignment)


def place_buffers(unplaced: list[Buffer], alignment: int = ALIGNMENT) -> list[Buffer]:
    """The greedy plan itself, for any timeline (`first` and `last` may count steps, or a GPU network's dispatches):
    largest first (ties: earlier first, then by name), each at the lowest aligned offset free while it is alive."""
    placed: list[Buffer] = []
    for buffer in sorted(unplaced, key=lambda b: (-b.size_bytes, b.first, b.name)):
        placed.append(_place(buffer, placed, alignment))
    return placed


def round_up(value: int, alignment: int) -> int:
    return -(-value // alignment) * alignment


def tensor_bytes(tensor: Tensor) -> int:
    """What a tensor takes in the layout kernels hold it in: a blocked layout (uint8's nhwc-8h8w32c) pads its
    blocks (a classifier's [N, C] is the [N, C, 1, 1] image a kernel writes); ONNX's own layout (no `layout:`, or
    NCHW) takes exactly its elements."""
    if tensor.layout is None or len(tensor.shape) not in (2, 4):
        return tensor.nbytes
    n, c, h, w = (*tensor.shape, 1, 1)[:4]
    physical = parse_layout(tensor.layout, ACTIVATION_DIMS).bind((n, h, w, c)).size
    return max(tensor.nbytes, physical * tensor.nbytes // math.prod(tensor.shape))


def _lifetimes(network: Network) -> list[Buffer]:
    """Each tensor a step writes that the caller does not hold (a network input or output), from its writer to
    its last reader, with offset 0 until placed."""
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for step in network.steps:
        for name in step.outputs:
            first.setdefault(name, step.index)
            last.setdefault(name, step.index)
        for name in step.inputs:
            last[name] = max(last.get(name, step.index), step.index)
    caller = set(network.inputs) | set(network.outputs)
    return [Buffer(name=name, size_bytes=tensor_bytes(network.tensors[name]), first=k, last=last[name], offset=0)
            for name, k in first.items() if name not in caller and network.tensors[name].nbytes > 0]


def _place(buffer: Buffer, placed: list[Buffer], alignment: int) -> Buffer:
    """TFLite's greedy step: walk the buffers alive at the same time in offset order and take the first aligned
    gap that holds this one (past the last of them when none does)."""
    offset = 0
    for other in sorted((b for b in placed if b.alive_with(buffer)), key=lambda b: (b.offset, b.end)):
        if offset + buffer.size_bytes <= other.offset:
            break
        offset = max(offset, round_up(other.end, alignment))
    return Buffer(name=buffer.name, size_bytes=buffer.size_bytes, first=buffer.first, last=buffer.last,
                  offset=offset, workspace_of=buffer.workspace_of)
