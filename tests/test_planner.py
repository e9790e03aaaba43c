"""Planner: seed 000's cache sizes exactly, and the geometry beyond it."""
import json

import pytest
from builders import Case, make_config

from kernelgen.api import load_config, parse_config
from kernelgen.errors import ConfigError, NoScheduleFits
from kernelgen.plan_types import Guard, Loop, Section
from kernelgen.planner import plan
from kernelgen.report import json_report

SEED_000 = {  # seed 000's allocations, in elements
    "seed000_baseline": {"input": 65536, "filter": 4096, "temp_output": 65536},
    "seed000_split": {"input": 131072, "filter": 8192, "temp_output": 131072},
    "seed000_3x3": {"input": 196608, "filter": 73728, "temp_output": 196608},
}


@pytest.mark.parametrize("name", sorted(SEED_000))
def test_seed_000_cache_sizes(repo, name):
    p = plan(load_config(repo / "configs" / f"{name}.yaml"))
    sizes = {c.name: c.elements for c in p.caches}
    assert {k: sizes[k] for k in SEED_000[name]} == SEED_000[name]
    assert all(c.bytes == 4 * c.elements for c in p.caches)
    # Seed 000 reuses the input cache for conv2d #2's output.
    assert p.cache("output").aliases == "input"


def test_seed_000_shapes_and_loop_extents(repo):
    p = plan(load_config(repo / "configs" / "seed000_3x3.yaml"))
    shapes = {t.title: (t.physical_layout, t.physical_shape, t.logical_shape) for t in (*p.tensors, *p.intermediates)}
    assert shapes["Temp Output"] == ("NHWC8h8w32c", (1, 8, 8, 4, 8, 8, 32), (1, 62, 62, 128))
    assert shapes["Output"] == ("NHWC8h8w32c", (1, 8, 8, 4, 8, 8, 32), (1, 60, 60, 128))
    assert shapes["Filter 2"] == ("OIHW8i32o4i", (4, 4, 3, 3, 8, 32, 4), (128, 128, 3, 3))
    outer = p.kernel.body[0]
    assert (outer.var, outer.extent) == ("ko_outer", 2)
    assert (outer.body[0].var, outer.body[0].extent) == ("ho_outer", 4)
    conv1_outer = [n for n in outer.body[0].body if isinstance(n, Loop)][0]
    assert (conv1_outer.var, conv1_outer.extent) == ("ko_outer_1", 2)
    assert p.flops == 2 * (62 * 62 * 128 * 128 * 9 + 60 * 60 * 128 * 128 * 9)


def test_plan_json_has_the_contract_keys(repo):
    report = json_report(plan(load_config(repo / "configs" / "seed000_split.yaml")))
    json.dumps(report)
    assert {"name", "flops", "tensors", "caches", "loops"} <= set(report)
    assert {"name", "logical_layout", "logical_shape", "physical_layout", "physical_shape"} <= set(report["tensors"][0])
    assert [c["name"] for c in report["caches"]] == ["input", "filter", "temp_output", "output"]
    assert report["loops"][0]["var"] == "ko_outer" and report["loops"][0]["extent"] == 2


def _config(ops: list[str], schedule: str):
    """conv2d `ops` over a 20x18x40 NHWC input, under `schedule`."""
    return make_config("t", Case([1, 20, 18, 40], ops, schedule=schedule))


def test_halo_rows_follow_stride_dilation_and_chain():
    cfg = _config(["{out_channels: 8, kernel: 3, stride: 2, pad: 1}",
                   "{out_channels: 8, kernel: 3, dilation: 2, pad: 2}"], schedule="{h_split: 1, h_block: 4}")
    p = plan(cfg)
    # 4 output rows of conv #2 need (4-1)*1 + 5 = 8 rows of conv #1, which need (8-1)*2 + 3 = 17 input rows.
    assert p.cache("temp_output").logical_shape[1] == 8
    assert p.cache("input").logical_shape[1] == 17
    # Columns: conv #2 (pad 2, dilation 2) reads all 9 + 4 columns of conv #1's output incl. padding.
    assert p.cache("temp_output").logical_shape[2] == 9 + 4
    assert p.cache("input").logical_shape[2] == (9 - 1) * 2 + 3


def test_splits_that_do_not_divide_get_guards():
    cfg = _config(["{out_channels: 40, kernel: 3}"], schedule="{k_split: 1, h_split: 2, k_block: 16}")
    p = plan(cfg)
    guards = []

    def walk(nodes):
        for n in nodes:
            if isinstance(n, Guard):
                guards.append(n.cond)
            if isinstance(n, (Loop, Guard, Section)):
                walk(n.body)
    walk(p.kernel.body)
    assert any("< 40" in g for g in guards)  # channel tail: 40 = 2.5 blocks of 16
    assert any("< 18" in g for g in guards)  # row tail: 18 rows in stripes of 16


def test_executed_work_counts_recompute(repo):
    p = plan(load_config(repo / "configs" / "seed000_split.yaml"))
    # conv2d #1 runs once per ko_outer stripe (2 of them): 2x its work, conv2d #2 once.
    conv1 = conv2 = 2 * 64 * 64 * 128 * 128
    assert p.executed_flops == 2 * conv1 + conv2


def test_k_split_larger_than_the_tensor_is_rejected():
    with pytest.raises(ConfigError, match=r"schedule.k_split: expected at most 1"):
        _config(["{out_channels: 20, kernel: 1}"], schedule="{k_split: 2}")


def _seed_3x3(repo, schedule: str) -> str:
    text = (repo / "configs" / "seed000_3x3.yaml").read_text()
    return text.replace("schedule: {k_split: 2, h_split: 2}", f"schedule: {schedule}")


def test_budget_picks_the_splits_that_fit(repo):
    # Seed 000's own schedule needs 1867776 bytes of caches; a 1.9 MB budget admits it and the
    # planner may not pick anything bigger than the budget.
    p = plan(parse_config(_seed_3x3(repo, "{budget: 1900000}")))
    assert p.workspace_bytes <= 1_900_000
    assert p.search.budget == 1_900_000 and p.search.chosen.workspace_bytes == p.workspace_bytes
    unlimited = plan(parse_config(_seed_3x3(repo, "{budget: 100000000}")))
    # With room for everything, conv2d #1 is never recomputed: one output-channel stripe.
    assert unlimited.k_split == 4 and unlimited.executed_flops < p.executed_flops


def test_budget_with_fixed_k_split_only_fits_h_split(repo):
    p = plan(parse_config(_seed_3x3(repo, "{k_split: 2, budget: 1900000}")))
    assert p.k_split == 2 and p.workspace_bytes <= 1_900_000


def test_budget_too_small_points_at_the_key(repo):
    with pytest.raises(ConfigError) as caught:
        plan(parse_config(_seed_3x3(repo, "{budget: 1000}"), "budget.yaml"))
    problem = caught.value.problems[0]
    assert problem.key == "schedule.budget" and problem.line == 10
    assert problem.message.startswith("expected a budget of at least ") and "got 1000" in problem.message
    # the same as data (the importer's coster reads these, never the message)
    assert isinstance(caught.value, NoScheduleFits) and caught.value.budget == 1000
    assert problem.message.startswith(f"expected a budget of at least {caught.value.needed} bytes: ")


def test_plan_reports_the_activation_traffic_fusion_saves():
    """An inverted-residual block (1x1 expand, 3x3 depthwise, 1x1 project + input) as one fused chain:
    the wide intermediates stay in the stripe caches; run one by one, each op reads its input and writes
    its output (the last also reads the residual) through memory."""
    from kernelgen.api import parse_config
    from kernelgen.report import text_report

    config = parse_config("name: block\ninput: {shape: [1, 16, 16, 8]}\nops:\n"
                          "  - conv2d: {out_channels: 48, kernel: 1, bias: true, activation: relu6}\n"
                          "  - conv2d: {out_channels: 48, kernel: 3, pad: 1, groups: 48, bias: true, "
                          "activation: relu6}\n"
                          "  - conv2d: {out_channels: 8, kernel: 1, bias: true, residual: input}\n"
                          "schedule: {k_block: 8, h_block: 4, h_split: 1}\n", "block.yaml")
    p = plan(config)
    small, wide = 16 * 16 * 8, 16 * 16 * 48
    alone = 4 * ((small + wide) + (wide + wide) + (wide + small + small))
    fused = p.traffic.input_bytes + p.traffic.output_bytes
    # input rows with 1-row halos per 4-row stripe, plus the residual read, plus the output
    assert p.traffic.output_bytes == 4 * small
    assert fused < alone / 4
    line = next(l for l in text_report(p).splitlines() if l.startswith("fusion:"))
    assert f"against {alone} for the 3 ops run one by one" in line and f"{alone - fused} saved" in line
