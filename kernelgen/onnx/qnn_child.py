"""The child process that runs a model on Qualcomm's HTP simulator (onnxruntime's QNN execution provider, HTP
backend, on an x86 host): `python qnn_child.py REQUEST.json`, or `python qnn_child.py --probe`.

It runs under whichever Python has onnxruntime-qnn (kernelgen's own, or the one KERNELGEN_QNN_PYTHON names: the
wheel of old brought an onnxruntime of its own, which would replace the project's, so users keep it in a venv of
its own), and so imports nothing from kernelgen: only the standard library, numpy and onnxruntime. It talks through
files, never stdout, which the QNN libraries write their own notes to. kernelgen/onnx/qnn.py is the parent side.

REQUEST.json: {"model": path, "inputs": {name: .npy path}, "outputs": [names], "arch": "73", "folder": path}.
It writes <folder>/<k>.npy for outputs[k] and <folder>/run.json (what ran: the versions, the backend library, the
arch); a failure is one line on stderr and exit status 3. --probe prints the same description as JSON without
running anything (exit 3: no QNN execution provider in this Python).
"""
import json
import os
import sys

EP = "QNNExecutionProvider"
REFUSED = 3


def fail(message):
    sys.stderr.write(" ".join(str(message).split()) + "\n")
    sys.exit(REFUSED)


def provider():
    """How this Python reaches the QNN execution provider: ("plugin", module) for onnxruntime-qnn 2.x, a library
    registered into the ordinary onnxruntime; ("builtin", None) for the wheels before it, whose onnxruntime has
    the provider built in; or exits with the line saying neither is here."""
    try:
        import onnxruntime
    except ImportError:
        fail(f"{sys.executable} has no onnxruntime (pip install onnxruntime-qnn)")
    try:
        import onnxruntime_qnn
        return "plugin", onnxruntime_qnn
    except ImportError:
        pass
    if EP in onnxruntime.get_available_providers():
        return "builtin", None
    fail(f"{sys.executable}: onnxruntime {onnxruntime.__version__} has no {EP} and onnxruntime_qnn is not installed "
         f"(pip install onnxruntime-qnn)")


def htp_library(kind, module):
    """The HTP backend (libQnnHtp.so, which runs the HTP simulator on x86) inside the wheel."""
    if kind == "plugin":
        return module.get_qnn_htp_path()
    import onnxruntime.capi
    return os.path.join(os.path.dirname(onnxruntime.capi.__file__), "libQnnHtp.so")


def describe(kind, module):
    import onnxruntime
    library = htp_library(kind, module)
    return {"onnxruntime": onnxruntime.__version__, "onnxruntime_qnn": getattr(module, "__version__", ""),
            "qnn_sdk": getattr(getattr(module, "build_and_package_info", None), "qnn_version", ""),
            "provider": kind, "backend": library, "backend_found": os.path.isfile(library),
            "python": sys.executable}


def session(model, arch, kind, module):
    """The model on the HTP backend for `arch` (htp_arch: 68, 69, 73, 75, 79, ...), every node on QNN: with the
    CPU fallback off, a node the HTP cannot take refuses the session instead of running quietly on the CPU."""
    import onnxruntime
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    options.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    qnn_options = {"backend_path": htp_library(kind, module), "htp_arch": arch}
    if kind == "plugin":
        onnxruntime.register_execution_provider_library(EP, module.get_library_path())
        devices = [d for d in onnxruntime.get_ep_devices() if d.ep_name == EP]
        if not devices:
            fail(f"onnxruntime_qnn registered no {EP} device on this host")
        options.add_provider_for_devices(devices, qnn_options)
        return onnxruntime.InferenceSession(model, options)
    return onnxruntime.InferenceSession(model, options, providers=[(EP, qnn_options)])


def main(argv):
    kind, module = provider()
    if argv[1:] == ["--probe"]:
        sys.stdout.write(json.dumps(describe(kind, module)) + "\n")
        return
    if len(argv) != 2:
        fail("usage: qnn_child.py REQUEST.json | --probe")
    import numpy as np
    with open(argv[1]) as file:
        request = json.load(file)
    try:
        run = session(request["model"], request["arch"], kind, module)
        feeds = {name: np.load(path) for name, path in request["inputs"].items()}
        values = run.run(request["outputs"], feeds)
    except Exception as error:  # onnxruntime's own exception types: the message is what the parent reports
        text = " ".join(str(error).split()) or type(error).__name__
        # without onnxruntime's preamble ("[ONNXRuntimeError] : 1 : FAIL : ..."; "... Status Message: ...")
        fail(text.split("Status Message: ", 1)[1] if "Status Message: " in text else
             text.split(" : ", 3)[-1] if text.startswith("[ONNXRuntimeError]") else text)
    for k, value in enumerate(values):
        np.save(os.path.join(request["folder"], f"{k}.npy"), value)
    description = describe(kind, module) | {"arch": request["arch"], "providers": run.get_providers()}
    with open(os.path.join(request["folder"], "run.json"), "w") as file:
        json.dump(description, file)


if __name__ == "__main__":
    main(sys.argv)
