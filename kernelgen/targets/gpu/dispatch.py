"""A GPU kernel's launch in API-neutral terms: the tensors it binds (by name, with their size and how the kernel
reads them) and its grid (work-group size and group counts, three dimensions each). OpenCL's NDRange (global =
groups x local size) and a Vulkan dispatch (groups, with the workgroup size in the shader) are both this record;
what the GPU network runners schedule, and what a device's limits are checked against."""
from __future__ import annotations

import math
from dataclasses import dataclass

from .api import GpuApi


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuTensor:
    name: str  # input, filter1, bias1, temp1, output
    elements: int  # in the storage type
    kind: str  # how kernels reach it: "buffer" (OpenCL __global, Vulkan storage), "image" (OpenCL image2d)


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
