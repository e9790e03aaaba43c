"""The c micro-kernel's tile for grouped convs whose groups are narrower than a vector (ResNeXt's 4 channels in, 4
out): each lane of an output vector sums its own group's input channels, fed by a shuffle of the loaded input
vector. Pure: loop-tree nodes, as microkernel.py's other tiles."""
from __future__ import annotations

from ...plan_types import Block, Guard, Loop, Node, Stmt
from .tile import Tile

# A narrow-group tile holds this many pixels: their accumulators, a filter vector per kernel column and the
# shuffled input fill 13 of x86-64's 16 vector registers.
LANE_GROUP_PIXELS = 8


def lane_group_nodes(t: Tile) -> tuple[Node, ...]:
    """A grouped conv with groups of q = lane_group channels in and out (q below the vector's lanes): a vector of
    output channels is several whole groups, whose inputs are the same channels. Per kernel row and in-group
    channel r, each loaded column's vector is shuffled so that every lane holds its own group's r-th input channel,
    then multiplied by that column's taps' filter vectors (lane k: output k's weight for input r). A loaded column
    serves every pixel that reads it (kernel-width of them at stride 1), so the shuffles are a third of the FMAs
    for a 3x3: no product is wasted, where broadcasting each input into a whole vector would need lanes / q times
    the FMAs, and the planner's loops for such a conv ran scalar (ResNeXt50's layer1: 36 of 77 ms)."""
    q, p_range, kw = t.lane_group, range(t.pixels), t.kernel[1]
    loaded = sorted({p * t.stride + rw * t.dilation for p in p_range for rw in range(kw)})  # a 1x1 at stride 2 skips
    clamps = [Stmt(code=f"const int xc{c} = KG_CLAMP(xb + {c}, 0, {t.col_limit});",
                   summary=f"xc{c} = column in the window") for c in loaded]
    readers = {c: [(p, rw) for p in p_range for rw in range(kw) if p * t.stride + rw * t.dilation == c]
               for c in loaded}  # the (pixel, kernel column) pairs that read loaded column c
    rows: list[Node] = [Stmt(code=f"const int xr = {t.row};", summary="xr = source row"),
                        *(Stmt(code=f"const float *const x{c} = {t.src} + xr + {t.col[c]} + ch;",
                               summary=f"x{c} = loaded column {c}") for c in loaded)]
    for r in range(q):
        index = ", ".join(str(k // q * q + r) for k in range(t.lanes))
        step: list[Node] = [Stmt(code="const kg_vf " + ", ".join(
            f"w{rw} = KG_LOAD(wk + ((rh * {kw} + {rw}) * {q} + {r}) * {t.lanes})" for rw in range(kw)) + ";",
            summary=f"w* = the taps' weights for input {r} of each group")]
        step += [Stmt(code=f"{{ const kg_vf xs = KG_SHUFFLE(KG_LOAD(x{c}), {index}); " + " ".join(
            f"KG_FMAV(a{p}_0, xs, w{rw});" for p, rw in readers[c]) + " }",
            summary=f"pixels reading column {c} += its group inputs {r} * w") for c in loaded]
        rows.append(Block(label=f"input {r} of each group", body=tuple(step)))
    accumulate: Node = Block(label="the groups' sums", body=(
        Stmt(code=f"const int ch = {t.channel};", summary="ch = the block's first channel"),
        Loop(var="rh", extent=t.kernel[0], body=tuple(rows))))
    if t.present:  # a stripe's blocks past the op's channels: no source to read, the sums stay 0
        accumulate = Guard(cond=t.present, body=(accumulate,))
    body: tuple[Node, ...] = (
        *clamps,  # here, not before the loop: the register epilogue takes the tile as its first column and kv loop
        Stmt(code=f"const float *const wk = {t.filter_base} + {t.filter_block};", summary="wk = filter block"),
        Stmt(code="kg_vf " + ", ".join(f"a{p}_0 = KG_ZERO" for p in p_range) + ";", summary="accumulators = 0"),
        accumulate,
        *(Stmt(code=f"KG_STORE(tile + {p * t.k_block} + kv * {t.lanes}, a{p}_0);", summary=f"tile[{p}] = a{p}_0")
          for p in p_range))
    return (Stmt(code=f"const int xb = {t.col_base};", summary="xb = first column"),
            Loop(var="kv", extent=t.k_block // t.lanes, body=body))
