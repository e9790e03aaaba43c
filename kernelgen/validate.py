"""Validation: fresh random inputs -> pack -> build and run on the target -> unpack ->
compare with the numpy reference (kernel_tuner's contract, XNNPACK's sentinels).

Outputs and the workspace start as NaN, so an element the kernel forgets stays NaN and
fails. Layout padding is checked too: pad_value where declared, untouched (still the
sentinel) where the layout says padding is never written.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from . import onnx_oracle, reference
from .config import Config
from .errors import ConfigError, KernelgenError
from .layout import PadKind
from .plan import Plan


@dataclass(frozen=True, slots=True)
class Result:
    config: str
    target: str
    status: str  # pass | FAIL | not run
    max_abs_error: float
    max_rel_error: float
    bound_ratio: float  # worst |error| / allowed bound; <= 1 passes
    seed: int
    detail: str = ""
    oracles: tuple[str, ...] = ("numpy",)  # what the output was checked against

    @property
    def passed(self) -> bool:
        return self.status == "pass"


@dataclass(frozen=True, slots=True)
class Inputs:
    logical: tuple[np.ndarray, ...]  # input then filters, logical layouts
    physical: tuple[np.ndarray, ...]  # packed with the layout engine


def make_inputs(plan: Plan, rng: np.random.Generator, config: Config | None = None) -> Inputs:
    """Fresh random tensors; an imported config (config.source) takes its filters and biases from the model."""
    logical, physical = [], []
    model_weights = onnx_oracle.weights(config) if config is not None and config.source is not None else {}
    for tensor in plan.tensors[:-1]:
        shape = tensor.logical_shape
        # Filters scaled by 1/sqrt(fan-in) keep chain activations near unit size; biases of half that
        # size move outputs across a relu's or clamp's bounds without swamping the conv.
        if tensor.name.startswith("filter"):
            scale = float(np.sqrt(3.0 / (shape[1] * shape[2] * shape[3])))
        else:
            scale = 0.5 if tensor.name.startswith("bias") else 1.0
        values = (rng.uniform(-1.0, 1.0, size=shape) * scale).astype(np.float32)
        if tensor.name in model_weights:
            values = model_weights[tensor.name].reshape(shape)
        logical.append(values)
        physical.append(np.ascontiguousarray(tensor.layout.pack(values)))
    return Inputs(tuple(logical), tuple(physical))


def compare(config: Config, plan: Plan, target: str, seed: int, inputs: Inputs, output: np.ndarray, *,
            accumulate_roundoff: float = reference.FLOAT32_UNIT_ROUNDOFF, storage_roundoff: float = 0.0) -> Result:
    """Unpack `output` and check it against the reference within the rounding bound.

    accumulate_roundoff: unit roundoff of the arithmetic (2^-24 for float32 math);
    storage_roundoff: unit roundoff of stored intermediates/outputs (2^-11 for half storage).
    """
    named = dict(zip((t.name for t in plan.tensors[:-1]), inputs.logical))
    filters = [named[f"filter{j}"] for j in range(1, len(config.ops) + 1)]
    biases = [named.get(f"bias{j}") for j in range(1, len(config.ops) + 1)]
    expected, bound = reference.chain_error_bound(config, named["input"], filters, accumulate_roundoff,
                                                  storage_roundoff, biases=biases)
    layout = plan.tensors[-1].layout
    got = layout.unpack(output).astype(np.float64)
    error = np.abs(got - expected)
    error[np.isnan(got)] = np.inf
    max_abs = float(error.max())
    # Relative to the output's largest magnitude: per-element ratios explode near zero crossings.
    max_rel = max_abs / max(float(np.abs(expected).max()), 1e-30)
    ratio = float((error / np.maximum(bound, 1e-300)).max())
    problems = []
    unwritten = int(np.isnan(got).sum())
    if unwritten:
        problems.append(f"{unwritten} output elements never written (still NaN)")
    elif ratio > 1.0:
        worst = np.unravel_index(int(np.argmax(error / np.maximum(bound, 1e-300))), got.shape)
        problems.append(f"output{list(map(int, worst))} = {got[worst]:.6g}, expected {expected[worst]:.6g} "
                        f"(error {error[worst]:.3g} > bound {bound[worst]:.3g})")
    problems += _padding_problems(layout, output)
    oracles = ("numpy",)
    if config.source is not None and not unwritten:
        # onnxruntime's float32 result errs from the exact value by at most the float32 bound as well
        # (any summation order, with or without FMA), so kernel and onnxruntime differ by at most twice it.
        ort = onnx_oracle.run_onnxruntime(config, named["input"], named)
        float32_bound = bound if storage_roundoff == 0.0 else reference.chain_error_bound(
            config, named["input"], filters, biases=biases)[1]
        ort_ratio = float((np.abs(got - ort) / np.maximum(bound + float32_bound, 1e-300)).max())
        oracles = ("numpy", "onnxruntime")
        ratio = max(ratio, ort_ratio)
        if ort_ratio > 1.0:
            problems.append(f"differs from onnxruntime by {float(np.abs(got - ort).max()):.3g} (over the two "
                            f"rounding bounds by {ort_ratio:.3g}x)")
    status = "FAIL" if problems else "pass"
    return Result(config=config.name, target=target, status=status, max_abs_error=max_abs, max_rel_error=max_rel,
                  bound_ratio=ratio, seed=seed, detail="; ".join(problems), oracles=oracles)


def _padding_problems(layout, output: np.ndarray) -> list[str]:
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


def not_run(config: Config, target: str, seed: int, status: str, detail: str) -> Result:
    """A row with no measurement: FAIL before running, 'not run', 'skipped'."""
    nan = float("nan")
    return Result(config=config.name, target=target, status=status, max_abs_error=nan, max_rel_error=nan,
                  bound_ratio=nan, seed=seed, detail=detail)


def validate_safely(run: Callable[[Config, int], Result], config: Config, target: str, seed: int) -> Result:
    """run(config, seed), with library errors (toolchain, template, device) reported as a FAIL row.
    A ConfigError is the config's fault, not the kernel's: it propagates (exit 2 at the command line)."""
    try:
        return run(config, seed)
    except ConfigError:
        raise
    except KernelgenError as error:
        return not_run(config, target, seed, "FAIL", str(error))
