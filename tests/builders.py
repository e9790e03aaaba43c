"""The tests' one way to write a config: a `Case` (input shape, ops, layouts, schedule, dtype, option blocks) and
`config_text` / `make_config`, instead of a builder and a tuple shape per test file. Also each target's tools as the
target itself lists them (`kernelgen targets`), for requires_tool / require_tools, and `benchmark` to import a
script of benchmarks/ by name.

    CASES = {"k3_pad1": Case([1, 10, 9, 16], ["{out_channels: 48, kernel: 3, pad: 1}"], schedule="{k_split: 2}")}
    make_config("k3_pad1", CASES["k3_pad1"])                  # a Config, as parse_config("k3_pad1.yaml") gives
    make_config("k3_pad1", CASES["k3_pad1"].with_(targets="[c]"))  # one field changed
"""
from __future__ import annotations

import functools
import importlib.util
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from kernelgen.api import parse_config
from kernelgen.config import Config
from kernelgen.layout import listed_of_logical, listed_order


@dataclass(frozen=True)
class Case:
    """One config's contents. An op is a conv2d flow map ("{out_channels: 8, kernel: 3}") or any other op as its
    YAML line ("maxpool: {kernel: 2}"); `blocks` are further top-level keys in the order written (opencl, vulkan,
    quant, hvx, c: "{...}"); `expect` is what a test table says about the case (not written)."""

    shape: list[int] | tuple[int, ...]  # logical NHWC, written in the input layout's letter order
    ops: list[str] | tuple[str, ...]
    input_layout: str = "NHWC"
    output_layout: str = "NHWC"
    schedule: str | None = "{}"
    dtype: str | None = None
    blocks: tuple[tuple[str, str], ...] = ()
    targets: str | None = None
    expect: object = field(default=None, compare=False)
    side_inputs: str | None = None  # the side_inputs map as a flow map: "{scale: {shape: [2, 1, 1, 10]}}"

    def with_(self, **changes) -> Case:
        return replace(self, **changes)

    def block(self, key: str) -> str | None:
        return dict(self.blocks).get(key)

    def with_block(self, key: str, text: str) -> Case:
        """The case with top-level `key` set to `text` (replacing it where the case has one)."""
        kept = tuple((k, v) for k, v in self.blocks if k != key)
        return replace(self, blocks=(*kept, (key, text)))


def _op_line(op: str) -> str:
    return f"  - conv2d: {op}\n" if op.startswith("{") else f"  - {op}\n"


def config_text(name: str, case: Case) -> str:
    """The YAML text of `case` named `name`: name, dtype, input, side inputs, ops, output, schedule, the blocks,
    targets."""
    text = f"name: {name}\n" + (f"dtype: {case.dtype}\n" if case.dtype else "")
    listed = listed_of_logical(tuple(case.shape), listed_order(case.input_layout))  # case.shape is NHWC
    text += f"input: {{shape: {list(listed)}, layout: {case.input_layout}}}\n"
    text += f"side_inputs: {case.side_inputs}\n" if case.side_inputs else ""
    text += "ops:\n"
    text += "".join(_op_line(op) for op in case.ops) + f"output: {{layout: {case.output_layout}}}\n"
    text += f"schedule: {case.schedule}\n" if case.schedule is not None else ""
    text += "".join(f"{key}: {value}\n" for key, value in case.blocks)
    return text + (f"targets: {case.targets}\n" if case.targets else "")


def make_config(name: str, case: Case) -> Config:
    """`case` loaded as the file <name>.yaml would be (its errors name that file)."""
    return parse_config(config_text(name, case), f"{name}.yaml")


def with_quick(values, *quick) -> list:
    """The parameters of a compile-and-run matrix: those in `quick` marked quick, so they stay in
    `pytest -m 'not slow'` (tests/conftest.py marks the others slow by the compiler they need)."""
    unknown = set(quick) - set(values)
    assert not unknown, f"no such case: {sorted(unknown)}"
    return [pytest.param(v, marks=pytest.mark.quick) if v in quick else v for v in values]


# ---------------------------------------------------------------- each target's tools, from the target

# How a ToolStatus row a target lists is asked for by requires_tool: a Python package as py:<module>; a row that is
# a device or a setting, not a tool, is left out (the device comes with the package that drives it).
_PYTHON_PACKAGES = {"pyopencl": "py:pyopencl", "python:vulkan": "py:vulkan"}
_NOT_TOOLS = {"cflags", "opencl-device", "vulkan-device"}


@functools.cache
def toolchain(target: str, *, stats: bool = False) -> tuple[str, ...]:
    """The tools `target` lists (`kernelgen targets`), as requires_tool names them; those it needs only for
    `kernelgen stats` (mesa:*) when `stats`."""
    from kernelgen.registry import TARGETS

    names = []
    for status in TARGETS[target].toolchain():
        if status.name in _NOT_TOOLS or (status.name.startswith("mesa:") and not stats):
            continue
        names.append(_PYTHON_PACKAGES.get(status.name, status.name))
    return tuple(names)


def c_library(job, folder, flags: tuple[str, ...] = ()):
    """A c job's files written into `folder` (made here) and built as a shared library with the target's flags and
    `flags`: (its compiled executable record, the loaded library)."""
    from kernelgen.targets.c import C
    from kernelgen.targets.c.toolchain import Library, build_shared

    folder.mkdir()
    for file, text in job.files.items():
        (folder / file).write_text(text)
    exe = C().compile(job, folder)
    name = job.plan.name
    return exe, Library(build_shared([folder / f"{name}.c"], folder / "lib.so", flags=(*exe.flags, *flags)))


def benchmark(name: str):
    """benchmarks/<name>.py imported as a module (the scripts are not a package), fresh each call."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parents[1] / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up while being made
    spec.loader.exec_module(module)
    return module
