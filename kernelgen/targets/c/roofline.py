"""Machine peaks of the project's own (an FMA-chain kernel, a STREAM triad), timed by the core's probe timing: the
roofs of the chart `kernelgen bench --plot` draws (measure/roofline.py).

`Probes` keeps both probes built in one library so a benchmark can run them between the repeats of a kernel and
pair each repeat with the peak and bandwidth measured next to it (a host shared with other work slows both)."""
from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from ...measure.primitives import BANDWIDTH, FMA, Primitives, Probe
from ...measure.probes import rate, triad_array_bytes as shared_triad_array_bytes
from ...measure.roofline import MachinePeaks
from .placement import placed
from .toolchain import build_shared

# Eight independent FMA chains: enough in flight to hide FMA latency on current x86 and ARM cores, few enough to
# stay in registers. Their vectors are the widest the micro-kernels use where this compiles (vector.h.j2's
# KG_VF16): 16 floats (zmm) where the compiler targets AVX-512F, else 8, so a kernel's share of the peak compares
# like with like. GCC's vector extension keeps it portable C; peak_lanes says which was built.
# Each chain starts from its own value: chains that start equal compute equal values, and gcc -O3 merged eight such
# chains into one, so the loop ran one dependent FMA a step. Its latency (4 cycles) times 8 happened to equal two
# FMA ports (Intel's AVX-512 Xeons, Zen 3's ymm), but on Zen 4, one zmm FMA a cycle, it read twice the core's peak
# (issue 50: 220-234 GFLOP/s where 8 to 24 real chains read 117).
_PEAK_SOURCE = """
#if defined(__AVX512F__)
#define LANES 16
#else
#define LANES 8
#endif
typedef float vf __attribute__((vector_size(4 * LANES)));
int peak_lanes(void) { return LANES; }
void peak(long iterations, float *out) {
    vf a0, a1, a2, a3, a4, a5, a6, a7, m, b;
    for (int k = 0; k < LANES; ++k) {
        m[k] = 1.0000001f; b[k] = 1e-7f;
        a0[k] = 0.0f; a1[k] = 1.0f; a2[k] = 2.0f; a3[k] = 3.0f; a4[k] = 4.0f; a5[k] = 5.0f; a6[k] = 6.0f; a7[k] = 7.0f;
    }
    for (long i = 0; i < iterations; ++i) {
        a0 = a0 * m + b; a1 = a1 * m + b; a2 = a2 * m + b; a3 = a3 * m + b;
        a4 = a4 * m + b; a5 = a5 * m + b; a6 = a6 * m + b; a7 = a7 * m + b;
    }
    vf s = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
    for (int k = 0; k < LANES; ++k) out[k] = s[k];
}
"""
CHAINS = 8


# STREAM's triad, a[i] = b[i] + s * c[i], over arrays far beyond the caches: the bandwidth one core reaches,
# counted as STREAM counts it (two arrays read, one written; the written array's read for ownership not counted).
_TRIAD_SOURCE = """
void triad(long n, float *restrict a, const float *restrict b, const float *restrict c) {
    for (long i = 0; i < n; ++i) a[i] = b[i] + 3.0f * c[i];
}
"""
TRIAD_MIN_BYTES = 64 << 20  # per array, also where the host does not name its last-level cache: 4x a 16 MiB L3


def triad_array_bytes(llc_bytes: int | None = None) -> int:
    """Each triad array: half the host's last-level cache, TRIAD_MIN_BYTES at least (measure/probes.py says why)."""
    return shared_triad_array_bytes(TRIAD_MIN_BYTES, llc_bytes)


class Probes:
    """The FMA-chain peak and the triad bandwidth of one core, compiled once (gcc -O3 and `machine`, a kernel's
    -m flags: -march=native by default), each one run a call: what the core's probe timing times (measure/probes.py), beside a kernel or alone."""

    def __init__(self, workdir: Path, iterations: int = 20_000_000, machine: tuple[str, ...] = ("-march=native",)):
        import ctypes

        source = workdir / "probes.c"
        source.write_text(_PEAK_SOURCE + _TRIAD_SOURCE)
        self._lib = ctypes.CDLL(str(build_shared([source], workdir / "libprobes.so",
                                                 flags=("-O3", *machine, "-ffp-contract=fast"))))
        self._lib.peak.argtypes = [ctypes.c_long, ctypes.c_void_p]
        self.lanes = int(self._lib.peak_lanes())  # 16 where the compiler targets AVX-512F, else 8
        self._lib.triad.argtypes = [ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        self.iterations = iterations
        self._out = np.zeros(self.lanes, dtype=np.float32)
        n = triad_array_bytes() // 4
        # on huge pages as the kernels' tensors (placement.py), not as numpy happens to place them
        self._a, self._b, self._c = (placed(np.full(n, v, np.float32)) for v in (0.0, 1.0, 2.0))
        self.peak(), self.triad()  # warm-up: page in the arrays

    @property
    def peak_flops(self) -> int:
        return CHAINS * self.lanes * 2 * self.iterations  # a multiply and an add a lane and step

    @property
    def describe(self) -> str:
        """Which vectors the FMA peak was measured with, for a report."""
        kind = "16-float (AVX-512F zmm)" if self.lanes == 16 else f"{self.lanes}-float"
        return f"FMA peak: {CHAINS} chains of {kind} vectors, the widest the micro-kernels use here"

    def peak(self) -> None:
        """One run of the FMA chains."""
        self._lib.peak(self.iterations, self._out.ctypes.data)

    @property
    def triad_bytes(self) -> int:
        return 3 * self._a.nbytes  # b and c read, a written

    def triad(self) -> None:
        """One run of the triad: what a benchmark times beside a kernel (measure/probes.py)."""
        self._lib.triad(self._a.size, self._a.ctypes.data, self._b.ctypes.data, self._c.ctypes.data)

    def records(self, kind: str) -> tuple[Probe, ...]:
        """The probe of `kind` (FMA or BANDWIDTH) as the core times it (Target.probes)."""
        if kind == FMA:
            return (Probe(kind=FMA, work=self.peak_flops, device="host", shape=f"{CHAINS}x{self.lanes}", kernel=self.peak),)
        if kind == BANDWIDTH:
            return (Probe(kind=BANDWIDTH, work=self.triad_bytes, device="host", shape="triad", kernel=self.triad),)
        return ()


def measure_peaks(target: Primitives, repeat: int = 5) -> MachinePeaks:
    """This core's FMA peak and triad bandwidth for the roofline chart: Probes' two kernels timed alone by the core's
    probe timing (measure/probes.py rate: `target`'s time primitive, the c target's, the median of `repeat` runs)."""
    with tempfile.TemporaryDirectory(prefix="kernelgen-peak-") as tmp:
        probes = Probes(Path(tmp))
        # probes alone: the time primitive reads no compiled job (there is none), only the probes' own calls
        (fma,), (triad,) = probes.records(FMA), probes.records(BANDWIDTH)
        return MachinePeaks(gflops=rate(target, None, fma, repeat=repeat),
                            bandwidth_gbs=rate(target, None, triad, repeat=repeat))
