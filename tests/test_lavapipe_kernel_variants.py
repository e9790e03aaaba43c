"""benchmarks/lavapipe_kernel_variants.py: each source variant of the generated kernel changes what it says and
computes the same conv (numpy, on lavapipe; bit for bit where the multiply-adds keep their order), and the uniform
filter's parts and bindings are laid out as the script says."""
from __future__ import annotations

import numpy as np
import pytest

from tests.builders import benchmark
from tests.conftest import requires_tool
from tests.test_vulkan_target import VULKAN


def script():
    return benchmark("lavapipe_kernel_variants")


def test_taps_per_part_fill_a_uniform_buffer():
    m = script()
    assert m.taps_per_part(m.SHAPES["c3"]) == 1 and m.parts(m.SHAPES["c3"]) == 9  # 128 x 128: 4,096 vec4s a tap
    assert m.taps_per_part(m.SHAPES["c258"]) == 4 and m.parts(m.SHAPES["c258"]) == 3  # 16 x 256: 1,024
    assert m.parts(m.SHAPES["pw"]) == 1 and m.parts(m.SHAPES["s2"]) == 1


def test_filters_past_the_limits_are_refused():
    m = script()
    with pytest.raises(ValueError, match="more than a uniform buffer"):
        m.taps_per_part(m.Conv(8, 256, 256, 1))  # one tap of 16,384 vec4s
    with pytest.raises(ValueError, match="more than 15 uniform buffers"):
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


# The generated kernel's text the reorderings rewrite, as conv2d.comp.j2 emits it for a plain 3x3 config.
def generated_3x3(tmp_path) -> str:
    from kernelgen.api import load_config
    from kernelgen.planner import plan as make_plan
    from kernelgen.targets import TARGETS

    m = script()
    path = tmp_path / "c.yaml"
    path.write_text(m.config_text(m.Conv(18, 32, 16, 3)))
    config = load_config(path)
    return TARGETS["vulkan"].build(config, make_plan(config)).files[f"{config.name}.comp"]


def test_reorderings_rewrite_the_multiply_adds(tmp_path):
    m = script()
    source, conv = generated_3x3(tmp_path), m.Conv(18, 32, 16, 3)
    for name in ("c_outer", "c_inner", "fw_c_outer"):
        out = m.VARIANTS[name].source(source, conv)
        assert m.MULTIPLY_ADDS not in out and out.count("fma(vec4(v[c]), F[b][fw][c][k], O[i][j][k])") == 1, name
    assert "[[unroll]] for (int c = 0; c < 4; ++c)\n" + m.PIXEL_LOOPS in m.c_outer(source, conv)
    hoisted = m.hoist_rows(source, conv)
    assert hoisted.count("load_src(") == source.count("load_src(") and "CH[h][q] = load_src(" in hoisted
    with pytest.raises(ValueError, match="update this script"):
        m.c_outer(source.replace("v.y", "v.g"), conv)


def test_trips_apply_to_1x1_convs_only(tmp_path):
    m = script()
    source = "[[dont_unroll]] for (int icb = 0; icb < 8; icb += 4) {\n      [[unroll]] for (int u = 0; u < 4; ++u)"
    assert m.VARIANTS["trip2"].source(source, m.Conv(8, 32, 32, 1)) == source.replace("4", "2")
    with pytest.raises(ValueError, match="not a 1x1 conv"):
        m.VARIANTS["trip2"].source(source, m.Conv(8, 32, 32, 3))
    with pytest.raises(ValueError, match="not a 1x1 conv"):
        m.VARIANTS["trip8"].source(source, m.Conv(8, 16, 32, 1))  # 4 chunks in all


@requires_tool(*VULKAN)
def test_variants_compute_the_conv(tmp_path):
    """The uniform filter with one part (3x3 32 -> 16, padded; 1x1) and nine (3x3 128 -> 128, a 64 KiB block per
    tap), the reorderings, the hoisted rows and other trips: run_shape exits unless every output is numpy's within
    1e-5 of its largest value, and the same-order variants' the generated kernel's bit for bit."""
    m = script()
    names = ["uniform", "c_outer", "c_inner", "fw_c_outer", "hoist_rows"]
    assert list(m.run_shape(m.Conv(16, 32, 16, 3, pad=1), names, 0, tmp_path)) == ["generated", *names]
    names = ["uniform", "trip1", "trip2", "trip8"]
    assert list(m.run_shape(m.Conv(16, 32, 32, 1), names, 0, tmp_path)) == ["generated", *names]
    assert list(m.run_shape(m.Conv(10, 128, 128, 3), ["uniform", "trip2"], 0, tmp_path)) == ["generated", "uniform"]


@requires_tool(*VULKAN)
def test_a_misplaced_filter_part_fails(tmp_path, monkeypatch):
    m = script()
    cut = m.filter_parts
    monkeypatch.setattr(m, "filter_parts", lambda flt, conv: cut(flt, conv)[::-1])
    with pytest.raises(SystemExit, match="differs from"):
        m.run_shape(m.Conv(10, 128, 128, 3), ["uniform"], 0, tmp_path)


@requires_tool(*VULKAN)
def test_a_variant_that_reads_the_wrong_channel_fails(tmp_path, monkeypatch):
    m = script()
    # input channels 1 and 3 of each chunk multiplied by channels 0 and 2's values
    wrong = m.Variant(lambda source, conv: m.c_inner(source, conv).replace("vec4(v[c])", "vec4(v[c & 2])"), False)
    monkeypatch.setitem(m.VARIANTS, "c_inner", wrong)
    with pytest.raises(SystemExit, match="differs from numpy"):
        m.run_shape(m.Conv(16, 32, 16, 3, pad=1), ["c_inner"], 0, tmp_path)
