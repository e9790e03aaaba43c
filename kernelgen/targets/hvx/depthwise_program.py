"""The instructions of one block of output rows of the depthwise sweep, in program order over values (each a
temporary t<k>, or an operand), for depthwise_asm.py to put on registers and into packets. Pure.

The rows (input pixels s..s+3 of a channel as one word W(s): transposed vector q is W(4q); the mid M(4q+2) is the
odd halfwords of q next to the even ones of q + 1; one column of left padding, so A = [w0, w1, w2, 0] on W(s) is
output s + 1 and B = [0, w0, w1, w2] output s + 2, or with stride 2, B on W(s) is output (s + 2) / 2): group g of 4
outputs takes B on M(4g-2), A and B on W(4g), A on M(4g+2); stride 2, B on M(8g-2), W(8g), M(8g+2), W(8g+4).
Vectors past the input are the zero point; a partial last one keeps its pixels and takes the zero point for the
rest, unless no stored output reads a pixel past the input (stride 2 on an even width: the last output reads
pixels up to 2 * out_w - 1 < in_w, and B weighs the first byte of its word 0).

A block is `rows` output rows, down stride `down`: output row j, kernel row r reads the block's input row
down * j + r. Each input row's words are made once for every output row that reads them (`share`: at stride 2 down
the last input row of one output row is the first of the next), or once per output row (no sharing: the program
of one row repeated, each with its own input rows). Input rows outside the input (`pads`, known per block when the
plan is made) are the zero point: no loads, no transposes, no mids."""
from __future__ import annotations

from dataclasses import dataclass

MPY, PERM, SHIFT, ALU, LOAD, STORE, SCALAR = "mpy", "perm", "shift", "alu", "load", "store", "scalar"
ALONE = "alone"  # a predicate and: which packets the assembler takes it in is not modelled, so it issues alone


@dataclass(frozen=True, slots=True)
class Instr:
    text: str  # with {name} for every register
    unit: str
    reads: tuple[str, ...]
    writes: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Block:
    """What one scheduled block computes: `rows` output rows of `out_w` pixels at stride `stride` across and `down`
    down from input rows `in_w` wide, the block's input rows in `pads` being padding; `lanes`: a tail block (its
    channels stored under a predicate); `partial`: the input's partial last vector is masked to the zero point."""

    stride: int
    down: int
    in_w: int
    out_w: int
    clamps: tuple[bool, bool]
    rows: int = 1
    pads: tuple[int, ...] = ()
    lanes: bool = False

    @property
    def in_rows(self) -> int:
        return self.down * (self.rows - 1) + 3

    @property
    def top(self) -> int:
        """Padding input rows above the input (the pads are rows at either end)."""
        return next(k for k in range(self.in_rows + 1) if k not in self.pads)

    @property
    def bottom(self) -> int:
        return len(self.pads) - self.top

    @property
    def partial(self) -> bool:
        if self.in_w % 4 == 0:
            return False
        return self.stride == 1 or 2 * self.out_w - 1 >= self.in_w


class _Program:
    """The block's instructions in program order, over temporaries t0.. (one per value) and operands."""

    def __init__(self, block: Block, share: bool, shifted_mids: bool) -> None:
        self.block, self.share, self.shifted_mids = block, share, shifted_mids
        self.instrs: list[Instr] = []
        self.count = 0
        self.loaded: dict[str, int] = {}  # per row pointer: the next vector index it is at
        self.words: dict[tuple[str, int], str] = {}
        self.starts: dict[tuple[int, ...], str] = {(): "corr"}  # per set of padding kernel rows

    def temp(self) -> str:
        self.count += 1
        return f"t{self.count - 1}"

    def emit(self, text: str, unit: str, reads: tuple[str, ...], writes: tuple[str, ...]) -> None:
        self.instrs.append(Instr(text=text, unit=unit, reads=reads, writes=writes))

    def pointer(self, j: int, r: int) -> str | None:
        """The pointer of output row j's kernel row r: p<k>, the block's input row k (or, without sharing, the
        row's own p<3j + r>); None for a padding row."""
        k = self.block.down * j + r
        if k in self.block.pads:
            return None
        return f"p{k}" if self.share else f"p{3 * j + r}"

    def load(self, p: str, q: int) -> str:
        """Transposed vector q of the row at pointer p (vectors load in order; each 8-column block is 2 vectors,
        the next block cstep bytes on)."""
        b = self.block
        if q >= (b.in_w + 3) // 4:
            return "zp"
        assert q == self.loaded.get(p, 0), (p, q)
        self.loaded[p] = q + 1
        t = self.temp()
        self.emit(f"{{{t}}} = vmem({{{p}}}+#{q % 2})", LOAD, (p,), (t,))
        if q % 2:
            self.emit(f"{{{p}}} = add({{{p}}},{{cstep}})", SCALAR, (p, "cstep"), (p,))
        self.emit(f"{{{t}}}.b = vshuff({{{t}}}.b)", PERM, (t,), (t,))
        self.emit(f"{{{t}}}.b = vshuff({{{t}}}.b)", PERM, (t,), (t,))
        if q == b.in_w // 4 and b.partial:  # the partial last vector: its pixels, the zero point past them
            self.emit(f"{{{t}}} = vand({{{t}}},{{keep}})", ALU, (t, "keep"), (t,))
            self.emit(f"{{{t}}} = vor({{{t}}},{{fill}})", ALU, (t, "fill"), (t,))
        return t

    def mid(self, left: str, right: str) -> str:
        """M: the odd halfwords of left next to the even ones of right, by a vshuffo (the permute resource) or, with
        shifted_mids, as (left >> 16) | (right << 16) per word (two shifts and an ALU op)."""
        s = self.temp()
        self.emit(f"{{{s}}}.w = vasl({{{right}}}.w,{{k16}})", SHIFT, (right, "k16"), (s,))
        if not self.shifted_mids:
            self.emit(f"{{{s}}}.h = vshuffo({{{s}}}.h,{{{left}}}.h)", PERM, (s, left), (s,))
            return s
        low = self.temp()
        self.emit(f"{{{low}}}.uw = vlsr({{{left}}}.uw,{{k16}})", SHIFT, (left, "k16"), (low,))
        self.emit(f"{{{s}}} = vor({{{s}}},{{{low}}})", ALU, (s, low), (s,))
        return s

    def word(self, p: str | None, pos: int) -> str:
        """W(pos) or M(pos) of the row at p, made once (M(-2): pixels -2, -1 are padding)."""
        if p is None:
            return "zp"
        if (p, pos) not in self.words:
            if pos % 4 == 0:
                value = self.load(p, pos // 4)
            else:
                value = self.mid("zp" if pos < 0 else self.word(p, pos - 2), self.word(p, pos + 2))
            self.words[p, pos] = value
        return self.words[p, pos]

    def start(self, pads: tuple[int, ...]) -> str:
        """The sums' start of an output row whose kernel rows pads read padding: corr plus those rows' taps on the
        zero point (zp * the row's weights, the same for every pixel: once per block, not per pixel)."""
        if pads not in self.starts:
            t = self.temp()
            self.emit(f"{{{t}}} = {{corr}}", ALU, ("corr",), (t,))
            for r in pads:
                self.emit(f"{{{t}}}.w += vrmpy({{zp}}.ub,{{wb{r}}}.b)", MPY, (t, "zp", f"wb{r}"), (t,))
            self.starts[pads] = t
        return self.starts[pads]

    def taps(self, j: int, g: int) -> list[str]:
        """Output row j's group g: the sums of the pixels the output holds (the last group's others are neither
        summed nor stored)."""
        b = self.block
        acc = [self.temp() for _ in range(min(4, b.out_w - 4 * g))]
        start = self.start(tuple(r for r in range(3) if self.pointer(j, r) is None))
        for a in acc:
            self.emit(f"{{{a}}} = {{{start}}}", ALU, (start,), (a,))
        if b.stride == 1:
            words = ((4 * g - 2, "wb"), (4 * g, "wa"), (4 * g, "wb"), (4 * g + 2, "wa"))
        else:
            words = ((8 * g - 2, "wb"), (8 * g, "wb"), (8 * g + 2, "wb"), (8 * g + 4, "wb"))
        for r in range(3):
            p = self.pointer(j, r)
            if p is None:  # a padding row: in the sums' start
                continue
            for a, (pos, w) in zip(acc, words):  # zip: the pixels summed
                word = self.word(p, pos)
                self.emit(f"{{{a}}}.w += vrmpy({{{word}}}.ub,{{{w}{r}}}.b)", MPY, (a, word, f"{w}{r}"), (a,))
        return acc

    def requant(self, j: int, g: int, acc: list[str]) -> None:
        b = self.block
        e = []
        for a in acc:  # round(acc * m / 2^31) (vmpye, vmpyo with its rounding shift), + rnd, >> shift
            t = self.temp()
            e.append(t)
            self.emit(f"{{{t}}}.w = vmpye({{{a}}}.w,{{mult}}.uh)", MPY, (a, "mult"), (t,))
            self.emit(f"{{{t}}}.w += vmpyo({{{a}}}.w,{{mult}}.h):<<1:rnd:sat:shift", MPY, (t, a, "mult"), (t,))
            self.emit(f"{{{t}}}.w = vadd({{{t}}}.w,{{rnd}}.w):sat", ALU, (t, "rnd"), (t,))
            self.emit(f"{{{t}}}.w = vasr({{{t}}}.w,{{shift}}.w)", SHIFT, (t, "shift"), (t,))
        e += [e[-1]] * (4 - len(e))  # pixels not stored: any bytes
        if len(set(e)) > 2:
            self.emit(f"{{{e[2]}}}.h = vpack({{{e[3]}}}.w,{{{e[2]}}}.w):sat", PERM, (e[3], e[2]), (e[2],))
        self.emit(f"{{{e[0]}}}.h = vpack({{{e[1]}}}.w,{{{e[0]}}}.w):sat", PERM, (e[1], e[0]), (e[0],))
        high = e[2] if len(set(e)) > 2 else e[0]
        self.emit(f"{{{e[0]}}}.ub = vpack({{{high}}}.h,{{{e[0]}}}.h):sat", PERM, (high, e[0]), (e[0],))
        if b.clamps[0]:
            self.emit(f"{{{e[0]}}}.ub = vmax({{{e[0]}}}.ub,{{qmin}}.ub)", ALU, (e[0], "qmin"), (e[0],))
        if b.clamps[1]:
            self.emit(f"{{{e[0]}}}.ub = vmin({{{e[0]}}}.ub,{{qmax}}.ub)", ALU, (e[0], "qmax"), (e[0],))
        out = f"out{j}"
        if 4 * g + 4 <= b.out_w and not b.lanes:
            self.emit(f"vmem({{{out}}}+#{g % 2}) = {{{e[0]}}}", STORE, (e[0], out), ())
        elif 4 * g + 4 <= b.out_w:
            self.emit(f"if ({{q1}}) vmem({{{out}}}+#{g % 2}) = {{{e[0]}}}", STORE, ("q1", e[0], out), ())
        else:  # the output's columns alone (and the block's channels)
            self.emit("{q0} = vsetq({qbytes})", PERM, ("qbytes",), ("q0",))
            if b.lanes:
                self.emit("{q0} = and({q0},{q1})", ALONE, ("q0", "q1"), ("q0",))
            self.emit(f"if ({{q0}}) vmem({{{out}}}+#{g % 2}) = {{{e[0]}}}", STORE, ("q0", e[0], out), ())
        if g % 2:
            self.emit(f"{{{out}}} = add({{{out}}},{{ostep}})", SCALAR, (out, "ostep"), (out,))


def program(block: Block, share: bool, shifted_mids: bool, by_row: bool, interleave: bool) -> list[Instr]:
    """The block's instructions: output rows one after the other (by_row), or each group of every row before the
    next group; each group's requantization right after its taps, or after the next group's (interleave)."""
    prog = _Program(block, share, shifted_mids)
    if block.lanes:  # a tail block: its channels as a predicate (takes a multiply resource, the assembler finds)
        prog.emit("{q1} = vand({lanes},{ones})", MPY, ("lanes", "ones"), ("q1",))
    groups = range((block.out_w + 3) // 4)
    order = [(j, g) for j in range(block.rows) for g in groups] if by_row else \
        [(j, g) for g in groups for j in range(block.rows)]
    pending = None
    for j, g in order:
        acc = prog.taps(j, g)
        if not interleave:
            prog.requant(j, g, acc)
            continue
        if pending is not None:
            prog.requant(*pending)
        pending = (j, g, acc)
    if pending is not None:
        prog.requant(*pending)
    return live(prog.instrs)


def live(instrs: list[Instr]) -> list[Instr]:
    """Without the instructions whose values nothing stored reads (the last group's loads and mids past the output,
    pointer steps past the last load)."""
    needed: set[str] = set()
    kept = []
    for instr in reversed(instrs):
        if instr.unit == STORE or set(instr.writes) & needed:
            needed -= set(instr.writes)
            needed |= set(instr.reads)
            kept.append(instr)
    return kept[::-1]
