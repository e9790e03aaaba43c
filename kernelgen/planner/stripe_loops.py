"""The loops around one stripe's load, compute and store: seed 000's nest, or seed 001's
double-buffered pipeline (load(s + 1); compute(s); store(s - 1)). Targets that rewrite a
stripe's parts (hvx) compose them with the same function, so the two never drift apart.

Under rows_outer a stripe is rows x columns: the last op's channel loop (ko_outer) and its
write-back are part of the compute, so there is no channel-stripe loop here and nothing to
store after it (the pipeline then prefetches the input only)."""
from __future__ import annotations

import re

from ..plan_types import Block, Guard, Loop, LoopOrder, Node, Pipeline, Section, Stmt, StripeParts

TIMELINE_HEAD, TIMELINE_TAIL = 14, 4  # pipeline steps the timeline shows before and after "..."


def compose_stripes(parts: StripeParts) -> tuple[Node, ...]:
    """The stripe loops around load, compute and store: seed 000's nest, or the double-buffered pipeline."""
    if parts.pipeline is Pipeline.DOUBLE_BUFFER:
        return _pipelined(parts)
    work: tuple[Node, ...] = (*parts.load, *parts.compute)
    if parts.chunks > 1:
        work = (Loop(var="ci_outer", extent=parts.chunks, body=work,
                     comment="input-channel chunks: partial sums stay in the output cache"),)
    stripe: Node = Loop(var="ho_outer", extent=parts.ho_extent, comment=f"output-row stripes of {parts.rows}",
                        body=(*work, *parts.store))
    if parts.wo_extent > 1:
        stripe = Loop(var="wo_outer", extent=parts.wo_extent, comment=f"output-column stripes of {parts.cols}",
                      body=(stripe,))
    nest = stripe
    if parts.order is LoopOrder.CHANNELS_OUTER:
        nest = Loop(var="ko_outer", extent=parts.ko_extent, comment=f"output-channel stripes of {parts.channels}",
                    body=(stripe,))
    if parts.batch > 1:
        nest = Loop(var="nb", extent=parts.batch, body=(nest,), comment="batch")
    return (nest,)


def _pipelined(parts: StripeParts) -> tuple[Node, ...]:
    """Seed 001's Sched2: load(s + 1); compute(s); store(s - 1), with prologue and epilogue.

    Copy loops stand in for DMA; the order is what an asynchronous copy engine would overlap."""
    total = parts.count

    def pick(kind: str, index: str) -> Stmt:
        if index.isdigit():
            code = f"{parts.ctype} *const {kind}_cache = {kind}_cache_{'b' if int(index) & 1 else 'a'};"
        else:
            code = f"{parts.ctype} *const {kind}_cache = (({index}) & 1) ? {kind}_cache_b : {kind}_cache_a;"
        return Stmt(code=code, summary=f"{kind}_cache = buffer ({index}) % 2")

    def step(index: str, kinds: tuple[str, ...], nodes: tuple[Node, ...]) -> tuple[Node, ...]:
        body = (*(pick(kind, index) for kind in kinds), *nodes)
        return (*_coordinates(parts, index, body), *body)

    # rows_outer writes each channel block back inside the compute: one output cache, no drain
    deferred = bool(parts.store)
    drain = (Section(label="drain: store stripe s - 1 from the other output cache",
                     body=(Guard(cond="s >= 1", body=step("s - 1", ("output",), parts.store)),)),) if deferred else ()
    loop = Loop(var="s", extent=total, comment=f"pipeline steps over {total} stripes", body=(
        Section(label="prefetch: load stripe s + 1 into the other input cache",
                body=(Guard(cond=f"s + 1 < {total}", body=step("s + 1", ("input",), parts.load)),)),
        Block(label="compute stripe s", body=step("s", ("input", "output") if deferred else ("input",),
                                                  parts.compute)),
        *drain))
    last = str(total - 1)
    epilogue = (Section(label="pipeline epilogue: store the last stripe",
                        body=(Block(label=f"stripe {last}", body=step(last, ("output",), parts.store)),)),
                ) if deferred else ()
    return (Section(label="pipeline prologue: load stripe 0",
                    body=(Block(label="stripe 0", body=step("0", ("input",), parts.load)),)),
            loop, *epilogue)


def _coordinates(parts: StripeParts, index: str, nodes: tuple[Node, ...]) -> tuple[Stmt, ...]:
    """Declarations of the stripe indices (nb, ko_outer, wo_outer, ho_outer) of flat stripe `index` that
    `nodes` use; ho_outer varies fastest, as in the unpipelined nest."""
    used = _identifiers(nodes)
    flat = index if re.fullmatch(r"\w+", index) else f"({index})"
    ho, wo, ko = parts.ho_extent, parts.wo_extent, parts.ko_extent
    if parts.order is LoopOrder.ROWS_OUTER:  # ko_outer is the compute's own loop, not a stripe coordinate
        used.discard("ko_outer")
        ko = 1
    order = [("nb", ho * wo * ko, parts.batch), ("ko_outer", ho * wo, ko), ("wo_outer", ho, wo), ("ho_outer", 1, ho)]
    out = []
    for var, divisor, extent in order:
        if var not in used:
            continue
        if index.isdigit():
            value = str(int(index) // divisor % extent)
        else:
            value = flat if divisor == 1 else f"{flat} / {divisor}"
            if divisor * extent < parts.count:
                value = f"({value}) % {extent}" if divisor > 1 else f"{flat} % {extent}"
        out.append(Stmt(code=f"const int {var} = {value};", summary=f"{var} of stripe {index}"))
    return tuple(out)


def _identifiers(nodes: tuple[Node, ...]) -> set[str]:
    found: set[str] = set()
    for node in nodes:
        if isinstance(node, Stmt):
            found |= set(re.findall(r"[A-Za-z_]\w*", node.text))
        elif isinstance(node, Guard):
            found |= set(re.findall(r"[A-Za-z_]\w*", node.cond)) | _identifiers(node.body)
        else:
            found |= _identifiers(node.body)
    return found


def timeline(total: int, deferred: bool = True) -> tuple[str, ...]:
    """The pipeline's steps; without deferred stores (rows_outer) each conv step writes its blocks back itself."""
    steps = [f"load{1}"]
    for i in range(1, total + 1):
        if i < total:
            steps.append(f"load{i + 1}")
        steps.append(f"conv{i}" if deferred else f"conv+store{i}")
        if i > 1 and deferred:
            steps.append(f"store{i - 1}")
    if deferred:
        steps.append(f"store{total}")
    if len(steps) > TIMELINE_HEAD + TIMELINE_TAIL + 1:
        steps = steps[:TIMELINE_HEAD] + ["..."] + steps[-TIMELINE_TAIL:]
    return tuple(steps)
