"""Validation, once for every target (kernel_tuner's check_kernel_output): fresh inputs from a seed -> the
target compiles the job -> one run per poison byte -> the comparison with the numpy reference (and onnxruntime for
an imported config).

Outputs, intermediates and workspaces start poisoned, so an element the kernel forgets stays NaN (or differs
between the two uint8 runs) and fails. A target that can only compile here (HVX float under QEMU 7.2) reports
'compiled'; a device that lacks a feature the kernel needs, 'not run'.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from ..errors import ConfigError, KernelgenError
from .compare import compare
from .primitives import Job, Primitives
from .records import Status, ValidationResult, unmeasured
from .tensors import KernelArgs, poisons, random_inputs



def validate(target: Primitives, job: Job, seed: int, args: KernelArgs | None = None) -> ValidationResult:
    """Compile and run the job on inputs drawn from `seed` (or `args`), compare with the references."""
    config = job.config
    args = args if args is not None else random_inputs(config, job.plan, np.random.default_rng(seed))
    with tempfile.TemporaryDirectory(prefix=f"kernelgen-{target.name}-{config.name}-") as tmp, \
            target.compile(job, Path(tmp)) as exe:
        if exe.compile_only:
            return unmeasured(config.name, target.name, seed, Status.COMPILED, exe.compile_only)
        if exe.cannot_run:
            return unmeasured(config.name, target.name, seed, Status.NOT_RUN, exe.cannot_run)
        traced = target.run_traced(exe, args, poisons(config.dtype)[0]) if _chained_float(config) else None
        outputs = {poisons(config.dtype)[0]: traced.output} if traced else \
            target.run_poisoned(exe, args, poisons(config.dtype))
        notes = exe.notes
    result = compare(config, job.plan, target.name, seed, args, outputs, target.roundoff(job),
                     intermediates=traced.intermediates if traced else None)
    if notes and result.passed:
        detail = "; ".join((result.detail, *notes) if result.detail else notes)
        return ValidationResult(config=result.config, target=result.target, status=result.status,
                                max_abs_error=result.max_abs_error, max_rel_error=result.max_rel_error,
                                bound_ratio=result.bound_ratio, seed=seed, detail=detail, oracles=result.oracles)
    return result


def _chained_float(config) -> bool:
    """A float chain: its ops can be checked one by one where the target keeps its intermediates."""
    return config.dtype != "uint8" and len(config.ops) > 1


def validate_safely(target: Primitives, job: Job, seed: int) -> ValidationResult:
    """validate(), with library errors (toolchain, template, device) reported as a FAIL row. A ConfigError is the
    config's fault, not the kernel's: it propagates (exit 2 at the command line)."""
    try:
        return validate(target, job, seed)
    except ConfigError:
        raise
    except KernelgenError as error:
        return unmeasured(job.config.name, target.name, seed, Status.FAIL, str(error))
