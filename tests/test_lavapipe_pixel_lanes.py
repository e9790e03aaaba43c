"""benchmarks/lavapipe_pixel_lanes.py: its hand-written pixel-lane shaders compute the conv (numpy, on lavapipe)."""
from __future__ import annotations

import pytest

from tests.builders import benchmark
from tests.conftest import requires_tool
from tests.test_vulkan_target import VULKAN


def script():
    return benchmark("lavapipe_pixel_lanes")


def test_variant_must_tile_the_conv():
    m = script()
    with pytest.raises(ValueError, match="does not tile"):
        m.shader(m.Conv(16, 32, 16, 3), m.Variant(3, 1, 8, 1))  # 16 rows in blocks of 3


def test_groups_cover_the_output():
    m = script()
    assert m.Variant(4, 1, 8, 4).groups(m.Conv(64, 128, 128, 1)) == (16, 8, 16)
    assert m.Variant(2, 2, 16, 1).groups(m.Conv(64, 128, 128, 3)) == (8, 4, 32)


@requires_tool(*VULKAN)
def test_shaders_match_numpy(tmp_path):
    """Every variant kind (rows, pixels 8 apart, 16 channels, several chunks a trip, padded 3x3 with and without the
    row shuffles, unpadded 3x3) on small convs; run_shape exits when any output differs from numpy by more than 1e-5 of its
    largest value (float32 sums of 32-288 products against float64)."""
    m = script()
    m.run_shape(m.Conv(16, 32, 16, 1), (m.Variant(2, 2, 8, 2), m.Variant(1, 1, 16, 8)), 0, tmp_path)
    m.run_shape(m.Conv(16, 32, 16, 3), (m.Variant(2, 2, 8, 1), m.Variant(4, 1, 16, 2),
                                        m.Variant(2, 1, 8, 1, row_shuffles=False)), 0, tmp_path)
    m.run_shape(m.Conv(16, 16, 32, 3, same=False), (m.Variant(2, 2, 8, 2), m.Variant(4, 1, 16, 1)), 0, tmp_path)


@requires_tool(*VULKAN)
def test_a_variant_that_skips_rows_fails(tmp_path, monkeypatch):
    m = script()
    monkeypatch.setattr(m.Variant, "groups", lambda self, conv: (conv.oc // self.channels, 1, 1))
    with pytest.raises(SystemExit, match="differs from numpy"):
        m.run_shape(m.Conv(16, 32, 16, 1), (m.Variant(2, 2, 8, 2),), 0, tmp_path)
