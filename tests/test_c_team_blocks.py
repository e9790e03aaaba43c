"""A team of threads on a chain whose convs have few rows (team.py blocks_shared): a classifier tail's 1x1 convs on
one pooled pixel (GEMVs) and a 7x7 conv share their output-channel blocks between the threads, one barrier an op,
where the row split would leave the team one row (or 4 + 3 rows a block) and a barrier every block. Checked in the
emitted C, against numpy, and 2 threads against 1 bit for bit. No timings here (benchmarks/network_peers.py)."""
from __future__ import annotations

import ctypes
import re

import numpy as np
import pytest
from builders import Case, make_config, toolchain
from conftest import requires_tool

from kernelgen.api import jobs, validate
from kernelgen.measure.tensors import random_inputs
from kernelgen.plan_types import Loop, Stmt
from kernelgen.targets.c import C, team

# MobileNetV3-small's tail, smaller: a 1x1 conv on 7x7 pixels (filters in place), the global pool, two GEMVs
TAIL = Case([1, 7, 7, 96], ["{out_channels: 576, kernel: 1, filter_layout: OHWI16o, bias: true, activation: hardswish}",
                            "global_avgpool: {}", "{out_channels: 256, kernel: 1, bias: true, activation: hardswish}",
                            "{out_channels: 200, kernel: 1, bias: true}"], "NHWC", "NCHW", "auto", targets="[c]")
SHARED = "#pragma omp for schedule(static)"


def _tail_job(threads: int):
    config = make_config("tail", TAIL.with_block("c", f"{{threads: {threads}}}"))
    return config, jobs(config, ("c",))["c"]


def test_a_classifier_tail_shares_its_channel_blocks_one_barrier_an_op():
    config, job = _tail_job(2)
    text = job.files["tail.c"]
    shared = [m.group(1) for m in re.finditer(re.escape(SHARED) + r"\n\s*#endif\n\s*for \(int (\w+) = 0; \1 < (\d+)",
                                              text)]
    # the 7x7 conv's 18 blocks (9 + 9 rows of 7 against 18 x 4 split rows) and both GEMVs' blocks; no row loop
    assert shared == ["ko_outer_1", "ko_outer_3", "ko_outer"] and text.count(SHARED) == 3
    assert text.count("#pragma omp barrier") == 2 and text.count("#pragma omp master") == 2  # the input, the pool
    assert job.target_plan.threads == 2
    assert "one OpenMP team per call: 5 barriers, 1,168,908 FLOPs between them" in job.target_plan.notes


@requires_tool(*toolchain("c"))
def test_a_classifier_tail_on_two_threads_matches_numpy_and_one_thread(tmp_path):
    config, job = _tail_job(2)
    result = validate(config, "c")
    assert result.passed, f"{result.detail} (seed {result.seed})"
    exe = C().compile(job, tmp_path)
    args = random_inputs(config, job.plan, np.random.default_rng(17))
    outputs = []
    for threads in (2, 1):  # a block's sums are one thread's whichever runs it: the same bits
        ctypes.CDLL(str(exe.library.path))["tail_set_threads"](threads)
        arrays = exe.arguments(args, 0x7F)
        exe.call(arrays)
        outputs.append(arrays[-2].copy())
    assert np.array_equal(outputs[0], outputs[1])


def _op(rows: int, blocks: int) -> Loop:
    """An op's channel-block loop around its shared row loop (what rewrite.py and the planner emit)."""
    row = Loop(var="oh", extent=rows, body=(Stmt(code="float tile[32];", summary=""),))
    return Loop(var="ko_outer_2", extent=blocks, body=(*team.shared_rows(), row))


@pytest.mark.parametrize("rows, blocks, threads, by_blocks", [
    (7, 3, 2, False),   # blocks 2 x 7 = 14 rows on the busiest thread, rows 3 x 4 = 12: the rows
    (7, 18, 2, True),   # 9 x 7 = 63 against 18 x 4 = 72
    (1, 32, 2, True),   # a GEMV: one row
    (56, 2, 2, True),   # a tie (56 each): the blocks, one barrier instead of two
    (56, 2, 3, False),  # three threads, two blocks: one would idle
])
def test_the_team_splits_whichever_leaves_its_busiest_thread_fewer_rows(rows, blocks, threads, by_blocks):
    (*marker, loop) = team.blocks_shared((_op(rows, blocks),), threads)
    assert tuple(marker) == (team.shared_rows() if by_blocks else ())
    assert any(isinstance(n, Stmt) and n.code == SHARED for n in loop.body) != by_blocks  # rows split, or plain


def test_a_block_loop_that_copies_a_cache_keeps_its_row_split():
    """A filter repack (the master's store) inside the block loop: sharing the blocks would race on the cache."""
    repack = Loop(var="fk", extent=32, body=(Stmt(code="filter_cache[fk] = filter1[fk];", summary=""),))
    loop = _op(1, 32)
    loop = Loop(var=loop.var, extent=loop.extent, body=(repack, *loop.body))
    assert team.blocks_shared((loop,), 2) == (loop,)
