"""schedule.order: rows_outer, the chain loop order with row stripes outermost and the last op's channel blocks
inside each (earlier ops run once per row stripe), against seed 000's channels_outer: exact work and traffic,
the loop nest, the budget search choosing between them, the config checks, and kernels on the real toolchains."""
from __future__ import annotations

import numpy as np
import pytest
from builders import Case, make_config, toolchain, with_quick
from conftest import requires_tool

from kernelgen.api import parse_config, validate
from kernelgen.config import parse_config as parse_with_catalog
from kernelgen.config.model import TargetInfo
from kernelgen.errors import ConfigError
from kernelgen.measure.records import Status
from kernelgen.plan_types import LoopOrder
from kernelgen.planner import plan
from kernelgen.report import json_report, text_report
from kernelgen.targets import TARGETS, catalog

# conv2d #1 3x3 16 -> 32, conv2d #2 3x3 32 -> 64 on 8x8: 4 channel stripes of 16, 2 row stripes of 4.
CHAIN = """name: {name}
input: {{shape: [1, 8, 8, 16]}}
ops:
  - conv2d: {{out_channels: 32, kernel: 3, pad: 1}}
  - conv2d: {{out_channels: 64, kernel: 3, pad: 1}}
schedule: {{k_block: 16, k_split: 1, h_block: 4, h_split: 1, order: {order}}}
"""

# ResNet18's layer4 basic block (layer4.1): two 3x3 convs 512 -> 512 on 7x7, + the block input, as imported.
RESNET_BLOCK = """name: resnet18_block
input: {{shape: [1, {channels}, {size}, {size}], layout: NCHW}}
ops:
  - conv2d: {{out_channels: {channels}, kernel: 3, pad: 1, bias: true, activation: relu}}
  - conv2d: {{out_channels: {channels}, kernel: 3, pad: 1, bias: true, residual: input, activation: relu}}
output: {{layout: NCHW}}
schedule: {schedule}
targets: {targets}
"""

# A chain both orders fit under 256 KiB; seed 000's needs two channel stripes there (1.5x).
BUDGETED = """name: budgeted
input: {{shape: [1, 16, 16, 64]}}
ops:
  - conv2d: {{out_channels: 64, kernel: 3, pad: 1, bias: true, activation: relu}}
  - conv2d: {{out_channels: 64, kernel: 3, pad: 1, bias: true, residual: input}}
schedule: {{budget: 256KiB, order: {order}}}
targets: {targets}
"""


def _tree(nodes) -> list:
    from test_emit import _plan_tree

    return _plan_tree(nodes)


def test_executed_flops_and_traffic_of_a_two_op_chain_under_both_orders():
    seed = plan(parse_config(CHAIN.format(name="seed", order="channels_outer")))
    rows = plan(parse_config(CHAIN.format(name="rows", order="rows_outer")))
    conv1 = 2 * 8 * 8 * 32 * (16 * 3 * 3)  # 2 x output positions x channels x taps
    conv2 = 2 * 8 * 8 * 64 * (32 * 3 * 3)
    assert seed.flops == rows.flops == conv1 + conv2 == 2949120
    # conv2d #1's window per row stripe: the stripe's 4 rows and a halo row each side, rows -1..4 and 3..8, of which
    # 0..4 and 3..7 lie in the tensor (the padding rows are guarded, not computed): 10 rows x 8 columns x 32 channels
    conv1_pass = 2 * (5 + 5) * 8 * 32 * (16 * 3 * 3)
    assert conv1_pass == 737280
    assert seed.executed_flops == 4 * conv1_pass + conv2 == 5308416  # once per channel stripe of conv2d #2
    assert rows.executed_flops == conv1_pass + conv2 == 3096576  # once per row stripe
    # input rows -2..5 and 2..9: 6 + 6 in the tensor, 8 columns x 16 channels x 4 bytes; again per channel stripe
    assert seed.traffic.input_bytes == 4 * 12 * 8 * 16 * 4
    assert rows.traffic.input_bytes == 12 * 8 * 16 * 4
    # filters: conv2d #1's whole filter per stripe (4 x 2 stripes, against 2 row stripes), conv2d #2's once per
    # row stripe either way
    filter1, filter2 = 32 * 16 * 9 * 4, 64 * 32 * 9 * 4
    assert seed.traffic.filter_bytes == 8 * filter1 + 2 * filter2
    assert rows.traffic.filter_bytes == 2 * filter1 + 2 * filter2
    assert seed.traffic.output_bytes == rows.traffic.output_bytes == 8 * 8 * 64 * 4
    # the caches are the same: the output cache holds one channel block of 16 in both orders
    assert [c.logical_shape for c in rows.caches] == [c.logical_shape for c in seed.caches]
    assert rows.cache("output").logical_shape == (1, 4, 8, 16)


def test_rows_outer_loop_nest_keeps_the_channel_loop_and_write_back_inside_the_row_stripe():
    rows = plan(parse_config(CHAIN.format(name="rows", order="rows_outer")))
    (ho,) = _tree(rows.kernel.body)
    assert ho[:2] == ("ho_outer", 2)
    assert [(var, extent) for var, extent, _ in ho[2]] == [("ih", 8), ("ko_outer_1", 2), ("ko_outer", 4)]
    ko = ho[2][2][2]
    # the filter read, conv2d #2 and the write-back of each block
    assert [var for var, _, _ in ko] == ["fk", "ko_inner", "oh"]
    assert rows.stripe.store == () and rows.stripe.count == 2
    report = text_report(rows)
    assert "order rows_outer: 2 row stripe(s) = 2 x 1 (rows x columns), each computing the last op's output channels " \
           "in 4 block(s) of 16" in report
    assert "conv2d #1 and the input load run once per row stripe (2 of them)" in report
    assert "run again for each of the" not in report
    assert json_report(rows)["schedule"]["order"] == "rows_outer"
    seed = plan(parse_config(CHAIN.format(name="seed", order="channels_outer")))
    assert _tree(seed.kernel.body)[0][:2] == ("ko_outer", 4)
    assert "conv2d #1..#1 run again for each of the 4 output-channel stripes" in text_report(seed)


def test_double_buffer_under_rows_outer_prefetches_the_input_and_stores_inside_the_compute():
    text = CHAIN.format(name="db", order="rows_outer").replace("order:", "pipeline: double_buffer, order:")
    p = plan(parse_config(text))
    assert [c.name for c in p.caches] == ["input_a", "input_b", "filter", "temp_output", "output"]
    assert p.timeline == ("load1", "load2", "conv+store1", "conv+store2")
    labels = [getattr(node, "label", "") for node in p.kernel.body]
    assert labels[0] == "pipeline prologue: load stripe 0" and not any("epilogue" in label for label in labels)


def test_schedule_auto_runs_the_resnet18_layer4_block_rows_outer_within_the_c_budget():
    block = dict(size=7, channels=512, targets="[c]")
    auto = plan(parse_config(RESNET_BLOCK.format(schedule="auto", **block)))
    assert auto.order is LoopOrder.ROWS_OUTER and auto.search.chosen.order is LoopOrder.ROWS_OUTER
    assert set(auto.search.fitted) >= {"order", "k_block"}
    assert auto.executed_flops / auto.flops <= 1.15
    assert auto.executed_flops == auto.flops  # one row stripe of 7 rows: nothing recomputed
    assert auto.workspace_bytes <= 512 * 1024
    # the widest channel block whose filter cache fits beside the 11x9 input and 9x9 intermediate windows
    assert auto.k_block == 8 and auto.k_split == 1 and auto.stripe_counts == (64, 1, 1)
    # seed 000's order fits no schedule there (its filter cache of 32 channels alone needs 576 KiB); as
    # imported before (the default schedule) it executes 8.50x
    with pytest.raises(ConfigError, match="expected a budget of at least 958464 bytes"):
        plan(parse_config(RESNET_BLOCK.format(schedule="{budget: auto, order: channels_outer}", **block)))
    seed = plan(parse_config(RESNET_BLOCK.format(schedule="{}", **block)))
    assert round(seed.executed_flops / seed.flops, 2) == 8.5
    # layer3's block (14x14x256) too
    layer3 = plan(parse_config(RESNET_BLOCK.format(schedule="auto", size=14, channels=256, targets="[c]")))
    assert layer3.order is LoopOrder.ROWS_OUTER and layer3.executed_flops / layer3.flops <= 1.15


# MobileNetV2's 7x7 inverted residual (features.15): 160 -> 960 (1x1) -> depthwise 3x3 -> 160, + the block input.
WIDE_BLOCK = """name: wide_block
input: {shape: [1, 160, 7, 7], layout: NCHW}
ops:
  - conv2d: {out_channels: 960, kernel: 1, bias: true, activation: relu6}
  - conv2d: {out_channels: 960, kernel: 3, pad: 1, groups: 960, bias: true, activation: relu6}
  - conv2d: {out_channels: 160, kernel: 1, bias: true, residual: input}
output: {layout: NCHW}
schedule: auto
"""


def test_schedule_auto_fits_the_row_block_of_a_960_channel_block_into_the_c_budget():
    the_plan = plan(parse_config(WIDE_BLOCK))
    # all 7 rows in one stripe need 557056 bytes at the narrowest channel block: over 512 KiB; 4 rows fit
    assert (the_plan.order, the_plan.h_block, the_plan.k_block) == (LoopOrder.ROWS_OUTER, 4, 32)
    assert "h_block" in the_plan.search.fitted and the_plan.workspace_bytes <= 512 * 1024
    expand, depthwise, project = 7 * 7 * 960 * 160, 7 * 7 * 960 * 9, 7 * 7 * 160 * 960  # useful MACs
    assert the_plan.flops == 2 * (expand + depthwise + project)
    # two row stripes (rows 0-3, 4-6): the depthwise conv reads expand rows 0-4 and 3-6, 9 of 7
    assert the_plan.executed_flops == 2 * (9 * 7 * 960 * 160 + depthwise + project)
    assert round(the_plan.executed_flops / the_plan.flops, 2) == 1.14


@requires_tool(*toolchain("c"))
def test_the_row_block_the_search_fitted_runs_right_on_c():
    result = validate(parse_config(WIDE_BLOCK), "c", seed=5)
    assert result.passed and result.checked == "op-by-op", result.detail


def test_auto_picks_rows_outer_only_where_every_stripe_target_renders_it():
    seed_only = TargetInfo(name="seedonly", dtypes=("float32",))  # the default: channels_outer stripe loops only
    catalog_ = catalog() + (seed_only,)
    assert plan(parse_config(BUDGETED.format(order="auto", targets="[c]"))).order is LoopOrder.ROWS_OUTER
    both = plan(parse_with_catalog(BUDGETED.format(order="auto", targets="[c, seedonly]"), "b.yaml", catalog_))
    assert both.order is LoopOrder.CHANNELS_OUTER and 2 * both.executed_flops == 3 * both.flops
    with pytest.raises(ConfigError) as caught:
        parse_with_catalog(BUDGETED.format(order="rows_outer", targets="[c, seedonly]"), "b.yaml", catalog_)
    problem = caught.value.problems[0]
    assert problem.key == "schedule.order" and problem.line == 6
    assert "target 'seedonly' renders only channels_outer stripe loops" in problem.message
    # opencl and vulkan run a kernel per conv: the order does not apply to them, and the report says so
    mixed = plan(parse_config(BUDGETED.format(order="auto", targets="[c, opencl, vulkan]")))
    assert mixed.order is LoopOrder.ROWS_OUTER
    assert any("opencl, vulkan run a kernel per conv2d over whole tensors and ignore it" in n for n in mixed.notes)
    # a single op has no earlier op to stop recomputing: auto keeps seed 000's order
    single = parse_config("name: single\ninput: {shape: [1, 16, 16, 64]}\nops:\n"
                          "  - conv2d: {out_channels: 64, kernel: 3, pad: 1}\nschedule: auto\n")
    assert plan(single).order is LoopOrder.CHANNELS_OUTER and plan(single).search.chosen.order is LoopOrder.CHANNELS_OUTER


@pytest.mark.parametrize("schedule, message", [
    ("{order: auto}", "expected a budget with order: auto"),
    ("{order: rows_outer, c_split: 2}", "expected 1: input channels split only for a single dense op"),
])
def test_order_combinations_that_cannot_work_are_refused(schedule, message):
    text = CHAIN.format(name="bad", order="x").replace("{k_block: 16, k_split: 1, h_block: 4, h_split: 1, order: x}",
                                                       schedule)
    if "c_split" in schedule:  # c_split is a single op's
        text = text.replace("  - conv2d: {out_channels: 64, kernel: 3, pad: 1}\n", "")
    with pytest.raises(ConfigError, match=message):
        parse_config(text, "bad.yaml")


# ---- kernels on the real toolchains ------------------------------------------------

# name: (input shape, ops, input layout, output layout, schedule), each under order: rows_outer
MATRIX = {name: Case(*row) for name, row in {
    "chain_4_channel_blocks": ([1, 8, 8, 16], ["{out_channels: 32, kernel: 3, pad: 1}",
                                               "{out_channels: 64, kernel: 3, pad: 1}"], "NHWC", "NCHW",
                               "{k_block: 16, h_block: 4, h_split: 1}"),
    "single_op_channel_tail": ([1, 10, 9, 16], ["{out_channels: 40, kernel: 3, pad: 1, bias: true}"], "NHWC", "NHWC",
                               "{k_block: 16, h_block: 4}"),
    "halo_reuse_chain_stride2_dilation2": ([1, 21, 19, 12], ["{out_channels: 16, kernel: 3, stride: 2, pad: 1}",
                                                             "{out_channels: 24, kernel: 3, dilation: 2, pad: 2}"],
                                           "NHWC", "NHWC", "{k_block: 8, h_block: 1, h_split: 2, halo: reuse}"),
    "double_buffer_w_split_batch2_blocked": ([2, 14, 17, 8], ["{out_channels: 12, kernel: 3, pad: 1, stride: 2}",
                                                              "{out_channels: 8, kernel: 3, dilation: 2, pad: 2}"],
                                             "nhwc-8h8w32c", "nhwc-8h8w32c", "{h_block: 2, w_block: 2, w_split: 2, "
                                                                             "k_block: 4, pipeline: double_buffer}"),
    "resnet_residual_batch2_relu": ([2, 9, 8, 12], ["{out_channels: 12, kernel: 3, pad: 1, bias: true, "
                                                    "activation: relu}",
                                                    "{out_channels: 12, kernel: 3, pad: 1, bias: true, "
                                                    "residual: input, activation: relu}"],
                                    "NCHW", "NCHW", "{k_block: 4, h_block: 2, h_split: 2}"),
    "inverted_residual_from_depthwise": ([1, 10, 9, 6], ["{out_channels: 12, kernel: 1, bias: true, activation: relu6}",
                                                         "{out_channels: 12, kernel: 3, pad: 1, groups: 12, bias: true, "
                                                         "activation: relu6}",
                                                         "{out_channels: 12, kernel: 1, residual: 2}",
                                                         "{out_channels: 12, kernel: 3, pad: [0, 1, 2, 1], residual: 1, "
                                                         "activation: relu}"],
                                         "NHWC", "nhwc-8h8w32c", "{k_block: 4, h_block: 3, w_block: 4, w_split: 1}"),
    "pad_value0_output_overcompute": ([1, 8, 7, 12], ["{out_channels: 12, kernel: 3, pad: 1}",
                                                      "{out_channels: 12, kernel: 1}"], "NHWC",
                                      "{map: nhwc-8c, pad_value: 0}", "{k_block: 8, h_block: 4}"),
}.items()}


def _rows_outer(case: Case) -> Case:
    return case.with_(schedule=f"{{order: rows_outer, {case.schedule[1:]}")


@requires_tool(*toolchain("c"))
@pytest.mark.parametrize("name", with_quick(sorted(MATRIX), "resnet_residual_batch2_relu"))
def test_c_kernel_under_rows_outer_matches_numpy(name):
    config = make_config(name, _rows_outer(MATRIX[name]))
    assert plan(config).order is LoopOrder.ROWS_OUTER
    result = validate(config, "c")
    assert result.passed, f"{result.detail} (seed {result.seed})"


def test_c_kernel_loops_are_the_rows_outer_plan_loops():
    from test_emit import _c_tree, _parse_kernel

    config = parse_config(CHAIN.format(name="rows", order="rows_outer"))
    the_plan = plan(config)
    job = TARGETS["c"].build(config, the_plan)
    tree = _c_tree(_parse_kernel(job.files["rows.c"], "rows").body)
    # the c target's loop tree (each conv's pixels in micro-kernel tiles) around the plan's stripe loops
    assert tree == _tree(job.target_plan.kernel.body) and tree[0][:2] == ("ho_outer", 2)
    assert [loop[:2] for loop in tree] == [loop[:2] for loop in _tree(the_plan.kernel.body)]


HVX_TOOLS = toolchain("hvx")


@requires_tool(*HVX_TOOLS)
@pytest.mark.parametrize("name", ["chain_splits_not_dividing", "chain_stride2_dilation2_double_buffer",
                                  "chain_stride2_dilation2_halo_reuse"])
def test_hvx_uint8_kernel_under_rows_outer_is_bit_exact(name):
    """hvx keeps its helpers: ko_outer is the same loop inside the row stripe, the write-back one channel stripe."""
    from test_hvx_target import MATRIX as HVX_MATRIX, _validate

    config = make_config(name, _rows_outer(HVX_MATRIX[name]))
    assert plan(config).order is LoopOrder.ROWS_OUTER
    result = _validate(config, int(np.random.SeedSequence().entropy % 2 ** 32))
    assert result.status is Status.PASS, f"{result.detail} (seed {result.seed})"
