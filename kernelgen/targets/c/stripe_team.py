"""Threads over whole stripes (c: {threads: N}): one `omp parallel` region per call, the stripes the kernel's outer
loops walk shared out by one `omp for` (the loops collapsed into one index, handed out one at a time), each thread
with its own copy of the caches (workspace + thread x one thread's workspace). Inside a stripe nothing is shared, so
no thread waits for another until the region ends.

Why not split each conv's rows (team.py): every cache copy and filter repack then runs on one thread while the
other waits, and each phase of a stripe ends in a barrier (~6 us of CPU each, passive): two threads were no faster
than one. A stripe is the unit the planner made independent; two threads each running half of them do twice the
work per barrier (one) and copy their own windows in parallel.

Why handed out one at a time (`schedule(dynamic)`), not in equal shares: on a host whose other core is busy, the
thread that shares it runs at a fraction of its speed, and with equal shares the call lasts as long as that thread
takes for its half, about what one thread takes for all of it. Handed out, the free thread takes more.

Stripes are independent when nothing is carried from one to the next: not under the double-buffered pipeline
(stripe s + 1 loads while s computes, into the other buffer). A halo ring (schedule halo: reuse) keeps the rows the
next row stripe reads: where the loops outside it (batch, channel and column stripes) are fewer than the threads,
the row stripes are cut into runs of consecutive stripes (RING_RUNS_PER_THREAD a thread), each run loading its
first stripe's kept rows itself as stripe 0 does (`ho_outer == ho_first`): a run's start reads the halo rows
twice, and the runs are shared out instead.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

from ...plan_types import Block, Guard, Halo, Loop, Node, Pipeline, Plan, Section, Stmt
from .team import PARALLEL, openmp, timed_region

STRIPE_LOOPS = ("nb", "ko_outer", "wo_outer", "ho_outer")  # compose_stripes' nest, outermost first
# Runs of ring row stripes per thread: enough that a thread slowed by a busy core leaves the rest to the other
# (with 2 threads a 4-run split ends after 3 runs' time where 2 equal halves take 4), few enough that the halo rows
# each run reads again stay a small share of its input (a run is at least one stripe).
RING_RUNS_PER_THREAD = 2
RING_START = "ho_outer == 0"  # planner.builder's guard on the first stripe's load of the rows the ring keeps


@dataclass(frozen=True, slots=True, kw_only=True)
class StripeTeam:
    """The stripe nest run by one team, each thread on its own caches."""

    body: tuple[Node, ...]  # the region: the caches' pointers (each thread's), then the shared-out stripe loops
    stripes: int  # independent stripes (or runs of ring row stripes) the threads share
    shared: str  # what they are, for the kernel's notes: "4 stripes", "4 runs of ring row stripes"
    thread_elements: int  # one thread's workspace (the plan's, rounded up to the caches' alignment)
    workspace_elements: int  # the workspace of the most threads the kernel runs (the config's `threads`)


def shared_loops(nest: tuple[Node, ...], plan: Plan) -> tuple[tuple[Loop, ...], Loop | None]:
    """The stripe loops at the top of `nest` whose iterations share no state, outermost first (a perfect nest:
    `omp for collapse` takes them as one loop), and the halo ring's row-stripe loop below them if that is where
    they stop (None otherwise)."""
    if plan.pipeline is Pipeline.DOUBLE_BUFFER or len(nest) != 1:
        return (), None
    loops: list[Loop] = []
    node = nest[0]
    while isinstance(node, Loop) and node.var in STRIPE_LOOPS:
        if node.var == "ho_outer" and plan.halo is Halo.REUSE:
            return tuple(loops), node  # the ring: row stripe ho_outer + 1 reads rows stripe ho_outer loaded
        loops.append(node)
        if len(node.body) != 1:
            break
        node = node.body[0]
    return tuple(loops), None


def stripe_team(nest: tuple[Node, ...], prologue: tuple[str, ...], plan: Plan, threads: int) -> StripeTeam | None:
    """`nest` (the stripe loops, without shared-rows markers) shared out between up to `threads` threads by stripe,
    the caches' pointers (`prologue`) declared per thread inside the region; None when fewer independent stripes
    (or runs of ring stripes) than threads (the row split then, team.py)."""
    loops, ring = shared_loops(nest, plan)
    stripes = math.prod(loop.extent for loop in loops)
    label = f"{stripes} stripes"
    if threads >= 2 and ring is not None and stripes < threads and ring.extent >= 2:
        runs = _ring_runs(ring, min(ring.extent, RING_RUNS_PER_THREAD * threads * stripes) // stripes)
        if runs is not None:
            nest, loops = _replaced(nest, ring, runs), (*loops, runs)
            label = f"{stripes * runs.extent} runs of ring row stripes"
            stripes *= runs.extent
    if threads < 2 or not loops or stripes < threads:
        return None
    align = plan.alignment_bytes // plan.element_bytes
    thread_elements = -(-plan.workspace_elements // align) * align  # each copy's caches keep their alignment
    collapse = f" collapse({len(loops)})" if len(loops) > 1 else ""
    own = (Stmt(code=f"{plan.ctype} *const thread_workspace = workspace + (size_t)KG_THREAD * {thread_elements};",
                summary=f"thread_workspace = workspace + thread * {thread_elements}"),
           *(Stmt(code=re.sub(r"\bworkspace\b", "thread_workspace", line), summary="") for line in prologue))
    region = Block(label=f"one team of kg_team: {label} shared out, each thread on its own caches",
                   body=(*own, *openmp(f"#pragma omp for{collapse} schedule(dynamic)"), *nest))
    return StripeTeam(body=timed_region((*openmp(PARALLEL), region)), stripes=stripes,
                      shared=label, thread_elements=thread_elements, workspace_elements=thread_elements * threads)


def _ring_runs(ring: Loop, runs: int) -> Loop | None:
    """The ring's row-stripe loop as `runs` runs of consecutive stripes, each starting its ring afresh (its first
    stripe loads the kept rows, as stripe 0 does); None when the ring's start is not the one guard this knows."""
    body, starts = _restarted(ring.body)
    if runs < 2 or not starts or any(re.search(r"\bho_outer\s*(==|!=|>|<=)\s*0\b", line) for line in _texts(body)):
        return None
    longest = -(-ring.extent // runs)
    step: tuple[Node, ...] = (
        Stmt(code="const int ho_outer = ho_first + ho_step;", summary="ho_outer = ho_first + ho_step"),
        *(body if ring.extent % runs == 0 else (Guard(cond="ho_outer < ho_end", body=body),)))
    return Loop(var="ho_run", extent=runs, comment=f"{ring.extent} ring row stripes in {runs} runs", body=(
        Stmt(code=f"const int ho_first = ho_run * {ring.extent} / {runs};",
             summary="ho_first = the run's first stripe"),
        Stmt(code=f"const int ho_end = (ho_run + 1) * {ring.extent} / {runs};",
             summary="ho_end = the next run's first"),
        Loop(var="ho_step", extent=longest, body=step)))


def _restarted(nodes: tuple[Node, ...]) -> tuple[tuple[Node, ...], int]:
    """`nodes` with the ring's first-stripe guard made the run's first stripe, and how many it changed."""
    out, count = [], 0
    for node in nodes:
        if isinstance(node, Guard) and node.cond == RING_START:
            inner, n = _restarted(node.body)
            out.append(Guard(cond="ho_outer == ho_first", body=inner))
            count += 1 + n
        elif isinstance(node, (Loop, Guard, Block, Section)):
            inner, n = _restarted(node.body)
            out.append(replace(node, body=inner))
            count += n
        else:
            out.append(node)
    return tuple(out), count


def _replaced(nest: tuple[Node, ...], old: Loop, new: Loop) -> tuple[Node, ...]:
    return tuple(new if node is old else replace(node, body=_replaced(node.body, old, new))
                 if isinstance(node, (Loop, Guard, Block, Section)) else node for node in nest)


def _texts(nodes: tuple[Node, ...]):
    for node in nodes:
        if isinstance(node, Stmt):
            yield node.text
        elif isinstance(node, Guard):
            yield node.cond
        if isinstance(node, (Loop, Guard, Block, Section)):
            yield from _texts(node.body)
