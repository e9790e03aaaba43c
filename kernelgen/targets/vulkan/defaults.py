"""What each device profile sets for the vulkan target when the config leaves it open: invocation tiles,
workgroup sizes, whether kernel rows unroll and filter slices stay in registers. Pure."""
from __future__ import annotations

from dataclasses import dataclass

from ...plan_types import Plan

DEFAULT_WG_SIZE = (8, 1, 1)  # x = lavapipe's subgroup width: one subgroup per workgroup row
# [oh, ow, oc]: 64 pixels x 2 vec4 chunks. lavapipe (Mesa 22.3) pays ~20 ns per fetched vec4
# per subgroup and core (texelFetch; its storage-buffer loads cost 3-4x more) while an
# 8-lane vec4 multiply-add costs ~1.6 ns, so the tile that fetches least per multiply-add
# wins: per input-channel chunk an invocation fetches kh * kw * oc (filter) +
# (oh + kh - 1) * (ow + kw - 1) (input, stride 1) vec4s for oh * ow * oc * kh * kw
# multiply-adds. More than ~128 vec4 accumulators spill out of L1 and lose; the bench
# sweep's best on lavapipe.
# What bounds it there (benchmarks/lavapipe_profile.py on seed 002's workload): NIR lowers
# fma to a multiply and an add (the FMA probe's too, so its peak is one pair per cycle);
# texelFetch is an out-of-line call after which every live vector register is reloaded; a
# storage-buffer store is a loop over lanes and components (23% of the JIT samples with vec4
# stores, 14% with wide_store); the multiply-add region touches ~36 KiB of stack (the L1d
# is 32 KiB on some hosts, 48 KiB on this one).
DEFAULT_IVC_TILE = (4, 16, 8)
# A 1x1 conv fetches oh * ow input vec4s and 4 * oc / 4 filter vec4s per input-channel chunk for oh * ow * oc
# multiply-adds: at 128 accumulators 4x8x16 fetches a third less per multiply-add than 4x16x8 (1/16 + 1/32
# against 1/8 + 1/64) and ran 0.43-0.51 of the probe against 0.35-0.44 (three pairs, one run, busy host); with
# kernel taps the input rows serve kw taps and 4x16x8 stays ahead (3x3: 0.78-0.80 against 0.66-0.75).
POINTWISE_IVC_TILE = (4, 8, 16)
# A stride-1 conv with kernel taps reads (oh + kh - 1) x (ow + kw - 1) input vec4s per channel chunk: the square
# 8x8 fetches 100 where 4x16 fetches 108 (3x3), and ran 0.87 of the probe against 0.73 (3x3 64x64x128) and 0.61-0.62
# against 0.53-0.55 (3x3 258x258x16 -> 256), quiet host, same runs. Strided convs keep 4x16x8: at stride 2 the 3x3
# 225x225x3 -> 32 ran 0.19 with 8x8 against 0.24.
SQUARE_IVC_TILE = (8, 8, 8)
# llvmpipe runs a kept loop as a divergent one: at each back-edge every value the loop carries is copied under
# the lanes' mask, a load, a vblendvps and a store per 8-lane vector, 512 of them for 128 vec4 accumulators. A 1x1
# conv's trip over one input-channel chunk holds 512 multiply-adds (4 per accumulator) and those copies took a
# quarter of its time (benchmarks/lavapipe_profile.py); 4 chunks per trip (2,048) ran 0.56 of the probe against
# 0.51, 8 chunks (4,096) 0.53 (1x1 64x64x128, alternating runs, busy host). A 3x3's 8x8x8 tile already holds
# 4,608 per chunk.
LAVAPIPE_TRIP_BODY = 2048
# lavapipe's texelFetch is an out-of-line call that gathers the 8 lanes' texels (~46 instructions, and the caller
# spills around it); a dense conv's lanes (output channels) all read the same input pixels, so each fetched the
# same texel. Fetching a column per lane and passing the columns round by subgroupShuffle (one vpermd per component
# on AVX2) takes a row of 8 columns in one call: 1x1 64x64x128 0.56 -> 0.61 of the probe (alternating runs).
# lavapipe's storage-buffer store is a loop over the 8 lanes per vector stored; a pair of chunks as one vector of
# 64-bit words halves those loops (wide_store): 1x1 64x64x128 0.49 -> 0.53 of the probe, 3x3 64x64x128
# 0.82 -> 0.90, 3x3 258x258x16 -> 256 0.60 -> 0.68 (same runs, busy host).


@dataclass(frozen=True, slots=True)
class DeviceDefaults:
    """What a device profile (kernelgen.devices) sets when the config leaves it open."""

    ivc_tile: tuple[int, int, int]  # [oh, ow, oc] of one invocation
    wg_size: tuple[int, int, int]
    unroll_kernel_rows: bool  # unroll kh (and keep a kh x kw filter slice in registers) when the body is small
    # kernels up to this wide hold their kw x 4-chunk filter slice ahead; wider ones load each filter vec4 at its
    # multiply-add (VulkanOp.filter_at_use); None: always held
    filter_slice_max_kw: int | None = None
    scalar_texel_reads: bool = False  # activations without vec4 channels read as scalars through texels (access.py)
    # the kw taps in a loop the compiler keeps, each input vec4 fetched at its use (with filter_at_use); unrolled,
    # a compiler that issues every fetch of the row ahead holds them all (VulkanOp.taps_at_use)
    taps_in_loop: bool = False
    # input-channel chunks per trip of the channel loop until a trip holds this many vec4 multiply-adds (0: one
    # chunk, or as the loop-count limit needs): VulkanOp.ic_unroll
    trip_body: int = 0
    # vulkan.wide_store when the config leaves it unset (wide_store below says where it applies)
    wide_store: bool = False
    # a dense conv's x lanes, which read the same input rows, fetch a row segment a column each and pass the
    # columns round by subgroupShuffle (shuffle_rows below says where)
    shuffle_rows: bool = False


def _wide_kernel_tile(tile: tuple[int, int, int], plan: Plan) -> tuple[int, int, int]:
    """A register-bound GPU keeps one kernel row's filter slice in registers (kw taps x 4 vec4 per output
    chunk): past 3 taps the pixels make room for it. Measured with kernelgen stats on RADV's ACO: a 1x5 kernel
    at 2x4 pixels needed 152 VGPRs, at 1x2 128; a 5x5 one 176, at 1x1 128 (8 waves per SIMD)."""
    kh = max(op.kernel[0] for op in plan.ops)
    kw = max(op.kernel[1] for op in plan.ops)
    if kw <= 3:
        return tile
    return (1, 1 if kh > 3 else min(tile[1], 2), tile[2])


DEVICE_DEFAULTS = {
    "lavapipe": DeviceDefaults(ivc_tile=DEFAULT_IVC_TILE, wg_size=DEFAULT_WG_SIZE, unroll_kernel_rows=True,
                               scalar_texel_reads=True, trip_body=LAVAPIPE_TRIP_BODY, wide_store=True,
                               shuffle_rows=True),
    # 2x4 pixels x 4 channels with kernel rows in a loop: no spill and <= 128 VGPRs for every vulkan config
    # here (kernelgen stats on RADV's ACO); 64 invocations = one wave64 per workgroup
    "rdna2": DeviceDefaults(ivc_tile=(2, 4, 4), wg_size=(16, 4, 1), unroll_kernel_rows=False),
    # Adreno (Turnip's ir3 as A740/A660, issue 31): a 5-wide kernel's held filter slice took 48 vec4 registers
    # (4 waves), loaded at use 16 (12 waves, 1.9x the instructions); a 3x3's 21-24 (8 waves on A740, 6 on A660).
    # Those wide kernels' taps in a loop: a padded 1x5 on A660 32 -> 12 registers (4 -> 10 waves), 640 -> 539
    # instructions; the dilated 5x5 on A740 19 -> 9 (10 -> 16 waves), 413 -> 259.
    "adreno-7xx": DeviceDefaults(ivc_tile=(1, 2, 4), wg_size=(16, 4, 1), unroll_kernel_rows=False, filter_slice_max_kw=3,
                                 taps_in_loop=True),
    "adreno-6xx": DeviceDefaults(ivc_tile=(1, 2, 4), wg_size=(16, 4, 1), unroll_kernel_rows=False, filter_slice_max_kw=3,
                                 taps_in_loop=True),
    # Mali (PanVK's Valhall compiler as a G610, issue 31): any held filter slice spills (3x3 at 1x1x4: 4:13
    # spills:fills at 64 registers); loaded at use it does not, and 1x1 kernels fit 32 registers (2 threads)
    # Its taps in a loop: unrolled, a 5-wide kernel's row of fetches (and a grouped conv's 3 taps x 2 texel
    # reads) took 64 work registers (1 thread); in a loop 32 (2 threads) and half the instructions.
    "mali-valhall": DeviceDefaults(ivc_tile=(1, 1, 4), wg_size=(16, 1, 1), unroll_kernel_rows=False,
                                   filter_slice_max_kw=0, taps_in_loop=True),
}


def default_tile_for(defaults: DeviceDefaults, plan: Plan, wg: tuple[int, int, int], lanes: int
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


def shuffle_rows(defaults: DeviceDefaults, subgroup: int, group_in: int, taps_loop: bool, wg: tuple[int, int, int],
                 row: int) -> bool:
    """The profile shuffles input columns and the op reads input rows shared by its x lanes: a dense conv's row
    segments (every lane reads the same input channels; a grouped conv's lanes read their own), more than one lane
    along x, each row of them inside one of the profile's subgroups, and at least two columns for them."""
    return (defaults.shuffle_rows and group_in == 0 and not taps_loop and wg[0] > 1 and subgroup % wg[0] == 0
            and row > 1)


def wide_store(option: bool | None, wg_tile: list[int] | None, defaults: DeviceDefaults, plan: Plan,
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
