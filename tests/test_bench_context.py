"""Issue 50: what a benchmark says it measured. The c target's cold and warm runs in their order beside the probes
(targets/c/timing.py), and the one host line (CPU model, watched flags, lavapipe's Mesa) `kernelgen bench` and the
benchmarks/ scripts print first."""
from kernelgen.measure import context
from kernelgen.measure.primitives import BANDWIDTH, FMA, Probe
from kernelgen.targets.c.timing import cold_and_warm
from kernelgen.toolstatus import ToolStatus


def _recording(calls: list[str], name: str):
    return lambda: calls.append(name)


def test_each_repeat_runs_the_probes_then_the_kernel_cold_then_warm():
    calls: list[str] = []
    fma = Probe(kind=FMA, work=1, device="host", shape="8x8", kernel=_recording(calls, "fma"))
    times = cold_and_warm(_recording(calls, "kernel"), (fma,), _recording(calls, "flush"), repeat=2)
    # a dense kernel (no triad among its probes): the triad runs untimed as the flush before the cold run
    assert calls == ["kernel"] + ["fma", "flush", "kernel", "kernel"] * 2
    assert len(times.cold) == len(times.warm) == len(times.probes[FMA]) == 2
    calls.clear()
    triad = Probe(kind=BANDWIDTH, work=1, device="host", shape="triad", kernel=_recording(calls, "triad"))
    times = cold_and_warm(_recording(calls, "kernel"), (fma, triad), _recording(calls, "flush"), repeat=1)
    # a memory-bound kernel: the timed triad is the flush
    assert calls == ["kernel", "fma", "triad", "kernel", "kernel"] and set(times.probes) == {FMA, BANDWIDTH}
    calls.clear()
    times = cold_and_warm(None, (fma,), _recording(calls, "flush"), repeat=3)  # a probe alone
    assert calls == ["fma"] * 3 and times.cold == times.warm == ()


def test_the_host_line_names_the_cpu_its_flags_and_lavapipes_mesa(monkeypatch):
    monkeypatch.setattr(context, "cpu_model", lambda: "AMD EPYC 7B13")
    monkeypatch.setattr(context, "cpu_flags", lambda: {"avx2": True, "avx512f": False, "fma": True})
    monkeypatch.setattr(context.os, "cpu_count", lambda: 2)
    device = "llvmpipe (LLVM 15.0.6, 256 bits); llvmpipe Mesa 22.3.6 (LLVM 15.0.6); Vulkan 1.3.230"
    monkeypatch.setattr(context.TARGETS["vulkan"], "toolchain", lambda: (ToolStatus("vulkan-device", True, device, ""),))
    assert context.host_line(["c"]) == "host: AMD EPYC 7B13 (avx2, no avx512f, fma; 2 logical CPUs)"
    assert context.host_line(["c", "vulkan"]) == ("host: AMD EPYC 7B13 (avx2, no avx512f, fma; 2 logical CPUs); "
                                                  "lavapipe: Mesa 22.3.6 (LLVM 15.0.6)")
    # a GPU's driver is not lavapipe: no Mesa on the line
    monkeypatch.setattr(context.TARGETS["vulkan"], "toolchain",
                        lambda: (ToolStatus("vulkan-device", True, "AMD Radeon RX 6800 (RADV NAVI21)", ""),))
    assert context.host_line(["vulkan"]).endswith("2 logical CPUs)")


def test_cpu_flags_reads_the_watched_flags_of_this_machine(monkeypatch, tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nmodel name\t: X\nflags\t\t: fpu sse2 avx avx2 fma bmi2\n")
    real_open = open
    monkeypatch.setattr(context.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr("builtins.open", lambda path, *a, **k: real_open(info if path == "/proc/cpuinfo" else path,
                                                                          *a, **k))
    assert context.cpu_flags() == {"avx2": True, "avx512f": False, "fma": True}
