"""The input cache read as one contiguous run per window row, for the c target. Pure.

The planner reads the input window pixel by pixel: per column, a bounds test, then a copy of the channels. When
the window holds every channel of the input (NHWC-like: a row's columns and channels are consecutive elements in
both the input and the cache), gcc turns each pixel's copy into its own memcpy call (26 x 26 calls of 384 bytes
per stripe of a depthwise 112x112x96, ~30% of its time). Here the row's columns inside the input become one
copy loop over consecutive elements (one large memcpy) between two zero-fill loops for the conv padding.

When the cache holds a pixel's channels together but the input keeps each channel's columns together (an NCHW
input under channels-innermost caches, planner.geometry.cache_window), the row read is a transpose: per pixel, one
element from each of C channel planes. Here it runs in blocks of LANES channels x LANES columns: LANES vector
loads along the input's columns, LANES vector stores along the cache's channels (112 columns x 96 channels in a C
harness: 9.2 us per row pixel by pixel, 4.4 us in blocks); columns past the last whole block and channels past
the last whole vector go element by element.

Matched on the planner's statement text, `cache[(A+(iw*C)+ic)] = (cond) ? input[(B+(iw*C)+ic)] : 0.0f;` (or, for
the transpose, `input[...(ic*S)...+iw...]`) inside `for iw { for ic < C }`, where each test of `cond` that names
iw bounds it from one side with coefficient 1; anything else keeps the planner's loops.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Callable

from ...plan_types import Block, Guard, Loop, Node, Section, Stmt
from .microkernel import LANES

_READ = re.compile(r"^(\w+)\[(.*)\] = \((.*)\) \? (\w+)\[(.*)\] : 0\.0f;$")
_TEST = re.compile(r"^\((.*)\) (>=|<) (-?\d+)$")


@dataclass(frozen=True, slots=True, kw_only=True)
class RowRead:
    """One window row's read: the columns [lo, hi) come from the input, the rest are zeros."""

    cache: str  # C: the cache pointer at the row's column 0
    source: str  # the input array
    offset: str  # C: the input element of the row's column 0 (may lie before the input: only [lo, hi) is read)
    columns: int
    channels: int
    row_test: str  # C: whether the row lies in the input ("" always)
    lower: tuple[str, ...]  # C: column bounds from below (iw >= each)
    upper: tuple[str, ...]  # C: column bounds from above (iw < each)
    channel_step: int = 1  # input elements between two channels of a pixel: 1, or a channel plane (a transpose)


def row_reads(nodes: tuple[Node, ...]) -> tuple[Node, ...]:
    """`nodes` with every matching per-pixel window read replaced by its row copy."""
    out: list[Node] = []
    for node in nodes:
        read = _match(node)
        if read is not None:
            label = ("one run of consecutive elements per window row" if read.channel_step == 1 else
                     f"per window row, {LANES} x {LANES} blocks of channel planes transposed into pixels")
            out.append(Block(label=label, body=_row_nodes(read)))
        elif isinstance(node, (Loop, Guard, Block, Section)):
            out.append(replace(node, body=row_reads(node.body)))
        else:
            out.append(node)
    return tuple(out)


def _match(node: Node) -> RowRead | None:
    if not (isinstance(node, Loop) and node.var == "iw" and len(node.body) == 1):
        return None
    inner = node.body[0]
    if not (isinstance(inner, Loop) and inner.var == "ic" and len(inner.body) == 1 and isinstance(inner.body[0], Stmt)):
        return None
    found = _READ.match(inner.body[0].code)
    if not found:
        return None
    cache, cache_index, cond, source, source_index = found.groups()
    run = f"(iw*{inner.extent})+ic"
    row_parts, step = [_without(cache_index, run), _without(source_index, run)], 1
    if row_parts[1] is None:  # channel planes: (ic*S) and a unit iw apart
        row_parts[1], step = _planes(source_index)
    if None in row_parts:
        return None
    row_tests, lower, upper = [], [], []
    for test in cond.split(" && "):
        if not _names(test, "iw"):
            row_tests.append(test)
            continue
        bound = _TEST.match(test)
        if not bound or _names(bound.group(1), "ic") or not _unit(bound.group(1)):
            return None
        at_zero = _tidy(re.sub(r"\biw\b", "0", bound.group(1)))
        if bound.group(2) == ">=":  # S + iw >= n  <=>  iw >= n - S
            lower.append(f"{bound.group(3)} - ({at_zero})")
        else:
            upper.append(f"{bound.group(3)} - ({at_zero})")
    if any(_names(t, "ic") for t in row_tests):
        return None
    return RowRead(cache=f"{cache} + {row_parts[0]}", source=source, offset=row_parts[1], columns=node.extent,
                   channels=inner.extent, row_test=" && ".join(row_tests), lower=tuple(lower), upper=tuple(upper),
                   channel_step=step)


def _tidy(code: str) -> str:
    """`code` without the `+0` terms a removed variable leaves."""
    return re.sub(r"\+0(?=[)+])", "", code)


def _names(code: str, var: str) -> int:
    return len(re.findall(rf"\b{var}\b", code))


def _unit(code: str) -> bool:
    """Whether iw appears once, added (coefficient 1)."""
    return _names(code, "iw") == 1 and not re.search(r"\*\s*iw\b|\biw\s*\*", code)


def _without(index: str, run: str) -> str | None:
    """The index with its column-and-channel part `run` taken out (the row's offset), None if iw or ic remain."""
    if index.count(run) != 1:
        return None
    rest = _tidy(index.replace(run, "0"))
    return None if _names(rest, "iw") or _names(rest, "ic") else rest


def _planes(index: str) -> tuple[str | None, int]:
    """(the index at iw = ic = 0, the channel step S) of an index holding `(ic*S)` and iw added once; (None, 1)
    otherwise."""
    plane = re.findall(r"\(ic\*(\d+)\)", index)
    if len(plane) != 1 or _names(index, "ic") != 1 or not _unit(index):
        return None, 1
    term = f"(ic*{plane[0]})"
    rest = _tidy(re.sub(r"\biw\b", "0", index.replace(term + "+", "") if term + "+" in index
                        else index.replace(term, "0")))
    return (None, 1) if _names(rest, "ic") or _names(rest, "iw") else (rest, int(plane[0]))


def _row_nodes(r: RowRead) -> tuple[Node, ...]:
    c, w = r.channels, r.columns
    nodes: list[Node] = [Stmt(code=f"int iw_lo = 0, iw_hi = {w};", summary="[iw_lo, iw_hi) = columns in the input")]
    nodes += [Stmt(code=f"if ({b} > iw_lo) iw_lo = {b};", summary="iw_lo = first column in the input") for b in r.lower]
    nodes += [Stmt(code=f"if ({b} < iw_hi) iw_hi = {b};", summary="iw_hi = past the last column") for b in r.upper]
    outside = f"!({r.row_test}) || " if r.row_test else ""
    nodes += [Stmt(code=f"if (iw_lo > {w}) iw_lo = {w};", summary="iw_lo within the row"),
              Stmt(code=f"if ({outside}iw_hi < iw_lo) iw_hi = iw_lo;", summary="no columns: the row is padding"),
              Stmt(code=f"float *const row = {r.cache};", summary="row = the cache row"),
              Stmt(code=f"for (int e = 0; e < iw_lo * {c}; ++e) row[e] = 0.0f;", summary="row[:iw_lo] = 0"),
              *(_transposed(r) if r.channel_step != 1 else (
                  Stmt(code=f"for (int e = iw_lo * {c}; e < iw_hi * {c}; ++e) row[e] = {r.source}[{r.offset} + e];",
                       summary="row[iw_lo:iw_hi] = input"),)),
              Stmt(code=f"for (int e = iw_hi * {c}; e < {w * c}; ++e) row[e] = 0.0f;", summary="row[iw_hi:] = 0")]
    return tuple(nodes)


def lane_blocks(channel: str, blocks: int, load: Callable[[int], str], store: Callable[[int], str],
                stored: Callable[[int], str]) -> Loop:
    """A transpose of LANES x LANES floats through registers, per block of LANES channels (`channel`, the loop's
    index, its first): LANES vector loads (`load(k)`: the address of vector k), then LANES vector stores, store i
    (`store(i)`, said by `stored(i)`) gathering lane i of every loaded vector. The input read (rowcopy) and the
    write-back (writeback.py) both run one, in opposite directions."""
    lanes = range(LANES)
    loads = Stmt(code="const kg_vf " + ", ".join(f"r{k} = KG_LOAD({load(k)})" for k in lanes) + ";",
                 summary=f"r* = {LANES} channels of {LANES} columns")
    stores = [Stmt(code=f"KG_STORE({store(i)}, KG_SET(" + ", ".join(f"KG_LANE(r{k}, {i})" for k in lanes) + "));",
                   summary=stored(i)) for i in lanes]
    return Loop(var=f"{channel}b", extent=blocks, body=(
        Stmt(code=f"const int {channel} = {channel}b * {LANES};", summary=f"{channel} = the block's first channel"),
        loads, *stores))


def _transposed(r: RowRead) -> tuple[Node, ...]:
    """row[iw_lo:iw_hi] from the input's channel planes: whole blocks of LANES columns x LANES channels through
    registers (one vector load per channel, one vector store per pixel), the rest element by element."""
    c, step, lanes = r.channels, r.channel_step, range(LANES)
    at = f"{r.offset} + iw"  # the input element of column iw, channel 0
    block: list[Node] = [Stmt(code=f"const int iw = iw_lo + ib * {LANES};", summary="iw = the block's first column")]
    if c >= LANES:
        block.append(lane_blocks("ic", c // LANES, lambda k: f"&{r.source}[{at} + (ic + {k}) * {step}]",
                                 lambda i: f"row + (iw + {i}) * {c} + ic",
                                 lambda i: f"row[iw + {i}][ic:] = column {i} of r*"))
    if c % LANES:
        block.append(Loop(var="ict", extent=c % LANES, body=(
            Stmt(code=f"const int ic = {c - c % LANES} + ict;", summary="ic = a channel past the whole vectors"),
            Stmt(code=" ".join(f"row[(iw + {i}) * {c} + ic] = {r.source}[{at} + ic * {step} + {i}];" for i in lanes),
                 summary=f"row[iw:iw + {LANES}][ic] = channel ic"))))
    out: list[Node] = [Stmt(code=f"const int iw_blocks = (iw_hi - iw_lo) / {LANES};",
                            summary=f"iw_blocks = whole blocks of {LANES} columns")]
    if r.columns >= LANES:
        out.append(Loop(var="ib", extent=r.columns // LANES, body=(Guard(cond="ib < iw_blocks", body=tuple(block)),)))
    out.append(Stmt(code=f"for (int iw = iw_lo + iw_blocks * {LANES}; iw < iw_hi; ++iw) for (int ic = 0; ic < {c}; "
                         f"++ic) row[iw * {c} + ic] = {r.source}[{at} + ic * {step}];",
                    summary="the columns past the blocks, element by element"))
    return tuple(out)
