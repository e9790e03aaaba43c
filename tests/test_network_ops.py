"""The ops between a mobile network's convs (issue 29): max and average pools (padded windows, count_include_pad
either way, a global pool), a classifier (a 1x1 conv on the pooled image), a residual from outside the chain (a side
input: the other branch of a two-branch add) and squeeze-excite's per-channel multiply, on every target against
numpy on odd shapes (batch 2, channels off every vector width, stride 2 over odd sizes); bad configs refused at their
key; a broken pool fails. Whole imported networks of the same shape against onnxruntime end to end."""
from __future__ import annotations

from dataclasses import replace

import pytest
from builders import Case, make_config, toolchain
from click.testing import CliRunner
from conftest import require_tools

from kernelgen import api
from kernelgen.cli import main
from kernelgen.errors import ConfigError
from kernelgen.measure.records import Status
from kernelgen.measure.validate import validate as validate_job
from kernelgen.targets import TARGETS

TOOLS = {name: toolchain(name) for name in TARGETS}  # each target's own list (`kernelgen targets`)
ONNX = ("py:onnx", "py:onnxruntime")

# ResNet's stem and head at odd sizes: a stride-2 conv, a padded 3x3 stride-2 max pool fused after it, average pools
# that exclude and include the padding, a conv, the global pool and the classifier (a 1x1 conv on a 1x1 image)
POOLS = Case([2, 17, 15, 6], ["{out_channels: 10, kernel: 3, stride: 2, pad: 1, bias: true, activation: relu}",
                              "maxpool: {kernel: 3, stride: 2, pad: 1}",
                              "avgpool: {kernel: 3, pad: 1}",
                              "avgpool: {kernel: 2, stride: 2, pad: [1, 0, 0, 1], count_include_pad: true}",
                              "{out_channels: 7, kernel: 1, bias: true, activation: hardswish}",
                              "global_avgpool: {}",
                              "{out_channels: 5, kernel: 1, bias: true}"])

# squeeze-excite's tail and a two-branch add: the block's tensor times one factor per image and channel, a 1x1
# projection, + the other branch (held in NCHW, unlike the chain)
SIDES = Case([2, 7, 5, 10], ["mul: {by: scale}",
                             "{out_channels: 6, kernel: 3, stride: 2, pad: 1, bias: true, residual: shortcut, "
                             "activation: relu}"],
             side_inputs="{scale: {shape: [2, 1, 1, 10]}, shortcut: {shape: [2, 6, 4, 3], layout: NCHW}}")


# pools writing layouts whose channel padding must hold pad_value (a consumer reads it against zero filter channels)
POOL_PADDING = Case([2, 7, 6, 6], ["maxpool: {kernel: 3, stride: 2, pad: 1}", "{out_channels: 5, kernel: 3, pad: 1}",
                                   "avgpool: {kernel: 2}"],
                    input_layout="{map: nhwc-8c, pad_value: 0}",
                    output_layout='{map: "n, h, w, c -> n, c // 4, h, |, w, c % 4", pad_value: 0}')
CASES = {"pools": POOLS, "sides": SIDES, "pool_padding": POOL_PADDING}


def _config(name: str, target: str):
    return make_config(name, CASES[name].with_(targets=f"[{target}]"))


def test_the_pools_plan_as_a_chain():
    plan = api.plan(_config("pools", "c"))
    assert [(op.kind, op.out_shape) for op in plan.ops] == [
        ("conv2d", (2, 9, 8, 10)), ("maxpool", (2, 5, 4, 10)), ("avgpool", (2, 5, 4, 10)),
        ("avgpool", (2, 3, 2, 10)), ("conv2d", (2, 3, 2, 7)), ("avgpool", (2, 1, 1, 7)), ("conv2d", (2, 1, 1, 5))]
    assert [t.name for t in plan.tensors] == ["input", "filter1", "filter5", "filter7", "bias1", "bias5", "bias7",
                                              "output"]  # pools read no filter
    # one max or add per tap: the max pool's 5 x 4 x 10 outputs each over a 3x3 window
    assert plan.ops[1].flops == 2 * 5 * 4 * 10 * 9 and plan.ops[0].flops == 2 * 2 * 9 * 8 * 10 * 6 * 9
    sides = api.plan(_config("sides", "c"))
    assert [t.name for t in sides.tensors] == ["input", "filter2", "bias2", "side_scale", "side_shortcut", "output"]


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("target", ["c", "hvx", "opencl", "vulkan"])
def test_every_target_matches_numpy(target, name):
    require_tools(*TOOLS[target])
    result = api.validate(_config(name, target), target, seed=3)
    assert result.passed, f"{result.detail} (seed {result.seed})"
    assert result.checked == "op-by-op" and result.bound_ratio <= 1.0


def test_a_lone_pool_is_a_kernel_of_its_own():
    require_tools(*TOOLS["c"])
    config = make_config("pool", Case([1, 9, 11, 3], ["maxpool: {kernel: [3, 2], stride: [2, 3], pad: [1, 1, 0, 1]}"],
                                      input_layout="NCHW", schedule=None))
    assert config.ops[0].pool and api.plan(config).caches[0].name == "input"  # no filter cache
    result = api.validate(config, "c", seed=4)
    assert result.passed, result.detail


# an average pool that divides by the whole window where the config excludes the padding: wrong at every border
WRONG_DIVISOR = {"c": ("acc[ki] / (float)((", "acc[ki] / 9.0f + 0.0f * (float)(("),
                 "opencl": ("acc / (float)count", "acc / 9.0f"), "vulkan": ("acc / float(count)", "acc / 9.0")}


@pytest.mark.parametrize("target", sorted(WRONG_DIVISOR))
def test_a_pool_that_counts_its_padding_fails(target):
    require_tools(*TOOLS[target])
    job = api.jobs(_config("pools", target), (target,))[target]
    old, new = WRONG_DIVISOR[target]
    name = next(n for n, text in job.files.items() if old in text)
    broken = replace(job, files={**job.files, name: job.files[name].replace(old, new, 1)})
    result = validate_job(TARGETS[target], broken, seed=3)
    assert result.status is Status.FAIL and "avgpool #3" in result.detail, result


BAD = {
    "window larger than the padded input": (
        "ops:\n  - maxpool: {kernel: 7, pad: 1}\n", "ops[0].maxpool.kernel", "spans 7x7 pixels"),
    "pads as large as the window": (
        "ops:\n  - avgpool: {kernel: 2, pad: 2}\n", "ops[0].avgpool.pad", "expected pads smaller than the 2x2 window"),
    "a residual naming a side input of another shape": (
        "side_inputs:\n  other: {shape: [1, 4, 4, 5]}\nops:\n  - conv2d: {out_channels: 4, residual: other}\n",
        "ops[0].conv2d.residual", "side input 'other' is [1, 4, 4, 5]"),
    "a residual naming no tensor": (
        "ops:\n  - conv2d: {out_channels: 4, residual: other}\n", "ops[0].conv2d.residual",
        "side_inputs: none declared"),
    "a mul by factors of another shape": (
        "side_inputs:\n  s: {shape: [1, 4, 4, 4]}\nops:\n  - mul: {by: s}\n", "ops[0].mul.by",
        "expected a side input of shape [1, 1, 1, 4]"),
    "a side input no op reads": (
        "side_inputs:\n  s: {shape: [1, 1, 1, 4]}\nops:\n  - conv2d: {out_channels: 4}\n", "side_inputs.s",
        "no op reads 's'"),
    "two ops in one item": (
        "ops:\n  - {maxpool: {kernel: 2}, conv2d: {out_channels: 4}}\n", "ops[0]", "got conv2d and maxpool"),
    "a padded quantized average pool": (
        "dtype: uint8\nops:\n  - avgpool: {kernel: 2, pad: 1}\ntargets: [hvx]\n", "ops[0].avgpool.pad",
        "expected pad 0 with dtype uint8 (every window whole"),
    "a quant block on a float pool": (
        "ops:\n  - global_avgpool: {quant: {output_scale: 0.1}}\n", "ops[0].global_avgpool.quant",
        "a quant block only with dtype uint8"),
    "a uint8 side input without its quantization": (
        "dtype: uint8\nside_inputs: {s: {shape: [1, 4, 4, 4], layout: nhwc-8h8w32c}}\nops:\n  - conv2d: "
        "{out_channels: 4, residual: s}\ntargets: [hvx]\n", "side_inputs.s", "expected scale: with dtype uint8"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_configs_are_refused_at_their_key(case, tmp_path):
    body, key, expected = BAD[case]
    path = tmp_path / "bad.yaml"
    path.write_text(f"name: bad\ninput: {{shape: [1, 4, 4, 4]}}\n{body}")
    result = CliRunner().invoke(main, ["plan", str(path)])
    assert result.exit_code == 2, result.output
    line = next(line for line in result.output.splitlines() if "error:" in line)
    assert f": error: {key}: " in line and expected in line, line
    with pytest.raises(ConfigError):
        api.load_config(path)


# ---------------------------------------------------------------- imported networks of the same shape

def _squeeze_excite_network(seed: int = 6):
    import onnx_models

    return onnx_models.squeeze_excite_network(seed)


NETWORKS = {"resnet_ends": "classifier_network", "squeeze_excite": "_squeeze_excite_network"}


@pytest.mark.parametrize("target", ["c", "opencl", "vulkan"])
@pytest.mark.parametrize("net", sorted(NETWORKS))
def test_imported_networks_have_no_host_step_and_match_onnxruntime(net, target, tmp_path):
    require_tools(*ONNX, *TOOLS[target])
    import onnx_models

    make = getattr(onnx_models, NETWORKS[net], None) or globals()[NETWORKS[net]]
    model = onnx_models.save(make(), tmp_path / f"{net}.onnx")
    imported = CliRunner().invoke(main, ["import", str(model), "-o", str(tmp_path / net), "--target", target])
    assert imported.exit_code == 0, imported.output
    assert "not generated" not in imported.output and "not imported" not in imported.output, imported.output
    network = api.load_network(tmp_path / net / "network.yaml")
    assert all(step.is_kernel for step in network.steps), [s.label for s in network.steps]
    runs = list(api.validate_network(network, target, seed=2))
    assert all(r.ran and r.record.passed for r in runs), [r.record.detail for r in runs if r.record]
    # float32 kernels against onnxruntime's float32: a few roundings per layer apart (measured ~1e-7)
    assert all(a.passed and a.relative < 1e-5 for r in runs for a in r.agreement)


def test_vulkan_bounds_the_gathers_of_a_grouped_conv_on_scalar_reads():
    """MobileNetV3's 5x5 stride-2 depthwise conv on NCHW (scalar reads, gathered lane by lane, all unrolled): the
    default tile shrinks until a kernel row gathers at most GROUPED_GATHER_LIMIT chunks (at 4x14x8 lavapipe did
    not compile it in 600 s; at 1x3x8 both ops of its block compile cold in about 10 s); an explicit tile stays."""
    from kernelgen.targets.vulkan.defaults import GROUPED_GATHER_LIMIT

    dw = Case([1, 28, 28, 96], ["{out_channels: 96, kernel: 5, stride: 2, pad: 2, groups: 96}"], input_layout="NCHW",
              schedule=None, targets="[vulkan]")
    op = api.jobs(make_config("dw", dw), ("vulkan",))["vulkan"].target_plan.ops[0]
    ioh, iow, chunks = op.ivc_tile
    assert ioh * iow * chunks * 5 <= GROUPED_GATHER_LIMIT < 4 * 14 * 2 * 5
    explicit = api.jobs(make_config("dw", dw.with_block("vulkan", "{ivc_tile: [4, 14, 8]}")), ("vulkan",))["vulkan"]
    assert explicit.target_plan.ops[0].ivc_tile[:2] == (4, 14)
    nhwc = api.jobs(make_config("dw", dw.with_(input_layout="NHWC")), ("vulkan",))["vulkan"]  # vec4 reads: as before
    assert nhwc.target_plan.ops[0].ivc_tile[0] * nhwc.target_plan.ops[0].ivc_tile[1] > ioh * iow
