"""A config that drifted from its model, caught at the op that drifted (issue 44), on torchvision's MobileNetV3-small.

    python benchmarks/model_drift.py [--work build/qdq_models] [--targets c opencl vulkan] [--seed 3]

MobileNetV3-small (random weights, trained-like BatchNorm statistics; exported by benchmarks/qdq_models.py when
missing: needs torch and torchvision) imported for c; its classifier tail `features_11_block_2_mul_to_classifier`
(squeeze-excite's Mul, 1x1 conv + residual, 1x1 576 + HardSwish, global average pool, 1024 FC + HardSwish, 1000 FC)
validated as imported and with `bias: true` dropped from the 576-channel conv, on each target. Prints, per target:
the verdict and detail of each, and the chain-wide bound against onnxruntime (what the check used before) beside
the outputs' largest magnitude and how far the drifted config's outputs are from the model's.
"""
from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import qdq_models  # noqa: E402

from kernelgen import api, reference  # noqa: E402
from kernelgen.measure.tensors import random_inputs  # noqa: E402
from kernelgen.onnx import oracle  # noqa: E402
from kernelgen.onnx.importer import import_model  # noqa: E402
from kernelgen.measure.context import host_line  # noqa: E402

TAIL = "features_11_block_2_mul_to_classifier"


def _drop_bias(text: str, channels: int) -> str:
    line = next(line for line in text.splitlines() if f"out_channels: {channels}," in line and "bias: true" in line)
    return text.replace(line, line.replace("bias: true, ", ""))


def _chain_bound(config, seed: int) -> tuple[float, float, float]:
    """(the chain-wide bound's largest value for kernel + onnxruntime, the outputs' largest magnitude, how far the
    config's numpy outputs are from the model's) on the inputs validate draws from `seed`."""
    args = random_inputs(config, api.plan(config), np.random.default_rng(seed))
    n = len(config.ops)
    filters, biases = args.filters(n), args.biases(n)
    _, bound = reference.chain_error_bound(config, args.logical["input"], filters, biases=biases, sides=args.sides())
    mine = reference.chain(config, args.logical["input"].astype(np.float64),
                           [None if f is None else f.astype(np.float64) for f in filters],
                           [None if b is None else b.astype(np.float64) for b in biases], args.sides())
    model = oracle.run_onnxruntime(config, args.logical["input"], dict(args.logical))
    return float(2 * bound.max()), float(np.abs(model).max()), float(np.abs(mine - model).max())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path("build/qdq_models"))
    parser.add_argument("--targets", nargs="+", default=["c", "opencl", "vulkan"])
    parser.add_argument("--seed", type=int, default=3)
    options = parser.parse_args(argv)
    print(host_line(options.targets))
    options.work.mkdir(parents=True, exist_ok=True)
    model = options.work / "mobilenet_v3_small.onnx"
    if not model.exists():
        qdq_models.export("mobilenet_v3_small", 224, model)
    folder = options.work / "drift"
    shutil.rmtree(folder, ignore_errors=True)
    imported = import_model(model, folder / "configs", ("c",))
    (tail,) = [c for c in imported.configs if c.name == TAIL]
    (folder / "configs").mkdir(parents=True)
    (folder / "configs" / f"{TAIL}.yaml").write_text(tail.text)
    drifted_dir = folder / "drifted"
    drifted_dir.mkdir()
    (drifted_dir / f"{TAIL}.yaml").write_text(_drop_bias(tail.text, 576))
    good = api.load_config(folder / "configs" / f"{TAIL}.yaml")
    bad = api.load_config(drifted_dir / f"{TAIL}.yaml")
    print(f"{TAIL}: {[op.kind for op in good.ops]}")
    for name, config in (("as imported", good), ("576 conv without bias", bad)):
        bound, magnitude, off = _chain_bound(config, options.seed)
        print(f"  {name}: chain-wide bound (kernel + onnxruntime) {bound:.3g}, outputs up to {magnitude:.3g}, "
              f"numpy of the config {off:.3g} from the model")
    for target in options.targets:
        for name, config in (("as imported", good), ("576 conv without bias", bad)):
            result = api.validate(config, target, seed=options.seed)
            print(f"| {target} | {name} | {result.status.value} | {result.checked} | {', '.join(result.oracles)} | "
                  f"{result.detail or '-'} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
