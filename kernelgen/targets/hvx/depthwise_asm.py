"""One row of the depthwise sweep (templates/hvx/depthwise_sweep_uint8.c.j2) as a packet schedule: Hexagon inline
assembly for a whole row of output pixels of one 32-channel block. Pure.

Why assembly: per 4 pixels x 32 channels the row issues 12 vector-by-vector vrmpy and 8 vmpye / vmpyo, and no
packet holds two of those (each takes both HVX multiply resources): 20 packets would do, with the loads, the
transposes (two vshuff per vector), the mids (vasl, vshuffo), the rest of the requantization and the store in
their free slots. clang's schedule of the same C takes 27-30 per group (the sweep keeps more live vectors than the
32 registers: spills). Here the row is a list of instructions in program order over values, each value on a
register (the one free the longest, so that few false dependences remain), then placed by a list scheduler: each
instruction in the first packet after every instruction it reads from (a packet reads its registers before any
write, so one that overwrites a register may share the packet of the register's last reader), longest chain first,
under each packet's limits. The assembler checks every packet (an illegal one fails the build).

The row (input pixels s..s+3 of a channel as one word W(s): transposed vector q is W(4q); the mid M(4q+2) is the odd
halfwords of q next to the even ones of q + 1; one column of left padding, so A = [w0, w1, w2, 0] on W(s) is output
s + 1 and B = [0, w0, w1, w2] output s + 2, or with stride 2, B on W(s) is output (s + 2) / 2): group g of 4 outputs
takes B on M(4g-2), A and B on W(4g), A on M(4g+2); stride 2, B on M(8g-2), W(8g), M(8g+2), W(8g+4). Vectors past the
input are the zero point; a partial last one keeps its pixels and takes the zero point for the rest.

Operands (%[name]): the scalars p0-p2 (p3-p5 for a second output row; each input row's first 8-column block,
advanced here by c0-c5, the bytes between blocks: 0 for a padding row, whose "row" is a 256-byte row of the zero
point), out0 / out1 (the output rows' first block, advanced by ostep), k16 (16), qbytes (the last group's stored
bytes, when the output ends inside it); the vectors wa0-wa2 / wb0-wb2 (A and B of kernel row r), corr (the sums'
start), mult, rnd, shift, qmin / qmax (the activation's clamp), zp, and keep / fill (a partial vector's pixels, and
the zero point in the others). The rest of the vector registers are temporaries, declared clobbered (with q0 / q1
for masked stores); a tail block's store keeps its channels: lanes (0xff per channel byte held), ones (0x01010101)."""
from __future__ import annotations

import functools
from dataclasses import dataclass

MPY, PERM, SHIFT, ALU, LOAD, STORE, SCALAR = "mpy", "perm", "shift", "alu", "load", "store", "scalar"
ALONE = "alone"  # a predicate and: which packets the assembler takes it in is not modelled, so it issues alone
# per packet (mpy: a vector-by-vector multiply takes both multiply resources); of the 4 HVX resources a packet
# has, each HVX instruction and vector load or store takes HVX_UNITS (as the assembler's packet checks find)
LIMITS = {MPY: 1, PERM: 1, SHIFT: 1, ALU: 2, LOAD: 1, STORE: 1, SCALAR: 2, ALONE: 1}
HVX_UNITS = {MPY: 2, PERM: 1, SHIFT: 1, ALU: 1, LOAD: 1, STORE: 1, SCALAR: 0, ALONE: 4}
SLOTS = 4
SCALARS = (*(f"p{i}" for i in range(6)), *(f"c{i}" for i in range(6)), "out0", "out1", "ostep", "k16", "qbytes",
           "ones")


@dataclass(frozen=True, slots=True)
class Instr:
    text: str  # with {name} for every register
    unit: str
    reads: tuple[str, ...]
    writes: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class RowAsm:
    """The packets of one output row (or two) and the registers they name."""

    packets: tuple[tuple[str, ...], ...]  # instruction texts, registers as %[operand], vN or q0
    vectors: tuple[str, ...]  # the vector operands it reads, in the order the template binds them
    temps: tuple[str, ...]  # the temporaries it writes (declared clobbered)
    predicates: tuple[str, ...]  # the predicate registers it writes (declared clobbered): q0 the last group's
    # columns (qbytes), q1 the block's channels (lanes)


def vector_operands(stride: int, clamps: tuple[bool, bool], partial: bool, lanes: bool) -> tuple[str, ...]:
    rows = range(3)
    names = ([f"wa{r}" for r in rows] if stride == 1 else []) + [f"wb{r}" for r in rows]
    names += ["corr", "mult", "rnd", "shift"] + (["qmin"] if clamps[0] else []) + (["qmax"] if clamps[1] else [])
    return (*names, "zp", *(("keep", "fill") if partial else ()), *(("lanes",) if lanes else ()))


class _Program:
    """The row's instructions in program order, over temporaries t0.. (one per value) and operands."""

    def __init__(self) -> None:
        self.instrs: list[Instr] = []
        self.count = 0

    def temp(self) -> str:
        self.count += 1
        return f"t{self.count - 1}"

    def emit(self, text: str, unit: str, reads: tuple[str, ...], writes: tuple[str, ...]) -> None:
        self.instrs.append(Instr(text=text, unit=unit, reads=reads, writes=writes))


def _program(stride: int, in_w: int, out_w: int, clamps: tuple[bool, bool], interleave: bool,
             shifted_mids: bool, lanes: bool) -> list[Instr]:
    nf, nq = in_w // 4, (in_w + 3) // 4
    groups = (out_w + 3) // 4
    prog = _Program()
    emit = prog.emit
    loaded = [0, 0, 0]  # per row: the next vector index the pointer is at

    def load(r: int, q: int) -> str:
        """Transposed vector q of input row r (vectors load in order)."""
        if q >= nq:
            return "zp"
        assert q == loaded[r], (r, q, loaded[r])
        loaded[r] += 1
        t = prog.temp()
        emit(f"{{{t}}} = vmem({{p{r}}}+#{q % 2})", LOAD, (f"p{r}",), (t,))
        if q % 2:
            emit(f"{{p{r}}} = add({{p{r}}},{{c{r}}})", SCALAR, (f"p{r}", f"c{r}"), (f"p{r}",))
        emit(f"{{{t}}}.b = vshuff({{{t}}}.b)", PERM, (t,), (t,))
        emit(f"{{{t}}}.b = vshuff({{{t}}}.b)", PERM, (t,), (t,))
        if q == nf:  # the partial last vector: its pixels, the zero point past them
            emit(f"{{{t}}} = vand({{{t}}},{{keep}})", ALU, (t, "keep"), (t,))
            emit(f"{{{t}}} = vor({{{t}}},{{fill}})", ALU, (t, "fill"), (t,))
        return t

    def mid(left: str, right: str) -> str:
        """M: the odd halfwords of left next to the even ones of right, by a vshuffo (the permute resource) or, with
        shifted_mids, as (left >> 16) | (right << 16) per word (two shifts and an ALU op)."""
        s = prog.temp()
        emit(f"{{{s}}}.w = vasl({{{right}}}.w,{{k16}})", SHIFT, (right, "k16"), (s,))
        if not shifted_mids:
            emit(f"{{{s}}}.h = vshuffo({{{s}}}.h,{{{left}}}.h)", PERM, (s, left), (s,))
            return s
        low = prog.temp()
        emit(f"{{{low}}}.uw = vlsr({{{left}}}.uw,{{k16}})", SHIFT, (left, "k16"), (low,))
        emit(f"{{{s}}} = vor({{{s}}},{{{low}}})", ALU, (s, low), (s,))
        return s

    if lanes:  # a tail block: its channels as a predicate (takes a multiply resource, the assembler finds)
        emit("{q1} = vand({lanes},{ones})", MPY, ("lanes", "ones"), ("q1",))
    x = [load(r, 0) for r in range(3)]
    m = [mid("zp", x[r]) for r in range(3)]  # M(-2): pixels -2, -1 are padding

    def taps(g: int) -> list[str]:
        """Group g's sums of the pixels the output holds (the last group's others are neither summed nor stored)."""
        acc = [prog.temp() for _ in range(min(4, out_w - 4 * g))]
        for a in acc:
            emit(f"{{{a}}} = {{corr}}", ALU, ("corr",), (a,))
        for r in range(3):
            if stride == 1:
                nx = load(r, g + 1)
                mm = mid(x[r], nx)  # M(4g+2)
                words = ((m[r], "wb"), (x[r], "wa"), (x[r], "wb"), (mm, "wa"))
                m[r], x[r] = mm, nx
            else:
                x1, x2 = load(r, 2 * g + 1), load(r, 2 * g + 2)
                m0, m1 = mid(x[r], x1), mid(x1, x2)  # M(8g+2), M(8g+6)
                words = ((m[r], "wb"), (x[r], "wb"), (m0, "wb"), (x1, "wb"))
                m[r], x[r] = m1, x2
            for a, (word, w) in zip(acc, words):  # zip: the pixels summed
                emit(f"{{{a}}}.w += vrmpy({{{word}}}.ub,{{{w}{r}}}.b)", MPY, (a, word, f"{w}{r}"), (a,))
        return acc

    def requant(g: int, acc: list[str]) -> None:
        e = []
        for a in acc:  # round(acc * m / 2^31) (vmpye, vmpyo with its rounding shift), + rnd, >> shift
            t = prog.temp()
            e.append(t)
            emit(f"{{{t}}}.w = vmpye({{{a}}}.w,{{mult}}.uh)", MPY, (a, "mult"), (t,))
            emit(f"{{{t}}}.w += vmpyo({{{a}}}.w,{{mult}}.h):<<1:rnd:sat:shift", MPY, (t, a, "mult"), (t,))
            emit(f"{{{t}}}.w = vadd({{{t}}}.w,{{rnd}}.w):sat", ALU, (t, "rnd"), (t,))
            emit(f"{{{t}}}.w = vasr({{{t}}}.w,{{shift}}.w)", SHIFT, (t, "shift"), (t,))
        e += [e[-1]] * (4 - len(e))  # pixels not stored: any bytes
        if len(set(e)) > 2:
            emit(f"{{{e[2]}}}.h = vpack({{{e[3]}}}.w,{{{e[2]}}}.w):sat", PERM, (e[3], e[2]), (e[2],))
        emit(f"{{{e[0]}}}.h = vpack({{{e[1]}}}.w,{{{e[0]}}}.w):sat", PERM, (e[1], e[0]), (e[0],))
        high = e[2] if len(set(e)) > 2 else e[0]
        emit(f"{{{e[0]}}}.ub = vpack({{{high}}}.h,{{{e[0]}}}.h):sat", PERM, (high, e[0]), (e[0],))
        if clamps[0]:
            emit(f"{{{e[0]}}}.ub = vmax({{{e[0]}}}.ub,{{qmin}}.ub)", ALU, (e[0], "qmin"), (e[0],))
        if clamps[1]:
            emit(f"{{{e[0]}}}.ub = vmin({{{e[0]}}}.ub,{{qmax}}.ub)", ALU, (e[0], "qmax"), (e[0],))
        if 4 * g + 4 <= out_w and not lanes:
            emit(f"vmem({{out0}}+#{g % 2}) = {{{e[0]}}}", STORE, (e[0], "out0"), ())
        elif 4 * g + 4 <= out_w:
            emit(f"if ({{q1}}) vmem({{out0}}+#{g % 2}) = {{{e[0]}}}", STORE, ("q1", e[0], "out0"), ())
        else:  # the output's columns alone (and the block's channels)
            emit("{q0} = vsetq({qbytes})", PERM, ("qbytes",), ("q0",))
            if lanes:
                emit("{q0} = and({q0},{q1})", ALONE, ("q0", "q1"), ("q0",))
            emit(f"if ({{q0}}) vmem({{out0}}+#{g % 2}) = {{{e[0]}}}", STORE, ("q0", e[0], "out0"), ())
        if g % 2:
            emit("{out0} = add({out0},{ostep})", SCALAR, ("out0", "ostep"), ("out0",))

    pending = None
    for g in range(groups):
        acc = taps(g)
        if not interleave:
            requant(g, acc)
            continue
        if pending is not None:
            requant(g - 1, pending)
        pending = acc
    if interleave:
        requant(groups - 1, pending)
    return _live(prog.instrs)


def _second_row(instrs: list[Instr]) -> list[Instr]:
    """The same row's instructions for a second output row: input rows p3-p5 (c3-c5), out1, its own temporaries."""
    rename = {**{f"p{r}": f"p{r + 3}" for r in range(3)}, **{f"c{r}": f"c{r + 3}" for r in range(3)}, "out0": "out1"}
    out = []
    for instr in instrs:
        names = {n: rename.get(n, "t1_" + n[1:] if n[0] == "t" else n) for n in (*instr.reads, *instr.writes)}
        out.append(Instr(text=instr.text.format(**{n: "{" + names[n] + "}" for n in names}), unit=instr.unit,
                         reads=tuple(names[n] for n in instr.reads), writes=tuple(names[n] for n in instr.writes)))
    return out


def _live(instrs: list[Instr]) -> list[Instr]:
    """Without the instructions whose values nothing stored reads (the last group's loads and mids past the output,
    pointer steps past the last load)."""
    live: set[str] = set()
    kept = []
    for instr in reversed(instrs):
        if instr.unit == STORE or set(instr.writes) & live:
            live -= set(instr.writes)
            live |= set(instr.reads)
            kept.append(instr)
    return kept[::-1]


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


def _schedule(instrs: list[Instr], multiplies_first: bool) -> list[list[Instr]]:
    """List scheduling in priority order: the longest chain of reads to the end first (or the multiplies first,
    the bottleneck, then the longest chain), then program order."""
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
    order = sorted(range(n), key=lambda i: (multiplies_first and instrs[i].unit != MPY, -height[i], i))
    packet_of: dict[int, int] = {}
    packets: list[list[int]] = []
    t = 0
    while len(packet_of) < n:
        packets.append([])
        for j in order:
            if j in packet_of or not all(i in packet_of and packet_of[i] + gap <= t for i, gap in preds[j]):
                continue
            units = [instrs[i].unit for i in packets[t]] + [instrs[j].unit]
            if (len(units) <= SLOTS and all(units.count(u) <= LIMITS[u] for u in LIMITS)
                    and sum(HVX_UNITS[u] for u in units) <= 4 and (ALONE not in units or len(units) == 1)):
                packets[t].append(j)
                packet_of[j] = t
        t += 1
    return [[instrs[j] for j in sorted(p)] for p in packets]


@functools.lru_cache(maxsize=64)
def row_asm(stride: int, in_w: int, out_w: int, clamps: tuple[bool, bool], rows: int = 1,
            lanes: bool = False) -> RowAsm:
    """The shortest schedule of two program orders (each group's requantization right after its taps, or after the
    next group's), two forms of the mids (permutes or shifts: stride 2 has more permutes than packets) and two
    priorities, among the programs whose values fit the registers the operands leave. rows 2: two output rows,
    one after the other in program order (the scheduler overlaps the first's last groups with the second's first)."""
    vectors = vector_operands(stride, clamps, in_w % 4 != 0, lanes)
    temps = 32 - len(vectors)
    best = None
    for interleave, shifted_mids in ((False, False), (True, False), (False, True), (True, True)):
        try:
            program = _program(stride, in_w, out_w, clamps, interleave, shifted_mids, lanes)
            instrs = _allocate(program + (_second_row(program) if rows == 2 else []), temps)
        except ValueError:
            continue
        for multiplies_first in (False, True):
            packets = _schedule(instrs, multiplies_first)
            if best is None or len(packets) < len(best):
                best = packets
    if best is None:
        raise ValueError(f"no register allocation of the depthwise row fits {temps} temporaries")
    names = {name: f"%[{name}]" for name in (*vectors, *SCALARS)} | {f"v{i}": f"v{i}" for i in range(temps)}
    names |= {"q0": "q0", "q1": "q1"}
    used = sorted({w for p in best for i in p for w in i.writes if w[0] == "v"}, key=lambda r: int(r[1:]))
    return RowAsm(packets=tuple(tuple(i.text.format(**names) for i in p) for p in best), vectors=vectors,
                  temps=tuple(used), predicates=tuple(sorted({w for p in best for i in p for w in i.writes
                                                             if w[0] == "q"})))
