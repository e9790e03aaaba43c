"""`kernelgen bench network.yaml --target c` (issue 48): the shipped program built once with -DKG_TIMERS and run end
to end, interleaved round by round with onnxruntime on the same input and threads; per-step times from the program's
own clocks; its output held to onnxruntime's in the same run. And the program's threads: one OpenMP team per kernel,
--threads at run time, passive waiting unless the user chose. No speed is asserted (a shared host): only that each
time was measured and where it came from."""
from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import numpy as np
import onnx
import pytest
from click.testing import CliRunner

import kernelgen
from kernelgen.cli import main
from kernelgen.measure.program_run import PROGRAM_AGREEMENT
from kernelgen.targets.c import team

from builders import toolchain
from conftest import requires_tool
from programs import make

ONNX = ("py:onnx", "py:onnxruntime")


def _import(root: Path, threads: int = 1) -> Path:
    """mobilenet_v2_classifier imported for c, with `kernelgen import --threads`: each config then says
    c: {threads} when more than one."""
    import onnx_models

    model = root / "mv2c.onnx"
    onnx.save(onnx_models.mobilenet_v2_classifier(), str(model))
    result = CliRunner().invoke(main, ["import", str(model), "-o", str(root / "mv2c"), "--target", "c",
                                       "--threads", str(threads)])
    assert result.exit_code == 0, result.output
    manifest = root / "mv2c" / "network.yaml"
    configs = [c for c in manifest.parent.glob("*.yaml") if c != manifest]
    written = [c.read_text().endswith(f"c: {{threads: {threads}}}  # kernelgen import --threads {threads}\n")
               for c in configs]
    assert configs and written == [threads > 1] * len(configs)
    return manifest


@pytest.fixture(scope="module")
def manifest(tmp_path_factory) -> Path:
    return _import(tmp_path_factory.mktemp("bench"))


@requires_tool(*ONNX, *toolchain("c"))
def test_bench_runs_the_program_against_onnxruntime_round_by_round(manifest, tmp_path):
    network = kernelgen.load_network(manifest)
    chart = tmp_path / "steps.svg"
    result = CliRunner().invoke(main, ["bench", str(manifest), "--target", "c", "--repeat", "2", "--rounds", "2",
                                       "--json", "--plot", str(chart)])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["threads"], report["rounds"], report["inferences_per_round"]) == (1, 2, 2)
    assert report["onnxruntime"].endswith("(CPU, 1 thread)")
    assert len(report["rounds_seconds"]) == 2 and all(v > 0 for r in report["rounds_seconds"] for v in r.values())
    assert report["cpu_ratio"] == pytest.approx(report["program_cpu_seconds"] / report["onnxruntime_cpu_seconds"])
    # the same run's output against onnxruntime's: 1e-4 of its largest magnitude (program_run.PROGRAM_AGREEMENT)
    assert report["agrees"] and 0 < report["relative"] <= PROGRAM_AGREEMENT
    steps = report["steps"]
    assert [s["name"] for s in steps] == [s.label for s in network.steps]  # every step, from the program's clocks
    assert all(s["seconds"] > 0 for s in steps) and sum(s["share"] for s in steps) == pytest.approx(1.0)
    first = network.steps[0].config
    assert steps[0]["flops"] == kernelgen.plan(first).flops
    text = chart.read_text()  # the chart draws the per-step times
    assert "<svg" in text and all(f"[{k + 1}] {s['name']}" in text for k, s in enumerate(steps))


@requires_tool(*ONNX, *toolchain("c"))
def test_bench_with_two_threads_builds_teams_and_turns_onnxruntimes_spinning_off(manifest, monkeypatch):
    for name in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT"):
        monkeypatch.delenv(name, raising=False)  # the program's own waiting, which the output names
    result = CliRunner().invoke(main, ["bench", str(manifest), "--target", "c", "--repeat", "1", "--rounds", "1",
                                       "--threads", "2"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("host: ")  # issue 50: the CPU it ran on first
    assert "2 threads, 1 rounds of 1 inferences" in lines[1] and "(CPU, 2 threads, spinning off)" in lines[1]
    assert lines[2] == "  its threads spin 3000 rounds, then sleep (GOMP_SPINCOUNT=3000, OMP_WAIT_POLICY=passive)"
    # what two threads must beat: the same program with one, in the same rounds
    assert re.search(r"^  the same program, 1 thread: CPU +\d+\.\d\d ms  wall +\d+\.\d\d ms  \(2 threads' wall / "
                     r"1 thread's: \d+\.\d\d\)$", lines[-2])
    assert re.search(r"kernelgen / onnxruntime: CPU \d+\.\d\dx, wall \d+\.\d\dx; output within .* \(pass", lines[-1])


@requires_tool(*toolchain("c"))
def test_the_program_takes_threads_at_run_time_and_waits_passively(tmp_path, monkeypatch):
    """A network whose configs run 2 threads: each kernel with a micro-kernel has one parallel region and a setter,
    network.c's <net>_set_threads calls them all, --threads 1 and 2 give the same output (each row is summed by
    one thread either way: bit-exact), and a bad count is a usage error."""
    monkeypatch.setattr(team, "MIN_WORK_PER_BARRIER", 0)  # small kernels: teams whatever they cost
    manifest = _import(tmp_path, threads=2)
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["build", str(manifest), "-o", str(out)])
    assert result.exit_code == 0, result.output
    folder = out / "mv2c" / "c"
    network_c = (folder / "network.c").read_text()
    teamed = [p for p in out.glob("*/c/*.c") if p.parent != folder and "#pragma omp parallel" in p.read_text()]
    assert teamed and all(p.read_text().count("#pragma omp parallel") == 1 for p in teamed)
    assert network_c.count("_set_threads(threads);") == len(teamed)
    # a kernel whose threads share out stripes announces a copy of its caches per thread; the arena holds them all
    shared = [p for p in teamed if "thread_workspace" in p.read_text()]
    assert shared
    for kernel in shared:
        size = int(re.search(r"_WORKSPACE_BYTES (\d+)\n", kernel.with_suffix(".h").read_text()).group(1))
        per_thread = int(re.search(r"\(size_t\)KG_THREAD \* (\d+);", kernel.read_text()).group(1))
        assert size == 2 * 4 * per_thread and re.search(rf'"{kernel.stem}", .*, {size}, \d+ }},', network_c)
    assert "#define MV2C_OPENMP 1" in (folder / "network.h").read_text()
    make(folder)
    network = kernelgen.load_network(manifest)
    shape = network.tensors[network.inputs[0]].shape
    np.save(tmp_path / "in.npy", np.random.default_rng(3).standard_normal(shape).astype(np.float32))
    outputs = []
    for threads in ("1", "2"):
        done = subprocess.run([str(folder / "mv2c_run"), "--threads", threads, "--repeat", "2", str(tmp_path / "in.npy"),
                               str(tmp_path / f"out{threads}.npy")], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert re.fullmatch(r"mv2c: \d+\.\d{3} ms CPU per run \(median of 2, all threads\)\n"
                            r"mv2c: \d+\.\d{3} ms per run \(median of 2\)\n", done.stdout)  # no step times: no -DKG_TIMERS
        outputs.append(np.load(tmp_path / f"out{threads}.npy"))
    assert np.array_equal(outputs[0], outputs[1])
    # libgomp prints its settings as it loads (OMP_DISPLAY_ENV): the program's own run has the bounded spin and the
    # passive policy it set for itself; a user's policy stands, and then no spin count is set for them
    for given, spins, policy in (({}, "3000", "PASSIVE"), ({"OMP_WAIT_POLICY": "active"}, "30000000000", "ACTIVE"),
                                 ({"GOMP_SPINCOUNT": "7"}, "7", "PASSIVE")):
        env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
        env.update({"OMP_DISPLAY_ENV": "verbose", **given})
        shown = subprocess.run([str(folder / "mv2c_run"), "--threads", "2", "--repeat", "1", str(tmp_path / "in.npy"),
                                str(tmp_path / "o.npy")], capture_output=True, text=True, timeout=120, env=env)
        assert shown.returncode == 0, shown.stderr
        settings = shown.stderr.split("OPENMP DISPLAY ENVIRONMENT BEGIN")[-1]  # the run that computed
        assert f"GOMP_SPINCOUNT = '{spins}'" in settings and f"OMP_WAIT_POLICY = '{policy}'" in settings, settings
    bad = subprocess.run([str(folder / "mv2c_run"), "--threads", "0", str(tmp_path / "in.npy"), str(tmp_path / "o.npy")],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--threads 0: expected a count from 1 to 1024" in bad.stderr
