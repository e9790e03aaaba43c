"""Validation: fresh random inputs -> pack -> build and run on the target -> unpack ->
compare with the numpy reference (kernel_tuner's contract, XNNPACK's sentinels).

Outputs and the workspace start as NaN, so an element the kernel forgets stays NaN and
fails. Layout padding is checked too: pad_value where declared, untouched (still the
sentinel) where the layout says padding is never written.
"""
from __future__ import annotations

import importlib
import secrets
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from . import reference
from .config import Config
from .emit import render
from .errors import KernelgenError
from .layout import PadKind
from .plan import Plan
from .planner import plan as make_plan
from .targets import TARGETS
from .toolchains import gcc


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

    @property
    def passed(self) -> bool:
        return self.status == "pass"


@dataclass(frozen=True, slots=True)
class Inputs:
    logical: tuple[np.ndarray, ...]  # input then filters, logical layouts
    physical: tuple[np.ndarray, ...]  # packed with the layout engine


def make_inputs(plan: Plan, rng: np.random.Generator) -> Inputs:
    logical, physical = [], []
    for tensor in plan.tensors[:-1]:
        shape = tensor.logical_shape
        # Filters scaled by 1/sqrt(fan-in) keep chain activations near unit size.
        scale = 1.0 if tensor.name == "input" else float(np.sqrt(3.0 / (shape[1] * shape[2] * shape[3])))
        values = (rng.uniform(-1.0, 1.0, size=shape) * scale).astype(np.float32)
        logical.append(values)
        physical.append(np.ascontiguousarray(tensor.layout.pack(values)))
    return Inputs(tuple(logical), tuple(physical))


def _run_c(plan: Plan, sources: dict[str, str], workdir: Path, arrays: list[np.ndarray]) -> None:
    for name, text in sources.items():
        (workdir / name).write_text(text)
    library = gcc.Library(gcc.build_shared([workdir / f"{plan.name}.c"], workdir / f"lib{plan.name}.so"))
    library.call(plan.name, arrays)


def validate_c(config: Config, seed: int) -> Result:
    plan = make_plan(config)
    inputs = make_inputs(plan, np.random.default_rng(seed))
    output = np.full(plan.tensors[-1].layout.flat_shape, np.nan, dtype=np.float32)
    workspace = np.full(plan.workspace_elements, np.nan, dtype=np.float32)
    with tempfile.TemporaryDirectory(prefix=f"kernelgen-{plan.name}-") as tmp:
        _run_c(plan, render(plan, TARGETS["c"]), Path(tmp), [*inputs.physical, output, workspace])
    return compare(config, plan, "c", seed, inputs, output)


def _lazy(module: str, function: str) -> Callable[[Config, int], Result]:
    """A validator imported on first use: target modules import this one, so no import cycle."""
    def run(config: Config, seed: int) -> Result:
        return getattr(importlib.import_module(module), function)(config, seed)
    return run


# One entry per target: (config, seed) -> Result. Targets register here, nowhere else.
VALIDATORS: dict[str, Callable[[Config, int], Result]] = {
    "c": validate_c,
    "opencl": _lazy("kernelgen.validate_opencl", "validate_opencl"),
    "hvx": _lazy("kernelgen.validate_hvx", "validate_hvx"),
    "vulkan": _lazy("kernelgen.validate_vulkan", "validate_vulkan"),
}


def validate(config: Config, target: str, *, seed: int | None = None) -> Result:
    seed = secrets.randbits(32) if seed is None else seed
    return VALIDATORS[target](config, seed)


def compare(config: Config, plan: Plan, target: str, seed: int, inputs: Inputs, output: np.ndarray, *,
            accumulate_roundoff: float = reference.FLOAT32_UNIT_ROUNDOFF, storage_roundoff: float = 0.0) -> Result:
    """Unpack `output` and check it against the reference within the rounding bound.

    accumulate_roundoff: unit roundoff of the arithmetic (2^-24 for float32 math);
    storage_roundoff: unit roundoff of stored intermediates/outputs (2^-11 for half storage).
    """
    expected, bound = reference.chain_error_bound(config, inputs.logical[0], list(inputs.logical[1:]),
                                                  accumulate_roundoff, storage_roundoff)
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
    status = "FAIL" if problems else "pass"
    return Result(config=config.name, target=target, status=status, max_abs_error=max_abs, max_rel_error=max_rel,
                  bound_ratio=ratio, seed=seed, detail="; ".join(problems))


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


def validate_safely(config: Config, target: str, *, seed: int | None = None) -> Result:
    """validate(), with toolchain failures reported as a FAIL row instead of an exception."""
    seed = secrets.randbits(32) if seed is None else seed
    try:
        return validate(config, target, seed=seed)
    except KernelgenError as error:
        return Result(config=config.name, target=target, status="FAIL", max_abs_error=float("nan"),
                      max_rel_error=float("nan"), bound_ratio=float("nan"), seed=seed, detail=str(error))
