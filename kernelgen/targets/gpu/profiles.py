"""Per-vendor tuning of the GPU targets, as tables: what each device profile sets when a config leaves it open
(OpenCL's tiles and work-group size; Vulkan's invocation tiles, workgroup sizes and code shape), the tile x
work-group spaces `bench --sweep` tries on each kind of device, and the FMA probe's candidate shapes on each API's
device here. Each number's measurement is said beside it; the device limits themselves are kernelgen/devices.py's
profiles."""
from __future__ import annotations

from dataclasses import dataclass

from .probes import FmaShape


@dataclass(frozen=True, slots=True, kw_only=True)
class ProbeSizes:
    """The probes' grids on one API's device: the FMA probe's work-groups (a fixed count, or so many per compute
    unit) and the triad's work-group size."""

    fma_work_group: int
    fma_groups: int
    per_compute_unit: bool  # fma_groups per compute unit (OpenCL reports them), else in all
    triad_work_group: int

    def fma_items(self, compute_units: int = 1) -> int:
        return self.fma_work_group * self.fma_groups * (compute_units if self.per_compute_unit else 1)


@dataclass(frozen=True, slots=True)
class SweepSpace:
    tiles: tuple[tuple[int, int, int], ...]  # per-work-item tiles
    sizes: tuple[tuple[int, int, int], ...]  # work-group sizes


# ---------------------------------------------------------------- defaults when the config leaves them open

@dataclass(frozen=True, slots=True, kw_only=True)
class OpenCLDefaults:
    """What the opencl target sets when the config leaves it open."""

    tiles: dict[str, tuple[int, int, int]]  # [oh, ow, oc4] by kind of loads (opencl/plan.py variant_of)
    local_size: tuple[int, int, int]


# From sweeps on this machine's PoCL (bench --sweep): float16 vectors for filter buffers, with activations in buffers
# or textures (1x1 conv 64x64x128: [1, 4, 16] 76 GFLOP/s in textures, [2, 2, 32] 56); with filter texels every texel
# read costs ~50 ns in PoCL's software sampler, whatever the tile. Every OpenCL profile takes them (no other OpenCL
# device here to measure): a profile's own choices are which variant and where the filters live (devices.py).
OPENCL_DEFAULTS = OpenCLDefaults(tiles={"vectors": (1, 4, 16), "vectors+images": (1, 4, 16), "texels": (2, 2, 4)},
                                 local_size=(8, 1, 1))
# The mobile profiles, judged by their own compilers through rusticl (issue 47, `kernelgen stats --target opencl`,
# Mesa 25.0.7): at PoCL's tiles (64 accumulator floats a work-item) ir3 gives the imported networks' kernels 48
# registers and still spills nearly every op (MobileNetV2 52 of 54 on A740), and the Valhall compiler takes 64
# registers and spills (one thread). Adreno at 1 x 4 pixels x 1 vec4 chunk (16 accumulator floats): MobileNetV3-
# small's worst block spill-free at 8-16 waves, 0.64 -> 0.33 ms estimated; Mali at one pixel x one chunk: 32
# registers, 2 threads, no spill (18.8 -> 2.0 ms estimated for MobileNetV3-small's first block).
OPENCL_MOBILE_DEFAULTS = {
    "adreno-7xx": OpenCLDefaults(tiles={"vectors": (1, 4, 1), "vectors+images": (1, 4, 1), "texels": (1, 4, 1)},
                                 local_size=(8, 1, 1)),
    "adreno-6xx": OpenCLDefaults(tiles={"vectors": (1, 2, 1), "vectors+images": (1, 2, 1), "texels": (1, 2, 1)},
                                 local_size=(8, 1, 1)),
    "mali-valhall": OpenCLDefaults(tiles={"vectors": (1, 1, 1), "vectors+images": (1, 1, 1), "texels": (1, 1, 1)},
                                   local_size=(8, 1, 1)),
}


def opencl_defaults(device: str) -> OpenCLDefaults:
    """The opencl target's defaults for a device profile: the mobile GPUs' own, else PoCL's."""
    return OPENCL_MOBILE_DEFAULTS.get(device, OPENCL_DEFAULTS)

# Vulkan (vulkan/defaults.py applies them to a plan):
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
# Those counts predate shuffle_rows: with a row's 8 columns in one fetch, 4x16x8 and 8x8x8 fetch 16 vec4s per 512
# multiply-adds and 4x8x16 20, yet all three ran within 3% of each other (issue 50, listed below).
# Superseded by the trip cap below (issue 50): the counts above held the code size of a trip fixed at what 4,608
# unrolled multiply-adds make, which is what bounded these kernels.
POINTWISE_IVC_TILE = (1, 32, 4)
# A stride-1 conv with kernel taps reads (oh + kh - 1) x (ow + kw - 1) input vec4s per channel chunk: the square
# 8x8 fetches 100 where 4x16 fetches 108 (3x3), and ran 0.87 of the probe against 0.73 (3x3 64x64x128) and 0.61-0.62
# against 0.53-0.55 (3x3 258x258x16 -> 256), quiet host, same runs. Strided convs keep 4x16x8: at stride 2 the 3x3
# 225x225x3 -> 32 ran 0.19 with 8x8 against 0.24.
SQUARE_IVC_TILE = (1, 32, 4)  # with LAVAPIPE_TRIP_CAP below: one kernel row and one chunk a trip
# lavapipe kept one tile per chain until issue 50: its LLVM compiled the larger tiles each conv took much longer.
# Imported MobileNetV2 (one 54-op chain ending in 1x1x1000, so every conv at 1x1 pixels) took 12.9 s of CPU to
# create its 54 pipelines cold; with a tile per conv (1x1s at 4x8x16) 163.5 s (slowest module 6.5 s; issue 47's
# limit for the network is 60 s; benchmarks/vulkan_compile.py --network, MESA_SHADER_CACHE_DISABLE=true, host at
# load 25). With the trip cap below (1x1 and stride-1 convs at 1x32x4, one kernel row of one chunk a trip) each conv
# takes its own tile again (issue 50; cold compile CPU, `kernelgen bench` of the shipped program, chain tile -> a tile
# per conv): MobileNetV2 12.2 -> 29.0 s and 267 -> 69 ms, ResNet18 61.0 -> 27.6 s and 292 -> 118 ms,
# MobileNetV3-small 30.9 -> 15.8 s and 28.4 -> 23.2 ms (the chain tile sized every conv of a chain by its last output
# and its largest stride: MobileNetV2's by a 1x1x1000 classifier).
LAVAPIPE_TILE_PER_OP = True
# The Adreno profiles' 1x1 tile (they say below what it measured).
GPU_POINTWISE_IVC_TILE = (2, 2, 4)
# llvmpipe runs a kept loop as a divergent one: at each back-edge every value the loop carries is copied under
# the lanes' mask, a load, a vblendvps and a store per 8-lane vector, 512 of them for 128 vec4 accumulators. A 1x1
# conv's trip over one input-channel chunk holds 512 multiply-adds (4 per accumulator) and those copies took a
# quarter of its time (benchmarks/lavapipe_profile.py); 4 chunks per trip (2,048) ran 0.56 of the probe against
# 0.51, 8 chunks (4,096) 0.53 (1x1 64x64x128, alternating runs, busy host). A 3x3's 8x8x8 tile already holds
# 4,608 per chunk.
LAVAPIPE_TRIP_BODY = 2048
# What bounded the unrolled tiles (issue 50, lavapipe 22.3 on a Xeon with AVX-512): one trip of 8x8x8's channel
# loop is 4,608 vec4 multiply-adds, 18,432 vmulps + vaddps pairs of 8 lanes and 313 KB of x86 (17 bytes a pair:
# the filter and the accumulators sit on a 64 KiB stack frame, so operands take 32-bit displacements), ten times
# the 32 KiB L1 instruction cache. llvm-mca (LLVM 15, skylake-avx512 and icelake-server models) puts a 3,000
# instruction window of it at one pair a cycle, the FMA probe's rate, so the code ran at half its port-bound speed
# for the front end alone: the probe itself unrolled to 1,024 steps a trip had run 0.63 of its speed. A trip that
# fits the L1i needs few accumulators (each one the trip carries costs a masked copy at the back-edge, see
# LAVAPIPE_TRIP_BODY) and enough pixels to share each gathered filter vec4: 1x32 pixels x 1 chunk (32 vec4
# accumulators), one kernel row of one input chunk a trip (3x3: 384 vec4 multiply-adds, ~26 KB), the kernel rows
# in the fh0 loop. Paired with the probe in one process (5 rounds, medians, host quiet), against the tiles before:
# 3x3 64x64x128 -> 128 0.47-0.49 -> 0.66 (4x8x4 0.59-0.61, 2x16x4 0.55-0.63, 1x16x4 0.56, 1x64x4 0.44, 2x16x8
# with wide_store 0.38, 8x8x8 with the rows in the loop 0.39-0.42, 4x16x8 with them 0.41 against 0.48 unrolled);
# 3x3 258x258x16 -> 256 0.35 -> 0.42; 1x1 64x64x128 0.30-0.31 -> 0.42 at one chunk a trip, 0.44 at two (256), 0.36
# at 4x8x4. A strided conv keeps 4x16x4 with its rows unrolled: a row of it passes the cap (0.19-0.21 either way).
# `kernelgen bench` of the plain configs, 4 processes alternating with the tiles before (native: 3x4x64 probe at
# 94-111 GFLOP/s): 1x1 0.33-0.45 (before 0.24-0.31), 3x3 0.48-0.68 (0.42-0.48), 258 0.33-0.44 (0.33-0.35). With
# lavapipe compiling for AVX2 + FMA and 16 vector registers (GALLIUM_OVERRIDE_CPU_CAPS=avx on the same Xeon, the
# ISA of an AVX2 host; its fastest probe 8x1x8 at 41-62 GFLOP/s) 3 processes each: 1x1 0.55-0.68 (0.49-0.62), 3x3
# 0.81-1.04 (0.79-0.82), 258 0.62-0.73 (0.57-0.62); 2x16x4 and 1x16x4 within noise of 1x32x4 there, 8x8x8 behind.
# The small-trip kernels swing more between processes (a slow mode near the old tiles' ratios in about one run in
# four, whole processes at a time); the old ones, always past the L1i, do not.
# Not the L1i's size alone: on a host with a 64 KiB L1i (KVM's family 6 model 167, AVX-512) caps of 768 and 1,152
# ran no better, 3 processes alternating (1x1 0.43-0.44 and 0.32-0.33 against 0.41-0.44; 3x3 0.57-0.59 and 0.44-0.45
# against 0.55-0.59; 258x258x16 0.32-0.33 and 0.31 against 0.37). There llvm-mca (LLVM 19, sapphirerapids) puts the
# 1x1's trip at 1,144 cycles for 1,024 pairs where its 2,048 multiplies and adds alone need 683 on the three vector
# ports: the input shuffles, texel fetches and masked copies share those ports (issue 50's note).
LAVAPIPE_TRIP_CAP = 384
# lavapipe's texelFetch is an out-of-line call that gathers the 8 lanes' texels (~46 instructions, and the caller
# spills around it); a dense conv's lanes (output channels) all read the same input pixels, so each fetched the
# same texel. Fetching a column per lane and passing the columns round by subgroupShuffle (one vpermd per component
# on AVX2) takes a row of 8 columns in one call: 1x1 64x64x128 0.56 -> 0.61 of the probe (alternating runs).
# lavapipe's storage-buffer store is a loop over the 8 lanes per vector stored; a pair of chunks as one vector of
# 64-bit words halves those loops (wide_store): 1x1 64x64x128 0.49 -> 0.53 of the probe, 3x3 64x64x128
# 0.82 -> 0.90, 3x3 258x258x16 -> 256 0.60 -> 0.68 (same runs, busy host).
# Measured on lavapipe 22.3 (issue 50, host at load 3-5) and left out:
# - Lanes along pixels, so that a filter value is one load broadcast to the subgroup: lavapipe loads a scalar and
#   broadcasts it only at an offset built from constants and push constants outside any kept loop (in a loop, or from
#   the workgroup id, every load is a per-lane gather); fully unrolled, with a constant output-channel block, each
#   filter value is a bounds-checked scalar load serving one multiply-add per pixel a lane owns: 0.04-0.16 of the
#   probe at 1-4 pixels x 4-16 channels a lane.
# - Accumulator-major trips (a 1x1's 4 chunks fetched first, then each accumulator's 16 multiply-adds together):
#   24,544 -> 19,890 instructions a trip, 3,206 -> 814 spills, 3,447 -> 1,672 reloads, but no speed change that
#   survived the load (0.315 -> 0.337 of the probe by timestamps, CPU time per run 6.8 -> 6.1 ms, paired 0.99).
# - Smaller 1x1 tiles with shorter trips (2x4x8 to 4x4x16, 256-512 multiply-adds a trip): 0.29-0.34 by CPU time
#   against the default's 0.31; below 4x4 pixels the texelFetch calls for the filter take a third of the samples.
# - Stores (the 3x3 s2 RGB conv spends 39-46% of its samples there, 27 multiply-adds per output): an imageStore to a
#   storage texel buffer ran at half the speed of the storage buffer's per-lane loop, a vec4 as u64vec2 at 0.75, and
#   two pixels' chunks regrouped by shuffles into one u64vec4 per lane at 0.8-1.0 (51% of samples in stores): the
#   loop moves each 8-lane vector of 64-bit words through a 64-byte stack slot and reads it back 8 bytes a lane.
# - Lanes along pixels with the filter shared through the subgroup (benchmarks/lavapipe_pixel_lanes.py: a lane owns
#   1-4 pixels x 8-16 channels in registers, the 8 lanes gather 32 filter values at once and each multiply-add
#   takes its own by subgroupShuffle with a constant lane, one vpermd): parity with the default, 1x1 0.29-0.30 and
#   3x3 0.44-0.46 of the probe against 0.30 and 0.51 in the same run; a third of the samples in the texel fetch
#   helper, 17% of a 1x1's in its stores. subgroupBroadcast with a constant lane scans the execution mask per
#   value on lavapipe 22.3: 0.04-0.07.
# - The filter through uniform buffers (benchmarks/lavapipe_kernel_variants.py: the generated kernel with only its
#   filter reads changed, parts of whole taps of at most maxUniformBufferRange, 64 KiB, one binding each of the 15 a
#   stage may have: 9 for a 3x3 128 -> 128): 7-14% slower, 1x1 0.30 -> 0.27, 3x3 0.50 -> 0.46, 258x258x16 0.35 ->
#   0.33, s2 RGB 0.25 -> 0.22 (paired, two runs). At a per-lane offset gallivm gathers each component on its own
#   (8 offsets moved out lane by lane, 8 scalar loads inserted: ~80 instructions a vec4 against texelFetch's ~46);
#   at an offset of constants and push constants (one value for all lanes) each scalar load sits behind its own
#   bounds-check branch. It removes the calls (81 -> 17 in a 1x1 trip) but not the spills: the 3,200 spills and
#   reloads a trip hold the 512 accumulator vectors, not registers saved around the calls.
# - In the same script, on this host (paired, 3-5 rounds): an accumulator's 4 multiply-adds a chunk spread apart
#   (the chunk's input channel outside the pixels, or inside the output chunks, or with the kernel column) 3x3
#   64x64x128 0.51 -> 0.33-0.48; every input row of a chunk fetched ahead of its multiply-adds 0.47 -> 0.44 (1x1
#   0.31 -> 0.31); 1, 2 or 8 chunks a 1x1 trip instead of 4: 0.30 -> 0.25, 0.29, 0.30.
# - The s2 RGB conv on 4 x-lanes of 2 chunks each, so that wide_store applies (wg 4x2x1 or 4x1x2, 1-2 rows x 8-16
#   pixels): 0.64-0.72 of the default's speed (paired by the probe, 5 rounds). 1x1 tiles 4x16x8, 8x8x8, 2x8x16,
#   4x4x16 and 2x16x16 against 4x8x16: 0.96-1.07 (medians of 5 paired rounds whose ranges spanned 0.5-4: the host
#   too loaded to tell them apart), and 8x8x8 and 4x16x8 again 1.010-1.026 (three runs of 10-40 rounds); the s2 RGB conv at 2x16x4, 4x8x4, 2x8x4, 4x4x4, 8x8x4, 8x16x4, 4x32x4 against
#   4x16x4: 0.93-1.03 (8 rounds, load average 4).
# - lavapipe at 512 bits on this AVX-512 host (LP_NATIVE_VECTOR_WIDTH=512: subgroups of 16, wg_size [16, 1, 1]):
#   the 3x3 64x64x128 ran 27.5-31.6 GFLOP/s (0.68-0.75 of its probe) against ~28 at 256 bits (0.50), the 1x1
#   10.8-10.9 against ~17: the ratio rose because the probe fell (40 GFLOP/s against 56), not the kernels.


@dataclass(frozen=True, slots=True)
class VulkanDefaults:
    """What the vulkan target sets when the config leaves it open, per device profile (kernelgen.devices)."""

    ivc_tile: tuple[int, int, int]  # [oh, ow, oc] of one invocation
    wg_size: tuple[int, int, int]
    unroll_kernel_rows: bool  # unroll kh (and keep a kh x kw filter slice in registers) when the body is small
    # a 1x1 conv's [oh, ow, oc]; None: ivc_tile
    pointwise_ivc_tile: tuple[int, int, int] | None = None
    # each conv of a chain takes its own tile (its kernel, stride and output); else one tile serves the chain, sized
    # by its last output, its largest stride and its widest kernel (vulkan/defaults.py)
    tile_per_op: bool = True
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
    # the most vec4 multiply-adds one trip holds where one kernel row of one input-channel chunk fits it (0: none):
    # the kernel rows go into the fh0 loop and chunks join a trip only within it, so the trip's code stays in the
    # L1 instruction cache (LAVAPIPE_TRIP_CAP says why); a tile whose row passes it keeps trip_body's rule
    trip_cap: int = 0
    # vulkan.wide_store when the config leaves it unset (vulkan/defaults.py wide_store says where it applies)
    wide_store: bool = False
    # a dense conv's x lanes, which read the same input rows, fetch a row segment a column each and pass the
    # columns round by subgroupShuffle (vulkan/defaults.py shuffle_rows says where)
    shuffle_rows: bool = False


VULKAN_DEFAULTS = {
    "lavapipe": VulkanDefaults(ivc_tile=DEFAULT_IVC_TILE, wg_size=DEFAULT_WG_SIZE, pointwise_ivc_tile=POINTWISE_IVC_TILE,
                               unroll_kernel_rows=True, tile_per_op=LAVAPIPE_TILE_PER_OP,
                               scalar_texel_reads=True, trip_body=LAVAPIPE_TRIP_BODY, trip_cap=LAVAPIPE_TRIP_CAP,
                               wide_store=True,
                               shuffle_rows=True),
    # 2x4 pixels x 4 channels with kernel rows in a loop: no spill and <= 128 VGPRs for every vulkan config
    # here (kernelgen stats on RADV's ACO); 64 invocations = one wave64 per workgroup
    "rdna2": VulkanDefaults(ivc_tile=(2, 4, 4), wg_size=(16, 4, 1), unroll_kernel_rows=False),
    # Adreno (Turnip's ir3 as A740/A660, issue 31): a 5-wide kernel's held filter slice took 48 vec4 registers
    # (4 waves), loaded at use 16 (12 waves, 1.9x the instructions); a 3x3's 21-24 (8 waves on A740, 6 on A660).
    # Those wide kernels' taps in a loop: a padded 1x5 on A660 32 -> 12 registers (4 -> 10 waves), 640 -> 539
    # instructions; the dilated 5x5 on A740 19 -> 9 (10 -> 16 waves), 413 -> 259.
    # A 1x1 conv at 2x2 pixels (issue 47, kernelgen stats on imported MobileNetV2 shapes, NCHW, A740): 12 registers
    # and 16 waves as at 1x2, and fewer instructions per output, estimated 56x56x24 -> 144 115 -> 80 us, 56x56x144 ->
    # 24 227 -> 144 us, 14x14x384 -> 64 66 -> 57 us; 1x4 and 2x4 pixels or 8 channels need 16-24 registers for less.
    "adreno-7xx": VulkanDefaults(ivc_tile=(1, 2, 4), wg_size=(16, 4, 1), pointwise_ivc_tile=GPU_POINTWISE_IVC_TILE,
                                 unroll_kernel_rows=False, filter_slice_max_kw=3, taps_in_loop=True),
    "adreno-6xx": VulkanDefaults(ivc_tile=(1, 2, 4), wg_size=(16, 4, 1), pointwise_ivc_tile=GPU_POINTWISE_IVC_TILE,
                                 unroll_kernel_rows=False, filter_slice_max_kw=3, taps_in_loop=True),
    # Mali (PanVK's Valhall compiler as a G610, issue 31): any held filter slice spills (3x3 at 1x1x4: 4:13
    # spills:fills at 64 registers); loaded at use it does not, and 1x1 kernels fit 32 registers (2 threads)
    # Its taps in a loop: unrolled, a 5-wide kernel's row of fetches (and a grouped conv's 3 taps x 2 texel
    # reads) took 64 work registers (1 thread); in a loop 32 (2 threads) and half the instructions.
    # Issue 47 tried 1x2x4 (kernelgen stats, G610): on the imported networks' NCHW convs it kept 32 registers (2
    # threads) and cut the estimate 4-6% an op (MobileNetV2 114.3 -> 112.8 ms), but NHWC 3x3 convs (seed000_3x3,
    # seed002_vulkan and 18 more of the bundled and matrix configs) took 64 registers there (1 thread): it stays 1x1x4.
    "mali-valhall": VulkanDefaults(ivc_tile=(1, 1, 4), wg_size=(16, 1, 1), unroll_kernel_rows=False,
                                   filter_slice_max_kw=0, taps_in_loop=True),
}


# OpenCL on PoCL, by kind of loads (opencl/plan.py variant_of): tile [oh, ow, oc4] x local size. Vector tiles hold
# 2-4 float16 accumulators per pixel (an AVX-512 core has 32 x 16-float registers); with activations in images,
# wider channel blocks spare PoCL's slow texel reads; filter texels cap every tile.
_OPENCL_LOCAL = ((8, 1, 1), (16, 1, 1), (4, 2, 1))
OPENCL_SWEEPS = {"vectors": SweepSpace(((1, 4, 8), (1, 4, 16), (2, 4, 8), (1, 8, 8), (2, 2, 16), (1, 2, 16)),
                                       _OPENCL_LOCAL),
                 "vectors+images": SweepSpace(((1, 4, 16), (2, 2, 16), (2, 2, 32), (1, 1, 64)), _OPENCL_LOCAL),
                 "texels": SweepSpace(((1, 4, 2), (2, 2, 4), (2, 4, 2), (4, 4, 1)), _OPENCL_LOCAL)}

# Vulkan on lavapipe: invocation tiles [oh, ow, oc] x workgroup sizes [x, y, z] (seed 002's table tried 1x16x16,
# 2x8x16, 4x4x16, 8x2x16 with WGSize 4x4x1 and 4x2x2), plus the shapes that fetch least per multiply-add with every
# tap unrolled (4x16x8, 8x8x8, 4x8x16, 8x16x4: 64-128 pixels, 4,608 unrolled FMAs per channel chunk) and two whose
# body keeps kh as a loop. lavapipe vectorizes x only (8 lanes): 4x2x2 fills half a subgroup and runs at half
# speed; 8x1x1 and 8x4x1 are within noise of each other on seed 002 (8x1x1 ahead with wide_store). The sweep keeps
# the config's wide_store: with it, tiles whose oc is not a multiple of 8 are skipped like any permutation the
# problem cannot take.
LAVAPIPE_SWEEP = SweepSpace(((1, 16, 16), (2, 8, 16), (4, 4, 16), (8, 2, 16), (1, 32, 16), (4, 8, 16), (4, 16, 8),
                             (8, 8, 8), (8, 16, 4), (4, 8, 32)),
                            ((8, 1, 1), (8, 4, 1), (4, 2, 2)))
# A GPU (rdna2, Adreno, Mali) sweeps the tiles its register file holds (rdna2: up to 2x4 pixels x 8 channels stay
# under 128 VGPRs, see devices.py) in wave-sized workgroups; lavapipe's tiles above spill thousands of VGPRs there.
GPU_SWEEP = SweepSpace(((1, 2, 4), (2, 2, 4), (2, 4, 4), (1, 4, 8), (2, 4, 8), (4, 4, 4)),
                       ((16, 4, 1), (64, 1, 1), (8, 8, 1)))
VULKAN_SWEEPS = {"lavapipe": LAVAPIPE_SWEEP}  # every other Vulkan profile: GPU_SWEEP


# The FMA probe's candidate shapes on each API's device here (gpu/probes.py FmaShape: lanes, accumulators, unroll,
# steps); the core times each once per device and keeps the fastest (measure/probes.py).
# PoCL: 128 lanes of independent chains each: 8 x float16 (AVX-512's 16 lanes), 16 x float8 (AVX2's 8). On an
# AVX-512 CPU float16 chains run at twice the rate of float8 ones (424 against 226 GFLOP/s on 2 cores here), on an
# AVX2 CPU a float16 is two registers.
OPENCL_FMA_SHAPES = (FmaShape(16, 8, 1, 4096), FmaShape(8, 16, 1, 4096))
# lavapipe runs 8 (AVX2) or 16 (AVX-512) invocations per vector register, so a vec4 accumulator takes 4 registers
# and a float one 1:
# - AVX-512 (32 registers, Mesa with FMA): 3 vec4 accumulators ran at 152 GFLOP/s against 121 for 2 (72 for 1;
#   4 spilled: 66).
# - AVX2 Zen2 with Mesa 22.3 / LLVM 15: lavapipe lowers fma() to vmulps + vaddps (no vfmadd in the JIT's code),
#   and LLVM emits each accumulator's chain back to back, so the core overlaps only the chains its reorder window
#   holds: one vec4 (4 chains of 64 steps) read 67 GFLOP/s where 2 and 3 vec4 read 23, and 12 float chains of 4
#   steps per trip 33-41.
# 16,384 steps per accumulator for every shape: far below lavapipe's 65,535 back-edges a loop.
VULKAN_FMA_SHAPES = (FmaShape(4, 1, 64, 16384), FmaShape(4, 2, 64, 16384), FmaShape(4, 3, 64, 16384),
                     FmaShape(1, 8, 8, 16384), FmaShape(1, 12, 4, 16384))

# PoCL: many more groups than compute units, so every core stays busy.
OPENCL_PROBE_SIZES = ProbeSizes(fma_work_group=64, fma_groups=16, per_compute_unit=True, triad_work_group=256)
# lavapipe: 0.5-3.2 GFLOP per FMA dispatch: 20-50 ms here.
VULKAN_PROBE_SIZES = ProbeSizes(fma_work_group=64, fma_groups=128, per_compute_unit=False, triad_work_group=64)
