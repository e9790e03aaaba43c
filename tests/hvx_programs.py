"""Helpers for tests of a quantized network's hvx program: the model imported for hvx, the program under
qemu-hexagon held bit for bit to the step-by-step run, and the driver source `kernelgen build` writes."""
from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

import kernelgen
from kernelgen.cli import main


def imported(model, folder: Path):
    """`model` (an onnx ModelProto) saved and imported for hvx into folder/net: its network."""
    import onnx

    onnx.save(model, str(folder / "q.onnx"))
    result = CliRunner().invoke(main, ["import", str(folder / "q.onnx"), "-o", str(folder / "net"), "--target", "hvx"])
    assert result.exit_code == 0, result.output
    return kernelgen.load_network(folder / "net" / "network.yaml")


def program_bit_exact(validation) -> None:
    """Every step ran, and the program's output is the step-by-step run's, bit for bit."""
    runs = list(validation)
    assert all(run.ran for run in runs), runs
    program = validation.run_program()
    assert program.ran and program.passed and program.max_abs == 0, program.why


def driver_source(folder: Path) -> str:
    """network.c as `kernelgen build` writes it for the network imported into folder/net."""
    result = CliRunner().invoke(main, ["build", str(folder / "net" / "network.yaml"), "-o", str(folder / "b")])
    assert result.exit_code == 0, result.output
    return next((folder / "b").glob("*/hvx/network.c")).read_text()
