"""A block of output rows of the depthwise sweep (templates/hvx/depthwise_sweep_uint8.c.j2) as a packet schedule:
Hexagon inline assembly for up to 4 whole rows of output pixels of one 32-channel block. Pure.

Why assembly: per 4 pixels x 32 channels the row issues 12 vector-by-vector vrmpy and 8 vmpye / vmpyo, and no
packet holds two of those (each takes both HVX multiply resources): 20 packets would do, with the loads, the
transposes (two vshuff per vector), the mids (vasl, vshuffo), the rest of the requantization and the store in
their free slots. clang's schedule of the same C takes 27-30 per group (the sweep keeps more live vectors than the
32 registers: spills). Here the block is a list of instructions in program order over values
(depthwise_program.py), each value on a register (the one free the longest, so that few false dependences remain),
then placed by a list scheduler: each instruction in the first packet after every instruction it reads from (a
packet reads its registers before any write, so one that overwrites a register may share the packet of the
register's last reader), longest chain first, under each packet's limits. The assembler checks every packet (an
illegal one fails the build).

Operands (%[name]): the scalars p0-p8 (each input row's first 8-column block, advanced here by cstep, the bytes
between blocks; a padding row has none: its words are the zero point), out0-out3 (the output rows' first block,
advanced by ostep), k16 (16), qbytes (the last group's stored bytes, when the output ends inside it); the vectors
wa0-wa2 / wb0-wb2 (A and B of kernel row r), corr (the sums' start), mult, rnd, shift, qmin / qmax (the
activation's clamp), zp, and keep / fill (a partial vector's pixels, and the zero point in the others). The rest of
the vector registers are temporaries, declared clobbered (with q0 / q1 for masked stores); a tail block's store
keeps its channels: lanes (0xff per channel byte held), ones (0x01010101)."""
from __future__ import annotations

import bisect
import functools
from dataclasses import dataclass

from .depthwise_program import ALONE, ALU, LOAD, MPY, PERM, SCALAR, SHIFT, STORE, Block, Instr, program

# per packet (mpy: a vector-by-vector multiply takes both multiply resources); of the 4 HVX resources a packet
# has, each HVX instruction and vector load or store takes HVX_UNITS (as the assembler's packet checks find)
LIMITS = {MPY: 1, PERM: 1, SHIFT: 1, ALU: 2, LOAD: 1, STORE: 1, SCALAR: 2, ALONE: 1}
HVX_UNITS = {MPY: 2, PERM: 1, SHIFT: 1, ALU: 1, LOAD: 1, STORE: 1, SCALAR: 0, ALONE: 4}
SLOTS = 4
MAX_ROWS = 4  # output rows per block: the template binds p0-p8 and out0-out3
SCALARS = (*(f"p{i}" for i in range(9)), "cstep", *(f"out{j}" for j in range(MAX_ROWS)), "ostep", "k16", "qbytes",
           "ones")


@dataclass(frozen=True, slots=True, kw_only=True)
class RowAsm:
    """The packets of one block of output rows and the registers they name."""

    block: Block
    packets: tuple[tuple[str, ...], ...]  # instruction texts, registers as %[operand], vN or q0
    vectors: tuple[str, ...]  # the vector operands it reads, in the order the template binds them
    inputs: tuple[tuple[str, int], ...]  # the row pointers it reads and advances, each with its input row (the
    # block's first is 0): p<k> row k when the block's output rows share their input rows, else output row j's
    # kernel row r p<3j + r>, row down * j + r
    scalars: tuple[str, ...]  # the other scalar operands it reads (out<j>, the output rows, advanced too)
    temps: tuple[str, ...]  # the temporaries it writes (declared clobbered)
    predicates: tuple[str, ...]  # the predicate registers it writes (declared clobbered): q0 the last group's
    # columns (qbytes), q1 the block's channels (lanes)


def vector_operands(block: Block) -> tuple[str, ...]:
    rows = range(3)
    names = ([f"wa{r}" for r in rows] if block.stride == 1 else []) + [f"wb{r}" for r in rows]
    names += ["corr", "mult", "rnd", "shift"] + (["qmin"] if block.clamps[0] else [])
    names += ["qmax"] if block.clamps[1] else []
    return (*names, "zp", *(("keep", "fill") if block.partial else ()), *(("lanes",) if block.lanes else ()))


def _allocate(instrs: list[Instr], temps: int) -> list[Instr]:
    """Each temporary value t<k> on a register v<i>, in program order: a register is free again after the last
    instruction reading its value (which may write the next value itself), and the one free the longest is taken."""
    last = {name: i for i, instr in enumerate(instrs) for name in (*instr.reads, *instr.writes) if name[0] == "t"}
    free, where, out = [f"v{i}" for i in range(temps)], {}, []
    for i, instr in enumerate(instrs):
        for name in instr.writes:
            if name[0] == "t" and name not in where:
                if not free:
                    raise ValueError(f"the depthwise row needs more than {temps} temporary vector registers")
                where[name] = free.pop(0)
        rename = {**{n: n for n in (*instr.reads, *instr.writes)}, **where}
        out.append(Instr(text=instr.text.format(**{n: "{" + rename[n] + "}" for n in rename}), unit=instr.unit,
                         reads=tuple(rename[n] for n in instr.reads), writes=tuple(rename[n] for n in instr.writes)))
        for name in {*instr.reads, *instr.writes}:
            if name[0] == "t" and last[name] == i:
                free.append(where.pop(name))
    return out


PRIORITIES = ("chain", "multiplies", "weighted")


def _schedule(instrs: list[Instr], priority: str) -> list[list[Instr]]:
    """List scheduling in priority order: the longest chain of reads to the end first ("chain"; "multiplies": the
    multiplies first, the bottleneck, then the longest chain; "weighted": the chain with each multiply and permute,
    the two resources one packet holds one of, counted 2 longer), then program order."""
    n = len(instrs)
    preds: list[list[tuple[int, int]]] = [[] for _ in range(n)]  # (earlier instr, 1: strictly after / 0: same ok)
    last_write: dict[str, int] = {}
    reads_since: dict[str, list[int]] = {}
    for j, b in enumerate(instrs):
        for r in b.reads:
            if r in last_write:
                preds[j].append((last_write[r], 1))
        for w in b.writes:
            if w in last_write:
                preds[j].append((last_write[w], 1))
            preds[j].extend((i, 0) for i in reads_since.get(w, ()) if i != j)
        for r in b.reads:
            reads_since.setdefault(r, []).append(j)
        for w in b.writes:
            last_write[w] = j
            reads_since[w] = []
    height = [1] * n
    for j in reversed(range(n)):
        for i, gap in preds[j]:
            height[i] = max(height[i], height[j] + gap)
    weight = [2 if priority == "weighted" and instr.unit in (MPY, PERM) else 0 for instr in instrs]
    order = sorted(range(n), key=lambda i: (priority == "multiplies" and instrs[i].unit != MPY,
                                            -height[i] - weight[i], i))
    rank = {j: k for k, j in enumerate(order)}
    succs: list[list[int]] = [[] for _ in range(n)]
    waiting = [len(p) for p in preds]  # predecessors not yet placed
    for j, p in enumerate(preds):
        for i, _ in p:
            succs[i].append(j)
    # the instructions whose predecessors are all placed, in priority order (as ranks); each packet scans them once
    # in that order, so one made ready by a placement in this packet joins it only if it ranks after the placed one
    ready = sorted(rank[j] for j in range(n) if not waiting[j])
    packet_of: dict[int, int] = {}
    packets: list[list[int]] = []
    t = 0
    while len(packet_of) < n:
        packets.append([])
        units: list[str] = []
        k = 0
        while k < len(ready):
            j = order[ready[k]]
            if any(packet_of[i] + gap > t for i, gap in preds[j]):
                k += 1
                continue
            trial = units + [instrs[j].unit]
            if not (len(trial) <= SLOTS and all(trial.count(u) <= LIMITS[u] for u in set(trial))
                    and sum(HVX_UNITS[u] for u in trial) <= 4 and (ALONE not in trial or len(trial) == 1)):
                k += 1
                continue
            packets[t].append(j)
            packet_of[j] = t
            units = trial
            del ready[k]
            for m in succs[j]:
                waiting[m] -= 1
                if not waiting[m]:
                    bisect.insort(ready, rank[m])
                    k += rank[m] < rank[j]  # ranked before the placed one: the next packet's scan finds it
        t += 1
    return [[instrs[j] for j in sorted(p)] for p in packets]


@functools.lru_cache(maxsize=64)
def block_asm(block: Block) -> RowAsm:
    """The shortest schedule over the program forms (input rows shared by the block's output rows or read by each;
    rows one after the other or group by group; each group's requantization right after its taps or after the
    next group's; mids by permutes or shifts: stride 2 has more permutes than packets) and three priorities, among
    the programs whose values fit the registers the operands leave. The scheduler overlaps one row's last groups
    with the next row's first: the per-row start (3 rows' first loads and transposes before the first vrmpy)
    hides behind the previous row's work."""
    assert 1 <= block.rows <= MAX_ROWS and block.in_rows <= 9, block
    vectors = vector_operands(block)
    temps = 32 - len(vectors)
    best, best_share = None, True
    # without sharing each output row has its own 3 row pointers (p0-p8: 3 rows at most)
    for share in (True, False) if block.rows <= 3 else (True,):
        for by_row, interleave, shifted_mids in ((True, False, False), (True, True, False), (True, False, True),
                                                 (True, True, True), (False, False, False), (False, True, True)):
            if block.rows == 1 and not by_row:
                continue
            try:
                instrs = _allocate(program(block, share, shifted_mids, by_row, interleave), temps)
            except ValueError:
                continue
            for priority in PRIORITIES:
                packets = _schedule(instrs, priority)
                if best is None or len(packets) < len(best):
                    best, best_share = packets, share
    if best is None:
        raise ValueError(f"no register allocation of the depthwise block fits {temps} temporaries")
    names = {name: f"%[{name}]" for name in (*vectors, *SCALARS)} | {f"v{i}": f"v{i}" for i in range(temps)}
    names |= {"q0": "q0", "q1": "q1"}
    used = sorted({w for p in best for i in p for w in i.writes if w[0] == "v"}, key=lambda r: int(r[1:]))
    read = {r for p in best for i in p for r in i.reads}
    inputs = tuple((f"p{i}", i if best_share else block.down * (i // 3) + i % 3) for i in range(9)
                   if f"p{i}" in read)
    return RowAsm(block=block, packets=tuple(tuple(i.text.format(**names) for i in p) for p in best),
                  vectors=vectors, inputs=inputs, scalars=tuple(n for n in SCALARS[9:] if n in read),
                  temps=tuple(used), predicates=tuple(sorted({w for p in best for i in p for w in i.writes
                                                             if w[0] == "q"})))
