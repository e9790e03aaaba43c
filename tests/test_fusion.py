"""Where `kernelgen import` cuts a chain into kernels (issue 28, first part): by the planner's cost of each
candidate group under the target's budget, within --max-group-ops and --cut."""
from __future__ import annotations

import itertools
import re

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import requires_tool

from kernelgen.api import load_config, plan
from kernelgen.cli import main
from kernelgen.onnx.fusion import MAX_RECOMPUTE, GroupCost, Grouping, choose
from kernelgen.planner import plan_costs


def _cost(seconds: float, refused: str = "") -> GroupCost:
    return GroupCost(useful_flops=1, executed_flops=1, traffic_bytes=0, workspace_bytes=0, budget_bytes=None,
                     seconds=seconds, refused=refused)


@pytest.mark.parametrize("seed", range(6))
def test_the_chosen_cuts_are_the_cheapest_cover_brute_force_finds(seed):
    """Dynamic programming against every way to cut 7 ops, with random costs, refusals, a residual that pins two
    ops together, a forced cut and a group-length limit."""
    rng = np.random.default_rng(seed)
    n, max_ops, cuts = 7, 4, frozenset({4})
    table = {(j, i): _cost(float(rng.uniform(0.5, 1.0)) * (i - j) ** 0.7,
                           "refused" if i - j > 1 and rng.random() < 0.2 else "")
             for j in range(n) for i in range(j + 1, n + 1)}

    def fusable(j: int, i: int) -> str:  # op 3 (0-based) adds op 2's input: ops 2 and 3 stay together
        return "residual" if j == 3 else ""

    groups = choose(n, fusable, Grouping(cost=lambda j, i: table[(j, i)], max_ops=max_ops, cuts=cuts))
    assert [g.start for g in groups][0] == 0 and groups[-1].stop == n
    assert all(a.stop == b.start for a, b in zip(groups, groups[1:]))

    def allowed(j: int, i: int) -> bool:
        return (i - j <= max_ops and not any(j <= k < i - 1 for k in cuts) and not fusable(j, i)
                and (i - j == 1 or not table[(j, i)].refused))

    best = min((sum(table[(j, i)].seconds for j, i in zip((0, *b), (*b, n)))
                for r in range(n) for b in itertools.combinations(range(1, n), r)
                if all(allowed(j, i) for j, i in zip((0, *b), (*b, n)))), default=None)
    assert best is not None
    assert sum(g.cost.seconds for g in groups) == pytest.approx(best)
    assert all(g.not_fused_with_next for g in groups[:-1])  # each boundary says why


@pytest.mark.parametrize("seed", range(12))
def test_a_side_residuals_source_ends_a_group_in_the_cheapest_cover(seed):
    """Op 5 adds op 2's result (a block's input) as a side input when its group starts after op 3: a group must
    then end after op 2. Every way to cut 8 ops against the search, with random costs and refusals; seed 0 is
    ResNeXt50's layer2.1 as the import met it: fusing op 2 with op 3 is cheap, so the cheapest cover of ops 0..3
    does not end after op 2, and the one-pass search took ops 3..5 as one refused kernel instead of 3 | 4..5."""
    rng = np.random.default_rng(seed)
    n = 8
    table = {(j, i): _cost(float(rng.uniform(0.5, 1.0)) * (i - j) ** 0.7,
                           "refused" if i - j > 1 and rng.random() < 0.2 else "")
             for j in range(n) for i in range(j + 1, n + 1)}
    if seed == 0:  # single ops 1.0, every longer group refused but ops 2..3 (cheap) and 4..5
        table = {(j, i): _cost(1.0 if i - j == 1 else 0.1 if (j, i) == (2, 4) else 1.5,
                               "" if i - j == 1 or (j, i) in ((2, 4), (4, 6)) else "refused")
                 for j in range(n) for i in range(j + 1, n + 1)}

    def needs(j: int, i: int) -> tuple[int, ...]:
        return (3,) if 3 < j <= 5 < i else ()

    groups = choose(n, lambda j, i: "", Grouping(cost=lambda j, i: table[(j, i)], needs=needs))
    ends = {g.stop for g in groups}
    assert all(set(needs(g.start, g.stop)) <= ends for g in groups)
    covers = [b for r in range(n) for b in itertools.combinations(range(1, n), r)
              if all(not table[(j, i)].refused or i - j == 1 for j, i in zip((0, *b), (*b, n)))
              and all(set(needs(j, i)) <= {0, *b} for j, i in zip((0, *b), (*b, n)))]
    best = min(sum(table[(j, i)].seconds for j, i in zip((0, *b), (*b, n))) for b in covers)
    assert sum(g.cost.seconds for g in groups) == pytest.approx(best)
    assert not any(g.despite for g in groups)
    if seed == 0:
        assert (3, 4) in {(g.start, g.stop) for g in groups} and (4, 6) in {(g.start, g.stop) for g in groups}


def _import(tmp_path, *args: str, size: int = 56) -> tuple[object, list]:
    """`kernelgen import` of MobileNetV2's stage at `size`x`size` (56: the budget cuts it by cost; the cuts
    --max-group-ops and --cut ask for are the graph's, at any size)."""
    import onnx
    import onnx_models

    tmp_path.mkdir(parents=True, exist_ok=True)
    model = tmp_path / "stack.onnx"
    onnx.save(onnx_models.mobilenet_v2_stack(size), model)
    out = tmp_path / "configs"
    result = CliRunner().invoke(main, ["import", str(model), "-o", str(out), *args])
    configs = [p for p in out.glob("*.yaml") if p.name != "network.yaml"]  # the manifest is no config
    return result, sorted(configs, key=lambda p: load_config(p).source.nodes[0])


# Slow: ~90 candidate groups planned by the budget search at 56x56. The quick set keeps the cuts by
# --max-group-ops and --cut (below, at 8x8) and hvx's grouping by cost (test_network.py).
@pytest.mark.slow
@requires_tool("py:onnx")
def test_a_mobilenet_stage_is_cut_by_cost_within_the_budget(tmp_path):
    result, paths = _import(tmp_path)
    assert result.exit_code == 0, result.output
    configs = [load_config(p) for p in paths]
    assert sum(len(c.ops) for c in configs) == 12 and 1 < len(configs) < 12
    for config in configs:
        planned = plan(config)
        if config.schedule.budget is not None:  # schedule: auto, fitted to c's 512 KiB L2
            assert planned.workspace_bytes <= config.schedule.budget
        if len(config.ops) > 1:
            assert planned.executed_flops <= MAX_RECOMPUTE * planned.flops, config.name
    lines = re.findall(r"executed/useful FLOPs (\d+\.\d+), .* workspace (\d+) KiB", result.output)
    assert len(lines) == len(configs)
    assert result.output.count("not fused with the next group:") == len(configs) - 1


@requires_tool("py:onnx")
def test_max_group_ops_and_cuts_narrow_the_choice(tmp_path):
    result, paths = _import(tmp_path, "--max-group-ops", "1", size=8)
    assert result.exit_code == 0, result.output
    assert result.stderr == ""  # no progress bar when stderr is no terminal
    # one conv per kernel: a block's last conv, cut from the two before it, reads the block input (its residual)
    # as a side input
    configs = [load_config(p) for p in paths]
    assert [len(c.ops) for c in configs] == [1] * 12
    assert sum(bool(c.side_inputs) for c in configs) == 2
    assert "one kernel although more than --max-group-ops" not in result.output
    result, paths = _import(tmp_path / "cut", "--max-group-ops", "3", "--cut", "b0_dw", "--cut", "b2_dw", size=8)
    assert result.exit_code == 0, result.output
    configs = [load_config(p) for p in paths]
    assert all(len(c.ops) <= 3 for c in configs)
    last_nodes = {c.source.nodes[-1] for c in configs}
    assert {"b0_dw_relu6", "b2_dw_relu6"} <= last_nodes  # the groups end at the asked nodes (their Clip folded in)
    assert "a cut was asked for" in result.output


@requires_tool("py:onnx")
def test_a_target_without_roofs_keeps_each_chain_whole_and_says_so(tmp_path):
    result, paths = _import(tmp_path, "--target", "opencl")
    assert result.exit_code == 0, result.output
    assert len(paths) == 1 and len(load_config(paths[0]).ops) == 12
    assert "the opencl target has no fusion cost: it runs one kernel per conv2d" in result.output


@requires_tool("py:onnx")
def test_a_cut_at_an_unknown_node_is_an_error(tmp_path):
    result, _ = _import(tmp_path, "--cut", "b9_dw")
    assert result.exit_code == 2 and "--cut b9_dw: stack.onnx has no node of that name" in result.output, result.output


@requires_tool("py:onnx")
def test_each_distinct_candidate_config_is_planned_once(tmp_path, monkeypatch):
    """Issue 49: candidate groups carry no name nor nodes, so a repeated block's candidates are the same configs;
    the coster plans each once (by the config's content) and hands the same cost back. In the stack, blocks 0 and
    1 differ only by block 1's residual add: their expand, depthwise and expand+depthwise candidates coincide."""
    import onnx
    import onnx_models

    import kernelgen.api as api
    import kernelgen.onnx.coster as coster_module
    from kernelgen.onnx.importer import Fusion, import_model

    model = tmp_path / "stack.onnx"
    onnx.save(onnx_models.mobilenet_v2_stack(8), model)
    planned, asked, reached = [], [], []
    monkeypatch.setattr(coster_module, "plan_costs", lambda config: planned.append(config) or plan_costs(config))
    coster = api.fusion_coster("c")
    fresh = api.fusion_coster("c")
    imported = import_model(model, tmp_path / "out", ("c",), Fusion(coster=lambda group: asked.append(group)
                                                                    or coster(group), progress=reached.append))
    assert len(asked) == 78  # each (start, stop) the search costs, once per chain position (a residual block's
    # last conv may start a group too: it reads the block input as a side input), and the runs of groups from a
    # side residual's source that such a group needs
    assert len({coster_module._content(group.data()) for group in asked}) == len(planned) == 74  # nothing fails to fit at 8x8
    # cut where the tiles' speed (issue 48) prices the 12-op chain's recomputed halo pixels over a kernel call
    assert [len(config.config.ops) for config in imported.configs] == [7, 5]
    # the kept cost is the one planning the candidate again gives
    assert all(coster(group) == fresh(group) for group in asked[:8])
    # progress: every node of the graph is reported as the import reaches it, the chain's ops while they are cut
    assert set(reached) == set(range(max(reached) + 1)) and len(reached) > max(reached) + 1
