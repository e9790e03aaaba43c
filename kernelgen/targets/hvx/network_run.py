"""A whole hvx network as it ships, run under qemu-hexagon: network.c, every kernel and the weights' data section
built by clang-19 for the network's arch with a small driver (templates/hvx/network_driver.c.j2) that reads the
float inputs and the data section as raw files, runs `<net>_run` once and writes the float outputs.

What `kernelgen validate network.yaml --target hvx` compares with the kernels run one by one from Python: the same
input, bit for bit the same output, or the network driver (its wiring, its arena, its convert steps, the packed
weights) is wrong.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import numpy as np

from ...network.driver_text import comment_text, render
from ...network.manifest import Network
from ...network.weights import pack_network_weights
from ..base import Job
from .network import network_files
from .plan import HvxPlan
from .toolchain import build_noted, parse_counters, run

DRIVER = "hvx/network_driver.c.j2"
QEMU_SECONDS = 1800  # MobileNetV2 under QEMU: a few minutes


@dataclass(frozen=True, slots=True)
class NetworkRun:
    outputs: dict[str, np.ndarray]  # the network's outputs by ONNX name, float32 in the model's shapes
    packets: int  # QEMU's packet count around <net>_run
    arch: str
    workaround: str  # a compiler crash worked around ("": none)


def run_network(network: Network, jobs: Mapping[str, Job[HvxPlan]], target, inputs: Mapping[str, np.ndarray],
                workdir: Path) -> NetworkRun:
    """Build the network's program in `workdir` and run it once on `inputs` (float32, by ONNX name)."""
    plan, data = pack_network_weights(network, jobs, target)
    files = network_files(network, jobs, plan)
    files["network_driver.c"] = render(DRIVER, dict(net=network.name, upper=network.name.upper(),
                                                    inputs=network.inputs, outputs=network.outputs,
                                                    manifest=comment_text(Path(network.path).name)))
    kernels = [jobs[step.config.name] for step in network.kernels]
    for job in kernels:
        files.update(job.files)
    for name, text in files.items():
        (workdir / name).write_text(text)
    arch = kernels[0].target_plan.arch
    sources = [workdir / "network_driver.c", workdir / "network.c",
               *dict.fromkeys(workdir / f"{job.plan.name}.c" for job in kernels)]
    built = build_noted(sources, workdir / f"{network.name}_driver", arch=arch, include_dirs=[workdir])
    (workdir / "weights.bin").write_bytes(data)
    names = ["weights.bin"]
    for k, name in enumerate(network.inputs):
        tensor = network.tensors[name]
        np.ascontiguousarray(inputs[name], np.float32).reshape(tensor.shape).tofile(workdir / f"input{k}.bin")
        names.append(f"input{k}.bin")
    names += [f"output{k}.bin" for k in range(len(network.outputs))]
    done = run(Path(built.output), names, cwd=workdir, arch=arch, timeout=QEMU_SECONDS)
    outputs = {name: np.fromfile(workdir / f"output{k}.bin", np.float32).reshape(network.tensors[name].shape)
               for k, name in enumerate(network.outputs)}
    return NetworkRun(outputs=outputs, packets=parse_counters(done.stdout)["network.packets"], arch=arch,
                      workaround=built.workaround)
