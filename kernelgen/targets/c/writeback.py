"""The write-back of a channels-innermost output cache into an output whose channels are planes (NCHW), for the c
target, as a transpose in blocks. Pure.

Under channels-innermost caches (planner.geometry.cache_window) the planner's write-back copies pixel by pixel and,
inside each pixel, channel by channel: every store lands a channel plane past the one before. Here each cache row
goes out in blocks of LANES columns x LANES channels: LANES vector loads along the cache's channels (one per
pixel), LANES vector stores along the output's columns (one per channel); columns past the last whole block and
channels past the last whole vector go element by element. (The convs that store into the output directly, the
usual last op, never come here: a pool or a multiply at the end of a chain does.)

Matched on the planner's statement text, `output[(...(ok*S)...+ow...)] = output_cache[(A+(ow*K)+ok)];` inside
`for oh { [if (row)] for ow { [if (col < W)] for ok < K } }`, where the column test bounds ow from above with
coefficient 1; anything else (a channel test, a ring, chunks) keeps the planner's loops.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace

from ...plan_types import Block, Guard, Loop, Node, Phase, Section, Stmt
from .microkernel import LANES
from .rowcopy import lane_blocks

_COPY = re.compile(r"^output\[(.*)\] = output_cache\[(.*)\];$")
_UPPER = re.compile(r"^\((.*)\) < (-?\d+)$")


@dataclass(frozen=True, slots=True, kw_only=True)
class RowWrite:
    """One cache row's write-back: columns [0, ow_hi) of `columns` go out, each of `channels` channel planes."""

    cache: str  # C: the cache element of the row's column 0, channel 0
    output: str  # C: the output element of the row's column 0, channel 0
    plane: int  # output elements between two channels
    columns: int
    channels: int
    upper: str  # C: the columns the output has from column 0 on ("" all of them)


def transposed_write_backs(nodes: tuple[Node, ...]) -> tuple[Node, ...]:
    """`nodes` with every matching write-back section's row loop body replaced by its blocked transpose."""
    out: list[Node] = []
    for node in nodes:
        if isinstance(node, Section) and node.step is not None and node.step.phase is Phase.WRITE_BACK:
            out.append(_section(node))
        elif isinstance(node, (Loop, Guard, Block, Section)):
            out.append(replace(node, body=transposed_write_backs(node.body)))
        else:
            out.append(node)
    return tuple(out)


def _section(section: Section) -> Section:
    if len(section.body) != 1 or not isinstance(section.body[0], Loop) or section.body[0].var != "oh":
        return section
    oh = section.body[0]
    row_guard, inner = _unguarded(oh.body)
    write = _match(inner)
    if write is None:
        return section
    body: tuple[Node, ...] = (Block(label=f"{LANES} x {LANES} blocks of pixels transposed into channel planes",
                                    body=_row_nodes(write)),)
    if row_guard is not None:
        body = (Guard(cond=row_guard, body=body),)
    return replace(section, body=(replace(oh, body=body),))


def _unguarded(body: tuple[Node, ...]) -> tuple[str | None, tuple[Node, ...]]:
    if len(body) == 1 and isinstance(body[0], Guard):
        return body[0].cond, body[0].body
    return None, body


def _match(body: tuple[Node, ...]) -> RowWrite | None:
    if len(body) != 1 or not isinstance(body[0], Loop) or body[0].var != "ow":
        return None
    ow = body[0]
    col_guard, inner = _unguarded(ow.body)
    if len(inner) != 1 or not isinstance(inner[0], Loop) or inner[0].var != "ok":
        return None
    ok = inner[0]
    if len(ok.body) != 1 or not isinstance(ok.body[0], Stmt):
        return None
    found = _COPY.match(ok.body[0].code)
    if not found:
        return None
    out_index, cache_index = found.groups()
    run = f"(ow*{ok.extent})+ok"
    if cache_index.count(run) != 1:
        return None
    cache = _tidy(cache_index.replace(run, "0"))
    plane = re.findall(r"\(ok\*(\d+)\)", out_index)
    if len(plane) != 1 or _names(out_index, "ok") != 1 or not _unit(out_index, "ow"):
        return None
    output = _tidy(re.sub(r"\bow\b", "0", out_index.replace(f"(ok*{plane[0]})", "0")))
    if _names(cache, "ow") or _names(cache, "ok") or _names(output, "ow") or _names(output, "ok"):
        return None
    upper = ""
    if col_guard is not None:
        bound = column_bound(col_guard)
        if not bound or _names(bound[0], "ok"):
            return None
        at_zero = _tidy(re.sub(r"\bow\b", "0", bound[0]))
        upper = f"{bound[1]} - ({at_zero})"  # S + ow < n  <=>  ow < n - S
    return RowWrite(cache=cache, output=output, plane=int(plane[0]), columns=ow.extent, channels=ok.extent,
                    upper=upper)


def column_bound(col_guard: str) -> tuple[str, str] | None:
    """(S + ow, n) of the planner's column guard `(S + ow) < n`: ow once, added; None for any other guard."""
    bound = _UPPER.match(col_guard)
    return (bound.group(1), bound.group(2)) if bound and _unit(bound.group(1), "ow") else None


def _tidy(code: str) -> str:
    """`code` without the `+0` terms a removed variable leaves."""
    return re.sub(r"\+0(?=[)+]|$)", "", code)


def _names(code: str, var: str) -> int:
    return len(re.findall(rf"\b{var}\b", code))


def _unit(code: str, var: str) -> bool:
    """Whether `var` appears once, added (coefficient 1)."""
    return _names(code, var) == 1 and not re.search(rf"\*\s*{var}\b|\b{var}\s*\*", code)


def _row_nodes(w: RowWrite) -> tuple[Node, ...]:
    k, plane, lanes = w.channels, w.plane, range(LANES)
    src, dst = f"({w.cache}) + ow * {k}", f"({w.output}) + ow"  # column ow's channel 0 in the cache, the output
    block: list[Node] = [Stmt(code=f"const int ow = ob * {LANES};", summary="ow = the block's first column")]
    if k >= LANES:
        block.append(lane_blocks("ok", k // LANES, lambda i: f"&output_cache[{src} + {i * k} + ok]",
                                 lambda c: f"&output[{dst} + (ok + {c}) * {plane}]",
                                 lambda c: f"output[ok + {c}][ow:] = channel {c} of r*"))
    if k % LANES:
        block.append(Loop(var="okt", extent=k % LANES, body=(
            Stmt(code=f"const int ok = {k - k % LANES} + okt;", summary="ok = a channel past the whole vectors"),
            Stmt(code=" ".join(f"output[{dst} + ok * {plane} + {i}] = output_cache[{src} + {i * k} + ok];"
                               for i in lanes), summary=f"output[ok][ow:ow + {LANES}] = channel ok"))))
    nodes: list[Node] = [Stmt(code=f"int ow_hi = {w.columns};", summary="ow_hi = past the output's last column")]
    if w.upper:
        nodes += [Stmt(code=f"if ({w.upper} < ow_hi) ow_hi = {w.upper};", summary="ow_hi within the output"),
                  Stmt(code="if (ow_hi < 0) ow_hi = 0;", summary="no columns: the stripe lies past the output")]
    nodes.append(Stmt(code=f"const int ow_blocks = ow_hi / {LANES};",
                      summary=f"ow_blocks = whole blocks of {LANES} columns"))
    if w.columns >= LANES:
        nodes.append(Loop(var="ob", extent=w.columns // LANES, body=(Guard(cond="ob < ow_blocks", body=tuple(block)),)))
    nodes.append(Stmt(code=f"for (int ow = ow_blocks * {LANES}; ow < ow_hi; ++ow) for (int ok = 0; ok < {k}; ++ok) "
                           f"output[{dst} + ok * {plane}] = output_cache[{src} + ok];",
                      summary="the columns past the blocks, element by element"))
    return tuple(nodes)
