"""The charts `kernelgen bench --plot FILE` draws (PNG or SVG, by FILE's extension): for configs, a roofline
(achieved GFLOP/s against arithmetic intensity under the host CPU's peaks, which a target measures:
Target.host_peaks, and each target's device peak); for a network, that roofline with each kernel a point beside a
bar chart of the time (or simulator packets) each step takes. matplotlib is an optional extra (`kernelgen[plot]`):
only these charts need it."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import KernelgenError

FORMATS = (".png", ".svg")
MISSING = "--plot needs matplotlib, an optional extra: pip install 'kernelgen[plot]'"


@dataclass(frozen=True, slots=True)
class MachinePeaks:
    gflops: float  # single-core FP32 FMA peak (2 FLOPs per lane per FMA)
    bandwidth_gbs: float  # main-memory copy bandwidth (read + write bytes)


@dataclass(frozen=True, slots=True, kw_only=True)
class Bar:
    """One step of a network in the time chart: seconds, or packets for a kernel counted by a simulator."""

    label: str
    value: float
    kind: str  # kernel, host, convert


def plot_roofline(path: Path, points: list[tuple[str, float, float]], peaks: MachinePeaks,
                  device_peaks: dict[str, float]) -> None:
    """points: (label, FLOPs per byte of compulsory traffic, achieved GFLOP/s)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 5.5))
    _roofline(ax, points, peaks, device_peaks, "arithmetic intensity (FLOPs per byte of compulsory traffic)")
    ax.set_title("kernelgen bench: achieved vs machine peaks")
    _save(plt, fig, path)


def plot_network(path: Path, title: str, bars: list[Bar], unit: str, points: list[tuple[str, float, float]],
                 peaks: MachinePeaks | None, device_peaks: dict[str, float]) -> None:
    """A network's two pictures side by side: the roofline of its kernels (points: label, FLOPs per byte of the
    plan's traffic, GFLOP/s; none when the kernels are counted rather than timed, or no peaks) and each step's
    `unit` (ms, packets) as a bar, largest first at the top."""
    plt = _pyplot()
    height = max(4.5, 0.28 * len(bars) + 1.5)
    fig, (left, right) = plt.subplots(1, 2, figsize=(15, height), gridspec_kw={"width_ratios": [1.1, 1]})
    if points and peaks is not None:
        _roofline(left, points, peaks, device_peaks, "arithmetic intensity (FLOPs per byte of the plan's traffic)",
                  detail=False)
        left.set_title("each kernel against this host's roofs")
    else:
        left.axis("off")
        left.text(0.5, 0.5, "no roofline: the kernels are counted by a simulator, not timed", ha="center",
                  va="center", fontsize=9)
    colours = {"kernel": ("tab:blue", "blue"), "host": ("tab:orange", "orange"), "convert": ("tab:gray", "grey")}
    rows = list(range(len(bars)))[::-1]  # step 1 at the top
    right.barh(rows, [b.value for b in bars], color=[colours[b.kind][0] for b in bars])
    right.set_yticks(rows, [b.label for b in bars], fontsize=7)
    total = sum(b.value for b in bars) or 1.0
    for row, bar in zip(rows, bars):
        right.annotate(f"{bar.value / total:.1%}", (bar.value, row), xytext=(3, 0), textcoords="offset points",
                       va="center", fontsize=6)
    right.set_xlabel(unit)
    kinds = [f"{colours[k][1]}: {k}" for k in colours if any(b.kind == k for b in bars)]
    right.set_title(f"{'time' if unit == 'ms' else unit} per step ({', '.join(kinds)})")
    right.grid(True, axis="x", linewidth=0.3)
    fig.suptitle(title, fontsize=10)
    _save(plt, fig, path)


def _roofline(ax: Any, points: list[tuple[str, float, float]], peaks: MachinePeaks, device_peaks: dict[str, float],
              xlabel: str, detail: bool = True) -> None:
    """The roofs and the points; `detail`: each point's rates written beside it (a network's many kernels are
    named by their step number only, the bar chart beside it names them)."""
    lowest = min([p[1] for p in points] + [1.0])
    highest = max([p[1] for p in points] + [100.0])
    intensities = np.logspace(np.log10(lowest) - 1, np.log10(highest) + 1, 200)
    ax.loglog(intensities, np.minimum(peaks.gflops, peaks.bandwidth_gbs * intensities), "k-",
              label=f"CPU roofline: {peaks.gflops:.0f} GFLOP/s, {peaks.bandwidth_gbs:.1f} GB/s")
    for name, value in sorted(device_peaks.items()):
        ax.axhline(value, linestyle="--", linewidth=1, label=f"{name} FMA peak {value:.0f} GFLOP/s")
    for label, intensity, gflops in points:
        ax.plot([intensity], [gflops], "o")
        # both measures: a memory-bound layer (depthwise) is judged by its GB/s against the bandwidth roof
        text = f"{label}\n{gflops:.2f} GFLOP/s, {gflops / intensity:.2f} GB/s" if detail else label
        ax.annotate(text, (intensity, gflops), fontsize=7 if detail else 6, xytext=(3, 3), textcoords="offset points")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("GFLOP/s")
    ax.grid(True, which="both", linewidth=0.3)
    ax.legend(fontsize=7, loc="lower right")


def chart_problem(path: str) -> str:
    """What stops `--plot path` before anything is measured ("" when nothing): a file name that does not say its
    format, or no matplotlib."""
    import importlib.util

    if Path(path).suffix.lower() not in FORMATS:
        return (f"expected a file name ending in {' or '.join(FORMATS)} (the chart's format), got "
                f"{Path(path).suffix or 'no extension'}")
    if importlib.util.find_spec("matplotlib") is None:
        return MISSING
    return ""


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise KernelgenError(MISSING) from None
    matplotlib.use("Agg")  # no display: render straight to the file
    import matplotlib.pyplot as plt

    return plt


def _save(plt: Any, fig: Any, path: Path) -> None:
    """PNG or SVG by the extension; an SVG without its creation date and with fixed element ids, so the same
    measurements draw the same bytes."""
    fig.tight_layout()
    if path.suffix.lower() == ".svg":
        with plt.rc_context({"svg.hashsalt": "kernelgen"}):
            fig.savefig(path, metadata={"Date": None})
    else:
        fig.savefig(path, dpi=120)
    plt.close(fig)
