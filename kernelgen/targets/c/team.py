"""One OpenMP team per kernel call (c: {threads: N}): the stripe loop nest inside a single `omp parallel` region.

Every thread walks the stripe loops (their bounds are constants, so each meets the same work-sharing constructs
in the same order, as OpenMP requires); the conv row loops rewrite.py marked (`omp for`) are split between them;
everything else that stores (cache copies, filter repacks, the planner's loops, pools) runs on the master thread,
followed by a barrier before anything reads it. The caches stay the workspace's, shared by the team.

Why not a region per row loop: a region is a fork and a join; a network of 2,849 of them (MobileNetV2) spent its
time waking threads, not computing. The team is made once per call here, and the barriers between the phases of
a stripe (which the caches' reuse requires) are all that remains. The team's size is read at run time from the
kernel's own `kg_threads` (<kernel>_set_threads: a network's --threads), the config's `threads` by default.
"""
from __future__ import annotations

import re
from dataclasses import replace

from ...plan_types import Block, Guard, Loop, Node, Section, Stmt

# The least work (executed FLOPs) a kernel does per meeting of its threads for a team to pay. A barrier where a
# thread waits asleep (passive) cost ~6 us of CPU on a 2-core VM (MobileNetV2, 2 threads: 5,800 barriers an
# inference added 33 ms of CPU to 34); the network program's threads now spin ~40 us before they sleep
# (targets/c/network.SPIN_COUNT), so a barrier between back-to-back phases is a few hundred ns, and each call
# times its team against one thread anyway (kernel.c.j2: a team that does not pay is not used). 100 kFLOPs is 2-5 us
# of one core's work: MobileNetV3-small's squeeze-excite FCs and 7x7 depthwise convs (120-176 kFLOPs between their
# 3-4 barriers) then run their teams, 2 threads' wall 1.24 -> 1.14 ms (7 interleaved runs, quiet 2-core VM).
MIN_WORK_PER_BARRIER = 100_000
SHARED_FOR = "#pragma omp for schedule(static)"
# The region's team: kg_team_begin (kernel.c.j2) answers kg_threads or 1, whichever its calls have timed faster.
PARALLEL = "#pragma omp parallel num_threads(kg_team)"  # what rewrite.py puts before a conv's row loop (oh)
_DIRECTIVE = ("#ifdef _OPENMP", "#endif", SHARED_FOR)
# the loops over one op's output-channel blocks (the planner's names: the last op's, and an earlier op's of a chain)
_CHANNEL_BLOCKS = re.compile(r"ko_outer(_\d+)?")
# a statement that only declares a local from its initializer: every thread may run it (its copy is its own)
_DECLARATION = re.compile(r"^(const\s+)?(int|float|size_t|ptrdiff_t)\s*(\*\s*const\s+)?\w+\s*=[^=]")


def openmp(directive: str) -> tuple[Stmt, ...]:
    return (Stmt(code="#ifdef _OPENMP", summary=""), Stmt(code=directive, summary=""), Stmt(code="#endif", summary=""))


def timed_region(region: tuple[Node, ...]) -> tuple[Node, ...]:
    """`region` (an `omp parallel` directive and its block) between the kernel's team timers: the call runs on the
    team or on one thread, whichever the kernel's last calls found faster (kernel.c.j2's kg_team_begin)."""
    return (Stmt(code="double kg_start;", summary=""),
            Stmt(code="const int kg_team = kg_team_begin(&kg_start);", summary="kg_team = threads or 1, the faster"),
            *region,
            Stmt(code="kg_team_end(kg_team, kg_start);", summary="time the call"))


def shared_rows() -> tuple[Stmt, ...]:
    """The marker rewrite.py puts before a conv's row loop: its rows are split between the team."""
    return openmp(SHARED_FOR)


def blocks_shared(nodes: tuple[Node, ...], threads: int) -> tuple[Node, ...]:
    """`nodes` with each op's output-channel block loop split between the team instead of the conv rows inside it,
    where the loop holds nothing else that stores (so each block writes its own channels only) and that leaves the
    busiest thread no more rows to run: one meeting an op instead of one a block. A 1x1 conv on a pooled pixel (a
    squeeze-excite FC, a classifier's GEMV) has one row, so only its blocks can share; a 7x7 conv's 7 rows split
    4 + 3, its 18 blocks 9 + 9."""
    out: list[Node] = []
    for node in nodes:
        if isinstance(node, Loop) and _CHANNEL_BLOCKS.fullmatch(node.var) and _rows_alone(node.body) and \
                _busiest_rows(node.body, threads, node.extent, by_blocks=True) <= \
                _busiest_rows(node.body, threads, node.extent, by_blocks=False):
            out += [*shared_rows(), replace(node, body=solo(node.body))]
        elif isinstance(node, (Loop, Guard, Block, Section)):
            out.append(replace(node, body=blocks_shared(node.body, threads)))
        else:
            out.append(node)
    return tuple(out)


def _rows_alone(nodes: tuple[Node, ...]) -> bool:
    """Whether `nodes` hold shared row loops and, outside them, only declarations (nothing _split would leave to
    the master thread)."""
    shared_next = found = False
    for node in nodes:
        if isinstance(node, Stmt) and node.code in _DIRECTIVE:
            shared_next = shared_next or node.code == SHARED_FOR
        elif shared_next:
            shared_next, found = False, True
        elif _shares(node):
            if not _rows_alone(node.body):
                return False
            found = True
        elif not (isinstance(node, Stmt) and (not node.code or _DECLARATION.match(node.code)) and not node.assign):
            return False
    return found


def _busiest_rows(nodes: tuple[Node, ...], threads: int, blocks: int, *, by_blocks: bool) -> int:
    """The rows the busiest thread runs over `blocks` runs of `nodes`: the blocks split between the team, or each
    shared row loop in them."""
    rows = 0
    shared_next = False
    for node in nodes:
        if isinstance(node, Stmt) and node.code in _DIRECTIVE:
            shared_next = shared_next or node.code == SHARED_FOR
        elif shared_next:
            assert isinstance(node, Loop), node
            rows += node.extent if by_blocks else -(-node.extent // threads)
            shared_next = False
        elif isinstance(node, (Loop, Guard, Block, Section)):
            times = node.extent if isinstance(node, Loop) else 1
            rows += times * _busiest_rows(node.body, threads, 1, by_blocks=by_blocks)
    return rows * (-(-blocks // threads) if by_blocks else blocks)


def one_team(body: tuple[Node, ...]) -> tuple[Node, ...]:
    """`body` run by one team, or unchanged when no loop in it is shared."""
    if not any(_shares(n) for n in body):
        return body
    inside = _split(body)
    if len(inside) > 3 and getattr(inside[-2], "code", "") == "#pragma omp barrier":
        inside = inside[:-3]  # the region's end is a barrier already
    return timed_region((*openmp(PARALLEL), Block(label="one team of kg_team for the whole call", body=inside)))


def _shares(node: Node) -> bool:
    if isinstance(node, Stmt):
        return node.code == SHARED_FOR
    return isinstance(node, (Loop, Guard, Block, Section)) and any(_shares(n) for n in node.body)


def _split(nodes: tuple[Node, ...]) -> tuple[Node, ...]:
    out: list[Node] = []
    serial: list[Node] = []
    shared_next = False  # the loop after SHARED_FOR is the one the team splits
    for node in nodes:
        if isinstance(node, Stmt) and node.code in _DIRECTIVE:
            out += _on_master(serial)
            serial = []
            out.append(node)
            shared_next = shared_next or node.code == SHARED_FOR
        elif shared_next:
            assert isinstance(node, Loop), node
            out.append(node)
            shared_next = False
        elif _shares(node):
            out += _on_master(serial)
            serial = []
            out.append(replace(node, body=_split(node.body)))
        elif isinstance(node, Stmt) and (not node.code or _DECLARATION.match(node.code)) and not node.assign:
            out.append(node)  # index arithmetic, read by the master's stores and the team's loops alike
        else:
            serial.append(node)
    out += _on_master(serial)
    return tuple(out)


def _on_master(serial: list[Node]) -> list[Node]:
    """Stores one thread makes, then a barrier: the master's (thread 0's), so that locals it declares at this level
    are the same thread's in every such block."""
    if not serial:
        return []
    return [*openmp("#pragma omp master"), Block(label="the master thread", body=tuple(serial)),
            *openmp("#pragma omp barrier")]


def pays(work: int, meetings: int) -> bool:
    """Whether a team pays for a call of `work` FLOPs whose threads meet `meetings` times."""
    return work >= MIN_WORK_PER_BARRIER * meetings


def barriers(nodes: tuple[Node, ...], times: int = 1) -> int:
    """How many times a call's threads meet (the end of each `omp for` and each master block): what a team costs."""
    count = 0
    for node in nodes:
        if isinstance(node, Stmt) and node.code in (SHARED_FOR, "#pragma omp barrier"):
            count += times
        elif isinstance(node, Loop):
            count += barriers(node.body, times * node.extent)
        elif isinstance(node, (Guard, Block, Section)):
            count += barriers(node.body, times)
    return count


def solo(nodes: tuple[Node, ...]) -> tuple[Node, ...]:
    """`nodes` without the shared-rows markers: one thread runs them all."""
    out: list[Node] = []
    for node in nodes:
        if isinstance(node, Stmt) and node.code in _DIRECTIVE:
            continue
        out.append(replace(node, body=solo(node.body)) if isinstance(node, (Loop, Guard, Block, Section)) else node)
    return tuple(out)
