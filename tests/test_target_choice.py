"""Target choice by dtype is one rule (kernelgen/target_choice.py), which the API, the commands over configs and
networks, and `import` all apply."""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import pytest

import kernelgen
from kernelgen import api
from kernelgen.cli.import_onnx import _choose_targets
from kernelgen.errors import ConfigError
from kernelgen.onnx.graph import OnnxError
from kernelgen.target_choice import TargetChoice, choose_targets
from kernelgen.targets import TARGETS


@dataclass(frozen=True)
class _Takes:
    dtypes: tuple[str, ...]


def test_the_given_targets_split_by_the_dtype_in_the_order_given():
    known = {"a": _Takes(("float32",)), "b": _Takes(("float32", "uint8")), "q": _Takes(("uint8",))}
    assert choose_targets("uint8", ("a", "q", "b", "q", "zz"), known) == TargetChoice(
        dtype="uint8", chosen=("q", "b"), refused=("a", "zz"), takers=("b", "q"))
    assert choose_targets("float16", (), known) == TargetChoice(dtype="float16", chosen=(), refused=(), takers=())


CONFIGS = {"float32": "seed000_3x3.yaml", "float16": "vulkan_chain_fp16.yaml", "uint8": "hvx_seed000_3x3_u8.yaml"}
OVERRIDES = [combo for n in (1, 2) for combo in itertools.permutations(TARGETS, n)]


@pytest.mark.parametrize("dtype", sorted(CONFIGS))
def test_every_caller_chooses_as_the_rule_does(dtype, repo):
    config = kernelgen.load_config(repo / "configs" / CONFIGS[dtype])
    assert config.dtype == dtype
    for override in OVERRIDES:
        expected = choose_targets(dtype, override, TARGETS).chosen
        if expected:
            assert api.chosen_targets(config, override) == expected
            assert api.applicable([config], override) == ([config], [])
            assert _choose_targets("m.onnx", override, {dtype: ("conv",)})[0] == {dtype: expected}
        else:
            with pytest.raises(ConfigError, match=f"supports dtype .*, got '{dtype}'"):
                api.chosen_targets(config, override)
            assert api.applicable([config], override) == ([], [config])
            with pytest.raises(OnnxError, match=f"no --target given takes {dtype}"):
                _choose_targets("m.onnx", override, {dtype: ("conv",)})
    # without --target a config's own targets must all take its dtype
    assert api.chosen_targets(config) == config.targets
