"""A dense tile that reads its filter tensor in place brings the next channel block's filter into the L2 cache while
it computes this block, a share of it in each tap's reduction loop. Pure.

A channel block's tiles run every row of the stripe (rows x tiles a row x kv steps x taps runs of the reduction
loop, the `calls`) over one filter block, which comes from memory in the first row's runs and from L2 after it: a
7x7x512 conv's 32-channel block is 590 KB in the first seventh of its FMAs, more than the memory delivers in that
time, and the FMAs wait. Prefetching the next block spreads its bytes over all the runs instead: its blocks x taps
runs of `reduce` consecutive filter lines (the `units`) go to calls floor(u x calls / units), one line a reduction
step. ResNet18's layer4_0_conv2 in one 512-channel stripe of 32-channel blocks, the filter one of 8 copies in turn
(so from memory, as in the network; C harness, interleaved, CPU time): 1.83 -> 1.70 ms; with one filter, L2-hot,
1.58 -> 1.56. A line each reduction step of every call (the same lines, spread evenly) cost more than it saved
with the filter hot (1.56 -> 1.69): the index arithmetic ran in every step.

Each tap run picks its line run (a few integer operations) and tests the pointer each reduction step, which a short
run does not repay: in ResNet18's program (perf, the kernels' shares of the CPU time, two runs each) conv1 (3 input
channels a tap) took 1.57 -> 1.65 ms with the prefetch and layer1's convs (64) 1-3% more, layer2's (128) the same,
layer3's (256) 1.54 -> 1.46 and layer4's 2.14 -> 2.05 (512), 1.05 -> 0.95 (256, stride 2). MIN_REDUCE is where the
runs start to pay.

Where the block has several tap runs for each run of lines (calls // units = `parts` of them), each run of lines is
cut into `parts` pieces, one a tap run, and a tap run brings its piece in one line every `parts` reduction steps:
the lines come at an even rate over the whole block, where a whole run in one tap run and none in the next came in
bursts. ResNet18's layer4 3x3 convs (tiles over two rows, 36 tap runs a block for 18 runs of lines: 2 parts), in
the network program (`-DKG_TIMERS`, 6 interleaved runs, medians of each kernel's time against the bursts):
layer4_0_conv1 0.88, layer4_0_conv2 0.91, layer4_1_conv1 0.90, layer4_1_conv2_to_fc 0.90."""
from __future__ import annotations

from dataclasses import dataclass

from ...plan_types import Stmt


@dataclass(frozen=True, slots=True, kw_only=True)
class FilterPrefetch:
    """Where the next channel block's filter lies and which of the tile's tap runs bring in which part of it."""

    ahead: str  # C: the next channel block's first filter element (in the tensor)
    call: str  # C: the current tap run's index among the block's `calls`
    calls: int  # tap runs of one channel block: rows x tiles a row x kv steps x taps
    taps: int  # kernel taps (kh x kw)
    blocks: int  # the filter tensor's blocks of output channels in one channel block
    block_stride: int  # elements between two such blocks
    tap_stride: int  # elements between two taps of a block
    line: int  # elements between two reduction channels' filter lines
    reduce: int  # reduction steps of a tap run: lines in a run

    @property
    def units(self) -> int:
        return self.blocks * self.taps

    @property
    def parts(self) -> int:
        """Tap runs that share one run of lines (each brings a piece of it)."""
        return self.calls // self.units


MIN_REDUCE = 128  # input channels a tap run sums, at least


def filter_prefetch(ahead: str, call: str, calls: int, taps: int, blocks: int, block_stride: int, tap_stride: int,
                    line: int, reduce: int) -> FilterPrefetch | None:
    """The prefetch, or None where the block has fewer tap runs than runs of lines to bring in (one each), or a
    tap run sums fewer than MIN_REDUCE input channels."""
    if blocks * taps > calls or reduce < MIN_REDUCE:
        return None
    return FilterPrefetch(ahead=ahead, call=call, calls=calls, taps=taps, blocks=blocks, block_stride=block_stride,
                          tap_stride=tap_stride, line=line, reduce=reduce)


def prefetch_pointer(p: FilterPrefetch) -> tuple[Stmt, ...]:
    """The run of lines this tap run brings in (unit u = ceil(call x units / calls), if floor(u x calls / units) is
    this call), or a null pointer: no prefetch. With `parts` tap runs a run of lines: run call / parts, its piece
    call % parts (calls past units x parts bring none)."""
    units, calls, parts = p.units, p.calls, p.parts
    unit = f"{p.ahead} + (pu / {p.taps}) * {p.block_stride} + (pu % {p.taps}) * {p.tap_stride}"
    if parts > 1:
        piece = -(-p.reduce // parts) * p.line
        return (Stmt(code=f"const int pc = {p.call}, pu = pc / {parts};",
                     summary="pu = the run of the next block's filter lines a piece of which this call brings in"),
                Stmt(code=f"const float *const pf = pu < {units} ? {unit} + (pc % {parts}) * {piece} : 0;",
                     summary="pf = its piece's first line, or 0: none"))
    return (Stmt(code=f"const int pu = (({p.call}) * {units} + {calls - 1}) / {calls};",
                 summary="pu = the run of the next block's filter lines this call brings in"),
            Stmt(code=f"const float *const pf = pu < {units} && pu * {calls} / {units} == ({p.call}) ? {unit} : 0;",
                 summary="pf = its first line, or 0: none"))


def prefetch_line(p: FilterPrefetch) -> Stmt:
    if p.parts > 1:  # a line every `parts` steps
        return Stmt(code=f"if (pf && rc % {p.parts} == 0) KG_PREFETCH(pf + rc / {p.parts} * {p.line});",
                    summary="prefetch a line of the next block's filter")
    return Stmt(code=f"if (pf) KG_PREFETCH(pf + rc * {p.line});", summary="prefetch a line of the next block's filter")
