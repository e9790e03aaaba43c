"""Where measured C kernels find their arrays (targets/c/placement.py), and a call bound before a timed region."""
from __future__ import annotations

import re
import sys

import numpy as np
import pytest
from builders import toolchain
from conftest import requires_tool

from kernelgen.targets.c.placement import HUGE_PAGE, placed
from kernelgen.targets.c.toolchain import Library, build_shared


def _vm_flags(array: np.ndarray) -> set[str]:
    """The VmFlags of the mapping that holds the array's first byte (Linux's /proc/self/smaps)."""
    address, inside = array.ctypes.data, False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            span = re.match(r"^([0-9a-f]+)-([0-9a-f]+) ", line)
            if span:
                inside = int(span[1], 16) <= address < int(span[2], 16)
            elif inside and line.startswith("VmFlags:"):
                return set(line.split()[1:])
    raise AssertionError("no mapping holds the array")


@pytest.mark.parametrize("elements", [1, 15, 16, 1000, HUGE_PAGE // 4 - 1, HUGE_PAGE // 4, HUGE_PAGE // 4 + 17,
                                      3 * HUGE_PAGE // 4])
def test_a_placed_copy_keeps_the_values_on_its_boundary(elements):
    """Below a huge page: a 64-byte boundary; from one on: a huge-page boundary, with whole pages inside the room."""
    array = np.random.default_rng(elements).standard_normal(elements).astype(np.float32)
    for huge in (True, False):
        copy = placed(array, huge)
        np.testing.assert_array_equal(copy, array)
        assert copy.dtype == array.dtype and copy.flags.c_contiguous
        assert copy.ctypes.data % (HUGE_PAGE if array.nbytes >= HUGE_PAGE else 64) == 0


def test_a_placed_copy_keeps_the_shape():
    array = np.arange(2 * 3 * 5, dtype=np.float32).reshape(2, 3, 5)
    np.testing.assert_array_equal(placed(array), array)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="madvise and /proc/self/smaps are Linux's")
def test_large_arrays_are_advised_huge_or_small_pages():
    """hg: MADV_HUGEPAGE (as the probe's arrays), nh: MADV_NOHUGEPAGE (the --small-pages baseline)."""
    array = np.ones(HUGE_PAGE, dtype=np.float32)  # 8 MiB
    assert "hg" in _vm_flags(placed(array, True))
    assert "nh" in _vm_flags(placed(array, False))


@requires_tool(*toolchain("c"))
def test_a_bound_call_is_the_call(tmp_path):
    """Library.bind resolves the function and the pointers once; calling it runs the kernel on the same arrays."""
    source = tmp_path / "scale.c"
    source.write_text("void scale(const float *x, float *y) { for (int i = 0; i < 8; ++i) y[i] = 2.0f * x[i]; }\n")
    library = Library(build_shared([source], tmp_path / "libscale.so"))
    x, y = np.arange(8, dtype=np.float32), np.zeros(8, dtype=np.float32)
    call = library.bind("scale", [x, y])
    assert not y.any()  # binding does not run it
    call()
    np.testing.assert_array_equal(y, 2 * x)
    x += 1  # the same memory: a bound call sees the arrays' current values
    call()
    np.testing.assert_array_equal(y, 2 * x)
