"""Qualcomm's HTP simulator as a second opinion on a QDQ model: onnxruntime's QNN execution provider with its HTP
backend (libQnnHtp.so, which on an x86 host simulates the DSP's HTP), from the onnxruntime-qnn wheel the user
installs. kernelgen never depends on it: nothing here imports it, and it runs in a child process (qnn_child.py)
under the Python that has it:
- KERNELGEN_QNN_PYTHON, when set: an interpreter of a venv of its own (the wheels before onnxruntime-qnn 2.x brought
  an onnxruntime of their own, which would replace the project's in the same venv);
- else this Python, when its onnxruntime has the provider (onnxruntime_qnn installed beside it, or built in).
The child isolates the QNN libraries (their notes on stdout, a crash) from the validation that asked."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

import numpy as np

from ..errors import KernelgenError

ENV = "KERNELGEN_QNN_PYTHON"
CHILD = Path(__file__).with_name("qnn_child.py")
# The HTP generations the simulator takes (htp_arch); the HTP begins at v68, so an older HVX has none.
ARCHES = ("v68", "v69", "v73", "v75", "v79", "v81")
INSTALL = (f"pip install onnxruntime-qnn (2.x adds its provider to this onnxruntime), or in a venv of its own: "
           f"python3 -m venv ~/qnn && ~/qnn/bin/pip install onnxruntime-qnn numpy, then {ENV}=~/qnn/bin/python")
PROBE_SECONDS = 120
RUN_SECONDS = 3600  # the simulator on a whole model: MobileNetV2 takes seconds; a slow host many times that


class QnnMissing(KernelgenError):
    """No Python here reaches the QNN execution provider: the option that asked for it is refused."""

    exit_code = 2


class QnnFailed(KernelgenError):
    """The simulator is installed but did not run the model (its own message): a line in the report, never the
    verdict."""


@dataclass(frozen=True, slots=True)
class QnnRuntime:
    """A Python that reaches the QNN execution provider, and what it has (qnn_child.describe's fields)."""

    python: str
    found_by: str  # "KERNELGEN_QNN_PYTHON" or "this Python"
    description: Mapping[str, object] = field(default_factory=dict)

    @property
    def text(self) -> str:
        d = self.description
        sdk = f", QNN SDK {d['qnn_sdk']}" if d.get("qnn_sdk") else ""
        package = (f"onnxruntime-qnn {d['onnxruntime_qnn']}" if d.get("onnxruntime_qnn") else
                   f"onnxruntime {d['onnxruntime']} (QNN built in)" if d.get("onnxruntime") else "onnxruntime-qnn")
        return f"{package}{sdk}, {self.python} ({self.found_by})"


@dataclass(frozen=True, slots=True)
class QnnRun:
    """A model's outputs as the HTP simulator computed them, and what computed them."""

    arch: str  # "v73"
    runtime: QnnRuntime
    values: Mapping[str, np.ndarray] = field(compare=False, repr=False)


def find_qnn() -> QnnRuntime:
    """The Python to run the simulator under (see the module's docstring), or QnnMissing with the one line that
    says how to install it."""
    named = os.environ.get(ENV, "")
    if named:
        if not Path(named).is_file():
            raise QnnMissing(f"--oracle qnn: {ENV}={named} is not a file (expected a Python with onnxruntime-qnn)")
        return QnnRuntime(named, ENV, _probe(named, f"{ENV}={named}"))
    if not _here():
        raise QnnMissing(f"--oracle qnn: onnxruntime-qnn is not installed for this Python and {ENV} is not set; "
                         f"install it: {INSTALL}")
    return QnnRuntime(sys.executable, "this Python", _probe(sys.executable, "this Python"))


def _here() -> bool:
    """Whether this Python's onnxruntime reaches the provider: onnxruntime_qnn beside it, or built in (asked
    without importing onnxruntime_qnn: its import loads nothing of QNN's, but the child does that)."""
    if importlib.util.find_spec("onnxruntime_qnn") is not None:
        return True
    if importlib.util.find_spec("onnxruntime") is None:
        return False
    import onnxruntime

    return "QNNExecutionProvider" in onnxruntime.get_available_providers()


def _probe(python: str, who: str) -> dict:
    try:
        done = subprocess.run([python, str(CHILD), "--probe"], capture_output=True, text=True, timeout=PROBE_SECONDS)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise QnnMissing(f"--oracle qnn: {who} does not run: {error}") from None
    if done.returncode:
        raise QnnMissing(f"--oracle qnn: {who}: {_last_line(done.stderr)}; install it: {INSTALL}")
    description = json.loads(done.stdout.strip().splitlines()[-1])
    if not description.get("backend_found"):
        raise QnnMissing(f"--oracle qnn: {who} has no HTP backend at {description.get('backend')}")
    return description


def run_qnn(runtime: QnnRuntime, model: bytes, feeds: dict[str, np.ndarray], outputs: list[str], arch: str
            ) -> QnnRun:
    """`model` (ONNX bytes) on the HTP simulator for `arch` (ARCHES) with every node on the HTP, `outputs` by name
    (an intermediate tensor must be among the model's outputs: subgraph.whole_model adds them)."""
    if arch not in ARCHES:
        raise QnnFailed(f"the HTP simulator takes {', '.join(ARCHES)}, not {arch}")
    with tempfile.TemporaryDirectory(prefix="kernelgen-qnn-") as folder:
        root = Path(folder)
        (root / "model.onnx").write_bytes(model)
        inputs = {}
        for k, (name, value) in enumerate(feeds.items()):
            np.save(root / f"input{k}.npy", value)
            inputs[name] = str(root / f"input{k}.npy")
        request = {"model": str(root / "model.onnx"), "inputs": inputs, "outputs": outputs, "arch": arch[1:],
                   "folder": str(root)}
        (root / "request.json").write_text(json.dumps(request))
        try:
            done = subprocess.run([runtime.python, str(CHILD), str(root / "request.json")], capture_output=True,
                                  text=True, timeout=RUN_SECONDS)
        except subprocess.TimeoutExpired:
            raise QnnFailed(f"the HTP simulator did not finish in {RUN_SECONDS} s") from None
        if done.returncode:
            why = _last_line(done.stderr) if done.returncode > 0 else f"killed by signal {-done.returncode}"
            raise QnnFailed(f"the HTP simulator {arch} did not run the model: {why}")
        values = {name: np.load(root / f"{k}.npy") for k, name in enumerate(outputs)}
    return QnnRun(arch, runtime, values)


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no message"
