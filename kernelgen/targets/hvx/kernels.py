"""The hvx kernels: the plan's kernel with each stripe section's body replaced by one call to
an HVX helper (templates/hvx/conv2d_*.c.j2), put back in the plan's own stripe loops."""
from __future__ import annotations

from dataclasses import replace

from ...config import Config
from ...errors import KernelgenError
from ...plan import Block, Function, Guard, Loop, Node, Param, Plan, Section, Stmt
from ...planner import compose_stripes


def _replace_sections(plan: Plan, calls: dict[str, str], after: dict[str, str] | None = None,
                      before: dict[str, str] | None = None) -> tuple[Node, ...]:
    """The plan's kernel body with each listed section's body replaced by one helper call.

    The stripe's load, compute and store are rewritten, then put in the same loops as the plan's
    (plain or pipelined) by planner.compose_stripes. Sections are found by the planner's labels
    ("input cache read", "filter #1 cache read", "conv2d #2", "write back output cache"); a label
    that is missing is an error here, not silently scalar code in the kernel. `after` and
    `before` add a statement after a loop (by variable) or before a section or loop."""
    found: set[str] = set()
    after, before = after or {}, before or {}
    parts = plan.stripe
    rewritten = replace(parts, load=_rewrite(parts.load, calls, after, before, found),
                        compute=_rewrite(parts.compute, calls, after, before, found),
                        store=_rewrite(parts.store, calls, after, before, found))
    missing = sorted(set(calls) - found)
    if missing:
        raise KernelgenError(f"hvx: the plan has no section labelled {', '.join(map(repr, missing))}")
    rest = plan.kernel.body[len(compose_stripes(parts)):]  # after the stripes: layout padding fills
    return (*compose_stripes(rewritten), *rest)


def _rewrite(nodes: tuple[Node, ...], calls: dict[str, str], after: dict[str, str], before: dict[str, str],
             found: set[str]) -> tuple[Node, ...]:
    out: list[Node] = []
    for node in nodes:
        name = node.label if isinstance(node, Section) else node.var if isinstance(node, Loop) else None
        if name is not None:
            key = next((k for k in before if name == k or name.startswith((k + " ", k + ":"))), None)
            if key is not None:
                out.append(Stmt(code=before[key], summary=before[key]))
        if isinstance(node, Section):
            key = next((k for k in calls if node.label == k or node.label.startswith((k + " ", k + ":"))), None)
            if key is not None:
                found.add(key)
                out.append(Section(label=node.label + " (HVX helper)",
                                   body=(Stmt(code=calls[key], summary=calls[key]),)))
                continue
            out.append(replace(node, body=_rewrite(node.body, calls, after, before, found)))
        elif isinstance(node, (Loop, Guard, Block)):
            out.append(replace(node, body=_rewrite(node.body, calls, after, before, found)))
            if isinstance(node, Loop) and node.var in after:
                out.append(Stmt(code=after[node.var], summary=after[node.var]))
        else:
            out.append(node)
    return tuple(out)


def uint8_kernel(config: Config, plan: Plan, keep: int) -> Function:
    """uint8: vrmpy helpers; `keep`: input rows a stripe keeps for the next with halo reuse (0: none)."""
    n = len(config.ops)
    nb = "nb" if config.input_shape[0] > 1 else "0"
    temp_names = ["temp_output"] if n == 2 else [f"temp_output_{j}" for j in range(1, n)]
    sources = ["input_cache", *temp_names]
    calls = {"write back output cache": f"kg_write_back(output_cache, output, {nb}, ko_outer, ho_outer);"}
    rows = plan.cache("input_a" if plan.pipeline == "double_buffer" else "input").logical_shape[1]
    chunked = plan.c_split > 1  # input-channel chunks: ci_outer picks one; partial sums in acc_cache
    ci = ", ci_outer" if chunked else ""
    if keep:
        calls["input cache read (first stripe only, rows the next stripe keeps)"] = (
            f"kg_input_read(input, input_cache, {nb}, ho_outer, 0, {keep});")
        calls[f"input cache read (new rows; {keep} kept in the ring)"] = (
            f"kg_input_read(input, input_cache, {nb}, ho_outer, {keep}, {rows - keep});")
    else:
        calls["input cache read"] = f"kg_input_read(input, input_cache, {nb}, ho_outer, 0, {rows}{ci});"
    # Channel sums of the input window belong to the compute (a prefetch may overwrite the scratch); only a dense
    # op reads them (a grouped one corrects its input zero point per output channel instead).
    dense = [op.groups == 1 for op in config.ops]
    before = {"ko_outer_1" if n > 1 else "filter #1 cache read": "kg_pixel_sums_0(input_cache, pixel_sums);"} \
        if dense[0] else {}
    after = {}
    for j in range(1, n + 1):
        ko = "ko_outer" if j == n else f"ko_outer_{j}"
        dst = "output_cache" if j == n else temp_names[j - 1]
        b = f"bias{j}" if config.ops[j - 1].bias else "0"
        if chunked and config.ops[j - 1].bias:  # the bias once, with the first chunk
            b = f"ci_outer ? 0 : bias{j}"
        weights = "grouped_weights" if config.ops[j - 1].groups > 1 else "filter_cache"
        calls[f"filter #{j} cache read"] = f"kg_filter_read_{j}(filter{j}, {weights}, wcorr, {b}, {ko}{ci});"
        if n == 1 and not dense[0]:  # widened weights depend on the channel stripe alone: once per ko, not per row
            calls[f"filter #{j} cache read"] = (f"if (widened_ko != {ko}) {{ {calls[f'filter #{j} cache read']} "
                                                f"widened_ko = {ko}; }}")
        residual = config.ops[j - 1].residual
        res = "" if residual is None else f", input, {nb}" if residual == 0 else f", {temp_names[residual - 1]}, 0"
        calls[f"conv2d #{j}"] = (f"kg_conv_{j}({sources[j - 1]}, {weights}, pixel_sums, wcorr, {dst}, {ko}, "
                                 f"ho_outer{res}{', (int32_t *)acc_cache, ci_outer' if chunked else ''});")
        if j < n and dense[j]:
            after[f"ko_outer_{j}"] = f"kg_pixel_sums_{j}({dst}, pixel_sums);"
    params = [Param(name="input", ctype="const uint8_t *restrict")]
    params += [Param(name=f"filter{j}", ctype="const uint8_t *restrict") for j in range(1, n + 1)]
    # int32 biases after the filters, one per op that has one (as the plan's tensors list them)
    params += [Param(name=f"bias{j}", ctype="const int32_t *restrict") for j, op in enumerate(config.ops, start=1)
               if op.bias]
    params += [Param(name="output", ctype="uint8_t *restrict"), Param(name="workspace", ctype="uint8_t *restrict")]
    return Function(name=plan.kernel.name, doc=plan.kernel.doc + "; HVX vrmpy compute", params=tuple(params),
                    prologue=plan.kernel.prologue + (
                        "int32_t *const pixel_sums = (int32_t *)(workspace + KG_SCRATCH_OFFSET); "
                        "/* per source pixel: sum of its channels */",
                        "int32_t *const wcorr = (int32_t *)(workspace + KG_WCORR_OFFSET); "
                        "/* per output channel: bias - za * sum(u) + n * za * zu */") + ((
                        "int16_t *const grouped_weights = (int16_t *)(workspace + KG_GROUPED_OFFSET); "
                        "/* a grouped conv's weights, w - zw */",) if any(op.groups > 1 for op in config.ops) else ())
                    + (("int widened_ko = -1; /* the channel stripe grouped_weights and wcorr hold */",)
                       if n == 1 and not dense[0] else ()),
                    body=_replace_sections(plan, calls, after, before))


def qf32_kernel(config: Config, plan: Plan, ops: tuple) -> Function:
    """ops: the hvx plan's OpGeo records (what each helper's epilogue reads besides the caches)."""
    n = len(config.ops)
    temp_names = ["temp_output"] if n == 2 else [f"temp_output_{j}" for j in range(1, n)]
    sources = ["input_cache", *temp_names]
    calls = {}
    for j in range(1, n + 1):
        ko = "ko_outer" if j == n else f"ko_outer_{j}"
        dst = "output_cache" if j == n else temp_names[j - 1]
        calls[f"filter #{j} cache read"] = f"kg_filter_read_{j}_qf32(filter{j}, filter_cache, {ko});"
        extra = [f"bias{j}"] if ops[j - 1].bias else []
        residual = ops[j - 1].residual
        if residual is not None:  # the chain's input (this image of the batch) or op K's window
            extra += ["input", "nb" if plan.ops[0].in_shape[0] > 1 else "0"] if residual == 0 else [
                temp_names[residual - 1], "0"]
        args = ", ".join([sources[j - 1], "filter_cache", dst, ko, "ho_outer", *extra])
        calls[f"conv2d #{j}"] = f"kg_conv_{j}_qf32({args});"
    return Function(name=plan.kernel.name + "_qf32",
                    doc=plan.kernel.doc + "; HVX qf32 compute (v68+), filter cache transposed to 4i x 32o",
                    params=plan.kernel.params, prologue=plan.kernel.prologue,
                    body=_replace_sections(plan, calls))
