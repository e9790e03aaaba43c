"""What a lavapipe run can observe about the CPU it compiles for: the vector width its device name reports, the
subgroup size, the CPU's vector features (as llvmpipe sees them) and its L1 data cache. lavapipe's speed against
its own FMA probe depends on these (gpu/profiles.py LAVAPIPE_HOSTS says how), so every lavapipe benchmark names
them, and the cache key of anything measured on one host is built from them.

llvmpipe reads the CPU's features itself and lets GALLIUM_OVERRIDE_CPU_CAPS take some away ("avx": no AVX-512, so
LLVM has 16 vector registers instead of 32; "sse4.1": no AVX, 128-bit vectors); LP_NATIVE_VECTOR_WIDTH sets the
vector width (256: subgroups of 8, 128: of 4, 512: of 16). Both change what this module reports, as they change
what llvmpipe generates."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass

from ...cpuinfo import data_caches, first_processor, model_text

# The features that decide llvmpipe's code: vector width and count of registers, fused multiply-add.
VECTOR_FLAGS = ("avx", "avx2", "fma", "avx512f", "avx512vl")
_OVERRIDE = "GALLIUM_OVERRIDE_CPU_CAPS"
# What each GALLIUM_OVERRIDE_CPU_CAPS value leaves of VECTOR_FLAGS (Mesa 22.3 src/util/u_cpu_detect.c: each value
# clears the features above it)
_OVERRIDES = {"avx": ("avx", "avx2", "fma"), "sse4.1": (), "ssse3": (), "sse3": (), "sse2": (), "sse": (),
              "nosse": ()}
_BITS = re.compile(r"\b(\d+) bits\b")


@dataclass(frozen=True, slots=True)
class LavapipeHost:
    """One host as lavapipe compiles for it."""

    cpu: str  # model name
    flags: tuple[str, ...]  # VECTOR_FLAGS present, as llvmpipe sees them
    vector_bits: int  # llvmpipe's vector width (its device name says it), 0 when the name does not
    subgroup: int
    l1d_bytes: int  # 0 when the host does not say
    driver: str  # e.g. "llvmpipe Mesa 22.3.6 (LLVM 15.0.6)"

    @property
    def vector_registers(self) -> int:
        """Vector registers LLVM may allocate: AVX-512VL gives 256-bit code 32, AVX2 16."""
        return 32 if "avx512vl" in self.flags else 16

    def describe(self) -> str:
        l1d = f"L1d {self.l1d_bytes // 1024} KiB" if self.l1d_bytes else "L1d unknown"
        return (f"{self.cpu} ({' '.join(self.flags) or 'no AVX'}; {l1d}); {self.driver}, "
                f"{self.vector_bits}-bit vectors, subgroup {self.subgroup}, {self.vector_registers} vector registers")

    def key(self) -> str:
        """What a calibration on this host is kept under: a different CPU, driver or width is another host."""
        return f"{self.cpu}|{self.driver}|{self.vector_bits}|{' '.join(self.flags)}"


def vector_bits(device_name: str) -> int:
    """llvmpipe's vector width from its device name, e.g. 'llvmpipe (LLVM 15.0.6, 256 bits)' -> 256."""
    found = _BITS.search(device_name)
    return int(found.group(1)) if found else 0


def cpu_info(text: str | None = None) -> tuple[str, tuple[str, ...]]:
    """(model name with its family, model and stepping numbers, VECTOR_FLAGS present) from /proc/cpuinfo's first
    processor (or `text`): the numbers tell apart CPUs a hypervisor names alike, whose probe shapes and tiles differ."""
    fields = first_processor(text)
    present = set(fields.get("flags", "").split())
    return model_text(fields) or "unknown CPU", tuple(f for f in VECTOR_FLAGS if f in present)


def llvmpipe_flags(flags: tuple[str, ...], override: str | None) -> tuple[str, ...]:
    """The CPU's flags as llvmpipe sees them under GALLIUM_OVERRIDE_CPU_CAPS=`override`."""
    if not override or override not in _OVERRIDES:
        return flags
    return tuple(f for f in flags if f in _OVERRIDES[override])


def l1d_bytes() -> int:
    try:
        size = os.sysconf("SC_LEVEL1_DCACHE_SIZE")
    except (ValueError, OSError):
        size = 0
    if size and size > 0:
        return int(size)
    return data_caches().get(1, 0)  # sysfs, where glibc does not say


def observe(device_name: str, driver: str, subgroup: int) -> LavapipeHost:
    """This host as the lavapipe device (its name, driver string and subgroup size) compiles for it."""
    cpu, flags = cpu_info()
    return LavapipeHost(cpu=cpu, flags=llvmpipe_flags(flags, os.environ.get(_OVERRIDE)),
                        vector_bits=vector_bits(device_name), subgroup=subgroup, l1d_bytes=l1d_bytes(),
                        driver=driver)


def current() -> LavapipeHost | None:
    """This host as the first llvmpipe device the Vulkan loader lists compiles for it; None without one."""
    from .device import list_devices

    for info in list_devices():
        if "llvmpipe" in info.name:
            return observe(info.name, info.driver, info.subgroup_size)
    return None


# The stack lavapipe's 256-bit code touches in a conv's multiply-add region grows with the vec4 accumulators of the
# invocation tile (each 4 ymm registers, spilled): benchmarks/lavapipe_profile.py on the 1x1 64x64x128 -> 128 read
# 23.7 KiB at 64 (4x4x16), 43.2 at 128 (4x8x16), 69.4 at 256 (8x8x16). A line through the first two, which
# overestimates past them and for a 3x3 (3x3 64x64x128 -> 128 read 30.8 KiB at 8x8x8, 22.6 at 4x8x8): what a
# tile may hold is judged against the host's L1d, where the region's spills and
# reloads must stay (the defaults' 128 fit this 48 KiB L1d, not a Zen 3's or a Skylake's 32 KiB).
STACK_BASE_KIB = 4.2
STACK_KIB_PER_VEC4 = 0.305


def stack_kib(tile: tuple[int, int, int]) -> float:
    """Estimated stack (KiB) the multiply-add region of an invocation tile [oh, ow, oc] touches."""
    return STACK_BASE_KIB + STACK_KIB_PER_VEC4 * tile[0] * tile[1] * tile[2] / 4


def fitting_tile(tile: tuple[int, int, int], l1d: int) -> tuple[int, int, int]:
    """`tile` with its pixels halved (the wider of oh, ow first; the channels stay, wide stores own pairs of them)
    until its stack estimate fits an L1d of `l1d` bytes or one pixel is left; unchanged when l1d is unknown (0)."""
    oh, ow, oc = tile
    while l1d and stack_kib((oh, ow, oc)) * 1024 > l1d and oh * ow > 1:
        if ow >= oh:
            ow //= 2
        else:
            oh //= 2
    return (oh, ow, oc)


def tile_note(host: LavapipeHost, tile: tuple[int, int, int]) -> str | None:
    """A line for a benchmark run with the default `tile` on `host` when it overflows the host's L1d: what fits."""
    fits = fitting_tile(tile, host.l1d_bytes)
    if fits == tile:
        return None
    return (f"lavapipe: the invocation tile {list(tile)}'s multiply-add region touches ~{stack_kib(tile):.0f} KiB "
            f"of stack, past this host's {host.l1d_bytes // 1024} KiB L1d; vulkan: {{ivc_tile: {list(fits)}}} "
            f"fits it (~{stack_kib(fits):.0f} KiB), or run benchmarks/lavapipe_calibrate.py")


def plan_tile_notes(host: LavapipeHost, ivc_tiles) -> list[str]:
    """tile_note for each distinct conv invocation tile of the plans a benchmark ran (`ivc_tiles`: [oh, ow, vec4
    chunks] as VulkanOp keeps them), once each, in their order."""
    tiles = dict.fromkeys((oh, ow, 4 * chunks) for oh, ow, chunks in ivc_tiles)
    return [note for note in (tile_note(host, tile) for tile in tiles) if note]
