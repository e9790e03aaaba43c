"""`kernelgen bench --sweep`: a target's tile and work-group permutations, each measured in a child process of its
own, so that one variant that compiles for minutes or hangs costs its timeout and no more, and every result is
kept the moment it exists.

- Each finished variant is appended to the `--output` JSON Lines file at once (one object per line, flushed):
  a sweep stopped by a timeout, a crash or Ctrl-C keeps what it measured, and a second run with the same file
  measures only the variants the file does not hold (resume).
- A variant over `--variant-timeout` seconds is recorded as `timed out`; one the device cannot take as `skipped`
  with the reason; the sweep goes on.
- The best variant is the one with the lowest rank: its measured time, or, for a device that is not here (a
  profile such as rdna2 whose compiler kernelgen can run but whose GPU it cannot), the target's static estimate.
"""
from __future__ import annotations

import json
import enum
import multiprocessing
import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from ..config import Config
from .primitives import Primitives
from .records import BenchOptions, BenchRow


class VariantStatus(enum.Enum):
    MEASURED = "measured"
    TIMED_OUT = "timed out"
    SKIPPED = "skipped"  # a permutation this problem or device cannot take
    FAILED = "failed"


RECORD_KEYS = ("config", "target", "variant", "status", "label", "seconds", "seconds_min", "seconds_max", "flops",
               "metrics", "detail")


@dataclass(frozen=True, slots=True)
class VariantResult:
    config: str
    target: str
    variant: str  # the key the target gave the permutation: what resume matches
    status: VariantStatus
    row: BenchRow | None
    detail: str = ""

    def record(self) -> dict:
        r = self.row
        return {"config": self.config, "target": self.target, "variant": self.variant, "status": self.status.value,
                "label": r.label if r else None, "seconds": _finite(r.seconds) if r else None,
                "seconds_min": _finite(r.spread[0]) if r else None, "seconds_max": _finite(r.spread[1]) if r else None,
                "flops": r.flops if r else None, "metrics": {k: _finite(v) for k, v in r.measurements().items()} if r else {},
                "detail": self.detail}


def _finite(value: float) -> float | None:
    return value if value == value and value not in (float("inf"), float("-inf")) else None


def from_record(record: dict) -> VariantResult:
    row = None
    status = VariantStatus(record["status"])
    if status is VariantStatus.MEASURED:
        nan = float("nan")
        metrics = dict(record.get("metrics") or {})
        typed = {key: metrics.pop(key) for key in ("peak_gflops", "ratio", "rank") if key in metrics}
        steal = {key: metrics.pop(key) for key in list(metrics) if key.startswith("steal")}
        row = BenchRow(config=record["config"], target=record["target"], label=record["label"],
                       seconds=nan if record["seconds"] is None else record["seconds"], flops=record["flops"],
                       spread=tuple(nan if v is None else v for v in (record["seconds_min"], record["seconds_max"])),
                       steal=steal, metrics=metrics, **typed)
    return VariantResult(config=record["config"], target=record["target"], variant=record["variant"],
                         status=status, row=row, detail=record.get("detail", ""))


def read_records(path: Path | None) -> dict[tuple[str, str, str], VariantResult]:
    """The variants a JSON Lines file already holds, by (config, target, variant); a torn last line (the run was
    killed while writing it) is ignored and measured again."""
    if path is None or not path.exists():
        return {}
    done = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            result = from_record(json.loads(line))
        except (ValueError, KeyError, TypeError):
            continue
        done[(result.config, result.target, result.variant)] = result
    return done


def _append(path: Path | None, result: VariantResult) -> None:
    if path is None:
        return
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps(result.record(), allow_nan=False) + "\n")
        out.flush()
        os.fsync(out.fileno())


def _child(target: Primitives, config: Config, options: BenchOptions, pipe) -> None:
    """Runs in the child process: one variant, its first row (the variant itself) sent back, or the error."""
    from ..errors import ConfigError, KernelgenError
    from ..planner import plan
    from .bench import bench

    try:
        rows = bench(target, target.build(config, plan(config)), options)
        pipe.send((VariantStatus.MEASURED, rows[0], ""))
    except ConfigError as error:  # a permutation this problem or device cannot take
        pipe.send((VariantStatus.SKIPPED, None, "; ".join(p.message for p in error.problems)))
    except KernelgenError as error:
        pipe.send((VariantStatus.FAILED, None, str(error)))
    except Exception as error:  # noqa: BLE001 - a crash of one variant must not end the sweep
        pipe.send((VariantStatus.FAILED, None, f"{type(error).__name__}: {error}"))


def measure_variant(target: Primitives, config: Config, variant: str, options: BenchOptions,
                    timeout: float | None) -> VariantResult:
    """One variant in a fresh process (spawned: no device or JIT state shared with this one)."""
    context = multiprocessing.get_context("spawn")
    receive, send = context.Pipe(duplex=False)
    process = context.Process(target=_child, args=(target, config, options, send), daemon=True)
    process.start()
    send.close()
    try:
        if receive.poll(timeout):
            status, row, detail = receive.recv()
        else:
            status, row, detail = VariantStatus.TIMED_OUT, None, f"no result within {timeout:g} s (--variant-timeout)"
    except EOFError:  # the child died without a word (a crash in a driver)
        status, row, detail = VariantStatus.FAILED, None, f"the variant's process ended with exit code {process.exitcode}"
    finally:
        if process.is_alive():
            process.terminate()
        process.join(5)
        if process.is_alive():
            process.kill()
            process.join()
    return VariantResult(config=config.name, target=target.name, variant=variant, status=status, row=row,
                         detail=detail)


def sweep(config: Config, target: Primitives, variants: list[tuple[str, Config]], options: BenchOptions,
          output: Path | None = None, timeout: float | None = None,
          progress: Callable[[int, int, VariantResult], None] | None = None) -> list[VariantResult]:
    """Every variant's result (from `output` when it holds one, else measured now), the best one marked.
    A KeyboardInterrupt ends the sweep early with what it has (those results are in `output` already)."""
    done = read_records(output)
    results: list[VariantResult] = []
    single = replace(options, sweep=False)
    try:
        for count, (key, candidate) in enumerate(variants, start=1):
            result = done.get((config.name, target.name, key))
            if result is None:
                # recorded under the swept config's name (a candidate may carry another): what resume looks up
                result = replace(measure_variant(target, candidate, key, single, timeout), config=config.name)
                _append(output, result)
            results.append(result)
            if progress:
                progress(count, len(variants), result)
    except KeyboardInterrupt:
        pass
    measured = [i for i, r in enumerate(results) if r.row is not None]
    if measured:
        best = min(measured, key=lambda i: results[i].row.sort_key)
        results[best] = replace(results[best], row=replace(results[best].row, best=True))
    return results
