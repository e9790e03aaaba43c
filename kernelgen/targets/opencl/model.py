"""The records the opencl target's planner hands to its kernel writer: device tensors, the
arithmetic of one conv2d, and one __kernel ready for the template."""
from __future__ import annotations

from dataclasses import dataclass

from ...layout import TensorLayout
from ...plan import OpGeometry


@dataclass(frozen=True, slots=True, kw_only=True)
class Storage:
    """One tensor on the device: a kernel argument and a run_sequence key."""

    name: str  # input, filter1, temp1, output
    role: str  # input | filter | temp | output
    kind: str  # image | buffer
    layout: TensorLayout  # packs the host array: image [rows, width*4], buffer its flat shape

    @property
    def shape(self) -> tuple[int, ...]:
        return self.layout.flat_shape

    @property
    def texels(self) -> tuple[int, int]:
        """(width, height) of an image."""
        return (self.layout.flat_shape[-1] // 4, self.layout.flat_shape[0])

    @property
    def map_text(self) -> str:
        return self.layout.layout.map_text


@dataclass(frozen=True, slots=True, kw_only=True)
class ConvOp:
    """The arithmetic of one conv2d kernel, before it becomes text."""

    geo: OpGeometry  # the plan's record of this conv2d
    source: Storage
    filter: Storage
    dest: Storage
    tiles: tuple[int, int, int]  # work-items needed along (ow tiles, oh tiles, n * channel blocks)
    channel_blocks: int  # ceil(out channels / channels per work-item)


@dataclass(frozen=True, slots=True, kw_only=True)
class Kernel:
    """One __kernel, as ready text for the template."""

    name: str
    doc: str
    params: tuple[str, ...]
    args: tuple[str, ...]  # storage names, in parameter order
    global_size: tuple[int, ...]
    local_size: tuple[int, ...]
    prologue: tuple[str, ...]
    taps: tuple[int, int]  # (kh, kw) loops around the channel loop; (0, 0) for a plain kernel
    tap_setup: tuple[str, ...]
    groups: int  # full 4-channel groups: the trip count of the c4 loop
    step: tuple[str, ...]  # body of the c4 loop
    tail: tuple[str, ...]  # the last, partial 4-channel group
    epilogue: tuple[str, ...]

    def __post_init__(self) -> None:
        assert all(g % l == 0 for g, l in zip(self.global_size, self.local_size)), (self.name, self.global_size)

    @property
    def work_group_3d(self) -> tuple[int, int, int]:
        """The local size as reqd_work_group_size wants it: always three numbers."""
        return (*self.local_size, *(1,) * (3 - len(self.local_size)))  # type: ignore[return-value]

    @property
    def tail_channel(self) -> int:
        """First input channel of the partial group of 4 (the tail step)."""
        return 4 * self.groups
