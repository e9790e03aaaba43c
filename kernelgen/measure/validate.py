"""Validation, once for every target (kernel_tuner's check_kernel_output): fresh inputs from a seed -> the
target compiles the job -> one run per poison byte -> the comparison with the numpy reference (and onnxruntime for
an imported config).

Outputs, intermediates and workspaces start poisoned, so an element the kernel forgets stays NaN (or differs
between the two uint8 runs) and fails. A target that can only compile here (HVX float under QEMU 7.2) reports
'compiled'; a device that lacks a feature the kernel needs, 'not run'.
"""
from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Callable

import numpy as np

from ..errors import ConfigError, KernelgenError
from .compare import compare
from .dump import dump as write_dump
from .primitives import Job, Primitives
from .records import Status, ValidationResult, not_built, unmeasured
from .tensors import KernelArgs, poisons, random_inputs


Phase = Callable[[str], None]  # told what a validation is doing now: compiling, running, comparing


def validate(target: Primitives, job: Job, seed: int, args: KernelArgs | None = None,
             dump: Path | None = None, phase: Phase | None = None) -> ValidationResult:
    """Compile and run the job on inputs drawn from `seed` (or `args`), compare with the references; with `dump`,
    write each op's output and its reference there as .npy (measure/dump.py); `phase` hears each step begin."""
    return validate_with_output(target, job, seed, args, dump, phase)[0]


def validate_with_output(target: Primitives, job: Job, seed: int, args: KernelArgs | None = None,
                         dump: Path | None = None, phase: Phase | None = None
                         ) -> tuple[ValidationResult, np.ndarray | None]:
    """validate(), and the kernel's output in the logical layout (None when it could not run here): what a
    network's next step reads."""
    config = job.config
    phase = phase or (lambda _: None)
    args = args if args is not None else random_inputs(config, job.plan, np.random.default_rng(seed))
    phase("compiling")
    with tempfile.TemporaryDirectory(prefix=f"kernelgen-{target.name}-{config.name}-") as tmp, \
            target.compile(job, Path(tmp)) as exe:
        phase("running")
        if exe.compile_only:
            return _noted(unmeasured(config.name, target.name, seed, Status.COMPILED, exe.compile_only),
                          (job.origin,)), None
        if exe.cannot_run:
            return _noted(unmeasured(config.name, target.name, seed, Status.NOT_RUN, exe.cannot_run),
                          (job.origin,)), None
        traced = target.run_traced(exe, args, poisons(config.dtype)[0]) if len(config.ops) > 1 else None
        # uint8 is checked from two poisons (an unwritten byte differs between them): the traced run is one more
        outputs = {poisons(config.dtype)[0]: traced.output} if traced and config.dtype != "uint8" else \
            target.run_poisoned(exe, args, poisons(config.dtype))
        notes = exe.notes
    intermediates = traced.intermediates if traced else None
    phase("comparing")
    if dump is not None:
        write_dump(dump, config, job.plan, target.name, args, next(iter(outputs.values())), intermediates)
    result = compare(config, job.plan, target.name, seed, args, outputs, target.roundoff(job),
                     intermediates=intermediates)
    output = job.plan.tensors[-1].layout.unpack(next(iter(outputs.values())))
    return _noted(result, (*notes, job.origin)), output


def validate_safely(target: Primitives, job: Job, seed: int, dump: Path | None = None,
                    phase: Phase | None = None) -> ValidationResult:
    """validate(), with library errors (toolchain, template, device) reported as a FAIL row. A ConfigError is the
    config's fault, not the kernel's: it propagates (exit 2 at the command line)."""
    try:
        return validate(target, job, seed, dump=dump, phase=phase)
    except ConfigError:
        raise
    except KernelgenError as error:
        return _noted(not_built(job.config.name, target.name, seed, error), (job.origin,))


def _noted(result: ValidationResult, notes: tuple[str, ...]) -> ValidationResult:
    """The result with what its executable noted (a compiler crash worked around, fp16 kernels a device could not
    run) and where its sources came from said after its detail, beside any verdict."""
    notes = tuple(note for note in notes if note)
    return replace(result, detail="; ".join((result.detail, *notes) if result.detail else notes)) if notes else result
