"""Validation of the hvx target: fresh random inputs -> pack -> clang-19 build of the kernel and
a generated driver -> qemu-hexagon -> unpack -> compare.

uint8 must equal reference_quant bit for bit, in two runs whose outputs and workspace start
from different poison bytes (0xA5, then 0x5A): an element the kernel forgets, or a value it
takes from never-written memory, differs between runs or from the reference. Layout padding
of the output must still hold that run's poison. float32 runs once with NaN poison (0xFF
bytes) and is compared with validate.compare's rounding bound. The qf32 variant
(hvx.float_compute: qf32) is only compiled, for its arch, and its assembly is checked for
HVX float multiplies: status "compiled", never "pass".
"""
from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from ... import onnx_oracle, reference_quant
from ...config import Config
from ...emit import Comment, render_template
from ...plan import Plan
from ...planner import plan as make_plan
from ...validate import Inputs, Result, compare, make_inputs, not_run
from .options import NAME, QF32_ARCHES, hvx_options
from .plan import HvxPlan, hvx_plan
from .toolchain import assembly, build, run

Render = Callable[[Config, Plan], dict[str, str]]  # the target's render: config, plan -> {file name: text}

UINT8_POISONS = (0xA5, 0x5A)
FLOAT_POISONS = (0xFF,)  # 0xFFFFFFFF is a NaN
QF32_MULTIPLY = re.compile(r"\.qf32\s*=\s*vmpy\(")


@dataclass(frozen=True, slots=True)
class Arg:
    name: str
    ctype: str
    elements: int


@dataclass(frozen=True, slots=True)
class Program:
    """A kernel plus its driver, built and run in a directory."""

    workdir: Path
    plan: Plan
    hvx: HvxPlan
    args: tuple[Arg, ...]
    runs: tuple[int, ...]


def driver_source(plan: Plan, hp: HvxPlan, args: tuple[Arg, ...], runs: tuple[int, ...]) -> str:
    uint8 = plan.dtype == "uint8"
    return render_template("hvx/driver.c.j2", plan, Comment(), hvx=hp, args=args, runs=runs, kernel=hp.kernel.name,
                           out_ctype="uint8_t" if uint8 else "float", out_elements=plan.tensors[-1].elements,
                           workspace_ctype="uint8_t" if uint8 else "float")


def prepare(config: Config, workdir: Path, arrays: list[np.ndarray], names: list[str],
            runs: tuple[int, ...], render: Render) -> Program:
    """Write kernel, header, driver and input files into workdir."""
    plan = make_plan(config)
    hp = hvx_plan(config, plan)
    for name, text in render(config, plan).items():
        (workdir / name).write_text(text)
    args = []
    for name, array in zip(names, arrays):
        ctype = {np.dtype(np.uint8): "uint8_t", np.dtype(np.int8): "uint8_t", np.dtype(np.int32): "int32_t",
                 np.dtype(np.float32): "float"}[array.dtype]
        args.append(Arg(name=name, ctype=ctype, elements=int(array.size)))
        np.ascontiguousarray(array).tofile(workdir / f"{name}.bin")
    args_t = tuple(args)
    (workdir / "driver.c").write_text(driver_source(plan, hp, args_t, runs))
    return Program(workdir=workdir, plan=plan, hvx=hp, args=args_t, runs=runs)


def build_and_run(program: Program, arch: str, *, profile: bool = False) -> tuple[list[np.ndarray], str]:
    wd = program.workdir
    binary = build([wd / "driver.c", wd / f"{program.plan.name}.c"], wd / "driver", arch=arch,
                           include_dirs=[wd], defines={"KG_PROFILE_COMPUTE": 1} if profile else None)
    outs = [f"out{i}.bin" for i in range(len(program.runs))]
    # QEMU runs ~10^7 Hexagon instructions per second; the float32 scalar nest spends ~9 per MAC
    # (seed 000's 3x3 chain: ~25 min of one core), so the limit grows with the work.
    timeout = 600 + len(program.runs) * program.plan.executed_flops / 2 / 2e5
    done = run(binary, [f"{a.name}.bin" for a in program.args] + outs, cwd=wd, arch=arch, timeout=timeout)
    dtype = np.uint8 if program.plan.dtype == "uint8" else np.float32
    return [np.fromfile(wd / name, dtype=dtype) for name in outs], done.stdout


# ---------------------------------------------------------------- uint8

def quant_inputs(config: Config, plan: Plan, rng: np.random.Generator) -> tuple[list, list, list]:
    """(logical, physical, names): input, filters, biases; full-range random bytes."""
    weight_dtype = np.int8 if config.quant.weight_dtype == "int8" else np.uint8
    info = np.iinfo(weight_dtype)
    logical, physical, names = [], [], []
    biases: list = [None] * len(config.ops)
    # an imported config (kernelgen import) runs on the model's own weights and biases
    model = onnx_oracle.weights(config) if config.source is not None else {}
    for tensor in plan.tensors[:-1]:
        if tensor.name.startswith("bias"):  # int32, at scale s_in * s_w[k]: a few hundred output steps
            values = rng.integers(-(2 ** 12), 2 ** 12, size=tensor.logical_shape).astype(np.int32)
            values = model.get(tensor.name, values).astype(np.int32)
            biases[int(tensor.name[4:]) - 1] = values
            physical.append(values)
            names.append(tensor.name)
            continue
        if tensor.name == "input":
            values = rng.integers(0, 256, size=tensor.logical_shape, dtype=np.uint8)
        else:
            values = rng.integers(info.min, info.max + 1, size=tensor.logical_shape).astype(weight_dtype)
            values = model.get(tensor.name, values).astype(weight_dtype)
        logical.append(values)
        packed = tensor.layout.pack(values.view(np.uint8), sentinel=0xA5)
        physical.append(np.ascontiguousarray(packed).reshape(-1))
        names.append(tensor.name)
    return logical + [biases], physical, names


def validate_uint8(config: Config, seed: int, render: Render) -> Result:
    plan = make_plan(config)
    rng = np.random.default_rng(seed)
    logical, physical, names = quant_inputs(config, plan, rng)
    biases = logical.pop()
    expected = reference_quant.chain(config, logical[0], logical[1:], biases)
    layout = plan.tensors[-1].layout
    with tempfile.TemporaryDirectory(prefix=f"kernelgen-hvx-{plan.name}-") as tmp:
        program = prepare(config, Path(tmp), physical, names, UINT8_POISONS, render)
        outputs, _ = build_and_run(program, hvx_options(config).arch)
    problems = []
    worst = 0
    for poison, out in zip(UINT8_POISONS, outputs):
        got = layout.unpack(out)
        diff = got.astype(np.int32) != expected.astype(np.int32)
        if diff.any():
            where = np.unravel_index(int(np.argmax(diff)), got.shape)
            worst = max(worst, int(np.abs(got.astype(np.int32) - expected.astype(np.int32)).max()))
            problems.append(f"poison 0x{poison:02X}: {int(diff.sum())} of {diff.size} outputs differ, first at "
                            f"{list(map(int, where))}: {int(got[where])} != {int(expected[where])}")
        mask = layout.padding_mask().reshape(-1)
        if mask.any() and not np.all(out[mask] == poison):
            problems.append(f"poison 0x{poison:02X}: {int((out[mask] != poison).sum())} layout padding bytes written")
    oracles = ("numpy",)
    if config.source is not None:
        # onnxruntime rounds its requantization in float (half to even): at most 1 apart from kernelgen's
        ort = onnx_oracle.run_onnxruntime(config, logical[0], {})
        apart = np.abs(ort - expected.astype(np.int32))
        oracles = ("numpy", "onnxruntime")
        if apart.max() > 1:
            problems.append(f"onnxruntime differs by up to {int(apart.max())} (expected at most 1)")
        ort_note = f"; onnxruntime: max difference {int(apart.max())}, {np.mean(apart > 0):.2%} of outputs differ"
    saturated = float(np.mean((expected == 0) | (expected == 255)))
    detail = "; ".join(problems) if problems else f"bit-exact in {len(UINT8_POISONS)} poisoned runs " \
                                                  f"({saturated:.0%} of outputs saturated)" + (
        ort_note if config.source is not None else "")
    return Result(config=config.name, target=NAME, status="FAIL" if problems else "pass", max_abs_error=float(worst),
                  max_rel_error=float(worst) / 255.0, bound_ratio=0.0 if not problems else float("inf"), seed=seed,
                  detail=detail, oracles=oracles)


# ---------------------------------------------------------------- float32

def validate_float32(config: Config, seed: int, render: Render) -> Result:
    plan = make_plan(config)
    inputs: Inputs = make_inputs(plan, np.random.default_rng(seed), config)
    arrays = [np.ascontiguousarray(p).reshape(-1) for p in inputs.physical]
    with tempfile.TemporaryDirectory(prefix=f"kernelgen-hvx-{plan.name}-") as tmp:
        program = prepare(config, Path(tmp), arrays, [t.name for t in plan.tensors[:-1]], FLOAT_POISONS, render)
        outputs, _ = build_and_run(program, hvx_options(config).arch)
    return compare(config, plan, NAME, seed, inputs, outputs[0])


def qf32_assembly(config: Config, workdir: Path, arch: str, render: Render) -> str:
    plan = make_plan(config)
    for name, text in render(config, plan).items():
        (workdir / name).write_text(text)
    return assembly(workdir / f"{plan.name}.c", arch=arch, include_dirs=[workdir])


def validate_qf32(config: Config, seed: int, render: Render) -> Result:
    arch = hvx_options(config).arch
    nan = float("nan")
    if arch not in QF32_ARCHES:
        return not_run(config, NAME, seed, "FAIL", f"qf32 needs hvx.arch v68 or later, got {arch}")
    plan = make_plan(config)
    if hvx_plan(config, plan).qf32 is None:
        return not_run(config, NAME, seed, "FAIL", "no qf32 variant for these layouts")
    with tempfile.TemporaryDirectory(prefix=f"kernelgen-hvx-qf32-{plan.name}-") as tmp:
        asm = qf32_assembly(config, Path(tmp), arch, render)
    multiplies = len(QF32_MULTIPLY.findall(asm))
    status = "compiled" if multiplies else "FAIL"
    return Result(config=config.name, target=NAME, status=status, max_abs_error=nan, max_rel_error=nan,
                  bound_ratio=nan, seed=seed,
                  detail=f"compile-only: QEMU 7.2 has no HVX float; qf32 variant built for {arch}, "
                         f"{multiplies} qf32 vmpy in its assembly")


def validate_hvx(config: Config, seed: int, render: Render) -> Result:
    if config.dtype == "uint8":
        return validate_uint8(config, seed, render)
    if hvx_options(config).float_compute == "qf32":
        return validate_qf32(config, seed, render)
    return validate_float32(config, seed, render)
