"""A quantized network's boundaries against Qualcomm's HTP simulator (kernelgen/onnx/qnn.py): `validate
network.yaml --oracle qnn`. The simulator runs the whole model once on the validation's own input, every tensor
the manifest names among its outputs; each tensor a step wrote is then compared with the simulator's, as is
onnxruntime's reference, which the verdict holds the steps to.

The simulator is not exact integer arithmetic (the issue measured its outputs 1-2 steps from an exact integer
reference, and its rounding differs between HTP generations), so this is agreement, never the verdict: the share of
equal bytes and the largest difference, in steps of the tensor's scale; a float tensor's largest difference in its
own unit."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from ..onnx import subgraph
from ..onnx.qnn import QnnFailed, QnnRun, QnnRuntime, run_qnn
from .manifest import Network

QUANTIZED = ("uint8", "int8")


@dataclass(frozen=True, slots=True)
class HtpAgreement:
    """One tensor against the simulator's: the network's run and onnxruntime's reference."""

    tensor: str
    dtype: str
    arch: str
    equal: float  # share of elements equal to the simulator's
    max_abs: float  # the largest difference (uint8: in steps of the scale)
    onnxruntime_equal: float
    onnxruntime_max_abs: float

    def text(self) -> str:
        what = "bytes" if self.dtype in QUANTIZED else "values"
        return (f"HTP {self.arch}: {self.equal:.2%} of {what} equal, largest difference {self.max_abs:.3g} "
                f"(onnxruntime's: {self.onnxruntime_equal:.2%}, {self.onnxruntime_max_abs:.3g})")


@dataclass(frozen=True, slots=True)
class HtpOpinion:
    """The simulator's run of the network's model, or why there is none (the line the report prints)."""

    arch: str
    runtime: QnnRuntime
    run: QnnRun | None = field(default=None, compare=False, repr=False)
    failed: str = ""

    @property
    def text(self) -> str:
        simulator = f"Qualcomm HTP simulator {self.arch} ({self.runtime.text})"
        if self.failed:
            return f"second opinion: {simulator}: none, {self.failed}"
        return f"second opinion: {simulator}; agreement only, not part of the verdict"

    def agreements(self, network: Network, values: Mapping[str, np.ndarray], reference: Mapping[str, np.ndarray]
                   ) -> list[HtpAgreement]:
        """Each tensor a step wrote (`values`) and onnxruntime's against the simulator's ([] with no run)."""
        return [a for name, got in values.items() if (a := self.agreement(network, name, got, reference[name]))]

    def agreement(self, network: Network, name: str, got: np.ndarray, reference: np.ndarray) -> HtpAgreement | None:
        """`got` (what a step wrote) and `reference` (onnxruntime's) against the simulator's `name` (None: no run)."""
        if self.run is None:
            return None
        htp = self.run.values[name]
        mine, theirs = _apart(got, htp), _apart(reference, htp)
        return HtpAgreement(name, network.tensors[name].dtype, self.arch, float(np.mean(mine == 0)),
                            float(mine.max(initial=0)), float(np.mean(theirs == 0)), float(theirs.max(initial=0)))


def _apart(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.abs(a.astype(np.float64) - np.asarray(b, dtype=np.float64).reshape(a.shape))


def htp_opinion(network: Network, feeds: dict[str, np.ndarray], arch: str, runtime: QnnRuntime) -> HtpOpinion:
    """The whole model on the simulator for `arch` on `feeds`, every tensor of the manifest but its inputs among
    its outputs (as execute.reference asks onnxruntime for them)."""
    inner = {t: np.dtype(network.tensors[t].dtype) for t in network.tensors if t not in network.inputs}
    model = subgraph.whole_model(subgraph.graph_of(network.model), inner)
    try:
        return HtpOpinion(arch, runtime, run_qnn(runtime, model, feeds, list(inner), arch))
    except QnnFailed as error:
        return HtpOpinion(arch, runtime, failed=str(error))


def summary(opinion: HtpOpinion, agreements: list[HtpAgreement]) -> str:
    """The line after the verdict: the quantized boundaries' range of agreement, the network's and onnxruntime's."""
    quantized = [a for a in agreements if a.dtype in QUANTIZED]
    if opinion.failed or not quantized:
        return opinion.text
    low, high = min(a.equal for a in quantized), max(a.equal for a in quantized)
    worst = max(a.max_abs for a in quantized)
    reference_low = min(a.onnxruntime_equal for a in quantized)
    reference_worst = max(a.onnxruntime_max_abs for a in quantized)
    return (f"HTP simulator {opinion.arch} (agreement, not the verdict): {len(quantized)} uint8 tensors, "
            f"{low:.2%} to {high:.2%} of bytes equal to the simulator's, largest difference {worst:.0f}; onnxruntime's: from "
            f"{reference_low:.2%}, largest difference {reference_worst:.0f}")
