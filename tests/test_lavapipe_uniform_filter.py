"""benchmarks/lavapipe_uniform_filter.py: the generated kernel with its filter read from uniform buffers computes the
same conv, bit for bit (numpy, on lavapipe), and its filter parts and bindings are laid out as the script says."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import requires_tool
from tests.test_vulkan_target import VULKAN

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "lavapipe_uniform_filter.py"


def script():
    spec = importlib.util.spec_from_file_location("lavapipe_uniform_filter", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up while being made
    spec.loader.exec_module(module)
    return module


def test_taps_per_part_fill_a_uniform_buffer():
    m = script()
    assert m.taps_per_part(m.SHAPES["c3"]) == 1 and m.parts(m.SHAPES["c3"]) == 9  # 128 x 128: 4,096 vec4s a tap
    assert m.taps_per_part(m.SHAPES["c258"]) == 4 and m.parts(m.SHAPES["c258"]) == 3  # 16 x 256: 1,024
    assert m.parts(m.SHAPES["pw"]) == 1 and m.parts(m.SHAPES["s2"]) == 1


def test_filters_past_the_limits_are_refused():
    m = script()
    with pytest.raises(ValueError, match="more than a uniform buffer"):
        m.taps_per_part(m.Conv(8, 256, 256, 1))  # one tap of 16,384 vec4s
    with pytest.raises(ValueError, match="more than 14 uniform buffers"):
        m.taps_per_part(m.Conv(8, 128, 128, 5))  # 25 taps of a whole buffer each


def test_filter_parts_hold_whole_taps_in_order():
    m = script()
    conv = m.Conv(8, 16, 256, 3)  # 4 taps of 4,096 floats a part: 4 + 4 + 1
    flt = np.arange(9 * 16 * 256, dtype=np.float32)
    parts = m.filter_parts(flt, conv)
    assert [p.size for p in parts] == [16384] * 3
    assert np.array_equal(np.concatenate(parts)[:flt.size], flt)
    assert not parts[2][4096:].any()


def test_uniform_source_binds_one_block_per_part():
    m = script()
    source = ("layout(binding = 1) uniform samplerBuffer flt;\n"
              "vec4 load_flt(int fh, int fw, int ci, int oc4) {\n  return texelFetch(flt, 0);\n}\n")
    out = m.uniform_source(source, m.SHAPES["c258"])
    assert "samplerBuffer flt" not in out and "texelFetch" not in out
    assert [line.split(")")[0] for line in out.splitlines() if line.startswith("layout(")] == \
        ["layout(std140, binding = 1", "layout(std140, binding = 3", "layout(std140, binding = 4"]
    assert "int i = (tap % 4) * 1024 + ci * 64 + oc4;" in out
    assert "if (part == 1) return flt1.v[i];" in out and out.count("return flt") == 3
    with pytest.raises(ValueError, match="update this script"):
        m.uniform_source(source.replace("flt;", "filt;"), m.SHAPES["c258"])


@requires_tool(*VULKAN)
def test_uniform_filter_matches_the_generated_kernel(tmp_path):
    """One part (3x3 32 -> 16, padded; 1x1) and nine (3x3 128 -> 128, a 64 KiB block per tap, unpadded): run_shape
    exits unless the output equals the generated kernel's bit for bit and numpy's within 1e-5 of its largest value."""
    m = script()
    m.run_shape(m.Conv(16, 32, 16, 3, pad=1), 0, tmp_path)
    m.run_shape(m.Conv(16, 32, 32, 1), 0, tmp_path)
    m.run_shape(m.Conv(10, 128, 128, 3), 0, tmp_path)


@requires_tool(*VULKAN)
def test_a_misplaced_filter_part_fails(tmp_path, monkeypatch):
    m = script()
    cut = m.filter_parts
    monkeypatch.setattr(m, "filter_parts", lambda flt, conv: cut(flt, conv)[::-1])
    with pytest.raises(SystemExit, match="differs from"):
        m.run_shape(m.Conv(10, 128, 128, 3), 0, tmp_path)
