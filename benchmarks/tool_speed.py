"""Speed of kernelgen itself (not of the kernels): plan + render in-process, and a whole
`kernelgen build` of the bundled configs in one process.

Budgets from the core issue: plan + render of one config under 50 ms; building all bundled
configs in one process well under 2 s. Times are printed with their ratio to the budget and
to a reference workload run in the same process (parsing the config YAML 100 times), so a
slower machine shows up as a higher reference time rather than a false regression.

    .venv/bin/python benchmarks/tool_speed.py
"""
from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from kernelgen.api import load_config
from kernelgen.planner import plan
from kernelgen.targets import TARGETS
from kernelgen.measure.context import host_line

REPO = Path(__file__).resolve().parent.parent
CONFIGS = sorted((REPO / "configs").glob("*.yaml"))


def median_seconds(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    print(host_line())
    text = (REPO / "configs" / "seed000_3x3.yaml").read_text()
    reference = median_seconds(lambda: [yaml.safe_load(text) for _ in range(100)], 5)
    print(f"reference (yaml.safe_load x100): {reference * 1e3:.1f} ms")
    failed = False
    for path in CONFIGS:
        def plan_and_render() -> None:
            config = load_config(path)
            the_plan = plan(config)
            for target in config.targets:
                TARGETS[target].build(config, the_plan)
        plan_and_render()  # warm the template cache, as a long-running process would be
        seconds = median_seconds(plan_and_render, 10)
        failed |= seconds > 0.050
        print(f"plan+render {path.name:<24} {seconds * 1e3:7.1f} ms  ({seconds / 0.050:.2f} of the 50 ms budget, "
              f"{seconds / reference:.2f}x reference)")
    with tempfile.TemporaryDirectory() as out:
        cmd = [sys.executable, "-m", "kernelgen", "build", *map(str, CONFIGS), "-o", out]
        runs = []
        for _ in range(3):
            start = time.perf_counter()
            subprocess.run(cmd, check=True, capture_output=True)
            runs.append(time.perf_counter() - start)
        seconds = statistics.median(runs)
    failed |= seconds > 2.0
    print(f"kernelgen build ({len(CONFIGS)} configs, one process, incl. interpreter start) {seconds * 1e3:.0f} ms "
          f"({seconds / 2.0:.2f} of the 2 s budget, {seconds / reference:.1f}x reference)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
