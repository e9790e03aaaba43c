"""Threads over whole stripes (c: {threads: N}): one `omp parallel` region per call, the stripes the kernel's outer
loops walk shared out by one `omp for` (static, the loops collapsed into one index), each thread with its own copy of
the caches (workspace + thread x one thread's workspace). Inside a stripe nothing is shared, so no thread waits for
another until the region ends.

Why not split each conv's rows (team.py): every cache copy and filter repack then runs on one thread while the
other waits, and each phase of a stripe ends in a barrier (~6 us of CPU each, passive): two threads were no faster
than one. A stripe is the unit the planner made independent; two threads each running half of them do twice the
work per barrier (one) and copy their own windows in parallel.

Stripes are independent when nothing is carried from one to the next: not under the double-buffered pipeline
(stripe s + 1 loads while s computes, into the other buffer), and a halo ring (schedule halo: reuse) keeps the rows
the next row stripe reads, so there the row-stripe loop (ho_outer) stays whole inside each thread's share and only
the loops outside it (batch, channel and column stripes) are split.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

from ...plan_types import Block, Halo, Loop, Node, Pipeline, Plan, Stmt
from .team import openmp

STRIPE_LOOPS = ("nb", "ko_outer", "wo_outer", "ho_outer")  # compose_stripes' nest, outermost first


@dataclass(frozen=True, slots=True, kw_only=True)
class StripeTeam:
    """The stripe nest run by one team, each thread on its own caches."""

    body: tuple[Node, ...]  # the region: the caches' pointers (each thread's), then the shared-out stripe loops
    stripes: int  # independent stripes the threads share
    thread_elements: int  # one thread's workspace (the plan's, rounded up to the caches' alignment)
    workspace_elements: int  # the workspace of the most threads the kernel runs (the config's `threads`)


def shared_loops(nest: tuple[Node, ...], plan: Plan) -> tuple[Loop, ...]:
    """The stripe loops at the top of `nest` whose iterations share no state, outermost first (a perfect nest:
    `omp for collapse` takes them as one loop)."""
    if plan.pipeline is Pipeline.DOUBLE_BUFFER or len(nest) != 1:
        return ()
    loops: list[Loop] = []
    node = nest[0]
    while isinstance(node, Loop) and node.var in STRIPE_LOOPS:
        if node.var == "ho_outer" and plan.halo is Halo.REUSE:
            break  # the ring: row stripe ho_outer + 1 reads rows stripe ho_outer loaded
        loops.append(node)
        if len(node.body) != 1:
            break
        node = node.body[0]
    return tuple(loops)


def stripe_team(nest: tuple[Node, ...], prologue: tuple[str, ...], plan: Plan, threads: int) -> StripeTeam | None:
    """`nest` (the stripe loops, without shared-rows markers) shared out between up to `threads` threads by stripe,
    the caches' pointers (`prologue`) declared per thread inside the region; None when fewer independent stripes
    than threads (the row split then, team.py)."""
    loops = shared_loops(nest, plan)
    stripes = math.prod(loop.extent for loop in loops)
    if threads < 2 or not loops or stripes < threads:
        return None
    align = plan.alignment_bytes // plan.element_bytes
    thread_elements = -(-plan.workspace_elements // align) * align  # each copy's caches keep their alignment
    collapse = f" collapse({len(loops)})" if len(loops) > 1 else ""
    own = (Stmt(code=f"{plan.ctype} *const thread_workspace = workspace + (size_t)KG_THREAD * {thread_elements};",
                summary=f"thread_workspace = workspace + thread * {thread_elements}"),
           *(Stmt(code=re.sub(r"\bworkspace\b", "thread_workspace", line), summary="") for line in prologue))
    region = Block(label=f"one team of kg_threads: {stripes} stripes shared out, each thread on its own caches",
                   body=(*own, *openmp(f"#pragma omp for{collapse} schedule(static)"), *nest))
    return StripeTeam(body=(*openmp("#pragma omp parallel num_threads(kg_threads)"), region), stripes=stripes,
                      thread_elements=thread_elements, workspace_elements=thread_elements * threads)

