"""`kernelgen run` and kernelgen.run: the generated kernel on the user's own tensors, on every bundled target;
its output equals validate's reference on the same inputs (bit for bit for uint8, within the rounding bound for
float); every bad input is exit 2 naming the tensor, with nothing written."""
from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner
from builders import toolchain
from conftest import SMALL_UINT8, require_tools

import kernelgen
from kernelgen.cli import main
from kernelgen.errors import ConfigError
from kernelgen.measure.compare import reference_output
from kernelgen.measure.tensors import pack
from kernelgen.reference import chain_error_bound

FLOAT = """\
name: run_{target}
input: {{shape: [1, 6, 7, 8], layout: nhwc-4c}}
ops:
  - conv2d: {{out_channels: 8, kernel: 3, pad: 1, bias: true, activation: relu}}
  - conv2d: {{out_channels: 4, kernel: 1}}
targets: [{target}]
"""
UINT8 = SMALL_UINT8.format(name="run_hvx", bias=", bias: true")


def _require(target: str) -> None:
    require_tools(*toolchain(target))


def _tensors(config) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(21)
    plan = kernelgen.plan(config)
    out = {}
    for t in plan.tensors[:-1]:
        if config.dtype == "uint8":
            out[t.name] = (rng.integers(-2000, 2000, t.logical_shape).astype(np.int32) if t.name.startswith("bias")
                           else rng.integers(0, 256, t.logical_shape).astype(np.uint8) if t.name == "input"
                           else rng.integers(-128, 128, t.logical_shape).astype(np.int8))
        else:
            out[t.name] = rng.uniform(-1, 1, t.logical_shape).astype(np.float32) * (0.3 if t.name != "input" else 1)
    return out


def _save(folder, tensors: dict[str, np.ndarray]) -> list[str]:
    args = []
    for name, array in tensors.items():
        np.save(folder / f"{name}.npy", array)
        args += ["--input", f"{name}={folder / f'{name}.npy'}"]
    return args


@pytest.mark.slow
@pytest.mark.parametrize("target", ["c", "opencl", "vulkan", "hvx"])
def test_run_writes_the_kernels_output_for_the_users_tensors(target, tmp_path):
    _require(target)
    text = UINT8 if target == "hvx" else FLOAT.format(target=target)
    path = tmp_path / f"run_{target}.yaml"
    path.write_text(text)
    config = kernelgen.load_config(path)
    tensors = _tensors(config)
    result = CliRunner().invoke(main, ["run", str(path), "--target", target, *_save(tmp_path, tensors),
                                       "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    got = np.load(tmp_path / "out" / "output.npy")
    assert f"output {list(got.shape)}" in result.stdout and f"run_{target}: {target} kernel" in result.stderr
    plan = kernelgen.plan(config)
    args = pack(config, plan, tensors)
    assert got.shape == plan.tensors[-1].logical_shape
    if config.dtype == "uint8":
        np.testing.assert_array_equal(got, reference_output(config, args))  # bit-exact
        assert got.dtype == np.uint8
    else:
        # float32 arithmetic in any order lies within the dot-product rounding bound of the exact result
        expected, bound = chain_error_bound(config, args.logical["input"], args.filters(2), biases=args.biases(2))
        assert (np.abs(got - expected) <= bound).all() and np.abs(expected).max() > 0.1
    # the Python API gives the same array
    again = kernelgen.run(config, target, tensors)["output"]
    np.testing.assert_array_equal(again, got)


@pytest.mark.slow
def test_a_quantized_config_takes_real_values_and_quantizes_them(tmp_path):
    _require("hvx")
    config = kernelgen.load_config(UINT8)
    tensors = _tensors(config)
    real = dict(tensors, input=(tensors["input"].astype(np.float32) - 128) * 0.05)
    np.testing.assert_array_equal(kernelgen.run(config, "hvx", real)["output"],
                                  kernelgen.run(config, "hvx", tensors)["output"])


def _bad(tmp_path, args: list[str], target: str = "c", text: str | None = None):
    path = tmp_path / "bad.yaml"
    path.write_text(text or FLOAT.format(target=target))
    out = tmp_path / "bad_out"
    result = CliRunner().invoke(main, ["run", str(path), "--target", target, *args, "-o", str(out)])
    assert result.exit_code == 2, result.output
    assert not out.exists(), "nothing is written on failure"
    return result.stderr


def test_bad_inputs_are_exit_2_naming_the_tensor(tmp_path):
    config = kernelgen.load_config(FLOAT.format(target="c"))
    good = _tensors(config)
    args = _save(tmp_path, good)
    # a missing name, with the shape and dtype it needs
    missing = _bad(tmp_path, args[:-2])
    assert list(good) == ["input", "filter1", "filter2", "bias1"]  # the kernel's argument order
    # issue 49: reported at the --input option, not at the config's first line
    assert missing.splitlines()[-1] == ("Error: Invalid value for '--input': bias1: missing: expected shape [8] dtype "
                                        "float32 (one per output channel)")
    # an unknown name
    np.save(tmp_path / "extra.npy", good["input"])
    assert f"filter9={tmp_path / 'extra.npy'}: unknown tensor (the kernel takes: input, filter1, filter2, bias1)" in _bad(
        tmp_path, [*args, "--input", f"filter9={tmp_path / 'extra.npy'}"])
    # a wrong shape: the expected one, in the logical layout
    np.save(tmp_path / "filter1.npy", good["filter1"][:, :4])
    assert (f"Invalid value for '--input': filter1={tmp_path / 'filter1.npy'}: expected shape [8, 8, 3, 3] dtype "
            f"float32 (OIHW), got shape [8, 4, 3, 3]" in _bad(tmp_path, args))
    np.save(tmp_path / "filter1.npy", good["filter1"])
    # a wrong dtype
    np.save(tmp_path / "input.npy", (good["input"] * 10).astype(np.int32))
    assert f"input={tmp_path / 'input.npy'}: expected floating-point values (float32), got dtype int32" in _bad(
        tmp_path, args)
    np.save(tmp_path / "input.npy", good["input"])
    # a file that is not .npy
    (tmp_path / "input.txt").write_text("1 2 3")
    named = [a if not a.startswith("input=") else f"input={tmp_path / 'input.txt'}" for a in args]
    assert "--input input: expected a .npy file (numpy.save), got 'input.txt'" in _bad(tmp_path, named)
    # a .npy that is not readable as one
    (tmp_path / "broken.npy").write_bytes(b"not numpy")
    named = [a if not a.startswith("input=") else f"input={tmp_path / 'broken.npy'}" for a in args]
    assert "is not a readable .npy file" in _bad(tmp_path, named)
    # issue 49: a file that does not exist has no line to point at: the --input argument that named it is the place
    absent = tmp_path / "absent.npy"
    named = [a if not a.startswith("input=") else f"input={absent}" for a in args]
    message = _bad(tmp_path, named).splitlines()
    assert message[-1] == (f"Error: Invalid value for '--input': input={absent}: no such file (write the array with "
                           f"numpy.save first)")
    assert not any(f"{absent}:1:1" in line for line in message)


def test_nan_in_a_uint8_tensors_float_source_is_exit_2(tmp_path):
    config = kernelgen.load_config(UINT8)
    tensors = _tensors(config)
    real = (tensors["input"].astype(np.float32) - 128) * 0.05
    real[0, 1, 2, 3] = np.nan
    args = _save(tmp_path, dict(tensors, input=real))
    message = _bad(tmp_path, args, target="hvx", text=UINT8)
    assert "input.npy: 1 value(s) are NaN or infinite: real values must be finite to quantize to uint8" in message
    with pytest.raises(ConfigError, match="NaN or infinite"):
        kernelgen.run(config, "hvx", dict(tensors, input=real))
