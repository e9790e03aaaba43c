"""The dense uint8 conv's inner loop as a packet schedule: one kernel row (kw taps x the source's channel blocks)
of vrmpy for a group of output pixels, written as Hexagon inline assembly. Pure.

Why assembly: each vrmpy multiplies a 128-byte filter vector (32 output x 4 input channels) by one 32-bit scalar
(4 input channels of one pixel), two per packet at most (the two HVX multiply resources). So at full rate every
packet also needs one doubleword load of activations (two scalars), and the two load/ALU slots left over must carry
that load, the filter vectors (one per 4 x pixels vrmpy) and the pixel pointers. clang's scheduler packs 84-92% of
packets with two vrmpy here (it hoists loads, spills scalar pairs, and recomputes the pointers); this schedule packs
every packet after a short prologue: vrmpy pairs in a fixed order, every load and pointer update placed as late as
its consumer allows (ALAP) in the packets' free slots.

Order of the vrmpy (step s = tap rw x channel block c): pixels in pairs, 8 packets per pair (one per filter vector
k, both pixels' vrmpy by the same vector). An odd last pixel splits into two accumulators (even k and odd k, one
packet per pair of vectors), added after the group; so a step is 4 x pixels packets for any pixel count.

Registers: the asm's operands are the accumulators (a0.., +1 when the pixel count is odd), the filter pointer (f,
post-incremented: the filter cache holds each kernel row's vectors in the order they are used), the source row (row)
and the group's column offsets (cols: int32 [kw][pixels], bytes from the row to each pixel's tap). Fixed scratch:
v24-v31 the 8 filter vectors of a step, r6-r27 pixel pointers, offsets and activation pairs (declared clobbered)."""
from __future__ import annotations

from dataclasses import dataclass, field

FILTER_REGS = tuple(f"v{24 + k}" for k in range(8))
DATA_PAIRS = ((11, 10), (13, 12), (15, 14), (17, 16))  # activation doublewords, rotating
OFFSET_PAIRS = ((7, 6), (9, 8))  # two pixels' column offsets, rotating
POINTER_REGS = tuple(f"r{18 + i}" for i in range(10))  # one per pixel: r18-r27
CLOBBERS = tuple(f"r{i}" for i in range(6, 28)) + FILTER_REGS
MAX_PIXELS = len(POINTER_REGS)
MIN_PIXELS = 4  # a step of 4 x pixels packets must hold the next step's 8 filter loads (one HVX load per packet)
# Packets from an activation load to the first vrmpy reading it. QEMU counts packets, not stalls, so 1 would do
# here; 2 costs no packet (measured: the same schedule lengths) and gives each load a packet more to complete on
# hardware, which these counters cannot show (not measured on a device).
DATA_LEAD = 2
MEMD_REACH = 8192  # memd(Rs + #s11:3) reaches [-8192, 8184]: a pointer serves 4 channel blocks of 2048 bytes


@dataclass(slots=True)
class _Op:
    text: str
    deadline: int  # the latest packet
    floor: int | None  # the earliest packet (None: any, the prologue included)
    load: bool
    vector_load: bool = False
    packet: int | None = None


@dataclass(slots=True)
class _Packets:
    """Slots taken per packet: 4 instructions, 2 of them loads (slots 0 and 1), one HVX load."""

    vrmpy: dict[int, list[str]] = field(default_factory=dict)
    other: dict[int, list[_Op]] = field(default_factory=dict)

    def fits(self, t: int, op: _Op) -> bool:
        others = self.other.get(t, [])
        if len(self.vrmpy.get(t, [])) + len(others) >= 4:
            return False
        if op.load and sum(o.load for o in others) >= 2:
            return False
        return not (op.vector_load and any(o.vector_load for o in others))

    def place(self, op: _Op, before: int | None = None) -> int:
        """ALAP: the latest packet <= the op's deadline (and < before) with a free slot, not before its floor."""
        t = op.deadline if before is None else min(op.deadline, before - 1)
        while not self.fits(t, op):
            t -= 1
        if op.floor is not None and t < op.floor:
            raise ValueError(f"no packet for {op.text!r} in [{op.floor}, {op.deadline}]")
        op.packet = t
        self.other.setdefault(t, []).append(op)
        return t


@dataclass(frozen=True, slots=True, kw_only=True)
class KernelRow:
    """The vrmpy of one kernel row for `pixels` output pixels: `taps` taps x `blocks` channel blocks of the source,
    `block_bytes` apart for one pixel."""

    pixels: int
    taps: int
    blocks: int
    block_bytes: int = 2048
    # filter vectors per step that carry input channels: under 8 only for a single block of at most 28 channels
    # (a 3-channel image: 1), whose other vectors' channels hold the zero point and are left out of the sum
    vectors: int = 8

    def __post_init__(self) -> None:
        if not MIN_PIXELS <= self.pixels <= MAX_PIXELS:
            raise ValueError(f"pixels: expected {MIN_PIXELS}..{MAX_PIXELS}, got {self.pixels}")
        if not 1 <= self.vectors <= 8 or (self.vectors < 8 and self.blocks != 1):
            raise ValueError("vectors: expected 1..8, under 8 only with one channel block")
        if self.block_bytes * 4 != MEMD_REACH:
            raise ValueError("block_bytes: the schedule moves each pixel pointer every 4 blocks of 2048 bytes")

    @property
    def accumulators(self) -> int:
        return self.pixels + self.pixels % 2

    @property
    def clobbers(self) -> tuple[str, ...]:
        return CLOBBERS

    @property
    def column_stride(self) -> int:
        """int32 column offsets per tap in the `cols` table (the pixels, padded to even)."""
        return self.accumulators

    @property
    def pairs(self) -> int:
        """Activation doublewords per pixel and step."""
        return -(-self.vectors // 2)

    @property
    def busy_packets(self) -> int:
        """Packets of a step with two vrmpy: one per filter vector and pair of pixels, an odd pixel's per pair."""
        return self.pixels // 2 * self.vectors + self.pixels % 2 * self.pairs

    @property
    def step_packets(self) -> int:
        """All 8 vectors: the vrmpy packets alone (the loads fit in their free slots). Fewer: a step's loads
        (activations, the filter vectors, the next tap's column offsets) and pointer adds need more slots than
        the vrmpy leave, so the vrmpy spread over the fewest packets that hold everything (_schedule tries)."""
        return self._spread()

    def _spread(self) -> int:
        if self.vectors == 8:
            return self.busy_packets
        for packets in range(self._slot_bound(), self._slot_bound() + 16):
            try:
                self._schedule(packets)
                return packets
            except ValueError:
                continue
        raise ValueError(f"no schedule for {self.pixels} pixels x {self.vectors} vectors")

    def _slot_bound(self) -> int:
        P = self.pixels
        loads = P * self.pairs + self.vectors + -(-P // 2)
        others = loads + P  # + one pointer add per pixel and tap
        return max(self.busy_packets, -(-loads // 2), -(-(2 * self.busy_packets + others) // 4))

    @property
    def vrmpy_packets(self) -> int:
        """From the first vrmpy packet to the last (a spread step ends with its last vrmpy)."""
        S, n = self.step_packets, self.busy_packets
        return (self.taps * self.blocks - 1) * S + (n - 1) * S // n + 1

    def packets(self) -> tuple[str, ...]:
        """The schedule, one packet per string: '{ a; b; c }'."""
        return tuple(self._schedule(self.step_packets))

    # ------------------------------------------------------------------ schedule

    def _schedule(self, S: int) -> list[str]:
        P, V, n = self.pixels, self.vectors, self.busy_packets
        steps = self.taps * self.blocks
        packets = _Packets()
        # vrmpy in fixed packets; the activation pair (step, pixel, m) each reads, and where it is used
        data_use: dict[tuple[int, int, int], list[int]] = {}
        filter_use: dict[tuple[int, int], list[int]] = {}
        for s in range(steps):
            base = s * S

            def at(i: int) -> int:  # the step's i-th vrmpy packet, spread evenly over its S packets
                return base + i * S // n
            for j in range(P // 2):
                for k in range(V):
                    t = at(V * j + k)
                    half = "L" if k % 2 == 0 else "H"
                    packets.vrmpy[t] = [f"%[a{2 * j + q}].uw += vrmpy({FILTER_REGS[k]}.ub, {{D{s}_{2 * j + q}_{k // 2}{half}}}.ub)"
                                        for q in range(2)]
                    for q in range(2):
                        data_use.setdefault((s, 2 * j + q, k // 2), []).append(t)
                    filter_use.setdefault((s, k), []).append(t)
            if P % 2:
                for m in range(self.pairs):
                    t = at(V * (P // 2) + m)
                    packets.vrmpy[t] = [f"%[a{P - 1}].uw += vrmpy({FILTER_REGS[2 * m]}.ub, {{D{s}_{P - 1}_{m}L}}.ub)"]
                    filter_use.setdefault((s, 2 * m), []).append(t)
                    if 2 * m + 1 < V:
                        packets.vrmpy[t].append(f"%[a{P}].uw += vrmpy({FILTER_REGS[2 * m + 1]}.ub, {{D{s}_{P - 1}_{m}H}}.ub)")
                        filter_use.setdefault((s, 2 * m + 1), []).append(t)
                    data_use.setdefault((s, P - 1, m), []).append(t)

        # filter vectors: post-incremented loads in use order, each after its register's last read in the step before
        later = None
        for s in reversed(range(steps)):
            for k in reversed(range(V)):
                floor = max(filter_use[(s - 1, k)]) if s else None
                op = _Op(text=f"{FILTER_REGS[k]} = vmem(%[f]++#1)", deadline=min(filter_use[(s, k)]) - 1, floor=floor,
                         load=True, vector_load=True)
                later = packets.place(op, later)

        # activation pairs: a rotating pool, each load after the previous occupant's last read
        names: dict[tuple[int, int, int], tuple[int, int]] = {}
        order = sorted(data_use, key=lambda key: (min(data_use[key]), key[1]))
        loads: dict[tuple[int, int, int], _Op] = {}
        for i, key in enumerate(order):
            pair = DATA_PAIRS[i % len(DATA_PAIRS)]
            names[key] = pair
            prev = order[i - len(DATA_PAIRS)] if i >= len(DATA_PAIRS) else None
            s, p, m = key
            c = s % self.blocks
            offset = c * self.block_bytes - (c // 4) * MEMD_REACH + 8 * m
            loads[key] = _Op(text=f"r{pair[0]}:{pair[1]} = memd({POINTER_REGS[p]}+#{offset})",
                             deadline=min(data_use[key]) - DATA_LEAD, floor=max(data_use[prev]) if prev else None, load=True)
        for key in sorted(order, key=lambda key: -loads[key].deadline):
            packets.place(loads[key])

        # pixel pointers: row + column offset at each tap's first block, + 8192 every 4 blocks; each update after
        # the last load through the old value, before the first through the new
        def uses(s_first: int, s_last: int, p: int) -> list[int]:
            return [loads[(s, p, m)].packet for s in range(s_first, s_last) for m in range(self.pairs)]

        quads = -(-self.blocks // 4)

        def quad(rw: int, q: int) -> tuple[int, int]:
            first = rw * self.blocks + 4 * q
            return first, min(first + 4, (rw + 1) * self.blocks)

        setups: list[tuple[int, int, _Op]] = []  # (tap, pixel, the add)
        updates = []
        for rw in range(self.taps):
            for q in range(quads):
                for p in range(P):
                    deadline = min(uses(*quad(rw, q), p)) - 1
                    before = quad(rw, q - 1) if q else quad(rw - 1, quads - 1) if rw else None
                    floor = max(uses(*before, p)) if before else None
                    if q:
                        updates.append(_Op(text=f"{POINTER_REGS[p]} = add({POINTER_REGS[p]},#{MEMD_REACH})",
                                           deadline=deadline, floor=floor, load=False))
                    else:
                        setups.append((rw, p, _Op(text="", deadline=deadline, floor=floor, load=False)))
        for op in sorted(updates, key=lambda op: -op.deadline):
            packets.place(op)
        # tap starts: pixels 2i, 2i+1 share one doubleword of offsets (the last odd pixel, a word)
        couples = [(rw, p) for rw in range(self.taps) for p in range(0, P, 2)]
        adds = {(rw, p): op for rw, p, op in setups}
        for rw, p in couples:  # the adds first (their deadlines bound the offset loads)
            for q in (p, p + 1):
                if q < P:
                    pair = OFFSET_PAIRS[(rw * ((P + 1) // 2) + p // 2) % len(OFFSET_PAIRS)]
                    adds[(rw, q)].text = f"{POINTER_REGS[q]} = add(%[row],r{pair[1] if q == p else pair[0]})"
        for op in sorted(adds.values(), key=lambda op: -op.deadline):
            packets.place(op)
        offset_loads = []
        for i, (rw, p) in enumerate(couples):
            pair = OFFSET_PAIRS[i % len(OFFSET_PAIRS)]
            readers = [adds[(rw, q)].packet for q in (p, p + 1) if q < P]
            prev = couples[i - len(OFFSET_PAIRS)] if i >= len(OFFSET_PAIRS) else None
            floor = max(adds[(prev[0], q)].packet for q in (prev[1], prev[1] + 1) if q < P) if prev else None
            where = 4 * (rw * self.accumulators + p)  # rows of an even length: doublewords stay aligned
            text = (f"r{pair[0]}:{pair[1]} = memd(%[cols]+#{where})" if p + 1 < P else
                    f"r{pair[1]} = memw(%[cols]+#{where})")
            offset_loads.append(_Op(text=text, deadline=min(readers) - 1, floor=floor, load=True))
        for op in sorted(offset_loads, key=lambda op: -op.deadline):
            packets.place(op)

        # the text, D names resolved
        lo = min(min(packets.other), 0)
        hi = max(packets.vrmpy)
        out = []
        for t in range(lo, hi + 1):
            body = [op.text for op in packets.other.get(t, [])]
            body += [_resolve(v, names) for v in packets.vrmpy.get(t, [])]
            out.append("{ " + "; ".join(body) + " }" if body else "{ nop }")
        return out


def _resolve(text: str, names: dict[tuple[int, int, int], tuple[int, int]]) -> str:
    start = text.index("{D")
    end = text.index("}", start)
    s, p, rest = text[start + 2:end].split("_")
    m, half = int(rest[:-1]), rest[-1]
    hi_reg, lo_reg = names[(int(s), int(p), m)]
    return text[:start] + f"r{lo_reg if half == 'L' else hi_reg}" + text[end + 1:]
