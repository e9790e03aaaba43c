"""One source of truth: the JSON Schema (`kernelgen schema`) and the loader agree.

Every file of the bad-config corpus breaks one rule. Where the rule is about one field alone
(a range, a pattern, an enum, a required key), the schema rejects the file as the loader does;
the rules the schema cannot state are listed below with the reason. Every bundled config is
accepted by both. A rule dropped from the pydantic model fails here, since the schema is
generated from that model.
"""
from pathlib import Path

import jsonschema
import pytest

from kernelgen.config import yamlmarks
from kernelgen.api import json_schema, load_config
from kernelgen.errors import ConfigError

REPO = Path(__file__).resolve().parent.parent
BAD = sorted((REPO / "tests" / "data" / "bad").glob("*.yaml"))
GOOD = sorted((REPO / "configs").glob("*.yaml"))

# Rules that span fields, or need arithmetic, or a value JSON cannot hold: only the loader has them.
LOADER_ONLY = {
    "duplicate_key": "YAML: JSON Schema sees the data after a parser kept one of the keys",
    "yaml_syntax": "YAML: not a document at all",
    "bad_layout_string": "a block's dim must be one of the tensor's dims (oihw for filters, nhwc for data)",
    "layout_rank": "the layout must name the tensor's dims",
    "map_unknown_dim": "an index map's names are its own left side",
    "map_not_injective": "injectivity of an index map over the tensor's shape",
    "layout_padding_not_enumerable": "padding of an index map over the tensor's shape",
    "layout_huge_block": "the physical size follows from the block factors and the shape",
    "layout_physical_past_int32": "the physical size follows from the block factors and the shape",
    "layout_huge_constant": "constants inside an index map's text",
    "empty_output": "the output size follows from shape, kernel, dilation, stride and pad",
    "kernel_too_big": "the dilated kernel against the padded input",
    "stride_past_input": "the stride against the padded input",
    "tensor_past_int32": "the product of the shape's dims",
    "output_past_int32": "the output size follows from shape, kernel, stride and pad",
    "h_split_too_big": "the split against the output's rows and the block",
    "w_block_too_big": "the block against the output's columns",
    "pad_value_float16": "the pad value's range depends on dtype",
    "pad_value_too_large": "the pad value's range depends on dtype",
    "pad_value_uint8": "the pad value's range depends on dtype",
    "pad_value_nan": "JSON has no NaN: a finite-number rule cannot be written in JSON Schema",
    "scale_nan_weight": "JSON has no NaN: a finite-number rule cannot be written in JSON Schema",
    "activation_reversed": "a clamp's two bounds against each other",
    "quant_weight_scales": "the number of scales against out_channels",
    "quant_on_float": "a quant block against the dtype",
    "groups_not_dividing": "groups against the channel counts",
    "residual_shape": "the residual's shape against the op's output",
    "residual_from_op": "op K's output shape against this op's: a rule about the chain",
    "residual_from_later_op": "K must name an op before this one: a rule about the chain",
    "residual_across_stride": "the ops between must have stride 1: a rule about the chain",
}


@pytest.fixture(scope="module")
def validator():
    return jsonschema.Draft202012Validator(json_schema())


def _data(path: Path):
    return yamlmarks.load(yamlmarks.decode(path.read_bytes())).data


@pytest.mark.parametrize("path", BAD, ids=[p.stem for p in BAD])
def test_the_loader_rejects_every_bad_config(path):
    with pytest.raises(ConfigError):
        load_config(path)


@pytest.mark.parametrize("path", [p for p in BAD if p.stem not in LOADER_ONLY],
                         ids=[p.stem for p in BAD if p.stem not in LOADER_ONLY])
def test_the_schema_rejects_every_single_field_case(path, validator):
    errors = list(validator.iter_errors(_data(path)))
    assert errors, f"the schema accepts {path.name}, which the loader rejects"


@pytest.mark.parametrize("stem", sorted(LOADER_ONLY))
def test_loader_only_cases_exist_and_the_schema_indeed_accepts_them(stem, validator):
    """The list above stays honest: each names a real file, and a case the schema learns to reject
    moves out of it."""
    path = REPO / "tests" / "data" / "bad" / f"{stem}.yaml"
    assert path.exists()
    try:
        data = _data(path)
    except yamlmarks.YamlProblem:
        return  # not YAML: nothing for a schema to look at
    assert not list(validator.iter_errors(data)), f"the schema now rejects {stem}: drop it from LOADER_ONLY"


@pytest.mark.parametrize("path", GOOD, ids=[p.stem for p in GOOD])
def test_both_accept_every_bundled_config(path, validator):
    load_config(path)
    assert not list(validator.iter_errors(_data(path)))


def test_the_committed_schema_states_the_bounds(validator):
    """Spot checks of rules the issue named: a misspelled target, a zero stride, a negative scale."""
    base = {"name": "x", "input": {"shape": [1, 8, 8, 4]}, "ops": [{"conv2d": {"out_channels": 4}}]}
    for patch in ({"targets": ["vulkn"]}, {"ops": [{"conv2d": {"out_channels": 4, "stride": 0}}]},
                  {"quant": {"input_scale": -0.5}}, {"input": {"shape": [1, 8, 8, 2**31]}}, {"name": "main"}):
        assert list(validator.iter_errors(base | patch)), patch
    assert not list(validator.iter_errors(base))
