"""A squeeze-excite gate folded into the input cache read, for the c target. Pure.

A kernel that starts with `mul: {by: gate}` (each channel of the input times the gate's value for it) ran the
multiply as an op of its own: the input cache read copied the window, then the planner's per-pixel loops read the
cache, multiplied and stored a second cache of the same window, which the next op read (MobileNetV3-small's SE
kernels: 6-12% of their time, 7x7x576 at about a cycle an element). The copy already touches every element once:
here it multiplies as it copies (input[i] * gate[channel], a vector multiply in the copy's loop), the mul's own pass
is gone, and the ops after it read the input cache where they read the mul's cache.

Applied when the input cache is the whole window, read once per stripe (tiles.reads_input), the input is plain NHWC
of one image (the gate one value per channel; the copy's input index is then the mul's logical output index, which
the intermediate trace records), and the mul reads and writes the same element of two caches of the same window
(its pixels are its input's, 1x1 and unpadded). Anything else keeps the mul's pass (`fold` returns None).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace

from ...plan_types import Block, Guard, Loop, Node, Phase, Section, Stmt

_ROW_RUN = re.compile(r"^for \(int e = (iw_lo \* (\d+)); e < (iw_hi \* \d+); \+\+e\) row\[e\] = input\[(.+) \+ e\];$")
_COPY = re.compile(r"^(input_cache\[.+\]) = input\[(.+)\];$")
_SELECT = re.compile(r"^(input_cache\[.+\]) = \((.+)\) \? input\[(.+)\] : 0\.0f;$")
_READ = re.compile(r"^const float x = input_cache\[(.+)\];$")
_TAP = re.compile(r"\(r[hw]\*\d+\)\+")


@dataclass(frozen=True, slots=True)
class Folded:
    load: tuple[Node, ...]
    compute: tuple[Node, ...]
    store: tuple[Node, ...]
    unused: str  # the mul's cache pointer, now unread: a (void) line for the prologue
    note: str


def fold(cfg, plan, parts, *, output_cache_live: bool) -> Folded | None:
    """The stripe parts with op 1's gate multiplied into the input cache read, or None where it does not apply.
    `parts` are the c target's rewritten stripe parts (row copies in place); `output_cache_live`: whether the
    kernel stores through the output cache (which may reuse the input cache's storage)."""
    from .tiles import reads_input

    if cfg.ops[0].kind != "mul" or plan.dtype != "float32" or len(cfg.ops) < 2:
        return None
    if plan.ops[0].in_shape[0] != 1 or not reads_input(cfg, plan) or not _plain_nhwc(plan):
        return None
    if output_cache_live and len(cfg.ops) == 2 and any("output_cache = input_cache" in line
                                                      for line in plan.kernel.prologue):
        return None  # the last op would store into the storage it reads
    mul = _mul_section(parts.compute)
    if mul is None:
        return None
    found = _mul_parts(mul)
    if found is None:
        return None
    cache, gate = found
    load = _scaled_reads(parts.load, gate)
    if load is None:
        return None
    compute = _renamed(_without(parts.compute, mul), cache)
    store = _renamed(parts.store, cache)
    if compute is None or store is None:
        return None
    return Folded(load=load, compute=compute, store=store,
                  unused=f"(void){cache}; /* the gate multiplies the input as it is read: no pass of its own */",
                  note=f"{plan.ops[0].label}: folded into the input cache read (each element times its channel's "
                       f"gate as it is copied; the next op reads the input cache)")


def _plain_nhwc(plan) -> bool:
    """Whether the input's elements lie in logical NHWC order (the trace records the mul's output by that index)."""
    layout = next(t for t in plan.tensors if t.name == "input").layout
    return layout.layout.name == "NHWC" and tuple(layout.physical_shape) == tuple(layout.logical_shape)


def _mul_section(nodes: tuple[Node, ...]) -> Section | None:
    for node in nodes:
        if isinstance(node, Section) and node.step is not None and node.step.op == 1 and \
                node.step.phase is Phase.CONV:
            return node
        if isinstance(node, (Loop, Guard, Block, Section)):
            inner = _mul_section(node.body)
            if inner is not None:
                return inner
    return None


def _statements(nodes: tuple[Node, ...]):
    for node in nodes:
        if isinstance(node, Stmt):
            yield node
        else:
            yield from _statements(node.body)


def _mul_parts(mul: Section) -> tuple[str, str] | None:
    """(the mul's cache, the gate's C array) when the mul stores element i of its cache from element i of the
    input cache (its cache is the input cache's window), else None."""
    reads, stores, gates = [], [], set()
    for stmt in _statements(mul.body):
        if stmt.assign is not None:
            return None
        if (read := _READ.match(stmt.code)) is not None:
            reads.append(_TAP.sub("", read.group(1)))
        elif (store := re.match(r"^(temp_output\w*)\[(.+?)\] = ", stmt.code)) is not None:
            stores.append((store.group(1), store.group(2)))
        gates.update(re.findall(r"\b(side_\w+)\[", stmt.code))
    if len(reads) != 1 or len(stores) != 1 or len(gates) != 1:
        return None
    (cache, index), = stores
    return (cache, gates.pop()) if index == reads[0] else None


def _scaled_reads(nodes: tuple[Node, ...], gate: str) -> tuple[Node, ...] | None:
    """The input cache read with each element times the gate at its channel (and traced as the mul's output);
    None if a read of the input has a form this does not know."""
    out: list[Node] = []
    for node in nodes:
        if isinstance(node, Stmt):
            scaled = _scaled(node, gate) if "input[" in node.code else node
            if scaled is None:
                return None
            out.append(scaled)
            continue
        body = _scaled_reads(node.body, gate)
        if body is None:
            return None
        out.append(replace(node, body=body))
    return tuple(out)


def _scaled(stmt: Stmt, gate: str) -> Stmt | None:
    if (run := _ROW_RUN.match(stmt.code)) is not None:  # rowcopy's run of whole pixels
        start, channels, end, offset = run.groups()
        at = f"{offset} + e + c"
        return Stmt(code=f"for (int e = {start}; e < {end}; e += {channels}) for (int c = 0; c < {channels}; ++c) "
                         f"{{ row[e + c] = input[{at}] * {gate}[c]; KG_TRACE(0, 1, {at}, row[e + c]); }}",
                    summary=f"row[iw_lo:iw_hi] = input * {gate}")
    if (copy := _COPY.match(stmt.code)) is not None:  # the planner's loops (ic the channel)
        target, index = copy.groups()
        return Stmt(code=f"{target} = input[{index}] * {gate}[ic]; KG_TRACE(0, 1, {index}, {target});",
                    summary=f"input_cache[...] = input[...] * {gate}[ic]")
    if (select := _SELECT.match(stmt.code)) is not None:
        target, cond, index = select.groups()
        return Stmt(code=f"{target} = ({cond}) ? input[{index}] * {gate}[ic] : 0.0f; "
                         f"KG_TRACE(0, {cond}, {index}, {target});",
                    summary=f"input_cache[...] = input[...] * {gate}[ic] (zeros outside)")
    return None


def _without(nodes: tuple[Node, ...], gone: Section) -> tuple[Node, ...]:
    """`nodes` without the section `gone` and the loops left empty by its going."""
    out: list[Node] = []
    for node in nodes:
        if node is gone:
            continue
        if isinstance(node, (Loop, Guard, Block, Section)):
            body = _without(node.body, gone)
            if not body and node.body:
                continue
            node = replace(node, body=body)
        out.append(node)
    return tuple(out)


def _renamed(nodes: tuple[Node, ...], cache: str) -> tuple[Node, ...] | None:
    """`nodes` reading the input cache where they read `cache`; None if an epilogue record names it."""
    name = re.compile(rf"\b{cache}\b")
    out: list[Node] = []
    for node in nodes:
        if isinstance(node, Stmt):
            if node.assign is not None and name.search(repr(node.assign)):
                return None
            out.append(replace(node, code=name.sub("input_cache", node.code),
                               summary=name.sub("input_cache", node.summary),
                               loads=tuple((leaf, name.sub("input_cache", read)) for leaf, read in node.loads)))
            continue
        body = _renamed(node.body, cache)
        if body is None:
            return None
        if isinstance(node, Guard):
            node = replace(node, cond=name.sub("input_cache", node.cond))
        out.append(replace(node, body=body))
    return tuple(out)
