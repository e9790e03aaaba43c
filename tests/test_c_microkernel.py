"""The c target's register-blocked micro-kernels (issue 30): taken for the convs they fit, checked in the emitted C,
and matching numpy on shapes at and around the tile: channels below, at and above the vector width and the
k_block, widths that are and are not multiples of the pixel block, batch 2, stride, dilation, padding, chains
with residuals and hard gates, every stripe schedule (chunks, ring, pipeline, rows_outer), OpenMP threads, and the
scalar fallback of the vector macros (-DKG_SCALAR). No timings here: benchmarks/c_speed.py measures speed."""
from __future__ import annotations

import ctypes
import re

import numpy as np
import pytest
from click.testing import CliRunner
from builders import Case, config_text, make_config, toolchain, with_quick
from conftest import requires_tool

from kernelgen.api import jobs, validate
from kernelgen.cli import main
from kernelgen.measure.compare import compare
from kernelgen.measure.tensors import random_inputs
from kernelgen.targets.c import C
from kernelgen.targets.c.microkernel import column_step
from kernelgen.targets.c.toolchain import Library, build_shared
from kernelgen.targets.c import team

# name: (input shape, ops, input layout, output layout, schedule, micro-kernel per op: dense / depthwise / None[,
# targets: "[c]" unless given]). An NCHW config whose targets are all c gets channels-innermost caches (depthwise
# channel vectors); with another target beside c its caches keep NCHW (depthwise pixel vectors, "columns").
BESIDE_OPENCL = "[c, opencl]"
CASES = {name: Case(*row[:5], targets=row[6] if len(row) > 6 else "[c]", expect=row[5]) for name, row in {
    "dense_3x3_width13_k16": ([1, 9, 13, 16], ["{out_channels: 16, kernel: 3, pad: 1}"], "NHWC", "NHWC",
                              "{k_block: 16}", ["dense"]),
    "dense_channels_5_to_13_k8": ([1, 7, 11, 5], ["{out_channels: 13, kernel: 3, stride: 2, pad: 1}"], "NHWC", "NHWC",
                                  "{k_block: 8}", ["dense"]),
    "dense_1x1_batch2_blocked_tail": ([2, 6, 14, 40], ["{out_channels: 72, kernel: 1, bias: true, activation: relu6}"],
                                      "nhwc-8h8w32c", "nhwc-8h8w32c", "{k_split: 2}", ["dense"]),
    "dense_dilation2_nchw_w_split": ([1, 12, 17, 9], ["{out_channels: 24, kernel: 3, dilation: 2, pad: 2}"], "NCHW",
                                     "NCHW", "{k_block: 8, w_block: 5, w_split: 1, h_block: 4}", ["dense"]),
    "depthwise_24_stride2_width13": ([1, 11, 13, 24], ["{out_channels: 24, kernel: 3, stride: 2, pad: 1, groups: 24, "
                                                       "bias: true, activation: relu6}"], "NHWC", "NHWC",
                                     "{k_block: 8}", ["depthwise"]),
    # 40 channels in stripes of 32: the second stripe's last three vectors have no source channels
    "depthwise_40_blocked_tail_vectors": ([2, 9, 10, 40], ["{out_channels: 40, kernel: 3, pad: 1, groups: 40}"],
                                          "nhwc-8h8w32c", "nhwc-8h8w32c", "{}", ["depthwise"]),
    # op 1 reads the input itself (no input cache): batch 2, column stripes, stride 2 with uneven padding
    "depthwise_direct_batch2_w_split": ([2, 10, 13, 16], ["{out_channels: 16, kernel: 3, stride: 2, pad: [0, 1, 1, 2], "
                                                          "groups: 16, bias: true}"], "NHWC", "NHWC",
                                        "{k_block: 8, h_block: 2, w_block: 3, w_split: 1}", ["depthwise"]),
    # stride 1, one stripe of 48 channels (three lines a pixel), and of 40 (the third line half used): a row narrower
    # than the prefetch distance (every prefetch falls past it) and one wider (tiles prefetch, the last ones not)
    "depthwise_direct_width3": ([1, 5, 3, 48], ["{out_channels: 48, kernel: 3, pad: 1, groups: 48, bias: true}"],
                                "NHWC", "NHWC", "{k_block: 48}", ["depthwise"]),
    "depthwise_direct_width21": ([1, 6, 21, 40], ["{out_channels: 40, kernel: 3, pad: 1, groups: 40, bias: true, "
                                                  "activation: relu6}"], "NHWC", "NHWC", "{k_block: 40}", ["depthwise"]),
    "depthwise_5x5_dilated": ([1, 14, 15, 16], ["{out_channels: 16, kernel: 5, dilation: 2, pad: 4, groups: 16}"],
                              "NHWC", "NHWC", "{k_block: 16, h_block: 4}", ["depthwise"]),
    "inverted_residual_hardswish_chain": ([1, 10, 11, 16], ["{out_channels: 48, kernel: 1, bias: true, "
                                                            "activation: hardswish}",
                                                            "{out_channels: 48, kernel: 3, pad: 1, groups: 48, bias: "
                                                            "true, activation: hardsigmoid}",
                                                            "{out_channels: 16, kernel: 1, bias: true, residual: input}"],
                                          "NHWC", "NHWC", "{k_block: 16, h_block: 3}", ["dense", "depthwise", "dense"]),
    # a 5x5 depthwise over a cache, 7 columns (MobileNetV3-small's last blocks): tiles of 3 pixels x 4 channel
    # vectors, in 16-float pairs where the compiler targets AVX-512F
    "depthwise_5x5_cached_width7": ([1, 7, 7, 16], ["{out_channels: 64, kernel: 1, bias: true, activation: hardswish}",
                                                    "{out_channels: 64, kernel: 5, pad: 2, groups: 64, bias: true, "
                                                    "activation: hardswish}"],
                                    "NHWC", "NHWC", "{k_block: 32}", ["dense", "depthwise"]),
    "chain_through_maxpool": ([1, 12, 12, 8], ["{out_channels: 16, kernel: 3, pad: 1, activation: relu}",
                                               "maxpool: {kernel: 2, stride: 2}",
                                               "{out_channels: 16, kernel: 3, pad: 1, bias: true}"],
                              "NHWC", "NHWC", "{k_block: 8}", ["dense", None, "dense"]),
    "c_split_chunks_partial_sums": ([1, 9, 10, 64], ["{out_channels: 24, kernel: 3, pad: 1, bias: true, "
                                                     "activation: relu}"], "NHWC", "NHWC",
                                    "{k_block: 8, h_block: 4, c_split: 4}", ["dense"]),
    "halo_reuse_chain": ([1, 14, 9, 8], ["{out_channels: 8, kernel: 3, pad: 1, activation: relu}",
                                         "{out_channels: 16, kernel: 3, pad: 1}"], "NHWC", "NHWC",
                         "{k_block: 8, h_block: 2, h_split: 2, halo: reuse}", ["dense", "dense"]),
    # the ring with one channel stripe: 11 row stripes, which two threads share as 4 runs (ring_runs_split_rows)
    "halo_ring_rows_only_nchw": ([1, 21, 9, 8], ["{out_channels: 16, kernel: 3, pad: 1, activation: relu}",
                                                 "{out_channels: 16, kernel: 3, pad: 1}"], "NCHW", "NCHW",
                                 "{k_block: 16, h_block: 2, halo: reuse}", ["dense", "dense"]),
    "double_buffer_w_split": ([1, 12, 16, 8], ["{out_channels: 16, kernel: 3, pad: 1, bias: true}"], "NHWC", "NHWC",
                              "{k_block: 8, h_block: 4, w_block: 4, w_split: 2, pipeline: double_buffer}", ["dense"]),
    "rows_outer_chain": ([1, 10, 10, 16], ["{out_channels: 24, kernel: 1, activation: relu}",
                                           "{out_channels: 32, kernel: 3, pad: 1}"], "NHWC", "NHWC",
                         "{k_block: 8, order: rows_outer}", ["dense", "dense"]),
    "depthwise_nchw_pixel_vectors_chain": ([2, 13, 19, 24], ["{out_channels: 24, kernel: 3, pad: 1, groups: 24, bias: "
                                                             "true, activation: relu6}",
                                                             "{out_channels: 24, kernel: 3, stride: 2, pad: 1, groups: 24}",
                                                             "{out_channels: 24, kernel: 3, dilation: 2, pad: 2, "
                                                             "groups: 24}"], "NCHW", "NCHW",
                                           "{k_block: 8, h_block: 2}", ["columns", "columns", "columns"],
                                           BESIDE_OPENCL),
    # the same chain for c alone: NHWC caches, so channel vectors; the input read and the write-back transpose
    "depthwise_nchw_channels_last_caches_chain": ([2, 13, 19, 24], ["{out_channels: 24, kernel: 3, pad: 1, groups: 24, "
                                                                    "bias: true, activation: relu6}",
                                                                    "{out_channels: 24, kernel: 3, stride: 2, pad: 1, "
                                                                    "groups: 24}",
                                                                    "{out_channels: 24, kernel: 3, dilation: 2, pad: 2, "
                                                                    "groups: 24}"], "NCHW", "NCHW",
                                                  "{k_block: 8, h_block: 2}", ["depthwise", "depthwise", "depthwise"]),
    # a pool ends the chain: its NHWC output cache goes back to the NCHW output in 8 x 8 blocks (writeback.py), 12
    # channels a stripe (a vector and 4 more), 10 columns (a block and 2 more)
    "nchw_chain_ending_in_maxpool": ([1, 12, 21, 12], ["{out_channels: 24, kernel: 3, pad: 1, bias: true, activation: "
                                                       "relu}", "maxpool: {kernel: 2, stride: 2}"], "NCHW", "NCHW",
                                     "{k_block: 12}", ["dense", None]),
    # MobileNetV2's features.4 as imported: schedule auto picks h_block 2 and rows_outer, which the c target's
    # geometry must follow (the stride-2 depthwise's window, then the 1x1 writing the output directly)
    "imported_mobilenet_block_schedule_auto": ([1, 56, 56, 144], ["{out_channels: 144, kernel: 3, stride: 2, pad: 1, "
                                                                  "groups: 144, bias: true, activation: relu6}",
                                                                  "{out_channels: 32, kernel: 1, bias: true}"],
                                               "NCHW", "NCHW", "auto", ["depthwise", "dense"]),
    # a k_block of 4 (schedule: auto fits one under rows_outer when a chain's filters are wide): half vectors
    "dense_k_block_4_half_vectors_chain": ([1, 9, 11, 12], ["{out_channels: 20, kernel: 1, bias: true, activation: "
                                                            "relu6}", "{out_channels: 20, kernel: 3, pad: 1, groups: 20}",
                                                            "{out_channels: 6, kernel: 3, stride: 2, pad: 1}"],
                                           "NCHW", "NCHW", "{k_block: 4, order: rows_outer}",
                                           ["dense", "columns", "dense"], BESIDE_OPENCL),
    # a classifier tail as imported (NCHW, batch 2): after the pool, 1x1 convs on one pixel are dot products, the last
    # with 40 channels in blocks of 16 (its third block's last 8 filter rows read as zeros)
    "dot_products_after_global_pool": ([2, 3, 4, 24], ["{out_channels: 48, kernel: 1, bias: true, activation: relu6}",
                                                       "global_avgpool: {}",
                                                       "{out_channels: 64, kernel: 1, bias: true, activation: "
                                                       "hardswish}", "{out_channels: 40, kernel: 1, bias: true}"],
                                       "NCHW", "NCHW", "{k_block: 16}", ["dense", None, "dot", "dot"]),
    # a classifier of 36 outputs: its last block of 8 filter rows ends past the tensor, so it keeps the filter cache
    "dot_products_copy_a_partial_row_block": ([1, 2, 2, 16], ["global_avgpool: {}",
                                                              "{out_channels: 36, kernel: 1, bias: true}"],
                                              "NCHW", "NCHW", "{k_block: 16}", [None, "dot"]),
    # a filter in the tiles' order (IN_PLACE_FILTER, as `kernelgen import` names it): read in place, no filter cache
    # copy; NCHW as imported, 2 channel stripes of 32 (two 16-channel blocks a tile), 2 input-channel chunks
    "dense_filter_in_place_chunks": ([1, 7, 7, 64], ["{out_channels: 64, kernel: 3, pad: 1, filter_layout: OHWI16o, "
                                                     "bias: true, activation: relu}"], "NCHW", "NCHW",
                                     "{k_block: 32, c_split: 2}", ["dense"]),
    # ... and in a chain, op 2 of 48 channels: its stripes of 32 reach channel 64, past the tensor's 3 blocks, so
    # it copies the filter cache as ever (op 1's 32 channels read in place)
    "dense_filter_in_place_chain_tail_copies": ([1, 8, 9, 16], ["{out_channels: 32, kernel: 1, filter_layout: "
                                                                "OHWI16o, activation: relu}",
                                                                "{out_channels: 48, kernel: 3, pad: 1, filter_layout: "
                                                                "OHWI16o}"], "NHWC", "NHWC", "{k_block: 32}",
                                                ["dense", "dense"]),
    # MobileNetV2's features_3 in small: 48 channels in stripes of 32 (the second half past them): each 1x1's last
    # block stores its 16 channels in a loop of 16, without a test per channel
    "inverted_residual_partial_blocks": ([1, 9, 10, 24], ["{out_channels: 48, kernel: 1, filter_layout: OHWI16o, "
                                                          "bias: true, activation: relu6}",
                                                          "{out_channels: 48, kernel: 3, pad: 1, groups: 48, bias: "
                                                          "true, activation: relu6}",
                                                          "{out_channels: 24, kernel: 1, bias: true, residual: input}"],
                                         "NHWC", "NHWC", "{k_block: 32}", ["dense", "depthwise", "dense"]),
    # op 1's 20 channels in a stripe of 3 blocks of 8: the third block's 4 channels stored in a loop of 4
    "dense_block_tail_in_a_stripe": ([1, 6, 7, 16], ["{out_channels: 20, kernel: 1, bias: true}",
                                                     "{out_channels: 24, kernel: 1}"], "NHWC", "NHWC",
                                     "{k_block: 8, k_split: 3}", ["dense", "dense"]),
    # a pool alone on NCHW (ResNet18's maxpool as imported): no micro-kernel, but the input read and the write-back
    # transpose in 8 x 8 blocks (the vector macros), as around the convs' tiles
    "nchw_maxpool_alone_blocked_copies": ([1, 16, 21, 16], ["maxpool: {kernel: 3, stride: 2, pad: 1}"], "NCHW",
                                          "NCHW", "{k_block: 16}", [None]),
    # a pool alone on NHWC (ResNet18's maxpool as imported now): its windows read from the input in place, no caches;
    # 80 channels in blocks of 64 and 16, batch 2, a 3x2 window with stride 2x3 and padding on three sides
    "nhwc_maxpool_alone_in_place": ([2, 9, 11, 80], ["maxpool: {kernel: [3, 2], stride: [2, 3], pad: [1, 1, 0, 1]}"],
                                    "NHWC", "NHWC", "{k_block: 16}", [None]),
    # ResNeXt's block, groups of 4 in a lane-group tile (each lane shuffled its group's inputs), over NCHW tensors
    "grouped_lane_groups_nchw_chain": ([1, 9, 11, 16], ["{out_channels: 32, kernel: 1, bias: true, activation: relu}",
                                                        "{out_channels: 32, kernel: 3, pad: 1, groups: 8, bias: true}",
                                                        "{out_channels: 16, kernel: 1}"], "NCHW", "NCHW",
                                       "{k_block: 16}", ["dense", "dense", "dense"]),
    # where it does not fit: a k_block below the vector width, a grouped conv, channels no vector width divides,
    # an index map mixing h and w in one axis
    "k_block_2_falls_back": ([1, 8, 8, 8], ["{out_channels: 8, kernel: 3, pad: 1}"], "NHWC", "NHWC", "{k_block: 2}",
                             [None]),
    # groups of 3 keep the planner's loops; the depthwise over 12 channels takes channel vectors, its second one
    # short (lanes 12..15 read the next pixel, never stored)
    "grouped_and_odd_depthwise_fall_back": ([1, 8, 9, 12], ["{out_channels: 12, kernel: 3, pad: 1, groups: 4}",
                                                            "{out_channels: 12, kernel: 3, pad: 1, groups: 12}"],
                                            "NHWC", "NHWC", "{k_block: 8}", [None, "depthwise"]),
    "mixed_axis_map_falls_back": ([1, 6, 7, 8], ["{out_channels: 8, kernel: 3, pad: 1}"],
                                  '"n, h, w, c -> n, h, w // 2, c * 2 + w % 2"', "NHWC", "{k_block: 8}", [None]),
}.items()}


def _job(name: str, c_options: str | None = None):
    """The case's config (with `c_options` as its c: block) and its c job."""
    case = CASES[name] if c_options is None else CASES[name].with_block("c", c_options)
    config = make_config(name, case)
    return config, jobs(config, ("c",))["c"]


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_micro_kernel_is_taken_where_it_fits(name):
    _, job = _job(name)
    kinds = [None if t is None else "columns" if t.columns else "depthwise" if t.depthwise else "dot" if t.dot
             else "dense" for t in job.target_plan.tiles]
    assert kinds == CASES[name].expect
    text = job.files[f"{name}.c"]
    ops = len(kinds)
    for j, kind in enumerate(kinds, start=1):
        label = f"{job.plan.ops[j - 1].kind} #{j}{'' if j == ops else ' into '}"
        sections = [line for line in text.splitlines() if line.lstrip().startswith(f"/* {label}") and line[0] == " "]
        assert len(sections) == 1, sections
        assert ("register-blocked micro-kernel" in sections[0]) == (kind is not None)
    if "dense" in kinds:
        fma = "KG_FMA4" if any(t is not None and t.lanes == 4 for t in job.target_plan.tiles) else "KG_FMA"
        assert f"{fma}(a0_0, x0[ch], w0);" in text
    if name == "dense_3x3_width13_k16":  # the repack's output-channel loop innermost: consecutive stores
        assert re.search(r"for \(int fw = 0; fw < 3; \+\+fw\) \{\n\s*for \(int fk = 0; fk < 16; \+\+fk\) \{\n\s*"
                         r"filter_cache\[\(fk / 16\) \* 2304 \+ \(\(fh \* 3 \+ fw\) \* 16 \+ fc\) \* 16 \+ fk % 16\] = ", text)
    if "depthwise" in kinds:
        assert "KG_FMAV(a0_0, KG_LOAD(x0_0 + 0), KG_LOAD(w0 + 0));" in text  # pixel by pixel, channel vectors
    if "columns" in kinds:
        assert "KG_FMA(a0, w0_0, KG_" in text  # a filter tap broadcast against a vector of pixels
    if name == "dot_products_after_global_pool":  # a vector of input channels against a filter row's, in place
        assert "KG_FMAV(a7, KG_LOAD(wk + 448 + rv * 8), xv);" in text and "filter_cache[fk * " not in text
        assert "const float *const wk = filter3 + (((ko_outer_3*16)+(ko_inner*16)+(kv*8))) * 48;" in text
        # 40 rows in blocks of 16: the last block's second 8 rows lie past the tensor and are not read
        assert "if (((ko_outer*16)+(ko_inner*16)+(kv*8)) < 40) {" in text
        assert "const float *const wk = filter4 + (((ko_outer*16)+(ko_inner*16)+(kv*8))) * 64;" in text
    if name == "dot_products_copy_a_partial_row_block":  # the filter cache as read, zeros past the 36 rows
        assert "filter_cache[fk * 16 + fc] = " in text and "const float *const wk = filter_cache + " in text
    if name == "dense_filter_in_place_chunks":  # blocks of 16 channels 9 x 64 x 16 apart, chunks of 32 channels
        # the plan keeps no filter cache (geometry.filter_in_place), so the kernel names none
        assert "filter_cache" not in text and "filter" not in [c.name for c in job.plan.caches]
        assert "const float *const wk = filter1 + ko_outer * 18432 + ko_inner * 18432 + ci_outer * 512 + kv * 9216;" \
            in text  # the 8-float tile: one block a kv step
        assert "kv * 18432;" in text and "wt + rc * 16 + 9216" in text  # the 16-float tile: two blocks, 9216 apart
        assert "const float *const wt = wk + (rh * 3 + rw) * 1024;" in text  # a tap: all 64 input channels on
    if name == "inverted_residual_partial_blocks":  # op 3's 24 channels in a block of 32: a loop of 24
        assert "KG_LIKELY(!(((ko_outer_1*32)+(ko_inner*32)+31) < 48) && ((ko_outer_1*32)+(ko_inner*32)+0) < 48)" in text
        assert "for (int ki = 0; ki < 16; ++ki) {" in text and "for (int ki = 0; ki < 24; ++ki) {" in text
        assert "if (((ko_outer_1*32)+(ko_inner*32)+ki) < 48)" not in text and "+ki) < 24)" not in text
    if name == "dense_block_tail_in_a_stripe":
        assert "&& ((ko_outer_1*24)+(ko_inner*8)+0) < 20)" in text and "for (int ki = 0; ki < 4; ++ki) {" in text
    if name == "dense_filter_in_place_chain_tail_copies":
        assert "filter_cache[" in text and "const float *const wk = filter1 + ko_outer_1 * 512" in text
        assert "const float *const wk = filter_cache + " in text
    if name == "nhwc_maxpool_alone_in_place":  # windows clamped to the input: no caches, no test per tap
        assert "_cache" not in text and "(void)workspace; /* the pool reads and writes in place */" in text
        assert "const int h1 = oh * 2 - 1 + 3 < 9 ? oh * 2 - 1 + 3 : 9;" in text
        assert "const int w0 = ow * 3 - 1 > 0 ? ow * 3 - 1 : 0;" in text
        assert "const int kn = (cb * 64 + 64 <= 80 ? 64 : 16);" in text and "cb < 2; ++cb" in text
    planner_convs = [k for k, op in zip(kinds, job.plan.ops) if k is None and op.kind == "conv2d"]
    assert ("acc[ki] += x * filter_cache" in text) == bool(planner_convs)  # the planner's scalar reduction
    blocked = name in ("nchw_maxpool_alone_blocked_copies",)  # 8 x 8 transposes, no tile
    assert ("#define KG_FMA" in text) == (any(kinds) or blocked)
    if blocked:
        assert "8 x 8 blocks of channel planes transposed into pixels" in text and "KG_SET(" in text


@requires_tool(*toolchain("c"))
@pytest.mark.parametrize("name", with_quick(sorted(CASES), "inverted_residual_hardswish_chain"))
def test_micro_kernels_match_numpy(name):
    config, _ = _job(name)
    result = validate(config, "c")
    assert result.passed, f"{result.detail} (seed {result.seed})"


SHARED_OUT = re.compile(r"#pragma omp for( collapse\((\d)\))? schedule\((static|dynamic)\)\n")


@requires_tool(*toolchain("c"))
def test_threads_share_out_whole_stripes_each_on_its_own_caches(tmp_path, monkeypatch):
    """4 row stripes, 2 threads: one region, one `omp for` over the stripe loops (ko_outer of 1 and ho_outer
    collapsed), no barrier or master block inside, each thread's caches at workspace + its index x one thread's
    workspace, and a workspace of two such copies."""
    monkeypatch.setattr(team, "MIN_WORK_PER_BARRIER", 0)  # a small kernel: a team whatever it costs
    name = "inverted_residual_hardswish_chain"
    config, job = _job(name, "{threads: 2}")
    text, header = job.files[f"{name}.c"], job.files[f"{name}.h"]
    assert text.count("#pragma omp parallel num_threads(kg_team)") == 1
    assert [m.group(0) for m in SHARED_OUT.finditer(text)] == ["#pragma omp for collapse(2) schedule(dynamic)\n"]
    assert "omp barrier" not in text and "omp master" not in text
    assert job.plan.workspace_elements == 7680 and job.target_plan.thread_elements == 7680  # 2048-byte multiple
    assert "float *const thread_workspace = workspace + (size_t)KG_THREAD * 7680;" in text
    assert "float *const input_cache = thread_workspace + 0;" in text
    assert f"#define {name.upper()}_WORKSPACE_ELEMENTS 15360\n" in header
    assert "kg_threads = threads > 0 && threads < 2 ? threads : 2;" in text  # never more than the workspace holds
    assert any("4 stripes shared out" in n for n in job.target_plan.notes)
    result = validate(config, "c")
    assert result.passed, f"{result.detail} (seed {result.seed})"


@requires_tool(*toolchain("c"))
def test_set_threads_gives_a_kernel_no_more_threads_than_its_workspace_holds(tmp_path, monkeypatch):
    """<kernel>_set_threads(8) on a kernel built for 2: its workspace holds 2 threads' caches, and the floats past
    it stay untouched (8 threads on 4 stripes would write a third and fourth copy); the output is the 2-thread
    one, bit for bit (each stripe is one thread's either way)."""
    monkeypatch.setattr(team, "MIN_WORK_PER_BARRIER", 0)
    name = "inverted_residual_hardswish_chain"
    config, job = _job(name, "{threads: 2}")
    exe = C().compile(job, tmp_path)
    args = random_inputs(config, job.plan, np.random.default_rng(5))
    outputs = []
    for threads in (2, 8):
        ctypes.CDLL(str(exe.library.path))[f"{name}_set_threads"](threads)  # the library exe.call runs
        arrays = exe.arguments(args, 0x7F)
        spare = np.full(3 * arrays[-1].size, -7.0, np.float32)
        spare[:arrays[-1].size] = arrays[-1]
        exe.call([*arrays[:-1], spare])
        assert (spare[arrays[-1].size:] == -7.0).all()
        outputs.append(arrays[-2].copy())
    assert np.array_equal(outputs[0], outputs[1])


@requires_tool(*toolchain("c"))
def test_openmp_threads_split_the_rows_where_fewer_stripes_than_threads_and_match_numpy(tmp_path, monkeypatch):
    """5 threads, 4 stripes: the row split (team.py), the caches shared, the workspace the plan's."""
    monkeypatch.setattr(team, "MIN_WORK_PER_BARRIER", 0)
    config, job = _job("inverted_residual_hardswish_chain", "{threads: 5}")
    text = job.files["inverted_residual_hardswish_chain.c"]
    # one team per call (team.py), not a region per row loop: the three convs' row loops are split inside it
    assert text.count("#pragma omp parallel") == 1 and "num_threads(kg_team)" in text
    assert text.count("#pragma omp for schedule(static)") == 3 and "thread_workspace" not in text
    assert job.target_plan.workspace_elements == job.plan.workspace_elements and not job.target_plan.thread_elements
    assert "static int kg_threads = 5;" in text and "void inverted_residual_hardswish_chain_set_threads(int threads);" \
        in job.files["inverted_residual_hardswish_chain.h"]
    assert "-fopenmp" in C().compile(job, tmp_path).flags
    result = validate(config, "c")
    assert result.passed, f"{result.detail} (seed {result.seed})"


# each stripe schedule with one team per call, and the stripes its threads share out (0: the row split, team.py):
# partial sums over chunks (3 channel x 3 row stripes), a halo ring (the 2 channel stripes; the rows it carries
# stay whole), a double buffer (each stripe loads the next: rows), rows outer (2 row stripes, the last conv's 4
# channel blocks inside each), a pool between convs, a first conv reading the input itself (batch 2 x 2 x 3 x 3),
# the planner's own loops (no micro-kernel: 4 channel stripes), an NCHW input read and output written back through
# channels-innermost caches (each thread transposes its own stripes)
TEAM_SCHEDULES = {"c_split_chunks_partial_sums": 9, "halo_reuse_chain": 2, "double_buffer_w_split": 0,
                  "rows_outer_chain": 2, "chain_through_maxpool": 2, "depthwise_direct_batch2_w_split": 36,
                  "k_block_2_falls_back": 4, "nchw_chain_ending_in_maxpool": 2}


@requires_tool(*toolchain("c"))
@pytest.mark.slow
@pytest.mark.parametrize("name", TEAM_SCHEDULES)
def test_one_team_per_call_matches_numpy_on_every_stripe_schedule(name, monkeypatch):
    monkeypatch.setattr(team, "MIN_WORK_PER_BARRIER", 0)
    config, job = _job(name, "{threads: 2}")
    text = job.files[f"{name}.c"]
    stripes = TEAM_SCHEDULES[name]
    shared = SHARED_OUT.findall(text)
    assert text.count("#pragma omp parallel") == 1 and (len(shared) == 1 if stripes else len(shared) >= 1)
    assert (f"{stripes} stripes shared out" in " ".join(job.target_plan.notes)) == bool(stripes)
    assert ("omp barrier" in text) != bool(stripes)
    result = validate(config, "c")
    assert result.passed, f"{result.detail} (seed {result.seed})"


@requires_tool(*toolchain("c"))
def test_threads_share_runs_of_ring_row_stripes_each_starting_its_own_ring(tmp_path, monkeypatch):
    """A halo ring over 11 row stripes and one channel stripe, 2 threads: the row stripes in 4 runs (2 a thread,
    11 * r / 4 apart: 2, 3, 3, 3 stripes), handed out one at a time; each run's first stripe loads the rows the ring
    keeps (as stripe 0 does), the others only their new rows. The output matches numpy, and the 2-thread output is
    the 1-thread one bit for bit (every stripe is computed the same way whichever thread runs it)."""
    monkeypatch.setattr(team, "MIN_WORK_PER_BARRIER", 0)
    name = "halo_ring_rows_only_nchw"
    config, job = _job(name, "{threads: 2}")
    text = job.files[f"{name}.c"]
    assert job.plan.geometry.stripes.ho_extent == 11 and job.plan.geometry.stripes.ko_extent == 1
    assert [m.group(0) for m in SHARED_OUT.finditer(text)] == ["#pragma omp for collapse(2) schedule(dynamic)\n"]
    assert "const int ho_first = ho_run * 11 / 4;" in text and "const int ho_end = (ho_run + 1) * 11 / 4;" in text
    assert "for (int ko_outer = 0; ko_outer < 1; ++ko_outer)" in text  # collapsed with the runs
    assert "for (int ho_step = 0; ho_step < 3; ++ho_step)" in text and "if (ho_outer < ho_end) {" in text
    assert "if (ho_outer == ho_first) {" in text and "ho_outer == 0" not in text
    assert "omp barrier" not in text and "omp master" not in text
    assert any("4 runs of ring row stripes shared out" in n for n in job.target_plan.notes)
    result = validate(config, "c")
    assert result.passed, f"{result.detail} (seed {result.seed})"
    exe = C().compile(job, tmp_path)
    args = random_inputs(config, job.plan, np.random.default_rng(11))
    outputs = []
    for threads in (1, 2):
        ctypes.CDLL(str(exe.library.path))[f"{name}_set_threads"](threads)
        arrays = exe.arguments(args, 0x7F)
        exe.call(arrays)
        outputs.append(arrays[-2].copy())
    assert np.array_equal(outputs[0], outputs[1])


def test_a_kernel_with_little_work_between_barriers_runs_one_thread():
    """Below MIN_WORK_PER_BARRIER FLOPs per meeting of the threads, no team: the row loops are plain, no setter,
    and a note says why (a barrier costs about as much CPU as such a kernel computes between two)."""
    config, job = _job("double_buffer_w_split", "{threads: 2}")  # 9,027 FLOPs between 49 barriers
    text = job.files["double_buffer_w_split.c"]
    assert "#pragma omp" not in text and "kg_threads" not in text and job.target_plan.threads == 1
    assert any(n.startswith("one thread: ") and "barriers a team would meet" in n for n in job.target_plan.notes)


@requires_tool(*toolchain("c"))
def test_cflags_replace_the_default_flags(tmp_path):
    config, job = _job("dense_3x3_width13_k16", "{cflags: [-O1, -fno-tree-vectorize]}")
    exe = C().compile(job, tmp_path)
    assert exe.flags == ("-std=c99", "-Wall", "-Wextra", "-Werror", "-O1", "-fno-tree-vectorize")
    assert validate(config, "c").passed
    _, default = _job("dense_3x3_width13_k16")
    assert C().compile(default, tmp_path).flags[-3:] == ("-O3", "-march=native", "-ffp-contract=fast")


def test_nchw_tensors_get_channels_last_caches_when_c_is_the_only_target():
    """The chain's caches hold a pixel's channels together (planner.geometry.cache_window) and the input read runs
    in 8 x 8 blocks of channel planes (rowcopy.py); beside another target the caches keep the tensors' NCHW."""
    _, job = _job("depthwise_nchw_channels_last_caches_chain")
    assert {c.name: (c.physical_layout, c.physical_shape) for c in job.plan.caches if c.name != "filter"} == {
        "input": ("NHWC", (1, 15, 21, 24)), "temp_output_1": ("NHWC", (1, 13, 21, 24)),
        "temp_output_2": ("NHWC", (1, 6, 14, 24)), "output": ("NHWC", (1, 2, 10, 8))}
    assert "caches input, temp_output_1, temp_output_2, output: NHWC, a pixel's channels together (every target of " \
        "the config reads channel vectors), though their tensors keep them apart: the input read and the write-back " \
        "transpose" in job.plan.notes
    text = job.files["depthwise_nchw_channels_last_caches_chain.c"]
    assert text.count("8 x 8 blocks of channel planes transposed into pixels") == 1
    # 21 columns: two whole blocks of 8 (three vectors of 8 channels each), then 5 columns element by element
    assert "for (int icb = 0; icb < 3; ++icb) {" in text and "for (int ib = 0; ib < 2; ++ib) {" in text
    assert ("KG_STORE(row + (iw + 7) * 24 + ic, KG_SET(KG_LANE(r0, 7), KG_LANE(r1, 7), KG_LANE(r2, 7), KG_LANE(r3, 7), "
            "KG_LANE(r4, 7), KG_LANE(r5, 7), KG_LANE(r6, 7), KG_LANE(r7, 7)));") in text
    assert "r1 = KG_LOAD(&input[((nb*5928)+(ho_outer*76)+(ih*19)+(-115)) + iw + (ic + 1) * 247])" in text
    _, pooled = _job("nchw_chain_ending_in_maxpool")
    text = pooled.files["nchw_chain_ending_in_maxpool.c"]
    assert text.count("8 x 8 blocks of pixels transposed into channel planes") == 1
    assert ("KG_STORE(&output[(((ko_outer*720)+(ho_outer*80)+(oh*10))) + ow + (ok + 7) * 60], KG_SET(KG_LANE(r0, 7), "
            "KG_LANE(r1, 7), KG_LANE(r2, 7), KG_LANE(r3, 7), KG_LANE(r4, 7), KG_LANE(r5, 7), KG_LANE(r6, 7), "
            "KG_LANE(r7, 7)));") in text
    assert "for (int okt = 0; okt < 4; ++okt) {" in text and "ok < 12; ++ok) output[" in text
    _, beside = _job("depthwise_nchw_pixel_vectors_chain")
    assert {c.physical_layout for c in beside.plan.caches if c.name != "filter"} == {"NCHW"}
    assert not any(n.startswith("caches ") for n in beside.plan.notes)
    # the same windows and sizes either way
    assert [(c.logical_shape, c.elements, c.offset) for c in beside.plan.caches] == [
        (c.logical_shape, c.elements, c.offset) for c in job.plan.caches]


@requires_tool(*toolchain("c"))
@pytest.mark.parametrize("name", ["inverted_residual_hardswish_chain", "depthwise_40_blocked_tail_vectors",
                                  "depthwise_nchw_pixel_vectors_chain", "dense_k_block_4_half_vectors_chain",
                                  "dot_products_after_global_pool", "depthwise_nchw_channels_last_caches_chain",
                                  "dense_dilation2_nchw_w_split", "nchw_chain_ending_in_maxpool",
                                  "grouped_lane_groups_nchw_chain"])
def test_the_scalar_fallback_of_the_vector_macros_matches_numpy(tmp_path, name):
    """-DKG_SCALAR: the struct-and-loop kg_vf a compiler without vector extensions gets."""
    config, job = _job(name)
    for file, text in job.files.items():
        (tmp_path / file).write_text(text)
    exe = C().compile(job, tmp_path)
    library = Library(build_shared([tmp_path / f"{name}.c"], tmp_path / "libscalar.so",
                                   flags=(*exe.flags, "-DKG_SCALAR")))
    args = random_inputs(config, job.plan, np.random.default_rng(3))
    arrays = exe.arguments(args, 0xFF)
    library.call(name, arrays)
    assert compare(config, job.plan, "c", 3, args, {0xFF: arrays[-2]}).passed


def test_bad_c_options_exit_2_at_their_key(tmp_path):
    path = tmp_path / "threads.yaml"
    path.write_text(config_text("threads", CASES["k_block_2_falls_back"].with_block("c", "{threads: 0}")))
    result = CliRunner().invoke(main, ["plan", str(path)])
    assert result.exit_code == 2 and "c.threads: expected a positive int" in result.output
    path.write_text(config_text("threads", CASES["k_block_2_falls_back"].with_block("c", "{cflags: []}")))
    result = CliRunner().invoke(main, ["plan", str(path)])
    assert result.exit_code == 2 and "c.cflags" in result.output


@requires_tool("clang-19")
def test_clang_builds_the_vector_and_the_scalar_macros_warning_free(tmp_path):
    """Every way a compiler may read the macros, with every kind of tile in one file (dense, half, both depthwise):
    vector extensions with and without AVX-512F (the 16-float dense tiles), or the scalar struct."""
    import subprocess

    for name in ("inverted_residual_hardswish_chain", "dense_k_block_4_half_vectors_chain",
                 "grouped_lane_groups_nchw_chain"):
        _, job = _job(name)
        for file, text in job.files.items():
            (tmp_path / file).write_text(text)
        for extra in ((), ("-DKG_SCALAR",), ("-mavx512f",), ("-mavx512f", "-DKG_SCALAR")):  # 8, 16-float tiles
            subprocess.run(["clang-19", "-std=c99", "-Wall", "-Wextra", "-Werror", "-O2", *extra, "-c",
                            str(tmp_path / f"{name}.c"), "-o", str(tmp_path / "x.o")], check=True)


@pytest.mark.parametrize("name, step, pixels", [("depthwise_direct_width3", 48, 3), ("depthwise_direct_width21", 40, 2),
                                                ("depthwise_24_stride2_width13", 24, 7),
                                                ("depthwise_direct_batch2_w_split", 16, 3),
                                                ("depthwise_5x5_dilated", 16, 6)])
def test_a_direct_depthwise_tile_inside_the_input_reads_taps_at_constant_offsets(name, step, pixels):
    """Tiles whose window lies inside the input take one pointer per input row (taps at column_step multiples);
    border tiles keep the per-tap selects. test_micro_kernels_match_numpy runs both (2 to 7 pixels a tile, strides
    1 and 2, dilation 2, batch 2, uneven padding; width 3: no tile inside, each reaches the padding)."""
    _, job = _job(name)
    tile = job.target_plan.tiles[0]
    assert (tile.direct.col_step, tile.pixels) == (step, pixels)
    text = job.files[f"{name}.c"]
    op = job.plan.ops[0]
    reach = (pixels - 1) * tile.stride + (tile.kernel[1] - 1) * tile.dilation  # the last pixel's last tap
    # if (KG_LIKELY(inside)) and if (!(inside)); as many again in a 16-float variant of as many pixels
    same = tile.wide is not None and tile.wide.pixels == pixels
    assert text.count(f"+ xb + {reach} < {op.in_shape[2]})) {{") == (4 if same else 2)
    assert "const float *const x = input + " in text and "kg_zeros;" in text
    assert f"KG_FMAV(a{pixels - 1}_0, KG_LOAD(x + {reach * step} + 0), KG_LOAD(w{tile.kernel[1] - 1} + 0));" in text


def test_column_step_is_the_distance_between_columns_or_zero():
    nhwc = make_config("depthwise_direct_width21", CASES["depthwise_direct_width21"]).input_layout
    blocked = make_config("depthwise_40_blocked_tail_vectors", CASES["depthwise_40_blocked_tail_vectors"]).input_layout
    assert column_step(nhwc.bind((1, 6, 21, 40))) == 40
    assert column_step(nhwc.bind((1, 6, 1, 40))) == 0  # one column: no step
    assert column_step(blocked.bind((2, 9, 10, 40))) == 0  # 8-column blocks: 32 apart inside, farther across


def test_a_depthwise_tile_over_a_cache_holds_three_pixels_and_its_16_float_variant_more():
    """Over a cache, at most 4 channel vectors a group, so 3 pixels share each tap's filter vectors; the group's
    adjacent 8-float vectors pair into 16-float ones in the AVX-512F variant, with as many pixels as its
    accumulators hold (test_micro_kernels_match_numpy runs it on such a host). A direct tile keeps its widest group
    and no 16-float variant."""
    name = "depthwise_5x5_cached_width7"
    _, job = _job(name)
    tile = job.target_plan.tiles[1]
    assert (tile.direct, tile.groups, tile.pixels, tile.vector_channels) == (None, 4, 3, ("0", "8", "16", "24"))
    # 2 wide vectors a pixel: 6 pixels fill the accumulators, 7 columns take 2 tiles of 4
    assert tile.wide is not None and (tile.wide.lanes, tile.wide.groups, tile.wide.pixels) == (16, 4, 4)
    assert len(tile.wide.col) == 4 + 5 - 1 and tile.wide.col_base == "(owb*4)"
    text = job.files[f"{name}.c"]
    wide, narrow = text.split("#else /* !KG_VF16 */")[-2:]
    assert "KG_FMAV16(a3_2, KG_LOAD16(x3_4 + 16), KG_LOAD16(w4 + 16));" in wide.split("#if KG_VF16")[-1]
    assert "KG_FMAV(a2_3, KG_LOAD(x2_4 + 24), KG_LOAD(w4 + 24));" in narrow.split("#endif /* KG_VF16 */")[0]
    # a direct tile sums a line of each pixel at a time (tile.DIRECT_GROUP: two 8-float vectors) where such groups
    # divide its vectors; 40 channels, 5 vectors, keep the widest group, and no 16-float pairs
    _, direct = _job("depthwise_direct_width21")
    assert (direct.target_plan.tiles[0].groups, direct.target_plan.tiles[0].pixels) == (5, 2)
    assert direct.target_plan.tiles[0].wide is None
    _, lines = _job("depthwise_direct_width3")  # 48 channels: 3 groups of a line, 16-float pairs of 3 pixels
    assert (lines.target_plan.tiles[0].groups, lines.target_plan.tiles[0].wide.groups) == (2, 2)


@pytest.mark.parametrize("name, rows, lines", [("depthwise_direct_width3", (2,), 3), ("depthwise_direct_width21", (2,), 3),
                                               ("depthwise_24_stride2_width13", (1, 2), 1),
                                               ("depthwise_direct_batch2_w_split", (1, 2), 1),
                                               ("depthwise_5x5_dilated", (4,), 1)])
def test_a_direct_depthwise_tile_prefetches_the_rows_that_come_from_memory(name, rows, lines):
    """The kernel rows the output row before did not read (the last `stride` at dilation 1; the last at dilation 2),
    of the next output row (oh + 1): the tile's own columns (pixels x stride), every line of each pixel's channels;
    guarded by the input's rows and columns. A tile with a 16-float variant (paired vectors) prefetches in each, over
    its own columns."""
    _, job = _job(name)
    tile = job.target_plan.tiles[0]
    assert (tile.direct.fresh_rows, tile.direct.lines) == (rows, lines)
    assert tile.direct.span == tile.pixels * tile.stride
    spans = [tile.direct.span]
    if tile.wide is not None:
        assert tile.wide.direct.span == tile.wide.pixels * tile.stride
        spans.append(tile.wide.direct.span)
    text = job.files[f"{name}.c"]
    step = tile.direct.col_step
    per_row = [len({c * step + i * 16 for c in range(span if step else 1) for i in range(lines)}) for span in spans]
    assert text.count("KG_PREFETCH(input + ") == len(rows) * sum(per_row)
    for r in rows:
        assert f"if (ih_ahead{r} >= 0 && ih_ahead{r} < {job.plan.ops[0].in_shape[1]} && iw_ahead >= 0 && iw_ahead < " in text
        assert f"const int ih_ahead{r} = " in text and "(oh + 1)" in text.split(f"const int ih_ahead{r} = ")[1].split(";")[0]


@pytest.mark.parametrize("name, direct", [("depthwise_24_stride2_width13", True), ("depthwise_direct_batch2_w_split", True),
                                          ("depthwise_5x5_dilated", True), ("depthwise_40_blocked_tail_vectors", False),
                                          ("inverted_residual_hardswish_chain", False)])
def test_a_first_depthwise_conv_reads_the_input_directly(name, direct):
    """Op 1 depthwise over an input with consecutive channels reads the input itself: no input cache read, zeros for
    the padding taps; a blocked input layout, or a depthwise conv later in a chain, keeps its source cache."""
    _, job = _job(name)
    text = job.files[f"{name}.c"]
    assert (job.target_plan.tiles[0].direct is not None) == direct
    assert ("input_cache[" not in text and "kg_zeros" in text) == direct
    if name == "depthwise_direct_batch2_w_split":  # no cache bounds a column stripe: each row runs across them
        row = text.index("for (int oh = 0;")
        assert "inside each row */" in text[row:] and "for (int wo_outer" not in text[:row]
