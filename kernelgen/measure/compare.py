"""The comparisons a validation ends in: a kernel's outputs (one per poison) against the numpy reference in the
logical layout and, for an imported config, against onnxruntime running the same nodes.

float: within the rounding bound carried through the chain (reference.chain_error_bound), given the unit
roundoffs of the target's arithmetic and storage; uint8: bit for bit. Layout padding of the output must hold
pad_value where the layout declares one and still the poison where it declares none.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import kernelgen.reference as reference
import kernelgen.reference_quant as reference_quant
from ..config import Config
from ..layout import PadKind, TensorLayout
from ..onnx import oracle as onnx_oracle
from ..onnx.u8s8 import allowed_difference
from ..plan_types import Plan
from ..quant import op_quants
from .kept_float import kept_float_allowance
from .records import Status, ValidationResult
from .tensors import KernelArgs


@dataclass(frozen=True, slots=True)
class Roundoff:
    """Unit roundoffs a float kernel's result may carry: of its arithmetic (2^-24 for float32 math, 2^-11 for
    fp16 math) and of its stored intermediates and outputs (0 for float32 storage, 2^-11 for half)."""

    accumulate: float = reference.FLOAT32_UNIT_ROUNDOFF
    storage: float = 0.0

    @property
    def underflow(self) -> float:
        """Half arithmetic or storage: subnormal roundings err absolutely, up to 2^-25 each."""
        half = reference.HALF_UNIT_ROUNDOFF in (self.accumulate, self.storage)
        return reference.HALF_UNDERFLOW if half else 0.0


def reference_output(config: Config, args: KernelArgs) -> np.ndarray:
    """The numpy reference of the config's chain on these inputs, in the output's logical layout (NHWC)."""
    x, filters, biases = args.logical["input"], args.filters(len(config.ops)), args.biases(len(config.ops))
    if config.dtype == "uint8":
        return reference_quant.chain(config, x, filters, biases, args.sides())
    return reference.chain(config, x.astype(np.float64), [f.astype(np.float64) for f in filters],
                           [None if b is None else b.astype(np.float64) for b in biases], args.sides())


def compare(config: Config, plan: Plan, target: str, seed: int, args: KernelArgs,
            outputs: dict[int, np.ndarray], roundoff: Roundoff = Roundoff(),
            intermediates: tuple[np.ndarray, ...] | None = None) -> ValidationResult:
    """outputs: the kernel's physical output after a run from each poison byte; intermediates: a float chain's
    op outputs as the kernel stored them (then every op is checked on the kernel's own input to it)."""
    if config.dtype == "uint8":
        return _compare_exact(config, plan, target, seed, args, outputs, intermediates)
    ((_, output),) = outputs.items()
    return _compare_float(config, plan, target, seed, args, output, roundoff, intermediates)


def _compare_float(config: Config, plan: Plan, target: str, seed: int, args: KernelArgs, output: np.ndarray,
                   roundoff: Roundoff, intermediates: tuple[np.ndarray, ...] | None) -> ValidationResult:
    filters, biases = args.filters(len(config.ops)), args.biases(len(config.ops))
    layout = plan.tensors[-1].layout
    got = layout.unpack(output).astype(np.float64)
    problems: list[tuple[str, str]] = []  # (what failed, in short: records.FAILURES or "conv2d #j"; the finding)
    if intermediates is not None:
        # Op by op: each op's stored output against the reference of that op on the kernel's own input to it,
        # within that op's rounding alone. The chain-wide bound multiplies by sum|w| per op (about 19 for a 3x3
        # over 64 channels) and says nothing past a few ops; this one is as tight at op 50 as at op 1.
        stored = [args.logical["input"].astype(np.float64), *(i.astype(np.float64) for i in intermediates), got]
        zeros = [np.zeros_like(s) for s in stored]
        ratio = 0.0
        op_bounds = []  # each op's own rounding bound on its stored input: what onnxruntime's op is held to too
        for j, op in enumerate(config.ops):
            expected_j, bound_j = reference.op_error_bound(op, filters[j], biases[j], stored[:j + 1], zeros[:j + 1],
                                                           roundoff.accumulate, roundoff.storage, roundoff.underflow,
                                                           args.sides())
            op_bounds.append(bound_j)
            with np.errstate(invalid="ignore"):
                over = np.abs(stored[j + 1] - expected_j) / np.maximum(bound_j, 1e-300)
            if j + 1 < len(config.ops):
                # positions of an intermediate the schedule never computes (no later op reads them: a stride-2
                # consumer's odd rows) stay poisoned; one a consumer needs shows as NaN in its expected value
                over = over[~np.isnan(stored[j + 1])]
            if j + 1 < len(config.ops) and np.nan_to_num(over, nan=np.inf).max(initial=0.0) > 1.0 and not problems:
                label = f"{op.kind} #{j + 1}"
                problems.append((label, _worst(f"{label}: output", stored[j + 1], expected_j,
                                                            bound_j)))
            ratio = max(ratio, float(over[~np.isnan(over)].max(initial=0.0)))  # NaN: a finding, not a ratio
        expected, bound = expected_j, bound_j
    else:
        expected, bound = reference.chain_error_bound(config, args.logical["input"], filters, roundoff.accumulate,
                                                      roundoff.storage, biases=biases, underflow=roundoff.underflow,
                                                      sides=args.sides())
    error = np.abs(got - expected)
    # NaN: unwritten, or computed from an intermediate the kernel never stored. The errors and err/bound are those
    # of the elements that exist (NaN when none does); the finding "unwritten" says the rest.
    measured = ~np.isnan(error)
    max_abs = float(error[measured].max()) if measured.any() else float("nan")
    # Relative to the output's largest magnitude: per-element ratios explode near zero crossings.
    max_rel = max_abs / max(float(np.nanmax(np.abs(expected), initial=0.0)), 1e-30)
    over = error / np.maximum(bound, 1e-300)
    if intermediates is None:
        ratio = float(over[measured].max()) if measured.any() else float("nan")
    threshold = float(np.nanmax(bound, initial=0.0)) / max(float(np.nanmax(np.abs(expected), initial=0.0)), 1e-30)
    unwritten = int(np.isnan(got).sum())
    if unwritten:
        problems.append(("unwritten", f"{unwritten} output elements never written (still NaN)"))
    elif float(over[measured].max(initial=0.0)) > 1.0:
        problems.append(("output", _worst("output", got, expected, bound)))
    elif not measured.all():
        problems.append(("unwritten", _worst("output", got, expected, bound)
                         + ": computed from an intermediate element the kernel never stored"))
    problems += [("padding", p) for p in _float_padding_problems(layout, output)]
    oracles = ("numpy",)
    ort = None
    if config.source is not None and not unwritten and intermediates is not None:
        ort_problem, ort_ratio = _onnxruntime_float_ops(config, args, stored, op_bounds, roundoff)
        problems += [("onnxruntime", ort_problem)] if ort_problem else []
        oracles, ratio = ("numpy", "onnxruntime"), max(ratio, ort_ratio)
    elif config.source is not None and not unwritten:
        try:
            ort = onnx_oracle.run_onnxruntime(config, args.logical["input"], dict(args.logical))
        except onnx_oracle.OracleFailed as error:  # the model's nodes do not run: a finding, not a crash
            problems.append(("onnxruntime", str(error)))
    if ort is not None:
        # A kernel without stored intermediates (one op, or a target that keeps none): onnxruntime runs the whole
        # chain from the input. Its float32 result errs from the exact value by at most the float32 bound (any
        # summation order, with or without FMA), so kernel and onnxruntime differ by at most the sum of the two.
        float32_bound = bound if roundoff.storage == 0.0 else reference.chain_error_bound(
            config, args.logical["input"], filters, biases=biases, sides=args.sides())[1]
        ort_ratio = float((np.abs(got - ort) / np.maximum(bound + float32_bound, 1e-300)).max())
        oracles = ("numpy", "onnxruntime")
        ratio = max(ratio, ort_ratio)
        if ort_ratio > 1.0:
            problems.append(("onnxruntime", f"differs from onnxruntime by {float(np.abs(got - ort).max()):.3g} "
                                            f"(over the two rounding bounds by {ort_ratio:.3g}x)"))
    return ValidationResult(config=config.name, target=target, status=Status.FAIL if problems else Status.PASS,
                            max_abs_error=max_abs, max_rel_error=max_rel, bound_ratio=ratio, seed=seed,
                            detail="; ".join(text for _, text in problems), oracles=oracles, threshold=threshold,
                            checked="op-by-op" if intermediates is not None else "chain",
                            failure=tuple(dict.fromkeys(kind for kind, _ in problems)))


def _onnxruntime_float_ops(config: Config, args: KernelArgs, stored: list[np.ndarray], op_bounds: list[np.ndarray],
                           roundoff: Roundoff) -> tuple[str, float]:
    """Each op of an imported float chain against onnxruntime running that op's own nodes of the model on the
    kernel's own input to it (onnx.oracle.run_onnxruntime_float_ops): (the first op over its bound, as a finding, or
    ""; the largest error over bound). onnxruntime's float32 op errs from the exact value by at most the op's float32
    bound (any summation order, with or without FMA) and the kernel's stored result by at most its own op bound, so
    the two differ by at most their sum: as tight at op 50, after pools and FCs, as at op 1, where the chain-wide
    bound grows by sum|w| per op and can hide a dropped bias in a deep tail."""
    try:
        theirs = onnx_oracle.run_onnxruntime_float_ops(config, stored, dict(args.logical))
    except onnx_oracle.OracleFailed as error:  # the model's nodes do not run: a finding, not a crash
        return str(error), float("nan")
    filters, biases, zeros = args.filters(len(config.ops)), args.biases(len(config.ops)), [np.zeros_like(s) for s in stored]
    worst, finding = 0.0, ""
    for j, (op, ort, bound) in enumerate(zip(config.ops, theirs, op_bounds)):
        if roundoff.storage or roundoff.accumulate != reference.FLOAT32_UNIT_ROUNDOFF:
            bound = bound + reference.op_error_bound(op, filters[j], biases[j], stored[:j + 1], zeros[:j + 1],
                                                     sides=args.sides())[1]
        else:
            bound = 2 * bound
        got = stored[j + 1]
        if ort.shape != got.shape:
            return (f"{op.kind} #{j + 1}: onnxruntime's nodes make shape {list(ort.shape)}, the kernel "
                    f"{list(got.shape)}: the config no longer matches its model"), float("inf")
        written = ~np.isnan(got)  # an intermediate position no later op reads stays poisoned
        with np.errstate(invalid="ignore"):
            over = np.nan_to_num(np.abs(got - ort) / np.maximum(bound, 1e-300), nan=np.inf)[written]
        worst = max(worst, float(over.max(initial=0.0)))
        if over.max(initial=0.0) > 1.0 and not finding:
            apart = float(np.nanmax(np.abs(got - ort)[written], initial=0.0))
            finding = (f"{op.kind} #{j + 1} differs from onnxruntime (the model's nodes for it, run on the kernel's "
                       f"own input to it) by up to {apart:.3g}: "
                       + _worst("output", np.where(written, got, ort), ort, bound).replace(", expected ",
                                                                                            ", onnxruntime ")
                       + ": the config differs from its model here")
    return finding, worst


def _worst(what: str, got: np.ndarray, expected: np.ndarray, bound: np.ndarray) -> str:
    """The element furthest over its bound, as a finding."""
    with np.errstate(invalid="ignore"):
        over = np.nan_to_num(np.abs(got - expected) / np.maximum(bound, 1e-300), nan=np.inf)
    at = np.unravel_index(int(np.argmax(over)), got.shape)
    return (f"{what}{list(map(int, at))} = {got[at]:.6g}, expected {expected[at]:.6g} "
            f"(error {abs(got[at] - expected[at]):.3g} > bound {bound[at]:.3g})")


def _float_padding_problems(layout: TensorLayout, output: np.ndarray) -> list[str]:
    mask = layout.padding_mask()
    if not mask.any():
        return []
    pad = output.reshape(layout.flat_shape)[mask]
    kind = layout.layout.pad_kind
    if kind is PadKind.VALUE and not np.all(pad == np.float32(layout.layout.pad_value)):
        return [f"{int((pad != np.float32(layout.layout.pad_value)).sum())} padding elements do not hold "
                f"pad_value {layout.layout.pad_value:g}"]
    if kind is PadKind.NONE and not np.all(np.isnan(pad)):
        return [f"{int((~np.isnan(pad)).sum())} padding elements were written although the layout "
                f"declares no pad_value"]
    return []


def _compare_exact(config: Config, plan: Plan, target: str, seed: int, args: KernelArgs,
                   outputs: dict[int, np.ndarray], intermediates: tuple[np.ndarray, ...] | None = None
                   ) -> ValidationResult:
    """Bit-exact against reference_quant in every poisoned run, each op on the kernel's own input to it where
    the target kept the intermediates; for an imported model, onnxruntime op by op (_onnxruntime_ops)."""
    x, filters, biases = args.logical["input"], args.filters(len(config.ops)), args.biases(len(config.ops))
    problems: list[tuple[str, str]] = []  # (what failed, in short; the finding)
    worst = 0
    quants = op_quants(config)
    read = _read_positions(config, plan)  # where the kernel's stored intermediates hold what a later op reads
    if intermediates is None:
        sources = reference_quant.chain_outputs(config, x, filters, biases, args.sides())
    else:
        sources = [x, *intermediates]
        for j in range(len(intermediates)):  # op j + 1 on the kernel's own input (and residual) to it
            want = reference_quant.op_output(config, j, sources, filters[j], biases[j], quants[j],
                                              args.sides()).astype(np.int32)
            # only where a later op reads it: the rest the fused chain need not compute (it stays poisoned)
            diff = (sources[j + 1].astype(np.int32) != want) & read[j + 1]
            if diff.any():
                where = np.unravel_index(int(np.argmax(diff)), want.shape)
                worst = max(worst, int((np.abs(sources[j + 1].astype(np.int32) - want) * read[j + 1]).max()))
                label = plan.ops[j].label
                problems.append((label, f"{label}: output{list(map(int, where))} = "
                                 f"{int(sources[j + 1][where])}, numpy {int(want[where])} on the kernel's own input "
                                 f"({int(diff.sum())} of {diff.size} differ)"))
        sources.append(reference_quant.op_output(config, len(config.ops) - 1, sources, filters[-1], biases[-1],
                                                 quants[-1], args.sides()))
    expected = sources[-1].astype(np.int32)
    layout = plan.tensors[-1].layout
    mask = layout.padding_mask().reshape(-1)
    runs = [layout.unpack(out) for out in outputs.values()]
    unwritten = np.any([run != runs[0] for run in runs[1:]], axis=0) if len(runs) > 1 else None
    if unwritten is not None and unwritten.any():  # a byte never written keeps each run's own poison
        problems.append(("unwritten", f"{int(unwritten.sum())} output elements never written (they differ between "
                                      f"the poisoned runs)"))
    for poison, out in outputs.items():
        got = layout.unpack(out).astype(np.int32)
        diff = got != expected
        if diff.any():
            where = np.unravel_index(int(np.argmax(diff)), got.shape)
            worst = max(worst, int(np.abs(got - expected).max()))
            problems.append(("output", f"poison 0x{poison:02X}: {int(diff.sum())} of {diff.size} outputs differ, "
                                       f"first at {list(map(int, where))}: {int(got[where])} != "
                                       f"{int(expected[where])}"))
        flat = out.reshape(-1)
        if mask.any() and not np.all(flat[mask] == poison):
            problems.append(("padding", f"poison 0x{poison:02X}: {int((flat[mask] != poison).sum())} layout padding "
                                        f"bytes written"))
    oracles, ort_note = ("numpy",), ""
    if config.source is not None:
        try:
            ort_problems, ort_note, decided = _onnxruntime_ops(config, sources, filters, biases, args.sides(), read)
        except onnx_oracle.OracleFailed as error:  # the model's nodes do not run: a finding, not a crash
            ort_problems, ort_note, decided = [str(error)], "", ()
        problems += [("onnxruntime", p) for p in ort_problems]
        oracles = ("numpy", *decided)
    saturated = float(np.mean((expected == 0) | (expected == 255)))
    detail = "; ".join(text for _, text in problems) if problems else \
        f"bit-exact in {len(outputs)} poisoned runs ({saturated:.0%} of outputs saturated){ort_note}"
    # bit-exact: no rounding bound to be over, so a FAIL has no err/bound (NaN); `failure` says what failed
    return ValidationResult(config=config.name, target=target, status=Status.FAIL if problems else Status.PASS,
                            max_abs_error=float(worst), max_rel_error=float(worst) / 255.0,
                            bound_ratio=float("nan") if problems else 0.0, seed=seed, detail=detail,
                            oracles=oracles, checked="bit-exact op-by-op" if intermediates else "bit-exact",
                            failure=tuple(dict.fromkeys(kind for kind, _ in problems)))


def _read_positions(config: Config, plan: Plan) -> list[np.ndarray]:
    """For each source (the chain's input, then each op's output), a mask broadcastable to its NHWC shape of the
    positions the chain reads to compute its whole output: the output's own, then backwards, what each op reads of
    its input at the positions needed of its output (its kernel taps inside the image: a stride or dilation skips
    rows and columns) and of its residual (the same positions). Rows and columns are independent, so each mask is
    rows x columns, over every image and channel."""
    shapes = [plan.ops[0].in_shape, *(geometry.out_shape for geometry in plan.ops)]
    rows = [np.zeros(shape[1], dtype=bool) for shape in shapes]
    cols = [np.zeros(shape[2], dtype=bool) for shape in shapes]
    rows[-1][:], cols[-1][:] = True, True
    for j in range(len(config.ops) - 1, -1, -1):
        op = config.ops[j]
        for axis, (need, src) in enumerate(((rows, rows[j]), (cols, cols[j]))):
            out = np.flatnonzero(need[j + 1])
            taps = np.arange(op.kernel[axis]) * op.dilation[axis] - op.pad[axis]
            at = (out[:, None] * op.stride[axis] + taps[None, :]).reshape(-1)
            src[at[(at >= 0) & (at < src.size)]] = True
        if isinstance(op.residual, int):  # (a side input is no tensor of the chain)
            rows[op.residual] |= rows[j + 1]
            cols[op.residual] |= cols[j + 1]
    return [r[None, :, None, None] & c[None, None, :, None] for r, c in zip(rows, cols)]


def _onnxruntime_ops(config: Config, sources: list[np.ndarray], filters: list[np.ndarray | None],
                     biases: list[np.ndarray | None], sides: dict[str, np.ndarray], read: list[np.ndarray]
                     ) -> tuple[list[str], str, tuple[str, ...]]:
    """Each op against onnxruntime running that op's nodes alone on the op's own input (the kernel's stored
    intermediates where it kept them, else numpy's, which its output matched bit for bit), in the session that is
    exact on this host (u8s8.quant_oracle: the default one, or its u8u8 precision mode where the default u8s8
    convolution saturates), held to each op's allowed difference (u8s8.allowed_difference: none for a float32
    requantization, 1 for a fixed-point one, a residual add, or an op onnxruntime kept in float32, which its float32
    sum's rounding bound may widen by whole steps where its terms are large: kept_float.float32_steps). filters:
    None for an op without weights (a pool, a mul). `read`: per source, the positions a later op reads
    (_read_positions); an intermediate is compared there only, as numpy's check does (a fused chain need not compute
    the rest: a stride-2 op after it skips them). Returns (problems, note, the oracles that decided)."""
    oracle = onnx_oracle.quant_oracle(filters)
    if not oracle.compared:  # no onnxruntime session is exact here: numpy alone decides, and we say why
        return [], f"; onnxruntime {oracle.why}", ()
    theirs = onnx_oracle.run_onnxruntime_ops(config, sources[:-1], sides, oracle)
    quants = op_quants(config)
    maxima, counts, over = [], [], []
    forms = []
    for j, (oq, mine, ran) in enumerate(zip(quants, sources[1:], theirs), start=1):
        apart = np.abs(ran.output - mine.astype(np.int32)) * np.broadcast_to(read[j], mine.shape)
        compared = int(np.broadcast_to(read[j], mine.shape).sum())
        allowed, form = allowed_difference(oq, ran.in_float)
        kept = kept_float_allowance(config.ops[j - 1], oq, sources[j - 1], filters[j - 1], biases[j - 1]) \
            if ran.in_float else None
        if kept is not None and kept.max() > allowed:
            allowed = kept  # per output: a rounding, its float32 sum's bound in whole steps, a residual add's
            form += f"; with its float32 sums' bound{' and the add after' if oq.add else ''}: up to {int(kept.max())}"
        forms.append(form)
        maxima.append(int(apart.max()))
        counts.append((int((apart > 0).sum()), compared))
        if (apart > allowed).any():
            expected = "exactly its result" if np.max(allowed) == 0 else \
                "at most 1" if np.max(allowed) == 1 else "at most what its float32 arithmetic allows"
            over.append(f"{config.ops[j - 1].kind} #{j}: {oracle.name} differs by up to {int(apart.max())} in "
                        f"{counts[-1][0]} of {compared} outputs (expected {expected}: {form})")
    decided = f" ({oracle.why})" if oracle.why else ""
    if over:
        return [text + decided for text in over], "", (oracle.name,)
    if not any(maxima):
        return [], f"; {oracle.name} op by op: bit-exact in all {len(maxima)} ops{decided}", (oracle.name,)
    differing = "; ".join(f"#{j} within {m} ({n} of {size} outputs; {form})"
                          for j, (m, (n, size), form) in enumerate(zip(maxima, counts, forms), start=1) if m)
    exact = sum(m == 0 for m in maxima)
    return [], f"; {oracle.name} op by op: bit-exact in {exact} of {len(maxima)} ops; {differing}{decided}", \
        (oracle.name,)
