"""How the vulkan planner applies its device profile's defaults (gpu/profiles.py VULKAN_DEFAULTS) to a plan:
the default invocation tile shrunk to the problem, wide_store and input shuffles where they suit. Pure."""
from __future__ import annotations

from ...plan_types import Plan
from ..gpu.profiles import POINTWISE_IVC_TILE, SQUARE_IVC_TILE, VulkanDefaults


def _wide_kernel_tile(tile: tuple[int, int, int], plan: Plan) -> tuple[int, int, int]:
    """A register-bound GPU keeps one kernel row's filter slice in registers (kw taps x 4 vec4 per output
    chunk): past 3 taps the pixels make room for it. Measured with kernelgen stats on RADV's ACO: a 1x5 kernel
    at 2x4 pixels needed 152 VGPRs, at 1x2 128; a 5x5 one 176, at 1x1 128 (8 waves per SIMD)."""
    kh = max(op.kernel[0] for op in plan.ops)
    kw = max(op.kernel[1] for op in plan.ops)
    if kw <= 3:
        return tile
    return (1, 1 if kh > 3 else min(tile[1], 2), tile[2])


def default_tile_for(defaults: VulkanDefaults, plan: Plan, wg: tuple[int, int, int], lanes: int
                     ) -> tuple[int, int, int]:
    """The profile's invocation tile for this plan, shrunk to small problems so few invocations idle."""
    last = plan.ops[-1].out_shape
    tile = defaults.ivc_tile
    convs = [op for op in plan.ops if not op.pool]
    if defaults.unroll_kernel_rows and all(op.kernel == (1, 1) for op in convs):
        tile = POINTWISE_IVC_TILE
    elif defaults.unroll_kernel_rows and all(op.stride == (1, 1) for op in convs):
        tile = SQUARE_IVC_TILE
    if not defaults.unroll_kernel_rows:  # a register-bound GPU: a strided conv reads stride x the columns
        tile = (tile[0], max(1, tile[1] // max(op.stride[1] for op in plan.ops)), tile[2])
        tile = _wide_kernel_tile(tile, plan)
    return (min(tile[0], last[1]), min(tile[1], last[2]),
            4 * lanes * max(1, min(tile[2] // (4 * lanes), -(-last[3] // (4 * lanes * wg[0])))))


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
    return (defaults.wide_store and all(op.out_shape[3] % pairs == 0 for op in convs)
            and (ivc is None or ivc[2] % 8 == 0) and (wg_tile is None or wg_tile[2] % pairs == 0))
