"""How a conv's output is cut over a GPU launch, in API-neutral terms: along each of three output axes a work-item
owns a tile of `per_item` elements and a work-group `work_group` work-items, so the launch takes
ceil(ceil(extent / per_item) / work_group) groups. From the same numbers follow which work-items have nothing to
do (a grid rounded up to whole groups: they return at once) and which store past the output's edge (a tile or a
group that does not divide the extent: their stores need a guard). The batch folds into the third axis: per
work-item (OpenCL's channel blocks x images) or per group (a Vulkan dispatch's row groups x images).

Each API orders the axes its own way (OpenCL x = columns, Vulkan x = channel chunks) and spells the guards in its
language; the arithmetic is here once."""
from __future__ import annotations

from dataclasses import dataclass

from .api import GpuApi


@dataclass(frozen=True, slots=True)
class TileAxis:
    extent: int  # output elements (or vec4 chunks) along the axis
    per_item: int  # of them one work-item computes
    work_group: int  # work-items a group holds along the axis

    @property
    def items(self) -> int:
        return -(-self.extent // self.per_item)

    @property
    def groups(self) -> int:
        return -(-self.items // self.work_group)

    @property
    def ragged(self) -> bool:
        """Some work-item's tile reaches past the extent: its stores there need a guard."""
        return self.extent % (self.per_item * self.work_group) != 0


@dataclass(frozen=True, slots=True, kw_only=True)
class TileGrid:
    axes: tuple[TileAxis, TileAxis, TileAxis]  # x, y, z in the API's launch order
    batch: int  # images, folded into z
    batch_per_group: bool  # each image takes whole groups along z (else whole work-items)

    @property
    def items(self) -> tuple[int, int, int]:
        """Work-items with a tile along each axis (z: for every image)."""
        x, y, z = self.axes
        return (x.items, y.items, self.batch * z.items)

    @property
    def groups(self) -> tuple[int, int, int]:
        x, y, z = self.axes
        per_z = z.groups * self.batch if self.batch_per_group else -(-self.batch * z.items // z.work_group)
        return (x.groups, y.groups, per_z)

    @property
    def global_size(self) -> tuple[int, int, int]:
        """Work-items launched along each axis: whole groups."""
        return tuple(g * a.work_group for g, a in zip(self.groups, self.axes))  # type: ignore[return-value]

    def idle(self) -> tuple[bool, bool, bool]:
        """Per axis: the launch holds work-items past the last tile (they return at once)."""
        return tuple(g > i for g, i in zip(self.global_size, self.items))  # type: ignore[return-value]

    def guards(self, names: tuple[str, str, str], order: tuple[int, ...] = (0, 1, 2)) -> tuple[str, ...]:
        """`name < extent` for each ragged axis (names: of x, y, z), axes taken in `order`."""
        return tuple(f"{names[a]} < {self.axes[a].extent}" for a in order if self.axes[a].ragged)

    def over_limit(self, api: GpuApi) -> bool:
        """More groups along some axis than the API guarantees."""
        return api.max_groups is not None and max(self.groups) > api.max_groups
