"""Issue 33, items 3-5: `kernelgen import` says which targets it chose and why (an explicit --target that cannot
take the model is exit 2 naming those that can), names configs after the model's structure (short, unique, never
cut mid-word), and reports what a user must act on: the ops left to the host by type, not the Q/DQ around them."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from conftest import requires_tool

from kernelgen.api import TARGETS, load_config
from kernelgen.cli import main
from kernelgen.config.reserved import MAX_NAME_LENGTH

ONNX = ("py:onnx", "py:onnxruntime")
UINT8 = [name for name, target in TARGETS.items() if "uint8" in target.dtypes]  # from the registry
NAME = re.compile(r"^[a-z][a-z0-9_]*$")




def _import(tmp_path: Path, name: str, model, *extra: str):
    import onnx_models

    model_file = onnx_models.save(model, tmp_path / f"{name}.onnx")
    result = CliRunner().invoke(main, ["import", str(model_file), "-o", str(tmp_path / name), *extra])
    folder = tmp_path / name
    configs = sorted(p for p in folder.glob("*.yaml") if p.name != "network.yaml") if folder.exists() else []
    return result, configs


# item 3: targets


@requires_tool(*ONNX)
def test_a_quantized_model_gets_the_target_that_takes_uint8_and_says_why(tmp_path):
    import onnx_models

    result, configs = _import(tmp_path, "q", onnx_models.qdq_resnet_block())
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0] == (f"targets: {UINT8[0]} for the 2 quantized convs (uint8): the only target "
                                             f"whose dtypes include uint8 (--target to choose)")
    assert load_config(configs[0]).targets == (UINT8[0],)
    result, configs = _import(tmp_path, "f", onnx_models.resnet_basic_block())
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0] == ("targets: c for the 2 float convs (float32): the default, as for a "
                                             "config without `targets:` (--target to choose)")
    assert load_config(configs[0]).targets == ("c",)


@requires_tool(*ONNX)
def test_an_explicit_target_that_cannot_take_a_quantized_model_is_exit_2_naming_the_one_that_can(tmp_path):
    import onnx_models

    result, configs = _import(tmp_path, "q", onnx_models.qdq_resnet_block(), "--target", "c")
    assert result.exit_code == 2 and configs == [], result.output
    assert result.stderr == (f"{tmp_path / 'q.onnx'}:1:1: error: q.onnx has 2 quantized convs (uint8) and no --target given takes uint8 (c "
                             f"takes float32); {UINT8[0]} does: add --target {UINT8[0]}, or leave --target out\n")
    result, configs = _import(tmp_path, "q2", onnx_models.qdq_resnet_block(), "--target", "c", "--target", UINT8[0])
    assert result.exit_code == 0, result.output
    assert f"targets: {UINT8[0]} for the 2 quantized convs (uint8): of --target c {UINT8[0]}, those that take " \
           f"uint8" in result.output
    assert load_config(configs[0]).targets == (UINT8[0],)


@requires_tool(*ONNX)
def test_a_model_with_float_and_quantized_convs_gives_each_config_the_targets_that_take_its_dtype(tmp_path):
    import onnx_models

    model = onnx_models.mixed_float_and_qdq()
    result, configs = _import(tmp_path, "mixed", model)
    assert result.exit_code == 0, result.output
    assert [(load_config(p).dtype, load_config(p).targets) for p in configs] == [
        ("float32", ("c",)), ("uint8", (UINT8[0],))]
    assert result.output.splitlines()[:2] == [
        "targets: c for the 1 float conv (float32): the default, as for a config without `targets:` (--target to "
        "choose)",
        f"targets: {UINT8[0]} for the 1 quantized conv (uint8): the only target whose dtypes include uint8 (--target "
        f"to choose)"]
    result, configs = _import(tmp_path, "mixed_c", model, "--target", "c")
    assert result.exit_code == 2 and configs == []
    assert f"add --target {UINT8[0]} (each config gets the given targets that take its dtype)" in result.stderr
    result, configs = _import(tmp_path, "both", model, "--target", "c", "--target", UINT8[0], "--target", "opencl")
    assert result.exit_code == 0, result.output
    assert [load_config(p).targets for p in configs] == [("c", UINT8[0], "opencl"), (UINT8[0],)]


# item 4: names


def _namer(tmp_path: Path, model):
    from kernelgen.onnx.graph import read_graph
    from kernelgen.onnx.names import Namer

    import onnx_models

    graph = read_graph(onnx_models.save(model, tmp_path / "model.onnx"))
    index = {node.name: i for i, node in enumerate(graph.nodes)}
    return Namer(graph), index


@requires_tool(*ONNX)
def test_names_follow_the_modules_a_group_covers(tmp_path):
    """torchvision's scoped node names (/features/features.3/conv/conv.0/conv.0.0/Conv) -> features_3_conv_0: the
    module a group covers whole, else the first and last convs' modules with the parts they share said once."""
    import onnx_models

    namer, at = _namer(tmp_path, onnx_models.torchvision_named_stack())

    def conv(k: int, j: int) -> int:
        return at["/features/features.0/features.0.0/Conv" if k == 0 else
                  f"/features/features.{k}/conv/conv.{j}/conv.{j}.0/Conv" if j < 2 else
                  f"/features/features.{k}/conv/conv.2/Conv"]

    assert namer.name([conv(1, 0), conv(1, 1), conv(1, 2)]) == "features_1"
    assert namer.name([conv(2, 0), conv(2, 1)]) == "features_2_conv_0_to_1"
    assert namer.name([conv(2, 1), conv(2, 2), conv(3, 0)]) == "features_2_conv_1_to_3_conv_0"
    assert namer.name([conv(0, 0), conv(1, 0), conv(1, 1), conv(1, 2), conv(2, 0)]) == "features_0_to_2_conv_0"
    assert namer.name([conv(3, 2)]) == "features_3_conv_2"
    assert namer.name([conv(0, 0)]) == "features_0"
    assert namer.name([conv(3, 1)]) == "features_3_conv_1"


@requires_tool(*ONNX)
def test_exporter_counters_give_the_convs_places_and_dynamo_scopes_give_modules(tmp_path):
    """The dynamo exporter's node_Conv_809 says nothing: its module path (metadata pkg.torch.onnx.name_scopes) names
    the group; without it the convs' places in graph order do (conv_000_to_conv_002)."""
    import onnx_models

    model = onnx_models.torchvision_named_stack()
    convs = [n for n in model.graph.node if n.op_type == "Conv"]
    for k, node in enumerate(convs):
        node.name = f"node_Conv_{809 + 3 * k}"
    namer, at = _namer(tmp_path, model)
    assert namer.name([at["node_Conv_812"], at["node_Conv_815"], at["node_Conv_818"]]) == "conv_001_to_conv_003"
    assert namer.name([at["node_Conv_809"]]) == "conv_000"
    scopes = ["['', 'features', 'features.0', 'features.0.1', '_native_batch_norm_legit_no_training']"] + [
        f"['', 'features', 'features.{k}', 'features.{k}.conv', 'features.{k}.conv.{j}', 'conv2d_{3 * k + j}']"
        for k in (1, 2, 3) for j in range(3)]
    for node, text in zip(convs, scopes):
        entry = node.metadata_props.add()
        entry.key, entry.value = "pkg.torch.onnx.name_scopes", text
    namer, at = _namer(tmp_path, model)
    assert namer.name([at["node_Conv_809"]]) == "features_0"
    assert namer.name([at["node_Conv_812"], at["node_Conv_815"], at["node_Conv_818"]]) == "features_1"
    assert namer.name([at["node_Conv_818"], at["node_Conv_821"]]) == "features_1_conv_2_to_2_conv_0"


@requires_tool(*ONNX)
def test_names_are_never_cut_stay_unique_and_avoid_reserved_words(tmp_path):
    import onnx_models

    b = onnx_models.Builder(12)
    deep = "/" + "/".join(f"encoder_stage_{k}_residual_branch" for k in range(3))
    t = b.conv(f"{deep}/a/Conv", "x", 4, 4, 1)
    t = b.conv(f"{deep}/b/Conv", t, 4, 4, 1)
    t = b.conv("int", t, 4, 4, 1)  # a C keyword
    t = b.conv("twin", t, 4, 4, 1)
    t = b.conv("twin_dup", t, 4, 4, 1)
    model = b.model("x", [1, 4, 4, 4], t)
    model.graph.node[4].name = "twin"  # a repeated node name (read_graph makes it twin_2)
    namer, at = _namer(tmp_path, model)
    assert namer.name([at[f"{deep}/a/Conv"], at[f"{deep}/b/Conv"]]) == "encoder_stage_0_residual_branch"
    assert namer.name([at[f"{deep}/a/Conv"]]) == "conv_000"  # its module path is 97 characters: its place, uncut
    assert namer.name([at["int"]]) == "int_2"
    assert (namer.name([at["twin"]]), namer.name([at["twin_2"]])) == ("twin", "twin_2")
    assert namer.name([at["twin"]]) == "twin_3"  # asked again: still unique


@requires_tool(*ONNX)
def test_imported_names_are_short_valid_and_the_manifest_uses_them(tmp_path):
    import onnx_models

    result, configs = _import(tmp_path, "tv", onnx_models.torchvision_named_stack(), "--max-group-ops", "1")
    assert result.exit_code == 0, result.output
    names = [p.stem for p in configs]
    assert sorted(names) == sorted(["features_0"] + [f"features_{k}_conv_{j}" for k in (1, 2, 3) for j in range(3)])
    assert all(NAME.match(n) and len(n) <= MAX_NAME_LENGTH for n in names)
    assert all(load_config(p).name == p.stem for p in configs)
    manifest = yaml.safe_load((tmp_path / "tv" / "network.yaml").read_text())
    assert sorted(s["kernel"] for s in manifest["steps"] if "kernel" in s) == sorted(names)


# item 5: what the import reports


@requires_tool(*ONNX)
def test_ops_left_to_the_host_are_reported_by_type_without_the_qdq_plumbing(tmp_path):
    import onnx_models

    result, configs = _import(tmp_path, "qn", onnx_models.qdq_network())
    assert result.exit_code == 0, result.output
    left = [line for line in result.output.splitlines() if line.startswith("not ")]
    # the MaxPool between DequantizeLinear and QuantizeLinear fuses; the float GlobalAveragePool at the end stays
    assert left == ["not generated (host steps in network.yaml, run by onnxruntime): GlobalAveragePool (and "
                    "the 1 QuantizeLinear/DequantizeLinear around them)"]
    assert "converted by kernelgen (convert steps in network.yaml): q_x" in result.output
    imported = [line for line in result.output.splitlines() if line.startswith("imported")]
    assert imported == [f"imported {tmp_path / 'qn' / 'stem_to_pool.yaml'}: Conv, Relu, MaxPool: stem",
                        f"imported {tmp_path / 'qn' / 'conv_a_to_conv_b.yaml'}: Conv x2, Relu x2, Add: conv_a .. conv_b"]
    assert "dq_" not in result.output and "q_pool" not in result.output
    b = onnx_models.Builder(13)
    t = b.node("LRN", "pool1", [b.conv("c1", "x", 4, 4, 1)], size=3)
    t = b.node("LRN", "pool2", [b.conv("c2", t, 4, 4, 1)], size=3)
    b.inits.append(__import__("onnx").numpy_helper.from_array(__import__("numpy").ones(4, "float32"), "scale"))
    t = b.node("Mul", "mul", [t, "scale"])
    model = b.model("x", [1, 4, 8, 8], b.conv("c3", t, 4, 4, 1))
    model.graph.input.append(__import__("onnx").helper.make_tensor_value_info("w", 1, [4, 4, 1, 1]))
    model.graph.node[-1].input[1] = "w"  # c3's weights are a graph input: a conv kernelgen cannot take
    result, _ = _import(tmp_path, "pools", model)
    assert result.exit_code == 0, result.output
    assert "  no network.yaml: tensor 'c3_out' has no static shape" in result.output  # so no host steps either
    assert [line for line in result.output.splitlines() if line.startswith("not ")] == [
        "not generated: LRN x2, Mul", "not imported: Conv c3: its weight 'w' is not a constant of the model (a graph input)"]


@requires_tool(*ONNX, "gcc")
def test_source_nodes_name_each_node_once_even_when_the_model_repeats_names(tmp_path):
    """Node names are optional and, in the wild, repeated or equal to an unnamed node's output: source.nodes names
    each node once, by an id no other node has, and validation runs the right nodes in onnxruntime."""
    import onnx_models

    b = onnx_models.Builder(14)
    t = b.conv("block", "x", 4, 8, 3, pad=1, out="block_conv")  # named as the next node's output
    b.nodes.append(__import__("onnx").helper.make_node("Relu", [t], ["block"]))  # unnamed: its id is "block"
    t = b.node("LRN", "pool", ["block"], size=3)  # a host step between the groups
    t = b.relu("act", b.conv("act_conv", t, 8, 8, 1))
    model = b.model("x", [1, 4, 8, 8], b.conv("act", t, 8, 4, 1, out="y"))  # "act" twice
    result, configs = _import(tmp_path, "dup", model, "--max-group-ops", "1")
    assert result.exit_code == 0, result.output
    nodes = sorted(tuple(load_config(p).source.nodes) for p in configs)
    assert nodes == [("act_2",), ("act_conv", "act"), ("block", "block_2")]
    shown = CliRunner().invoke(main, ["validate", *map(str, configs), "--target", "c", "--json"])
    assert shown.exit_code == 0, shown.output
    rows = json.loads(shown.stdout)["results"]
    assert [(r["status"], r["oracles"]) for r in rows] == [("pass", ["numpy", "onnxruntime"])] * 3


@pytest.mark.parametrize("line", ["source.nodes", "not generated"])
def test_the_readme_describes_the_import_output(line):
    from conftest import REPO

    section = (REPO / "README.md").read_text().split("### ONNX models in")[1].split("\n### ")[0]
    assert line in section
