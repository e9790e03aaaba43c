"""Streaming stores for a kernel's large output: a depthwise conv's per-pixel stores go past the caches. Pure.

A direct depthwise conv (microkernel.py) moves its input and its output once each, so its time is memory's. A plain
store of an output line first reads the line in (a read for ownership) and later pushes out a dirty line to make room:
on Zen 4, behind the triad's 192 MiB that `kernelgen bench` runs before a cold call, 112x112x96 + bias + relu6 took
0.97-1.0 ms cold against 0.41-0.45 warm. A streaming store writes the whole line without reading it and leaves the
caches to the input: 0.73 ms cold, 0.58 with the epilogue in registers (depthwise_epilogue.py), 0.41-0.47 in tiles of
4 pixels (benchmarks/depthwise_row_stream.c, a loop of its own, reached 0.45). It
only pays where the stores write whole 64-byte lines at once (8-float streaming stores of half lines written apart,
in that benchmark, took twice the time of plain ones) and where the output is too large to stay in the caches for
whatever reads it next: a network's next kernel then reads it from memory either way. Smaller outputs keep plain
stores.

The per-pixel store loop (`for ki: ... output[...] = v;`, a block of a pixel's consecutive channels) keeps its
epilogue and writes the finished block back into the pixel's sums (acc), which kg_stream (vector.h.j2) then streams
into the output: whole lines with non-temporal stores where the block is aligned to a line, plain stores elsewhere
(a caller's unaligned output, a compiler without SSE). KG_STREAM_FENCE after each stripe orders them before what
follows (another thread's reads, the kernel's return)."""
from __future__ import annotations

import re
from dataclasses import replace

from ...plan_types import Block, Guard, Loop, Node, Section, Stmt
from .register_epilogue import contiguous

# An output of at least this many bytes takes streaming stores: past the L2 of any core this targets and most of a
# phone's system cache, where a network's next kernel would read it from memory anyway.
STREAM_MIN_BYTES = 4 << 20
LINE_FLOATS = 16  # a 64-byte line: a block of a pixel's channels streams only in whole lines

_STORE = re.compile(r"output\[(.+)\] = v;")
_VECTOR_STORE = re.compile(r"KG_STORE(16|)\(&output\[(.+)\], v\);")  # an epilogue in registers' store


def streams(output_bytes: int) -> bool:
    return output_bytes >= STREAM_MIN_BYTES


def streamed(nodes: tuple[Node, ...], vectors: bool) -> tuple[Node, ...]:
    """Every per-pixel store loop of whole lines into `output` as its epilogue into acc, then kg_stream, and with
    `vectors` (an epilogue in registers whose stores write whole lines one after another) every vector store into
    `output` a streaming one; the other nodes as they are. Each top-level node (a stripe) that streamed ends with
    KG_STREAM_FENCE."""
    out: list[Node] = []
    for node in nodes:
        changed = _streamed(node, vectors)
        out.append(changed)
        if changed is not node:
            out.append(Stmt(code="KG_STREAM_FENCE();", summary="order the streaming stores before what follows"))
    return tuple(out)


def _streamed(node: Node, vectors: bool) -> Node:
    if isinstance(node, Loop) and node.var == "ki":
        return _store_loop(node) or node
    if isinstance(node, Stmt) and vectors and _VECTOR_STORE.fullmatch(node.code):
        width, index = _VECTOR_STORE.fullmatch(node.code).groups()
        return replace(node, code=f"KG_STREAM{width}(&output[{index}], v);", summary=node.summary + ", streamed")
    if isinstance(node, (Loop, Guard, Block, Section)):
        body: list[Node] = []
        for child in node.body:
            changed = _streamed(child, vectors)
            if isinstance(child, Loop) and child.var == "ki" and changed is not child:
                body += list(changed.body)  # the loop, then its stream (a Block's two statements, unwrapped)
            else:
                body.append(changed)
        if body != list(node.body):
            return replace(node, body=tuple(body))
    return node


def _store_loop(loop: Loop) -> Block | None:
    """The loop with its store into acc[ki] and a kg_stream of the block after it, None where it is not a whole-line
    block of consecutive output channels read from acc (its statements, or one section of them: the epilogue's)."""
    body = loop.body
    section = body[0] if len(body) == 1 and isinstance(body[0], Section) else None
    statements = section.body if section is not None else body
    if loop.extent % LINE_FLOATS or not all(isinstance(n, Stmt) for n in statements):
        return None
    if not any(n.code == "float v = acc[ki];" for n in statements):
        return None
    stores = [n for n in statements if _STORE.fullmatch(n.code)]
    if len(stores) != 1 or stores[0] is not statements[-1]:
        return None
    index = _STORE.fullmatch(stores[0].code).group(1)
    if not contiguous(index):
        return None
    first = re.sub(r"\bki\b", "0", index)
    statements = (*statements[:-1], Stmt(code="acc[ki] = v;", summary="acc[ki] = v"))
    kept = replace(loop, body=(replace(section, body=statements),) if section is not None else statements)
    return Block(label="", body=(kept, Stmt(code=f"kg_stream(&output[{first}], acc, {loop.extent});",
                                            summary=f"output[...] = acc[0..{loop.extent}), streamed")))
