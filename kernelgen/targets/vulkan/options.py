"""The `vulkan:` block of a config: checked by this model when the config is loaded."""
from __future__ import annotations

import math
from typing import Literal, Union

from pydantic import Field, StrictBool, conlist

from ...config import Config, options_of
from ...config.model import Count, StrictModel
from ...devices import DeviceProfile

NAME = "vulkan"
# Accumulators one invocation may hold (oh * ow * oc of its tile): the shader unrolls every one of them. A CPU
# profile (lavapipe): 1,024. Its LLVM's cold compile grows much faster with the accumulators live across the body
# than with the body (benchmarks/vulkan_compile.py, CPU s on a loaded 2-core host, 64x64x128 -> 128): a 1x1 conv
# at 1,024 accumulators 6.4 s, at 2,048 27 s; a 3x3 at 1,024 (9,216 multiply-adds unrolled) 8.8 s, at 2,048
# (6,144 per kernel row) 49 s, 1x7 at 2,048 100 s. A GPU profile: 4x its register budget (rdna2: 512), past which
# each op spills hundreds of registers whatever the compiler does, and RADV's ACO needs minutes and gigabytes
# (measured on a 3-op chain, three pipelines: 4 s at 32 accumulators, 8 s at 256 (655 VGPRs spilled), 12 s at
# 512 (1,833), over 100 s at 1,024; issue 32's 4,096 ran past 600 s at 2.9 GB).
MAX_TILE_ACCUMULATORS = 1024
# vec4 multiply-adds one trip of the innermost loop the shader keeps may unroll (taps, kernel rows, channel
# chunks, accumulators): lavapipe's LLVM compiles it in time roughly proportional to it once no read branches
# (benchmarks/vulkan_compile.py, CPU s cold: 1,152 ~2.5 s, 4,608 ~3.7 s, 9,216 ~9 s at 1,024 accumulators).
MAX_UNROLLED_BODY = 9216
# Storage-buffer accesses the store phase unrolls per invocation (per output chunk of the tile its store: 4 scalar
# stores where the layout keeps no 4 channels together, as NCHW does, else 1 vector store; its residual read: 4
# scalars or 1 vec4), times the trip body: lavapipe runs each access as a loop over the subgroup's lanes, and its
# LLVM's cold compile grew with that product, ~5 s per million (benchmarks/vulkan_compile.py, CPU s cold, busy
# 2-core host; NCHW in and out, imported ResNet18 and MobileNetV3-small convs): 3x3 with an NCHW residual at 8x8x8
# (1,024 accesses x 4,608) 22.8 s, at 4x16x8 17-23 s, at 4x8x8 (512 x 2,304) 5-6 s; 3x3 at 4x16x8 (512 x 4,608)
# 10.6 s, at 4x8x8 2.8 s; 1x1 240 -> 40 with a residual at 8x8x8 (1,024 x 2,048) 12.2 s, without at 8x8x8 5.5 s,
# at 4x8x8 1.4 s; the 7x7 s2 stem at 4x16x8 (512 x 3,584) 7.7 s. A default tile shrinks until it fits
# (vulkan/plan.py); the smaller tiles also ran faster where this shrinks them (fraction of the probe, two
# alternating rounds: 3x3 0.40, 0.32 -> 0.52, 0.35; with a residual 0.30, 0.28 -> 0.50, 0.42; 1x1 with a residual
# 0.36, 0.29 -> 0.40, 0.47), while a 1x1 without one, at 4x8x8 0.34, 0.54 against 0.44, 0.12, keeps 8x8x8. A 3x3
# s2 56x56x64 -> 128 at 4x8x8 ran 0.39, 0.25 against 0.49, 0.28 (within this host's noise) and at 4x16x8 took
# 11-16 s to compile: it shrinks too. The bundled NHWC configs stay far below it.
MAX_STORE_WORK = 2_000_000
# and the accesses alone, whatever the body: MobileNetV3-small's 1x1 28x28x88 -> 24 with an NCHW residual at
# 4x14x8 (896 accesses x 896) took 11-14 s, at 4x7x8 (448) 3 s (and ran 0.11, 0.05 of the probe against 0.11, 0.07:
# a 28x28x24 output, too small to tell); at 1,024 the 1x1s above took 12-19 s.
MAX_STORE_ACCESSES = 512
GPU_TILE_REGISTERS = 4


class VulkanModel(StrictModel):
    """Options of the `vulkan` target (issue: Vulkan GLSL compute)."""

    wg_tile: Union[conlist(Count, min_length=3, max_length=3), None] = Field(
        default=None, description="[oh, ow, oc]: output tile of one workgroup")
    ivc_tile: Union[conlist(Count, min_length=3, max_length=3), None] = Field(
        default=None, description="[oh, ow, oc]: output tile of one invocation (oc a multiple of 4)")
    wg_size: Union[conlist(Count, min_length=3, max_length=3), None] = Field(
        default=None, description="[x, y, z]: invocations per workgroup")
    device: Literal["lavapipe", "rdna2", "adreno-7xx", "adreno-6xx", "mali-valhall"] = Field(
        default="lavapipe", description="the device profile the defaults come from (kernelgen devices): 'lavapipe' "
                                        "(tuned on Mesa's CPU driver), 'rdna2', 'adreno-7xx', 'adreno-6xx' or "
                                        "'mali-valhall'")
    wide_store: Union[StrictBool, None] = Field(
        default=None, description="true or false: with true, an invocation owns pairs of adjacent vec4 channel "
                                  "chunks and stores each pair as one vector of 64-bit words (chunk by chunk on a "
                                  "profile without shaderInt64); unset: the device profile's choice (lavapipe: true "
                                  "where every conv's output channels are a multiple of 8 and fill the workgroup's "
                                  "lanes with pairs)")


def vulkan_options(config: Config) -> VulkanModel:
    return options_of(config, NAME)


def check_accumulators(config: Config, ivc: tuple[int, int, int], profile: DeviceProfile, *,
                       explicit: bool) -> None:
    """Refuse an invocation tile with more accumulators than the profile allows (MAX_TILE_ACCUMULATORS), at the
    key that set it: ivc_tile, or wg_tile (which sets it as wg_tile / wg_size)."""
    held = math.prod(ivc)
    budget = profile.register_budget
    limit = MAX_TILE_ACCUMULATORS if budget is None else GPU_TILE_REGISTERS * budget
    if held <= limit:
        return
    why = ("lavapipe's LLVM compiles a tile past it for minutes" if budget is None else
           f"{GPU_TILE_REGISTERS} x its {budget}-register budget in kernelgen devices: past it every op spills "
           f"hundreds of registers, and a GPU compiler such as RADV's ACO takes minutes")
    key = "vulkan.ivc_tile" if explicit or vulkan_options(config).wg_tile is None else "vulkan.wg_tile"
    raise config.problem(key, f"the invocation tile {list(ivc)} holds {held} accumulators (oh * ow * oc); keep it "
                              f"<= {limit} on {profile.name} ({why})")


def tile_key(config: Config, *, explicit: bool) -> str:
    """The key that set the invocation tile: ivc_tile, or wg_tile (which sets it as wg_tile / wg_size); the vulkan
    block when neither is set (a default tile)."""
    options = vulkan_options(config)
    if explicit or options.ivc_tile is not None:
        return "vulkan.ivc_tile"
    return "vulkan.wg_tile" if options.wg_tile is not None else "vulkan"


def check_body(config: Config, op: int, ivc: tuple[int, int, int], body: int, *, explicit: bool) -> None:
    """Refuse an op whose innermost kept loop unrolls more than MAX_UNROLLED_BODY vec4 multiply-adds per trip
    (ops[op] with the invocation tile ivc [oh, ow, vec4 chunks]), at the key that set the tile."""
    if body <= MAX_UNROLLED_BODY:
        return
    raise config.problem(tile_key(config, explicit=explicit),
                         f"ops[{op}] with the invocation tile {[ivc[0], ivc[1], 4 * ivc[2]]} unrolls {body} vec4 "
                         f"multiply-adds per loop trip; keep it <= {MAX_UNROLLED_BODY} (lavapipe's LLVM compile "
                         f"time grows with it): use a smaller tile")
