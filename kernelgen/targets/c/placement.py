"""Where measured C kernels and the bandwidth probe find their arrays: on cache-line boundaries, as the network
arena places every tensor, and, for an array of at least a huge page, on a huge-page boundary with the kernel asked
for transparent huge pages (Linux's MADV_HUGEPAGE).

Why the pages matter: a kernel that reads its tensors from memory streams them through the hardware prefetchers,
which stop at every 4 KiB page (on this Zen 2 host: 10 pixels of a 96-channel NHWC row) and restart a few lines
late; the TLB also covers a tensor of megabytes only in 2 MiB pages. The triad probe's 64 MiB arrays always had
huge pages (numpy advises them for every allocation of 4 MiB or more), while a 4.6 MiB tensor got them only for
the 2 MiB-aligned part that happened to lie inside its allocation (0 to 4 of its 4.6 MiB, run to run): the kernel
streamed on small pages against a probe on huge ones. Placing both here gives both the same pages.
"""
from __future__ import annotations

import ctypes
import sys

import numpy as np

from ...network.arena import ALIGNMENT as LINE_ALIGNMENT

HUGE_PAGE = 2 * 1024 * 1024  # bytes: x86-64's and arm64's (4 KiB granule) transparent huge page
_MADV_HUGEPAGE, _MADV_NOHUGEPAGE = 14, 15  # <asm-generic/mman-common.h>


def placed(array: np.ndarray, huge: bool = True) -> np.ndarray:
    """A copy of `array` on a LINE_ALIGNMENT boundary; one of at least HUGE_PAGE bytes starts on a huge-page boundary
    and its pages are advised huge (`huge`) or small (not `huge`: a 4 KiB-page baseline) before they are touched."""
    big = array.nbytes >= HUGE_PAGE
    alignment = HUGE_PAGE if big else LINE_ALIGNMENT
    length = -(-array.nbytes // alignment) * alignment  # whole huge pages: the last one lies inside the allocation
    room = np.empty(length + alignment, dtype=np.uint8)  # untouched until the copy below
    start = -room.ctypes.data % alignment
    if big:
        _advise(room.ctypes.data + start, length, _MADV_HUGEPAGE if huge else _MADV_NOHUGEPAGE)
    out = room[start:start + array.nbytes].view(array.dtype).reshape(array.shape)
    out[...] = array
    return out


def _advise(address: int, length: int, advice: int) -> None:
    """madvise on Linux; elsewhere, or where the kernel refuses, the pages are whatever the system gives."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        libc.madvise(address, length, advice)


def pages() -> str:
    """Where placed() puts a tensor of 2 MiB or more, as this host's transparent huge page setting allows."""
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled", encoding="ascii") as setting:
            mode = setting.read().split("[", 1)[1].split("]", 1)[0]
    except (OSError, IndexError):
        return "tensors on the system's pages (no transparent huge pages here)"
    if mode == "never":
        return "tensors on 4 KiB pages (transparent huge pages: never)"
    return f"tensors of 2 MiB or more on 2 MiB pages (transparent huge pages: {mode}), smaller ones on 4 KiB pages"
