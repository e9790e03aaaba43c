"""A lone 3x3 stride-1 conv by Winograd's F(2x2, 3x3) on the c target (targets/c/winograd.py): where it is taken
and where not, its cut of the tiles and its workspace, and its outputs against numpy (validate: real gcc runs) and
the same bytes from its 16- and 8-float vectors (each output channel's products sum over the input channels in the
same order whatever the vector width, and the transforms are lane by lane), the scalar fallback within a few units
in the last place. No timings here:
benchmarks/c_speed.py and `kernelgen bench` measure speed."""
from __future__ import annotations

import ctypes

import numpy as np
import pytest
from builders import Case, make_config, toolchain
from conftest import requires_tool

from kernelgen.api import jobs, validate
from kernelgen.measure.tensors import random_inputs
from kernelgen.targets.c import C
from kernelgen.targets.c.toolchain import Library, build_shared
from kernelgen.targets.c.winograd import winograd_fits

CONV = "{{out_channels: {k}, kernel: 3, pad: 1, filter_layout: OHWI16o{extra}}}"


def _case(shape, k, extra="", **more) -> Case:
    return Case(shape, [CONV.format(k=k, extra=extra)], "NHWC", "NHWC", "auto", targets="[c]", **more)


CASES = {
    # ResNet's: bias, the shortcut, relu; 28 x 28 tiles in blocks of 6 rows (168 tiles: 12 register blocks of 14,
    # 28 of 6; the last block 4 rows); its filter transformed whole at the call's start
    "resnet_block": _case([1, 56, 56, 16], 32, ", bias: true, residual: shortcut, activation: relu",
                          side_inputs="{shortcut: {shape: [1, 56, 56, 32]}}"),
    # odd height and width (the last tiles' second row and column past the edge), batch 2, relu6
    "odd_edges_batch2_relu6": _case([2, 7, 9, 32], 64, ", bias: true, activation: relu6"),
    # no epilogue at all; 3 x 3 tiles (9: register blocks of 3 and the rest one at a time where 14 or 6 do not fit)
    "bare": _case([1, 6, 6, 16], 32),
    # a filter whose transform (1.25 MiB) is made a panel of 2 output-channel vectors at a time
    "panels_of_a_large_filter": _case([1, 6, 6, 128], 160, ", bias: true"),
}


def _job(name: str, c_options: str | None = None):
    case = CASES[name] if c_options is None else CASES[name].with_block("c", c_options)
    config = make_config(name, case)
    return config, jobs(config, ("c",))["c"]


def _on_threads(config, job, folder, counts):
    """The kernel's output on the same random tensors with each team size in `counts` (<kernel>_set_threads)."""
    exe = C().compile(job, folder)
    args = random_inputs(config, job.plan, np.random.default_rng(29))
    outputs = []
    for threads in counts:
        ctypes.CDLL(str(exe.library.path))[f"{job.plan.name}_set_threads"](threads)
        arrays = exe.arguments(args, 0x7F)
        exe.call(arrays)
        outputs.append(arrays[-2].copy())
    return outputs


def test_the_cut_and_workspace_of_a_resnet_block():
    _, job = _job("resnet_block")
    text = job.files["resnet_block.c"]
    note = next(n for n in job.target_plan.notes if "Winograd" in n)
    assert note == ("conv2d #1: Winograd F(2x2, 3x3): 28 x 28 tiles of 2x2 outputs in blocks of 168, 16 products over "
                    "the input channels each; the filter transformed each call, whole, at its start")
    # V 16 x 168 x 16 floats, U 16 x 16 x 32, a panel's M 16 x 168 x 32 (a row of tiles' V and M: 86,016 bytes, 6
    # in 512 KiB; the whole image's 2.4 MB past 1 MiB)
    assert job.target_plan.workspace_elements == 16 * 168 * 16 + 16 * 16 * 32 + 16 * 168 * 32
    assert "#define KG_WR 14" in text and "#define KG_WR 6" in text
    assert "const int nt = (ty0 + 6 <= 28 ? 6 : 28 - ty0) * 28;" in text
    assert "v = KG_WADD(v, KG_WLOAD(side_shortcut + at));" in text and "v = KG_WMAX(v, KG_WSPLAT(0.0f));" in text
    assert "v = KG_WMIN(" not in text  # relu: no upper clamp
    assert job.target_plan.threads == 1 and "#pragma omp" not in text  # one thread: no team


@pytest.mark.parametrize("change, why", [
    ("{out_channels: 32, kernel: 3, stride: 2, pad: 1, filter_layout: OHWI16o}", "not a 3x3 conv of stride 1"),
    ("{out_channels: 32, kernel: 3, pad: 1}", "its filter is not OHWI16o"),
    ("{out_channels: 48, kernel: 3, pad: 1, filter_layout: OHWI16o}", "channels not multiples"),
    ("{out_channels: 32, kernel: 3, pad: 1, filter_layout: OHWI16o, activation: hardswish}", "is not a clamp"),
    ("{out_channels: 512, kernel: 3, pad: 1, filter_layout: OHWI16o}", "its filter is past 4 MiB"),  # 512 x 512
    ("{out_channels: 32, kernel: 3, pad: 1, filter_layout: OHWI16o, residual: input}", "not a side input"),
])
def test_what_keeps_the_direct_kernel(change, why):
    channels = 512 if "512" in change else 32 if "residual" in change else 16
    config = make_config("direct", Case([1, 8, 8, channels], [change], "NHWC", "NHWC", "auto", targets="[c]"))
    job = jobs(config, ("c",))["c"]
    assert why in winograd_fits(job.plan)
    assert not any("Winograd" in n for n in job.target_plan.notes)


def test_a_large_filter_is_transformed_a_panel_at_a_time():
    _, job = _job("panels_of_a_large_filter")
    assert any(n.endswith("a panel of 2 output-channel vectors at a time") for n in job.target_plan.notes)
    # V 16 x 9 x 128, then the thread's panel: U 16 x 2 x 128 x 16 and M 16 x 9 x 32
    assert job.target_plan.workspace_elements == 16 * 9 * 128 + 16 * 2 * 16 * (128 + 9)
    assert "wf + " not in job.files["panels_of_a_large_filter.c"]


@requires_tool(*toolchain("c"))
def test_a_team_splits_a_large_filters_tiles_then_its_panels(tmp_path):
    """Transformed a panel at a time, the filter is split by panels (each thread its own U and M), after the input
    tiles are split; 2 threads give the 1-thread bytes."""
    config, job = _job("panels_of_a_large_filter", "{threads: 2}")
    text = job.files["panels_of_a_large_filter.c"]
    assert text.count("#pragma omp for ") == 2 and "const int t_lo = 0, t_hi = nt;" in text
    assert np.array_equal(*_on_threads(config, job, tmp_path, (2, 1)))
    result = validate(config, "c")
    assert result.passed, f"{result.detail} (seed {result.seed})"


def test_the_option_keeps_the_direct_kernel():
    _, off = _job("resnet_block", "{winograd: false}")
    assert not any("Winograd" in n for n in off.target_plan.notes) and "KG_WR" not in off.files["resnet_block.c"]


@requires_tool(*toolchain("c"))
def test_two_threads_share_the_tiles_and_products_and_give_one_threads_bytes(tmp_path):
    """One team a call: an `omp for` over the panels' filters (transformed whole at the start), then each thread its
    own share of each block's tiles, from their input patches to their outputs (its own M; every element written by
    one thread); numpy agrees, and 2 threads give the 1-thread output bit for bit."""
    config, job = _job("odd_edges_batch2_relu6", "{threads: 2}")
    text = job.files["odd_edges_batch2_relu6.c"]
    assert text.count("#pragma omp parallel num_threads(kg_team)") == 1 and text.count("#pragma omp for ") == 1
    assert job.target_plan.threads == 2 and "kg_team_end(kg_team, kg_start);" in text
    assert "const int t_lo = nt * me / share, t_hi = nt * (me + 1) / share;" in text
    # V 16 x 20 tiles x 32, U 16 x 32 x 64, then each thread's M 16 x 20 x 32
    assert job.target_plan.workspace_elements == 16 * 20 * 32 + 16 * 32 * 64 + 2 * 16 * 20 * 32
    result = validate(config, "c")
    assert result.passed, f"{result.detail} (seed {result.seed})"
    assert np.array_equal(*_on_threads(config, job, tmp_path, (2, 1)))


@requires_tool(*toolchain("c"))
@pytest.mark.parametrize("name", sorted(CASES))
def test_winograd_matches_numpy_and_every_vector_width_bit_for_bit(name, tmp_path):
    config, job = _job(name)
    assert any("Winograd" in n for n in job.target_plan.notes)
    result = validate(config, "c")
    assert result.passed, f"{result.detail} (seed {result.seed})"
    exe = C().compile(job, tmp_path)
    args = random_inputs(config, job.plan, np.random.default_rng(23))
    outputs = []
    for k, flags in enumerate(((), ("-mno-avx512f",), ("-DKG_SCALAR",))):
        library = Library(build_shared([tmp_path / f"{name}.c"], tmp_path / f"lib{k}.so", flags=(*exe.flags, *flags)))
        arrays = exe.arguments(args, 0xFF)
        library.call(name, arrays)
        outputs.append(arrays[-2].copy())
    assert np.isfinite(outputs[0]).all() and outputs[0].any()
    assert np.array_equal(outputs[0], outputs[1])  # 16- and 8-float vectors: the same sums in the same order
    # the scalar struct's lane loops, which gcc vectorizes its own way, fuse other products into FMAs: a few units in
    # the last place of the largest output (here at most 2 at 2^-23 relative)
    assert np.abs(outputs[2] - outputs[0]).max() <= 4 * 2.0 ** -23 * np.abs(outputs[0]).max()
