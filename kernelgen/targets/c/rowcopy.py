"""The input cache read as one contiguous run per window row, for the c target. Pure.

The planner reads the input window pixel by pixel: per column, a bounds test, then a copy of the channels. When
the window holds every channel of the input (NHWC-like: a row's columns and channels are consecutive elements in
both the input and the cache), gcc turns each pixel's copy into its own memcpy call (26 x 26 calls of 384 bytes
per stripe of a depthwise 112x112x96, ~30% of its time). Here the row's columns inside the input become one
copy loop over consecutive elements (one large memcpy) between two zero-fill loops for the conv padding.

Matched on the planner's statement text, `cache[(A+(iw*C)+ic)] = (cond) ? input[(B+(iw*C)+ic)] : 0.0f;` inside
`for iw { for ic < C }`, where each test of `cond` that names iw bounds it from one side with coefficient 1;
anything else keeps the planner's loops.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace

from ...plan_types import Block, Guard, Loop, Node, Section, Stmt

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


def row_reads(nodes: tuple[Node, ...]) -> tuple[Node, ...]:
    """`nodes` with every matching per-pixel window read replaced by its row copy."""
    out: list[Node] = []
    for node in nodes:
        read = _match(node)
        if read is not None:
            out.append(Block(label="one run of consecutive elements per window row", body=_row_nodes(read)))
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
    row_parts = [_without(index, run) for index in (cache_index, source_index)]
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
                   channels=inner.extent, row_test=" && ".join(row_tests), lower=tuple(lower), upper=tuple(upper))


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
              Stmt(code=f"for (int e = iw_lo * {c}; e < iw_hi * {c}; ++e) row[e] = {r.source}[{r.offset} + e];",
                   summary="row[iw_lo:iw_hi] = input"),
              Stmt(code=f"for (int e = iw_hi * {c}; e < {w * c}; ++e) row[e] = 0.0f;", summary="row[iw_hi:] = 0")]
    return tuple(nodes)
