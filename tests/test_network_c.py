"""network.c: a whole imported network run by the c target's driver over one arena, against onnxruntime.

A small model with every kind of step ResNet has (a fused conv+relu chain, a MaxPool that returns its indices: a
host step, two conv branches joined by an Add+Relu: a kernel with a side input, a GlobalAveragePool/Flatten/Gemm
head fused into it) is imported as `kernelgen import` does,
its kernels and network.c built by gcc into one library and run through ctypes, the host steps in onnxruntime
through a Python callback. The arena and the packed weights start as NaN, so a step reading a byte nobody wrote
shows in the output. The arena plan is checked on its own, exactly.
"""
from __future__ import annotations

import ctypes
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

import kernelgen
from kernelgen.api import TARGETS
from kernelgen.errors import ConfigError, KernelgenError
from kernelgen.network import execute
from kernelgen.network.arena import Arena, plan_arena
from kernelgen.network.manifest import Network, Step, Tensor
from kernelgen.network.weights import pack_network_weights
from kernelgen.onnx.importer import Fusion, import_model
from kernelgen.onnx.oracle import weights as model_weights
from kernelgen.targets.c.toolchain import build_shared

from builders import toolchain
from conftest import SMALL_UINT8, requires_tool
from onnx_models import Builder

# float32 end to end: each kernel sums its products in another order than onnxruntime's GEMM, so each output
# differs by a few units of roundoff (2^-24) times the number of products summed (at most 16 * 3 * 3 = 144 here)
# relative to the magnitudes summed: about 1e-5 at worst, carried through 3 layers. 1e-4 of the largest magnitude
# leaves a margin of 10 over that, while a wrong tensor, offset, layout or weight moves values by order 1 (and an
# unwritten byte of the NaN-poisoned arena or weights makes NaN).
FLOAT_TOLERANCE = 1e-4


def tiny_model() -> onnx.ModelProto:
    b = Builder(11)
    t = b.relu("stem_relu", b.conv("stem", "x", 3, 8, 3, pad=1))
    t = b.relu("stem2_relu", b.conv("stem2", t, 8, 8, 3, pad=1))
    b.nodes.append(onnx.helper.make_node("MaxPool", [t], ["pool_out", "pool_indices"], name="pool", kernel_shape=[2, 2],
                                         strides=[2, 2]))  # with its indices: a host step
    t = "pool_out"
    a = b.relu("a1_relu", b.conv("a1", t, 8, 16, 3, stride=2, pad=1))
    a = b.conv("a2", a, 16, 16, 3, pad=1)
    skip = b.conv("skip", t, 8, 16, 1, stride=2)
    t = b.relu("join_relu", b.add("join", a, skip))
    t = b.relu("head_relu", b.conv("head", t, 16, 16, 1))
    t = b.node("Flatten", "flatten", [b.node("GlobalAveragePool", "gap", [t])])
    b.inits += [numpy_helper.from_array(b.rng.uniform(-1, 1, (16, 10)).astype(np.float32), "fc_w"),
                numpy_helper.from_array(b.rng.uniform(-1, 1, 10).astype(np.float32), "fc_b")]
    t = b.node("Gemm", "fc", [t, "fc_w", "fc_b"])
    return b.model("x", [1, 3, 16, 16], t)


def write_import(root: Path, channels_last: bool = False) -> Path:
    """The model imported as `kernelgen import tiny_net.onnx -o net` writes it: configs and network.yaml (with
    channels_last, as it does for the c target: the tensors only kernels touch NHWC)."""
    model = root / "tiny_net.onnx"
    onnx.save(tiny_model(), str(model))
    out = root / "net"
    out.mkdir()
    imported = import_model(model, out, ("c",), Fusion(channels_last=channels_last))
    for config in imported.configs:
        (out / f"{config.name}.yaml").write_text(config.text)
    assert imported.manifest, "the importer wrote no manifest"
    (out / "network.yaml").write_text(imported.manifest)
    return out / "network.yaml"


@pytest.fixture(scope="module", params=[False, True], ids=["nchw", "nhwc"])
def imported(tmp_path_factory, request) -> tuple[Network, dict]:
    manifest = write_import(tmp_path_factory.mktemp("network"), request.param)
    network = kernelgen.load_network(manifest)
    jobs = {step.config.name: kernelgen.jobs(step.config, ("c",))["c"] for step in network.kernels}
    return network, jobs


def workspaces(network: Network, jobs: dict) -> dict[int, int]:
    return {s.index: jobs[s.config.name].plan.workspace_bytes for s in network.kernels}


def test_the_model_has_every_kind_of_step(imported, request):
    network, _ = imported
    hosts = [set(s.op_types) for s in network.steps if not s.is_kernel]
    assert hosts == [{"MaxPool"}]
    # NHWC: only the skip conv's output, a side input of the kernel after it; the stem's output (the host MaxPool
    # reads it), the pool's (it writes it), the network's input and the logits stay NCHW
    nhwc = {name: network.tensors[name].shape for name, t in network.tensors.items() if t.layout == "NHWC"}
    assert nhwc == ({"skip_out": (1, 16, 4, 4)} if request.node.callspec.params["imported"] else {})
    assert [t.layout for t in network.tensors.values()].count("NCHW") == len(network.tensors) - len(nhwc)
    assert len(network.kernels) >= 3
    assert any(s.config.side_inputs for s in network.kernels), "no kernel reads the other branch of an Add"
    assert any(op.kind == "avgpool" for s in network.kernels for op in s.config.ops), "no fused classifier head"
    assert any(len(s.config.ops) > 1 for s in network.kernels), "no fused chain"


# ---------------------------------------------------------------- the arena plan


def lifetimes(network: Network) -> dict[str, tuple[int, int]]:
    """From the manifest, independently of arena.py: each tensor from its writer to its last reader."""
    spans = {}
    for step in network.steps:
        for name in step.outputs:
            spans[name] = (step.index, step.index)
    for step in network.steps:
        for name in step.inputs:
            if name in spans:
                spans[name] = (spans[name][0], max(spans[name][1], step.index))
    return {n: s for n, s in spans.items() if n not in network.inputs and n not in network.outputs}


def check_no_overlap(network: Network, arena: Arena, workspace: dict[int, int]) -> None:
    regions = [(name, arena.offsets[name], network.tensors[name].nbytes, span)
               for name, span in lifetimes(network).items()]
    regions += [(f"workspace {k}", arena.workspaces[k], size, (k, k)) for k, size in workspace.items()]
    assert set(arena.offsets) == set(lifetimes(network))
    for name, offset, size, _ in regions:
        assert offset % 64 == 0 and offset + size <= arena.size_bytes, name
    for i, (a, a_off, a_size, (a_first, a_last)) in enumerate(regions):
        for b, b_off, b_size, (b_first, b_last) in regions[:i]:
            if a_first <= b_last and b_first <= a_last:
                assert a_off + a_size <= b_off or b_off + b_size <= a_off, f"{a} and {b} share bytes while alive"


def test_arena_shares_memory_between_dead_tensors_and_never_between_live_ones(imported):
    network, jobs = imported
    workspace = workspaces(network, jobs)
    arena = plan_arena(network, workspace)
    check_no_overlap(network, arena, workspace)
    assert arena.size_bytes < arena.naive_bytes
    assert arena.peak_bytes <= arena.size_bytes
    assert plan_arena(network, workspace) == arena  # the same plan on every run


def test_arena_greedy_plan_exactly():
    """x -> t1 -> t2 -> t3 -> y, 1000 bytes each, and a 500-byte workspace at step 1: t1 and t3 never live
    together, so they share offset 0; t2 goes past t1; the workspace, alive with t1 and t2, past both."""
    tensors = {n: Tensor(n, (250,), "float32", None) for n in ("x", "t1", "t2", "t3", "y")}
    chain = ("x", "t1", "t2", "t3", "y")
    steps = tuple(Step(index=k, inputs=(a,), outputs=(b,), nodes=(f"n{k}",), op_types=("Relu",))
                  for k, (a, b) in enumerate(zip(chain, chain[1:])))
    network = Network(name="chain", path="chain.yaml", model=Path("chain.onnx"), inputs=("x",), outputs=("y",),
                      tensors=tensors, steps=steps)
    arena = plan_arena(network, {1: 500})
    assert arena.offsets == {"t1": 0, "t2": 1024, "t3": 0}
    assert arena.workspaces == {1: 2048}
    assert arena.size_bytes == 2560  # 2048 + 500, rounded up to 64
    assert arena.naive_bytes == 3 * 1024 + 512
    assert arena.peak_bytes == 2500


# ---------------------------------------------------------------- network.c, built and run


def nan_buffer(nbytes: int, alignment: int = 64) -> tuple[np.ndarray, int]:
    """A float32 buffer of NaN whose address is aligned; (the owning array, the address)."""
    raw = np.full(nbytes // 4 + alignment, np.nan, np.float32)
    address = raw.ctypes.data
    skip = (-address % alignment) // 4
    return raw, address + skip * 4


def view(address: int, tensor: Tensor) -> np.ndarray:
    return np.frombuffer((ctypes.c_char * tensor.nbytes).from_address(address), tensor.dtype).reshape(tensor.shape)


HOST = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_void_p),
                        ctypes.POINTER(ctypes.c_void_p))


class Driver:
    """The network's library: pack the weights once, run with a Python host callback."""

    def __init__(self, network: Network, jobs: dict, workdir: Path):
        self.network = network
        self.plan, self.data = pack_network_weights(network, jobs, TARGETS["c"])
        files = TARGETS["c"].network_files(network, jobs, self.plan)
        for job in jobs.values():
            files |= dict(job.files)
        for name, text in files.items():
            (workdir / name).write_text(text)
        self.header = files["network.h"]
        library = build_shared(sorted(workdir / n for n in files if n.endswith(".c")), workdir / "libnet.so")
        self.lib = ctypes.CDLL(str(library))
        self.run_fn = getattr(self.lib, f"{network.name}_run")
        self.run_fn.restype = ctypes.c_int
        self.run_fn.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p,
                                ctypes.c_void_p, HOST, ctypes.c_void_p]
        self.arena_bytes = self.macro("ARENA_BYTES")
        self.packed, packed_address = nan_buffer(self.macro("WEIGHTS_BYTES"))
        logical = [np.ascontiguousarray(w, np.float32) for w in self.logical_weights()]
        pointers = (ctypes.c_void_p * len(logical))(*(w.ctypes.data for w in logical))
        pack = getattr(self.lib, f"{network.name}_pack_weights")
        pack.restype = None
        pack(pointers, ctypes.c_void_p(packed_address))
        self.packed_address = packed_address
        # what the C pack functions wrote over NaN: the weights file's data section (checked in test_network_weights)
        self.c_packed = bytes((ctypes.c_char * self.plan.data_bytes).from_address(packed_address))

    def macro(self, name: str) -> int:
        return int(re.search(rf"#define {self.network.name.upper()}_{name} (\d+)", self.header).group(1))

    def logical_weights(self) -> list[np.ndarray]:
        """As network.h documents them: kernel by kernel, filter1, bias1, filter2, ..."""
        out = []
        for step in self.network.kernels:
            found = model_weights(step.config)
            for j in range(1, len(step.config.ops) + 1):
                out += ([found[f"filter{j}"]] if f"filter{j}" in found else []) + (
                    [found[f"bias{j}"]] if f"bias{j}" in found else [])
        return out

    def run(self, feeds: dict[str, np.ndarray], host) -> tuple[int, dict[str, np.ndarray]]:
        network = self.network
        outputs = {t: np.full(network.tensors[t].shape, np.nan, network.tensors[t].dtype) for t in network.outputs}
        inputs = [np.ascontiguousarray(feeds[t]) for t in network.inputs]
        arena, arena_address = nan_buffer(self.arena_bytes)  # `arena` owns the memory until the call returns
        status = self.run_fn((ctypes.c_void_p * len(inputs))(*(a.ctypes.data for a in inputs)),
                             (ctypes.c_void_p * len(outputs))(*(a.ctypes.data for a in outputs.values())),
                             ctypes.c_void_p(arena_address), ctypes.c_void_p(self.packed_address),
                             HOST(host), None)
        assert arena.size  # (kept alive through the call)
        return status, outputs


class OnnxHost:
    """The host callback: each host step in onnxruntime on numpy views of the C pointers. It keeps a copy of
    what each host step received (the kernels' outputs, for the check) and never raises into C."""

    def __init__(self, network: Network):
        self.network = network
        self.runners = {s.index: execute.host_runner(network, s) for s in network.steps if not s.is_kernel}
        self.received: dict[str, np.ndarray] = {}
        self.calls: list[int] = []
        self.errors: list[BaseException] = []

    def __call__(self, user, step, inputs, outputs) -> int:
        try:
            self.calls.append(step)
            this = self.network.steps[step]
            values = {t: view(inputs[k], self.network.tensors[t]).copy() for k, t in enumerate(this.inputs)}
            self.received |= values
            results = self.runners[step](values)
            for k, t in enumerate(this.outputs):
                view(outputs[k], self.network.tensors[t])[...] = results[t]
            return 0
        except BaseException as error:  # an exception cannot cross the C frames: report it after the run
            self.errors.append(error)
            return 99


@pytest.fixture(scope="module")
def driver(imported, tmp_path_factory) -> Driver:
    network, jobs = imported
    return Driver(network, jobs, tmp_path_factory.mktemp("build"))


def relative_error(got: np.ndarray, want: np.ndarray) -> float:
    apart = np.nan_to_num(np.abs(got.astype(np.float64) - want), nan=np.inf)
    return float(apart.max() / np.abs(want).max())


@requires_tool(*toolchain("c"))
def test_network_c_matches_onnxruntime(imported, driver):
    network, _ = imported
    for seed in (1, 2):
        feeds = execute.network_input(network, seed)
        untouched = {name: value.copy() for name, value in feeds.items()}
        want = execute.reference(network, feeds)
        host = OnnxHost(network)
        status, outputs = driver.run(feeds, host)
        assert not host.errors, host.errors
        assert status == 0
        assert host.calls == [s.index for s in network.steps if not s.is_kernel]
        assert all(np.array_equal(feeds[name], untouched[name]) for name in feeds)  # the caller's input is read only
        # every tensor a host step received (the kernels' outputs among them), then the network's output
        for name, got in [*host.received.items(), *outputs.items()]:
            error = relative_error(got, want[name])
            assert error <= FLOAT_TOLERANCE, f"seed {seed}: {name} off by {error:.2e} of its largest magnitude"


@requires_tool(*toolchain("c"))
def test_network_h_states_the_arena_plan(imported, driver):
    network, jobs = imported
    arena = plan_arena(network, workspaces(network, jobs))
    assert driver.arena_bytes == arena.size_bytes
    assert driver.macro("ARENA_ALIGNMENT") == 64
    assert driver.macro("HOST_STEPS") == sum(not s.is_kernel for s in network.steps)


@requires_tool(*toolchain("c"))
def test_a_host_step_that_fails_stops_the_run(imported, driver):
    network, _ = imported
    first_host = next(s.index for s in network.steps if not s.is_kernel)
    calls = []

    def refuse(user, step, inputs, outputs) -> int:
        calls.append(step)
        return 7

    status, outputs = driver.run(execute.network_input(network, 3), refuse)
    assert status == 7 and calls == [first_host]
    assert all(np.isnan(v).all() for v in outputs.values())  # nothing after it ran
    assert driver.run_fn(None, None, None, None, HOST(), None) == -1  # no host, host steps


def test_files_are_the_same_bytes_every_time(imported):
    network, jobs = imported
    plan, _ = pack_network_weights(network, jobs, TARGETS["c"])
    assert TARGETS["c"].network_files(network, jobs, plan) == TARGETS["c"].network_files(network, jobs, plan)


def test_the_tensor_table_says_each_tensors_layout(imported, request):
    """<net>_tensors[i].layout: how a caller reading a tensor in the arena finds its bytes."""
    network, jobs = imported
    plan, _ = pack_network_weights(network, jobs, TARGETS["c"])
    text = TARGETS["c"].network_files(network, jobs, plan)["network.c"]
    rows = dict(re.findall(r'^  \{ "([^"]+)", "float32", .*, "(NCHW|NHWC)" \}, /\* \d+: ', text, re.MULTILINE))
    nhwc = request.node.callspec.params["imported"]
    assert rows == {"x": "NCHW", "stem2_relu_out": "NCHW", "pool_out": "NCHW", "skip_out": "NHWC" if nhwc else "NCHW",
                    "fc_out": "NCHW"}


# ---------------------------------------------------------------- what network.c refuses


@pytest.mark.parametrize("channels_last, key, old, new, held", [
    (False, "input.layout", "], layout: NCHW}", "], layout: NHWC}", "NCHW"),
    (False, "output.layout", "output: {layout: NCHW}", "output: {layout: nchw-4c}", "NCHW"),
    (True, "output.layout", "output: {layout: NHWC}", "output: {layout: NCHW}", "NHWC"),  # skip_out, between kernels
])
def test_a_kernel_boundary_not_as_the_manifest_holds_it_is_a_config_error(tmp_path, channels_last, key, old, new,
                                                                           held):
    manifest = write_import(tmp_path, channels_last)
    network = kernelgen.load_network(manifest)
    config = Path(network.kernels[1].config.file)
    text = config.read_text()
    assert text.count(old) == 1
    config.write_text(text.replace(old, new))
    network = kernelgen.load_network(manifest)
    jobs = {s.config.name: kernelgen.jobs(s.config, ("c",))["c"] for s in network.kernels}
    with pytest.raises(ConfigError) as caught:
        TARGETS["c"].network_files(network, jobs, pack_network_weights(network, jobs, TARGETS["c"])[0])
    (problem,) = caught.value.problems
    assert problem.key == key and f"as the manifest holds it ({held}, unpadded)" in problem.message
    assert problem.message.endswith(f"`{key.split('.')[0]}: {{layout: {held}}}` (kernelgen import writes that)")
    assert Path(problem.path).name == config.name
    section = key.split(".")[0] + ":"
    assert problem.line == 1 + next(k for k, line in enumerate(text.splitlines()) if line.startswith(section))


def test_an_nhwc_tensor_a_host_step_reads_is_an_error_at_the_manifest(tmp_path):
    """The host MaxPool writes pool_out as ONNX holds it: a manifest (and the kernels reading it) saying NHWC would
    have network.c hand the kernels NCHW bytes as NHWC."""
    manifest = write_import(tmp_path, channels_last=True)
    text = manifest.read_text()
    line = '"pool_out": {shape: [1, 8, 8, 8], dtype: float32, layout: NCHW}'
    assert text.count(line) == 1
    manifest.write_text(text.replace(line, line.replace("NCHW", "NHWC")))
    for config in manifest.parent.glob("[!n]*.yaml"):  # the kernels reading it, as the manifest says
        config.write_text(config.read_text().replace("input: {shape: [1, 8, 8, 8], layout: NCHW}",
                                                     "input: {shape: [1, 8, 8, 8], layout: NHWC}"))
    network = kernelgen.load_network(manifest)
    jobs = {s.config.name: kernelgen.jobs(s.config, ("c",))["c"] for s in network.kernels}
    with pytest.raises(ConfigError) as caught:
        TARGETS["c"].network_files(network, jobs, pack_network_weights(network, jobs, TARGETS["c"])[0])
    (problem,) = caught.value.problems
    assert (Path(problem.path).name, problem.key) == ("network.yaml", "tensors.pool_out.layout")
    assert problem.message == ("'pool_out' is NHWC, but the caller or a host step reads or writes it, as ONNX holds "
                               "it: NCHW")
    assert problem.line == 1 + next(k for k, row in enumerate(text.splitlines())
                                    if row.strip().startswith('"pool_out"'))


def test_a_uint8_kernel_is_a_config_error(imported):
    network, jobs = imported
    uint8 = kernelgen.parse_config(SMALL_UINT8.format(name="quantized", bias=""), "quantized.yaml")
    step = network.kernels[0]
    steps = tuple(replace(s, config=uint8) if s is step else s for s in network.steps)
    weights, _ = pack_network_weights(network, jobs, TARGETS["c"])
    with pytest.raises(ConfigError) as caught:
        TARGETS["c"].network_files(replace(network, steps=steps), jobs, weights)
    assert caught.value.problems[0].key == "dtype" and "uint8" in caught.value.problems[0].message


def test_other_targets_write_no_network_driver(imported):
    network, jobs = imported
    from plugin_target import CArgs

    with pytest.raises(KernelgenError, match="network.c is the c target's"):
        CArgs().network_files(network, {}, pack_network_weights(network, jobs, TARGETS["c"])[0])
