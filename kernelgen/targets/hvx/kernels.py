"""The hvx kernels: the plan's kernel with each stripe section's body replaced by one call to
an HVX helper (templates/hvx/conv2d_*.c.j2), put back in the plan's own stripe loops."""
from __future__ import annotations

from dataclasses import replace

from ...config import Config
from ...errors import KernelgenError
from ...plan_types import Block, Function, Guard, Loop, Node, Param, Phase, Plan, Section, Step, Stmt
from ...planner import compose_stripes
from .depthwise import single_input_stripe
from .names import NAMES


Anchor = Step | str  # a stripe step (a section), or a loop variable


def _replace_sections(plan: Plan, calls: dict[Step, str], after: dict[str, str] | None = None,
                      before: dict[Anchor, str] | None = None) -> tuple[Node, ...]:
    """The plan's kernel body with each listed section's body replaced by one helper call.

    The stripe's load, compute and store are rewritten, then put in the same loops as the plan's
    (plain or pipelined) by planner.compose_stripes. Sections are found by the step the planner
    gave them (Step(Phase.CONV, 2): conv2d #2); a step that is missing is an error here, not
    silently scalar code in the kernel. `after` and `before` add a statement after a loop (by
    variable) or before a section (by step) or loop (by variable)."""
    found: set[str] = set()
    after, before = after or {}, before or {}
    parts = plan.stripe
    rewritten = replace(parts, load=_rewrite(parts.load, calls, after, before, found),
                        compute=_rewrite(parts.compute, calls, after, before, found),
                        store=_rewrite(parts.store, calls, after, before, found))
    missing = [step for step in calls if step not in found]
    if missing:
        raise KernelgenError("hvx: the plan has no section for " + ", ".join(
            f"{step.phase.value}{f' #{step.op}' if step.op else ''}" for step in missing))
    rest = plan.kernel.body[len(compose_stripes(parts)):]  # after the stripes: layout padding fills
    return (*compose_stripes(rewritten), *rest)


def _rewrite(nodes: tuple[Node, ...], calls: dict[Step, str], after: dict[str, str], before: dict[Anchor, str],
             found: set[Step]) -> tuple[Node, ...]:
    out: list[Node] = []
    for node in nodes:
        anchor = node.step if isinstance(node, Section) else node.var if isinstance(node, Loop) else None
        if anchor is not None and anchor in before:
            out.append(Stmt(code=before[anchor], summary=before[anchor]))
        if isinstance(node, Section):
            key = node.step if node.step in calls else None
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


def uint8_kernel(config: Config, plan: Plan, keep: int, direct: bool = False) -> Function:
    """uint8: vrmpy helpers; `keep`: input rows a stripe keeps for the next with halo reuse (0: none); `direct`:
    a lone depthwise conv swept from the input tensor to the output tensor (depthwise.Depthwise.sweep), so the
    stripe has no cache read or write-back to call."""
    n = len(config.ops)
    nb = "nb" if config.input_shape[0] > 1 else "0"
    temp_names = ["temp_output"] if n == 2 else [f"temp_output_{j}" for j in range(1, n)]
    sources = ["input_cache", *temp_names]
    calls = {Step(Phase.WRITE_BACK): f"{NAMES.write_back()}(output_cache, output, {nb}, ko_outer, ho_outer);"}
    rows = plan.geometry.rows[0]  # the input window
    chunked = plan.c_split > 1  # input-channel chunks: ci_outer picks one; partial sums in acc_cache
    ci = ", ci_outer" if chunked else ""
    ko = ", ko_outer" if single_input_stripe(config, plan) else ""  # a lone depthwise op: ko reads its channels
    if keep:
        calls[Step(Phase.INPUT_READ_KEPT)] = f"{NAMES.input_read()}(input, input_cache, {nb}, ho_outer, 0, {keep}{ko});"
        calls[Step(Phase.INPUT_READ_NEW)] = (
            f"{NAMES.input_read()}(input, input_cache, {nb}, ho_outer, {keep}, {rows - keep}{ko});")
    else:
        calls[Step(Phase.INPUT_READ)] = f"{NAMES.input_read()}(input, input_cache, {nb}, ho_outer, 0, {rows}{ci}{ko});"
    if direct:
        calls[Step(Phase.INPUT_READ)] = "/* none: the depthwise sweep reads its rows from the input */"
        calls[Step(Phase.WRITE_BACK)] = "/* none: the depthwise sweep stores into the output */"
    # Channel sums of the input window belong to the compute (a prefetch may overwrite the scratch); only a dense
    # op reads them (a grouped one corrects its input zero point per output channel instead).
    dense = [op.groups == 1 and not op.pool for op in config.ops]
    signed = config.quant.weight_dtype == "int8"
    before: dict[Anchor, str] = {"ko_outer_1" if n > 1 else Step(Phase.FILTER_READ, 1):
                                 f"{NAMES.pixel_sums(0)}(input_cache, pixel_sums);"} if dense[0] else {}
    after = {}
    for j in range(1, n + 1):
        ko = "ko_outer" if j == n else f"ko_outer_{j}"
        dst = "output_cache" if j == n else temp_names[j - 1]
        if j < n:  # once the stripe holds all of op j's channels: the next op's sums, the validation trace
            sums = f"{NAMES.pixel_sums(j)}({dst}, pixel_sums); " if dense[j] else ""
            after[f"ko_outer_{j}"] = f"{sums}KG_TRACE_OP({j}, {dst}, {nb}, ho_outer);"
        if config.ops[j - 1].pool:  # a pool reads its source window alone (a mul: and its factors): no filter, no sums
            by = config.ops[j - 1].scale_by
            factors = f", side_{by}, {nb}" if by else ""
            calls[Step(Phase.CONV, j)] = f"{NAMES.conv(j)}({sources[j - 1]}, {dst}, {ko}, ho_outer{factors});"
            continue
        b = f"bias{j}" if config.ops[j - 1].epilogue.bias else "0"
        if chunked and config.ops[j - 1].epilogue.bias:  # the bias once, with the first chunk
            b = f"ci_outer ? 0 : bias{j}"
        weights = "grouped_weights" if config.ops[j - 1].groups > 1 else "filter_cache"
        # int8 weights come typed as int8_t (their sign is the model's); the helpers read their bytes
        source = f"(const uint8_t *)filter{j}" if signed else f"filter{j}"
        read = f"{NAMES.filter_read(j)}({source}, {weights}, wcorr, {b}, {ko}{ci});"
        if n == 1 and not dense[0]:  # widened weights depend on the channel stripe alone: once per ko, not per row
            read = f"if (widened_ko != {ko}) {{ {read} widened_ko = {ko}; }}"
        calls[Step(Phase.FILTER_READ, j)] = read
        residual = config.ops[j - 1].epilogue.residual
        res = ("" if residual is None else f", side_{residual}, {nb}" if isinstance(residual, str)
               else f", input, {nb}" if residual == 0 else f", {temp_names[residual - 1]}, 0")
        calls[Step(Phase.CONV, j)] = (f"{NAMES.conv(j)}({sources[j - 1]}, {weights}, pixel_sums, wcorr, {dst}, {ko}, "
                                 f"ho_outer{res}{', (int32_t *)acc_cache, ci_outer' if chunked else ''});")
        if direct:
            calls[Step(Phase.CONV, j)] = (f"{NAMES.conv(j)}(input, {weights}, pixel_sums, wcorr, output, {ko}, "
                                          f"ho_outer, {nb});")
    # as the plan's tensors list them: the input, a filter per conv, the int32 biases, the side inputs
    params = [Param(name="input", ctype="const uint8_t *restrict")]
    params += [Param(name=f"filter{j}", ctype=f"const {'int8_t' if signed else 'uint8_t'} *restrict")
               for j, op in enumerate(config.ops, start=1) if not op.pool]
    params += [Param(name=f"bias{j}", ctype="const int32_t *restrict") for j, op in enumerate(config.ops, start=1)
               if op.bias]
    params += [Param(name=side.param, ctype="const uint8_t *restrict") for side in config.side_inputs]
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
        calls[Step(Phase.FILTER_READ, j)] = f"{NAMES.filter_read(j, qf32=True)}(filter{j}, filter_cache, {ko});"
        extra = [f"bias{j}"] if ops[j - 1].bias else []
        residual = ops[j - 1].residual
        if residual is not None:  # the chain's input (this image of the batch) or op K's window
            extra += ["input", "nb" if plan.ops[0].in_shape[0] > 1 else "0"] if residual == 0 else [
                temp_names[residual - 1], "0"]
        args = ", ".join([sources[j - 1], "filter_cache", dst, ko, "ho_outer", *extra])
        calls[Step(Phase.CONV, j)] = f"{NAMES.conv(j, qf32=True)}({args});"
    return Function(name=plan.kernel.name + "_qf32",
                    doc=plan.kernel.doc + "; HVX qf32 compute (v68+), filter cache transposed to 4i x 32o",
                    params=plan.kernel.params, prologue=plan.kernel.prologue,
                    body=_replace_sections(plan, calls))
