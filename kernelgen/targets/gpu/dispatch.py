"""A GPU kernel's launch in API-neutral terms: the tensors it binds (by name, with their size and how the kernel
reads them) and its grid (work-group size and group counts, three dimensions each). OpenCL's NDRange (global =
groups x local size) and a Vulkan dispatch (groups, with the workgroup size in the shader) are both this record;
what the GPU network runners schedule, and what a device's limits are checked against."""
from __future__ import annotations

import math
from dataclasses import dataclass

from ...layout import TensorLayout
from ...plan_types import TextEnum
from .api import GpuApi


class Role(TextEnum):
    """What a device tensor is to the chain."""

    INPUT = "input"
    FILTER = "filter"
    BIAS = "bias"
    SIDE = "side"  # a side input (a residual's other branch), read-only like the input
    TEMP = "temp"  # an intermediate, on the device only
    OUTPUT = "output"


def role_of(name: str) -> Role:
    """The role a tensor's name gives: input, filter<j>, bias<j>, side_<name>, temp<j>, output."""
    return Role.SIDE if name.startswith("side_") else Role(name.rstrip("0123456789"))


class TensorKind(TextEnum):
    """How kernels reach a tensor."""

    IMAGE = "image"  # an OpenCL image2d texture (read_imagef / write_imagef)
    BUFFER = "buffer"  # an OpenCL __global buffer, a Vulkan storage (or texel) buffer


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuTensor:
    """One tensor on the device: a kernel argument or binding, and what the runtime fills it from."""

    name: str  # input, filter1, bias1, side_<name>, temp1, output
    role: Role
    elements: int  # in the storage type
    kind: TensorKind = TensorKind.BUFFER
    # of `elements`, those past the tensor's own, bound so that a kernel reading it by whole 4-element texels stays
    # inside the binding (Vulkan: vulkan/plan.py); the bytes before them are the layout another kernel shares
    slack: int = 0
    # how the host packs its array when the target chooses (OpenCL: every tensor, image or buffer; Vulkan: a filter
    # it packs itself, filters.py); None: the core plan's physical array as it is
    layout: TensorLayout | None = None

    @classmethod
    def packed(cls, name: str, kind: TensorKind, layout: TensorLayout) -> GpuTensor:
        """A tensor the target lays out itself: as many elements as its layout's flat shape holds."""
        return cls(name=name, role=role_of(name), elements=math.prod(layout.flat_shape), kind=kind, layout=layout)

    @property
    def shape(self) -> tuple[int, ...]:
        """The host array's shape: an image [rows, width * 4], a buffer its layout's flat shape."""
        assert self.layout is not None, self.name
        return self.layout.flat_shape

    @property
    def texels(self) -> tuple[int, int]:
        """(width, height) of an image."""
        return (self.shape[-1] // 4, self.shape[0])

    @property
    def map_text(self) -> str:
        assert self.layout is not None, self.name
        return self.layout.layout.map_text


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuDispatch:
    kernel: str  # the kernel's name, or the shader module's
    tensors: tuple[str, ...]  # bound in argument / binding order
    work_group: tuple[int, int, int]
    groups: tuple[int, int, int]

    def __post_init__(self) -> None:
        assert len(self.work_group) == len(self.groups) == 3 and min(self.work_group + self.groups) >= 1, self

    @property
    def global_size(self) -> tuple[int, int, int]:
        return tuple(g * w for g, w in zip(self.groups, self.work_group))  # type: ignore[return-value]

    @property
    def invocations(self) -> int:
        return math.prod(self.global_size)

    def describe(self, api: GpuApi) -> str:
        """In the API's words: `NDRange [8, 32, 4] / local size [8, 1, 1]`, `dispatch [4, 2, 8] / workgroup size
        [8, 1, 1]` (OpenCL counts work-items, Vulkan groups)."""
        grid = self.groups if api.grid_in_groups else self.global_size
        return f"{self.kernel}: {api.launch} {list(grid)} / {api.work_group} {list(self.work_group)}"


def three(size: tuple[int, ...]) -> tuple[int, int, int]:
    """A 1- to 3-dimensional size as three numbers."""
    return (*size, *(1,) * (3 - len(size)))  # type: ignore[return-value]
