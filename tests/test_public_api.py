"""`import kernelgen`: the names notebooks and build scripts use (issue 22)."""
from __future__ import annotations

import pytest
from builders import toolchain
from conftest import requires_tool

import kernelgen

TEXT = "name: api_conv\ninput: {shape: [1, 6, 5, 4]}\nops:\n  - conv2d: {out_channels: 3, kernel: 3, pad: 1}\n"


def test_the_package_lists_its_api():
    from kernelgen import api

    assert kernelgen.__all__ == ["__version__", *api.__all__]
    assert {"bench", "generate", "load_config", "plan", "run", "validate"} <= set(kernelgen.__all__)
    assert all(getattr(kernelgen, name) is getattr(api, name) for name in api.__all__)
    assert type(kernelgen) is type(api)  # a plain module: no class swap
    assert kernelgen.__version__.count(".") == 2
    with pytest.raises(AttributeError):
        kernelgen.no_such_name


def test_load_plan_and_generate_from_text_and_from_a_file(repo, tmp_path):
    config = kernelgen.load_config(TEXT)
    assert (config.name, config.input_shape) == ("api_conv", (1, 6, 5, 4))
    plan = kernelgen.plan(config)
    assert plan.ops[0].out_shape == (1, 6, 5, 3) and plan.flops == 2 * 6 * 5 * 3 * 4 * 9
    files = kernelgen.generate(config, "c")
    assert sorted(files) == ["api_conv.c", "api_conv.h"] and "void api_conv(" in files["api_conv.h"]
    (tmp_path / "conv.yaml").write_text(TEXT)
    assert kernelgen.load_config(tmp_path / "conv.yaml").name == "api_conv"
    # the modules of the same names stay importable
    import importlib

    importlib.import_module("kernelgen.measure.validate")
    importlib.import_module("kernelgen.plan_types")
    from kernelgen.measure.records import ValidationResult
    from kernelgen.plan_types import Plan

    assert isinstance(plan, Plan) and ValidationResult.__name__ == "ValidationResult"
    assert callable(kernelgen.plan) and callable(kernelgen.validate)  # importing the modules rebinds nothing


@requires_tool(*toolchain("c"))
def test_validate_and_bench_from_python():
    config = kernelgen.load_config(TEXT)
    result = kernelgen.validate(config, "c", seed=7)
    assert result.passed and result.seed == 7
    rows = kernelgen.bench(config, "c", repeat=2)  # issue 50: on c a row cold and a row warm, the probes' beside
    assert [row.when for row in rows] == ["warm", "cold"]  # a dense conv: warm first (what a network's bench takes)
    for row in rows:
        assert row.seconds > 0 and row.spread[0] <= row.seconds <= row.spread[1]
