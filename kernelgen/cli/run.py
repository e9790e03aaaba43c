"""`kernelgen run CONFIG --target T --input NAME=FILE.npy ... -o DIR`: the generated kernel on your own tensors.
Registered by commands.py; prints and exits like the other commands."""
from __future__ import annotations

import math
import os
from pathlib import Path

import click
import numpy as np

from ..api import TARGETS, jobs
from ..files import display_path, write_if_changed_bytes
from ..errors import ConfigProblem
from ..measure.run import InputsRefused, as_listed, checked_inputs, output_order, run
from ..measure.tensors import input_tensors, read_npy
from .common import device_option, handle_errors, load_all, make_folder


def _named_file(ctx, param, values: tuple[str, ...]) -> dict[str, Path]:
    out: dict[str, Path] = {}
    for value in values:
        name, sep, path = value.partition("=")
        if not sep or not name or not path:
            raise click.BadParameter(f"expected NAME=FILE.npy (input=x.npy, filter1=w1.npy), got {value!r}")
        if name in out:
            raise click.BadParameter(f"{name} is given twice")
        if not os.path.lexists(path):  # no file to point into: the argument that named it is the place
            raise click.BadParameter(f"{display_path(value)}: no such file (write the array with numpy.save first)")
        out[name] = Path(path)
    return out


@click.command("run")
@click.argument("config", type=click.Path(dir_okay=False))
@click.option("--target", "target", required=True, metavar="NAME", type=click.Choice(sorted(TARGETS)),
              help="The target whose kernel runs on this machine.")
@click.option("--input", "inputs", multiple=True, metavar="NAME=FILE.npy", callback=_named_file,
              help="A tensor as the config lists it (input and side_<name> in the order of their layout's "
                   "letters: NCHW for an imported config; filter<j> OIHW, bias<j>); repeatable.")
@click.option("-o", "--output", "out_dir", required=True, type=click.Path(file_okay=False),
              help="Folder to write output.npy into.")
@device_option
@handle_errors
def run_command(config: str, target: str, inputs: dict[str, Path], out_dir: str, device: str | None) -> None:
    """Run the generated kernel on your tensors and write its output as .npy (in the output layout's letter order).

    \b
    The input's shape is the config's input.shape, in the order of its layout's letters (an imported NCHW config
    takes the NCHW array its model takes). The layout engine packs each tensor into the config's physical layout
    and unpacks the output. An imported config's weights default to the model's; a uint8 config takes integers,
    or real values it quantizes with the config's scales and zero points. Nothing is written when an input is
    wrong (exit 2).
    Example:
      kernelgen run configs/seed000_baseline.yaml --target c --input input=x.npy \\
          --input filter1=w1.npy --input filter2=w2.npy -o result/
    """
    (loaded,) = load_all((config,), (target,), device)
    job = jobs(loaded, (target,))[target]
    # each file read only up to what its tensor can need; a name the kernel does not take is reported unread
    sizes = {t.name: math.prod(t.logical_shape) for t in input_tensors(job.plan)}
    given = {name: read_npy(f"--input {name}", path, sizes[name]) if name in sizes else np.empty(0)
             for name, path in inputs.items()}
    try:
        args = checked_inputs(loaded, job.plan, given, listed=True)
    except InputsRefused as error:  # the --input argument that gave the tensor is the place, not the config
        raise click.BadParameter("; ".join(_refusal(p, inputs) for p in error.problems), param_hint="'--input'")
    result = run(TARGETS[target], job, args)
    root = Path(out_dir)
    make_folder(root)  # a bad -o is exit 2 with nothing written
    order = "".join(output_order(loaded)).upper()
    for name, logical in result.outputs.items():
        array = as_listed(loaded, logical)
        write_if_changed_bytes(root / f"{name}.npy", _npy_bytes(array))
        click.echo(f"{root / f'{name}.npy'}: {name} {list(array.shape)} {array.dtype} ({order})")
    click.echo(f"ran {result.ran} on {', '.join(f'{n} {list(np.shape(a))}' for n, a in given.items())}", err=True)


def _refusal(problem: ConfigProblem, inputs: dict[str, Path]) -> str:
    """One tensor's problem as the --input argument that gave it (NAME=FILE), or the tensor's name when none did."""
    name = problem.key.removeprefix("--input ")
    return f"{name}={display_path(str(inputs[name]))}: {problem.message}" if name in inputs else \
        f"{name}: {problem.message}"


def _npy_bytes(array: np.ndarray) -> bytes:
    import io

    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()
