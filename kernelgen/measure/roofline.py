"""The roofline chart `kernelgen bench --plot` draws: achieved GFLOP/s against arithmetic intensity, under the
host CPU's peaks (a target measures them: Target.host_peaks) and each target's device peak."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True, slots=True)
class MachinePeaks:
    gflops: float  # single-core FP32 FMA peak (2 FLOPs per lane per FMA)
    bandwidth_gbs: float  # main-memory copy bandwidth (read + write bytes)


def plot_roofline(path: Path, points: list[tuple[str, float, float]], peaks: MachinePeaks,
                  device_peaks: dict[str, float]) -> None:
    """points: (label, FLOPs per byte of compulsory traffic, achieved GFLOP/s)."""
    import matplotlib

    matplotlib.use("Agg")  # no display: render straight to the file
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5.5))
    intensities = np.logspace(-2, 4, 200)
    ax.loglog(intensities, np.minimum(peaks.gflops, peaks.bandwidth_gbs * intensities), "k-",
              label=f"CPU roofline: {peaks.gflops:.0f} GFLOP/s, {peaks.bandwidth_gbs:.1f} GB/s")
    for name, value in sorted(device_peaks.items()):
        ax.axhline(value, linestyle="--", linewidth=1, label=f"{name} FMA peak {value:.0f} GFLOP/s")
    for label, intensity, gflops in points:
        ax.plot([intensity], [gflops], "o")
        # both measures: a memory-bound layer (depthwise) is judged by its GB/s against the bandwidth roof
        ax.annotate(f"{label}\n{gflops:.2f} GFLOP/s, {gflops / intensity:.2f} GB/s", (intensity, gflops), fontsize=7,
                    xytext=(4, 4), textcoords="offset points")
    ax.set_xlabel("arithmetic intensity (FLOPs per byte of compulsory traffic)")
    ax.set_ylabel("GFLOP/s")
    ax.set_title("kernelgen bench: achieved vs machine peaks")
    ax.grid(True, which="both", linewidth=0.3)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
