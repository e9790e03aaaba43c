"""How the vulkan planner applies its device profile's defaults (gpu/profiles.py VULKAN_DEFAULTS) to a plan:
each conv's default invocation tile shrunk to its problem, wide_store and input shuffles where they suit. Pure."""
from __future__ import annotations

from ...plan_types import OpGeometry, Plan
from ..gpu.profiles import SQUARE_IVC_TILE, VulkanDefaults


def _wide_kernel_tile(tile: tuple[int, int, int], kernel: tuple[int, int]) -> tuple[int, int, int]:
    """A register-bound GPU keeps one kernel row's filter slice in registers (kw taps x 4 vec4 per output
    chunk): past 3 taps the pixels make room for it. Measured with kernelgen stats on RADV's ACO: a 1x5 kernel
    at 2x4 pixels needed 152 VGPRs, at 1x2 128; a 5x5 one 176, at 1x1 128 (8 waves per SIMD)."""
    kh, kw = kernel
    if kw <= 3:
        return tile
    return (1, 1 if kh > 3 else min(tile[1], 2), tile[2])


def chain_tile_for(defaults: VulkanDefaults, plan: Plan, wg: tuple[int, int, int], lanes: int
                   ) -> tuple[int, int, int]:
    """A profile without tile_per_op: one tile for every conv of the plan, by the rules default_tile_for applies to
    one conv, with the chain's convs taken together (all 1x1, all stride 1, the largest stride, the widest kernel)
    and its last output."""
    convs = [op for op in plan.ops if not op.pool]
    tile = defaults.ivc_tile
    if defaults.pointwise_ivc_tile is not None and all(op.kernel == (1, 1) for op in convs):
        tile = defaults.pointwise_ivc_tile
    elif defaults.unroll_kernel_rows and all(op.stride == (1, 1) for op in convs):
        tile = SQUARE_IVC_TILE
    if not defaults.unroll_kernel_rows:
        tile = (tile[0], max(1, tile[1] // max(op.stride[1] for op in plan.ops)), tile[2])
        tile = _wide_kernel_tile(tile, (max(op.kernel[0] for op in plan.ops), max(op.kernel[1] for op in plan.ops)))
    return _fitted(tile, plan.ops[-1].out_shape, wg, lanes)


def _fitted(tile: tuple[int, int, int], out_shape: tuple[int, int, int, int], wg: tuple[int, int, int], lanes: int
            ) -> tuple[int, int, int]:
    """The tile shrunk to an output [n, h, w, c], so few invocations idle."""
    _, out_h, out_w, out_c = out_shape
    return (min(tile[0], out_h), min(tile[1], out_w),
            4 * lanes * max(1, min(tile[2] // (4 * lanes), -(-out_c // (4 * lanes * wg[0])))))


def default_tile_for(defaults: VulkanDefaults, op: OpGeometry, wg: tuple[int, int, int], lanes: int
                     ) -> tuple[int, int, int]:
    """A tile_per_op profile's invocation tile for one conv of a plan, from that conv's own kernel, stride and
    output, shrunk to a small output so few invocations idle. Each conv is its own dispatch and shader (compiled with
    -DKG_OP=<op>), so nothing ties one conv's tile to another's: a chain's 1x1 convs keep their tile beside a strided
    or wide-kernel conv, and a chain ending in a 1x1x1000 classifier no longer sizes every conv by that output
    (imported MobileNetV2, one 54-op chain: every conv at 1x1 pixels)."""
    tile = defaults.ivc_tile
    if op.kernel == (1, 1) and defaults.pointwise_ivc_tile is not None:
        tile = defaults.pointwise_ivc_tile
    elif defaults.unroll_kernel_rows and op.stride == (1, 1):
        tile = SQUARE_IVC_TILE
    if not defaults.unroll_kernel_rows:  # a register-bound GPU: a strided conv reads stride x the columns
        tile = (tile[0], max(1, tile[1] // op.stride[1]), tile[2])
        tile = _wide_kernel_tile(tile, op.kernel)
    return _fitted(tile, op.out_shape, wg, lanes)


def shuffle_rows(defaults: VulkanDefaults, subgroup: int, group_in: int, taps_loop: bool, wg: tuple[int, int, int],
                 row: int) -> bool:
    """The profile shuffles input columns and the op reads input rows shared by its x lanes: a dense conv's row
    segments (every lane reads the same input channels; a grouped conv's lanes read their own), more than one lane
    along x, each row of them inside one of the profile's subgroups, and at least two columns for them."""
    return (defaults.shuffle_rows and group_in == 0 and not taps_loop and wg[0] > 1 and subgroup % wg[0] == 0
            and row > 1)


def wide_store(option: bool | None, wg_tile: list[int] | None, defaults: VulkanDefaults, plan: Plan,
               wg: tuple[int, int, int], ivc: tuple[int, int, int] | None) -> bool:
    """The config's wide_store, else the profile's where chunk pairs suit every conv: its output channels in
    whole pairs for each of the workgroup's x lanes (on lavapipe a 32-channel conv would leave half its 8 lanes
    idle: 3x3 s2 225x225x3 -> 32 fell from 0.32 to 0.24 of the probe; 96 channels would leave a quarter of the
    last step's lanes idle, where single chunks fill them) and, when the config sets the tile, whole pairs."""
    if option is not None:
        return option
    pairs = 8 * wg[0]
    convs = [op for op in plan.ops if not op.pool]
    if ivc is None and wg_tile is None:  # the profile's tiles: a one-chunk tile (1x32x4 on lavapipe) has no pairs
        tiles = ([default_tile_for(defaults, op, wg, 1) for op in convs] if defaults.tile_per_op
                 else [chain_tile_for(defaults, plan, wg, 1)])
        if any(tile[2] % 8 for tile in tiles):
            return False
    return (defaults.wide_store and all(op.out_shape[3] % pairs == 0 for op in convs)
            and (ivc is None or ivc[2] % 8 == 0) and (wg_tile is None or wg_tile[2] % pairs == 0))


# A grouped conv whose input is read as scalars gathers each (pixel, chunk, kw tap) of a kernel row lane by lane,
# all unrolled. Measured on lavapipe (MESA_SHADER_CACHE_DISABLE=true): MobileNetV3-small's features.4 depthwise (5x5,
# stride 2, NCHW) at the default 4x14x8 tile, 560 gathers a row, did not compile within 600 s; at 1x4x8 (40), 4 s.
GROUPED_GATHER_LIMIT = 64


def grouped_tile(op: OpGeometry, ivc: tuple[int, int, int], vec4_reads: bool) -> tuple[int, int, int]:
    """A default tile, halved in rows then columns until a grouped conv on scalar reads (not `vec4_reads`) gathers
    at most GROUPED_GATHER_LIMIT chunks per kernel row."""
    ioh, iow, ioc = ivc
    if op.groups == 1 or vec4_reads:
        return ivc
    while ioh * iow * (ioc // 4) * op.kernel[1] > GROUPED_GATHER_LIMIT and (ioh > 1 or iow > 1):
        ioh, iow = (ioh // 2, iow) if ioh > 1 else (ioh, iow // 2)
    return ioh, iow, ioc
