"""Real quantized networks through kernelgen, against onnxruntime (issue 27).

torchvision's MobileNetV2 and ResNet18 (random weights, `weights=None`, seeded, with random BatchNorm statistics
so that the folded biases are nonzero and distinct as in a trained network; an untrained one's are all zero and
the exporter shares them through Identity nodes, which the quantizer leaves in float), exported by
`torch.onnx.export(..., dynamo=False)` at opset 17 (BatchNorm folded in eval mode), quantized by
`onnxruntime.quantization.quantize_static` in QDQ form with its defaults (int8 activations, which kernelgen holds
as uint8 with each zero point + 128: kernelgen/onnx/int8_activations.py; full-range int8 weights, no
reduce_range), per tensor and per channel; every config `kernelgen import --target hvx` makes of
them, and the whole network, validated on hvx under qemu-hexagon (bit-exact against kernelgen's numpy reference,
and against onnxruntime in the session that is exact on this host, named in the output: kernelgen/onnx/u8s8.py).

    python benchmarks/qdq_models.py [--models mobilenet_v2 resnet18 ...] [--size 224] [--work build/qdq_models]
                                    [--reduce-range] [--activations int8|uint8] [--no-validate] [--json F]

Needs torch and torchvision (not kernelgen dependencies: `pip install torch torchvision`). The weights are
quantize_static's defaults on every host: on x86 without VNNI, onnxruntime's default uint8 x int8 kernels add
pairs of products in 16 bits and saturate on them, and kernelgen's checks then run onnxruntime in its exact u8u8
precision mode (session.x64quantprecision) and say so. --reduce-range quantizes to 7-bit weights instead (what
onnxruntime's quantization guide recommends for deploying on such a CPU); its models are kept apart (`_7bit`).
--activations uint8 quantizes activations to uint8 (QUInt8), as the runs before int8 activations were taken did
(`_u8` models).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from kernelgen import api
from kernelgen.onnx.importer import Fusion, import_model
from kernelgen.measure.context import host_line

MODELS = ("mobilenet_v2", "resnet18")  # the default run
# more of torchvision's classifiers that run whole on hvx once quantized (each minutes under qemu-hexagon): SiLU and
# squeeze-excite Sigmoids (EfficientNet, RegNetY), BatchNorms and AveragePools between Q/DQ (DenseNet), Concats,
# Slices and channel shuffles (SqueezeNet, ShuffleNet), deep float32 sums in onnxruntime's reference (ResNet50)
MORE_MODELS = ("resnet50", "mobilenet_v3_small", "efficientnet_b0", "regnet_y_400mf", "densenet121",
               "squeezenet1_1", "shufflenet_v2_x0_5", "mnasnet0_5")
TORCHVISION_OPS = ("nms", "qnms", "roi_align", "_roi_align_backward", "qroi_align", "ps_roi_align",
                   "_ps_roi_align_backward", "roi_pool", "_roi_pool_backward", "ps_roi_pool", "_ps_roi_pool_backward",
                   "deform_conv2d", "_deform_conv2d_backward")


def _torchvision():
    """torchvision, as installed: a release matching torch imports as it is (its compiled ops define their own
    schemas, and a placeholder of the same name would abort the process). From PyPI next to a CPU torch wheel it
    lacks its compiled ops, and its import registers shapes for them; placeholder schemas then let the
    pure-Python classification models load (none of these ops is used)."""
    import importlib.util
    import subprocess

    import torch

    plain = subprocess.run([sys.executable, "-c", "import torchvision"], capture_output=True)
    if plain.returncode == 0 or importlib.util.find_spec("torchvision") is None:
        import torchvision

        return torch, torchvision, None
    library = torch.library.Library("torchvision", "DEF")
    for name in TORCHVISION_OPS:
        library.define(f"{name}(Tensor x) -> Tensor")
    import torchvision

    return torch, torchvision, library


def export(model: str, size: int, path: Path) -> None:
    torch, torchvision, _ = _torchvision()
    torch.manual_seed(0)
    net = getattr(torchvision.models, model)(weights=None).eval()
    with torch.no_grad():  # trained-like BatchNorm statistics: folded biases nonzero and distinct, as deployed
        for layer in net.modules():
            if isinstance(layer, torch.nn.BatchNorm2d):
                layer.weight.uniform_(0.5, 1.5)
                layer.bias.normal_(0.0, 0.1)
                layer.running_mean.normal_(0.0, 0.1)
                layer.running_var.uniform_(0.5, 1.5)
    torch.onnx.export(net, torch.randn(1, 3, size, size), str(path), opset_version=17, dynamo=False,
                      input_names=["input"], output_names=["logits"])


def quantize(float_path: Path, path: Path, per_channel: bool, size: int, reduce_range: bool = False,
             activations: str = "int8") -> None:
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Random(CalibrationDataReader):
        def __init__(self):
            rng = np.random.default_rng(1)
            self.batches = iter([{"input": rng.standard_normal((1, 3, size, size), dtype=np.float32)}
                                 for _ in range(4)])

        def get_next(self):
            return next(self.batches, None)

    quantize_static(str(float_path), str(path), Random(), quant_format=QuantFormat.QDQ, per_channel=per_channel,
                    activation_type=QuantType.QUInt8 if activations == "uint8" else QuantType.QInt8,
                    weight_type=QuantType.QInt8, reduce_range=reduce_range)


def _validate_network(path: Path, seed: int, rows: list[dict], tag: str) -> int:
    """The whole network on hvx (kernelgen validate network.yaml): 1 when it does not pass."""
    from kernelgen.network.execute import network_oracle

    network = api.load_network(path)
    start = time.perf_counter()
    runs = list(api.validate_network(network, "hvx", seed))
    seconds = time.perf_counter() - start
    uint8 = [a for r in runs for a in r.agreement if a.dtype == "uint8"]
    passed = all(r.ran for r in runs) and all(a.passed for r in runs for a in r.agreement) and all(
        r.record.passed for r in runs if r.record is not None)
    oracle = network_oracle(network)
    exact = sum(not a.max_abs for a in uint8)
    rows.append(dict(model=tag, config="network.yaml", status="pass" if passed else "FAIL", steps=len(runs),
                     bit_exact_uint8=exact, uint8_tensors=len(uint8), oracle=oracle.text, seconds=round(seconds, 1)))
    print(f"  network: {'pass' if passed else 'FAIL'} {seconds:6.1f} s  {exact} of {len(uint8)} uint8 tensors "
          f"bit-exact; oracle: {oracle.text}", flush=True)
    return 0 if passed else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS + MORE_MODELS)
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--work", type=Path, default=Path("build/qdq_models"))
    parser.add_argument("--reduce-range", action="store_true",
                        help="7-bit int8 weights (quantize_static's reduce_range) instead of its full-range default")
    parser.add_argument("--activations", choices=("int8", "uint8"), default="int8",
                        help="the activations' type: quantize_static's default int8, or uint8")
    parser.add_argument("--no-validate", action="store_true", help="import only")
    parser.add_argument("--seed", type=int, default=27)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    print(host_line(["c", "opencl", "vulkan", "hvx"]))
    args.work.mkdir(parents=True, exist_ok=True)
    rows, failures = [], 0
    for model in args.models:
        float_path = args.work / f"{model}_{args.size}.onnx"
        if not float_path.exists():
            export(model, args.size, float_path)
        for per_channel in (False, True):
            tag = (f"{model}_{args.size}_{'per_channel' if per_channel else 'per_tensor'}"
                   f"{'_7bit' if args.reduce_range else ''}{'_u8' if args.activations == 'uint8' else ''}")
            q_path = args.work / f"{tag}.onnx"
            if not q_path.exists():
                quantize(float_path, q_path, per_channel, args.size, args.reduce_range, args.activations)
            folder = args.work / tag
            folder.mkdir(exist_ok=True)
            # cut by cost as `kernelgen import --target hvx` cuts (without a coster the whole chain is one config)
            fusion = Fusion(coster=api.fusion_coster("c"), quant_coster=api.fusion_coster("hvx"))
            imported = import_model(q_path, folder, ("c",), fusion, ("hvx",))
            (folder / "network.yaml").write_text(imported.manifest)
            print(f"{tag}: {len(imported.configs)} configs", flush=True)
            for item in imported.configs:
                path = folder / f"{item.name}.yaml"
                path.write_text(item.text)
                if args.no_validate:
                    continue
                config = api.load_config(path)
                start = time.perf_counter()
                result = api.validate(config, "hvx", args.seed)
                seconds = time.perf_counter() - start
                failures += result.status.value != "pass"
                rows.append(dict(model=tag, config=item.name, ops=len(config.ops), status=result.status.value,
                                 checked=result.checked, detail=result.detail, oracles=list(result.oracles),
                                 seconds=round(seconds, 1)))
                print(f"  {item.name:<44} {len(config.ops):>2} ops  {result.status.value:<5} {seconds:6.1f} s  "
                      f"{result.detail}", flush=True)
            if not args.no_validate:
                failures += _validate_network(folder / "network.yaml", args.seed, rows, tag)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    print(f"{len(rows)} configs and networks validated, {failures} not passing")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
