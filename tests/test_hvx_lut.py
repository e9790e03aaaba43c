"""The hard gates' byte tables as HVX's vlut32 reads them (kernelgen/targets/hvx/lut.py): every one of the 256
indices through the eight merged lookups gives its table entry, for tables that tell every entry apart."""
from __future__ import annotations

import numpy as np
import pytest

from kernelgen.targets.hvx.lut import lookup, vlut32, vlut32_bytes


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_eight_lookups_are_the_table(seed):
    table = tuple(int(v) for v in np.random.default_rng(seed).permutation(256))  # every entry distinct
    laid = vlut32_bytes(table)
    assert sorted(laid) == list(range(256))
    for start in (0, 128):
        indices = list(range(start, start + 128))
        assert lookup(indices, laid) == list(table[start:start + 128])


def test_one_lookup_matches_only_its_segment():
    """Segment k = 5 (entries 160..191): the odd halfwords' low bytes of the second vector; other lanes 0."""
    table = tuple(range(1, 257)[:255]) + (0,)
    laid = vlut32_bytes(table)
    indices = [150, 160, 191, 192, 5]
    assert vlut32(indices, laid[128:], 5) == [0, table[160], table[191], 0, 0]
    assert laid[128 + 2 * 32] == table[160] and laid[128 + 2 * 63] == table[191]


def test_a_table_of_another_length_is_refused():
    with pytest.raises(ValueError, match="256 entries, got 255"):
        vlut32_bytes(tuple(range(255)))
