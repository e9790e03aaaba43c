"""The GPU layer's tiles and stores (kernelgen/targets/gpu/tiles.py, stores.py): one grid arithmetic and one
vector-store decision, which the OpenCL and Vulkan plans read with their own axis orders and spellings."""
from __future__ import annotations

import math

import pytest

from kernelgen import api
from kernelgen.layout import ACTIVATION_DIMS, parse_layout
from kernelgen.targets import TARGETS
from kernelgen.targets.gpu.api import OPENCL, VULKAN
from kernelgen.targets.gpu.dispatch import GpuTensor, Role, role_of
from kernelgen.targets.gpu.stores import tail_fill, vector_stores
from kernelgen.targets.gpu.tiles import TileAxis, TileGrid


@pytest.mark.parametrize(("extent", "items", "groups", "ragged"), [
    (16, 4, 2, False),  # a tile x group (4 x 2 = 8) divides it
    (8, 2, 1, False),  # equal to one group's span
    (5, 2, 1, True),  # below it: the last work-item's second element and the idle half of the group
    (17, 5, 3, True),  # above a multiple: one element more takes a work-item and a group of its own
])
def test_an_axis_counts_work_items_groups_and_whether_stores_reach_past_it(extent, items, groups, ragged):
    axis = TileAxis(extent, 4, 2)  # 4 elements a work-item, 2 work-items a group
    assert (axis.items, axis.groups, axis.ragged) == (items, groups, ragged)


def test_the_batch_folds_into_z_per_work_item_or_per_group():
    """3 images of 5 channel blocks in groups of 2 along z: OpenCL's 15 work-items take 8 groups (the last half
    idle), a Vulkan dispatch's 3 x 3 groups (each image's last group half idle)."""
    axes = (TileAxis(10, 2, 4), TileAxis(6, 3, 2), TileAxis(5, 1, 2))
    per_item = TileGrid(axes=axes, batch=3, batch_per_group=False)
    per_group = TileGrid(axes=axes, batch=3, batch_per_group=True)
    assert per_item.items == per_group.items == (5, 2, 15)
    assert per_item.groups == (2, 1, 8) and per_item.global_size == (8, 2, 16)
    assert per_group.groups == (2, 1, 9) and per_group.global_size == (8, 2, 18)
    assert per_item.idle() == (True, False, True)
    assert per_item.guards(("x", "y", "z")) == ("x < 10", "z < 5")
    assert per_item.guards(("x", "y", "z"), order=(2, 1, 0)) == ("z < 5", "x < 10")


def test_a_grid_past_the_apis_group_limit_is_refused_only_where_the_api_has_one():
    grid = TileGrid(axes=(TileAxis(70_000, 1, 1), TileAxis(1, 1, 1), TileAxis(1, 1, 1)), batch=1,
                    batch_per_group=True)
    assert grid.over_limit(VULKAN) and not grid.over_limit(OPENCL)


def _bound(text: str, channels: int, pad: object = None):
    return parse_layout(text, ACTIVATION_DIMS, pad=pad).bind((1, 3, 5, channels))


def test_vector_stores_need_lanes_together_for_opencl_and_aligned_whole_vectors_for_vulkan():
    nhwc = "n, h, w, c -> n, h, w, c"
    assert vector_stores(OPENCL, _bound(nhwc, 8)) and vector_stores(VULKAN, _bound(nhwc, 8))
    # 6 channels: vstore4 at any offset keeps a pixel's first group together (the tail goes lane by lane); a vec4
    # buffer's second pixel would start mid-vector
    assert vector_stores(OPENCL, _bound(nhwc, 6)) and not vector_stores(VULKAN, _bound(nhwc, 6))
    blocked = "n, h, w, c -> n, h, w, c // 4, c % 4"  # 6 channels in two padded blocks of 4
    assert vector_stores(VULKAN, _bound(blocked, 6, pad=0.5)) and not vector_stores(VULKAN, _bound(blocked, 6))
    nchw = "n, h, w, c -> n, c, h, w"
    assert not vector_stores(OPENCL, _bound(nchw, 8)) and not vector_stores(VULKAN, _bound(nchw, 8))


def test_the_partial_groups_fill_is_the_layouts_pad_value():
    blocked = "n, h, w, c -> n, h, w, c // 4, c % 4"
    assert tail_fill(_bound(blocked, 6, pad=0.5)) == 0.5
    assert tail_fill(_bound(blocked, 8, pad=0.5)) is None  # whole groups: nothing past the channels
    assert tail_fill(_bound(blocked, 6)) is None


RAGGED = """name: ragged
input: {shape: [2, 7, 9, 12], layout: NHWC}
ops:
  - conv2d: {out_channels: 20, kernel: 3, pad: 1}
opencl: {tile: [2, 4, 2], local_size: [4, 2, 1]}
vulkan: {ivc_tile: [2, 4, 8], wg_size: [2, 1, 1]}
"""


def test_both_plans_read_their_launch_and_store_guards_off_one_grid():
    """7 x 9 pixels, 20 channels, 2 images: OpenCL's 2x4-pixel x 8-channel work-items take ceil(9/4) = 3 column
    tiles (one local group of 4: one idle), 4 row tiles (2 groups of 2), 2 images x 3 channel blocks; a Vulkan
    invocation's 2 x 4 pixels x 2 chunks in workgroups of 2 along the 5 chunks: 2 groups, their last chunk past
    the output; rows and columns ragged too."""
    config = api.load_config(RAGGED)
    plan = api.plan(config)
    cl = TARGETS["opencl"].target_plan(config, plan)
    (cl_op,) = cl.ops
    assert cl_op.tiles == (3, 4, 6) and cl_op.grid.global_size == (4, 4, 6)
    assert cl_op.grid.idle() == (True, False, False)
    assert cl.kernels[0].global_size == (4, 4, 6) and cl.kernels[0].body.early == (("owt", 3),)
    (vk_op,) = TARGETS["vulkan"].target_plan(config, plan).ops
    assert vk_op.groups == (2, 3, 2 * 4) and vk_op.groups_oh == 4
    assert vk_op.store_guard == "oh < 7 && ow < 9 && oc4 < 5" and vk_op.oc_ragged


RESIDUAL = """name: shared_tensors
input: {shape: [1, 6, 6, 8], layout: NHWC}
ops:
  - conv2d: {out_channels: 8, kernel: 3, pad: 1, bias: true}
  - conv2d: {out_channels: 8, kernel: 1, residual: input}
"""


def test_both_runtimes_hold_their_tensors_as_gpu_tensor_records():
    """One record for OpenCL's storages and Vulkan's buffers: the same names and roles; OpenCL lays out every
    tensor itself (a layout on each), Vulkan only the filters it packs (the rest are the core plan's arrays)."""
    config = api.load_config(RESIDUAL)
    plan = api.plan(config)
    cl = TARGETS["opencl"].target_plan(config, plan).storages
    vk = TARGETS["vulkan"].target_plan(config, plan).buffers
    assert all(isinstance(t, GpuTensor) for t in (*cl, *vk))
    roles = {t.name: t.role for t in vk}
    assert roles == {"input": Role.INPUT, "filter1": Role.FILTER, "filter2": Role.FILTER, "bias1": Role.BIAS,
                     "temp1": Role.TEMP, "output": Role.OUTPUT}
    assert {t.name: t.role for t in cl} == roles
    assert all(t.layout is not None and t.elements == math.prod(t.shape) for t in cl)
    assert {t.name for t in vk if t.layout is not None} <= {"filter1", "filter2"}
    assert [role_of(n) for n in ("side_gate", "temp12", "bias3")] == [Role.SIDE, Role.TEMP, Role.BIAS]
