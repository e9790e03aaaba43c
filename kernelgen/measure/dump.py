"""`kernelgen validate --dump DIR`: each op's output of a chain as the kernel stored it, beside the numpy
reference of that op on the kernel's own input to it, so a user sees where a chain goes wrong.

    DIR/<config>/<target>/op<j>.npy            the kernel's (logical NHWC; op n is the output)
    DIR/<config>/<target>/op<j>.reference.npy  numpy's, on the kernel's op j-1 output (op 1: the input)

Where a target keeps no intermediates, only the output and the chain's reference are written.
"""
from __future__ import annotations

import io
from pathlib import Path

import numpy as np

import kernelgen.reference as reference
import kernelgen.reference_quant as reference_quant
from ..errors import ConfigError, ConfigProblem
from ..files import display_path, write_if_changed_bytes
from ..plan_types import Plan
from .compare import reference_output
from .tensors import KernelArgs


def prepare(folder: Path) -> None:
    """Make the dump folder before anything runs: one that cannot be made (a file in its path, no permission) is
    the user's error at --dump (exit 2), not a kernel that failed after it ran."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ConfigError([ConfigProblem(display_path(folder), 1, 1, "--dump", f"cannot create the folder: "
                                                                           f"{error.strerror or error}")]) from None


def dump(folder: Path, config, plan: Plan, target: str, args: KernelArgs, output: np.ndarray,
         intermediates: tuple[np.ndarray, ...] | None) -> tuple[Path, ...]:
    root = folder / config.name / target
    got = plan.tensors[-1].layout.unpack(output)
    n = len(config.ops)
    files: dict[str, np.ndarray] = {}
    if intermediates is None:
        files[f"op{n}.npy"] = got
        files[f"op{n}.reference.npy"] = reference_output(config, args)
    elif config.dtype == "uint8":
        sources = [args.logical["input"], *intermediates]
        for j in range(n):
            files[f"op{j + 1}.npy"] = intermediates[j] if j + 1 < n else got
            files[f"op{j + 1}.reference.npy"] = reference_quant.op_output(config, j, sources, args.filters(len(config.ops))[j],
                                                                          args.biases(n)[j], sides=args.sides())
    else:
        stored = [args.logical["input"].astype(np.float64), *(i.astype(np.float64) for i in intermediates)]
        for j, op in enumerate(config.ops):
            expected = reference.epilogue(reference.apply(stored[j], args.logical.get(f"filter{j + 1}"), op, args.sides()), op,
                                          args.logical.get(f"bias{j + 1}"), stored, args.sides())
            files[f"op{j + 1}.npy"] = intermediates[j] if j + 1 < n else got
            files[f"op{j + 1}.reference.npy"] = expected.astype(np.float32)
    written = []
    for name, array in files.items():
        buffer = io.BytesIO()
        np.save(buffer, np.ascontiguousarray(array), allow_pickle=False)
        write_if_changed_bytes(root / name, buffer.getvalue())
        written.append(root / name)
    return tuple(written)
