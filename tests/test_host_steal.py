"""host_steal: the hypervisor's share of CPU ticks during a bench, and the CLI's warning."""
import importlib
import time
from pathlib import Path

from click.testing import CliRunner

from kernelgen.measure.records import BenchRow
from kernelgen.cli import main
from kernelgen.measure.host_steal import PROC_STAT, CpuTimes, measure_steal, steal_fraction


def _stat(tmp_path: Path, name: str, fields: str) -> Path:
    path = tmp_path / name
    path.write_text(f"cpu  {fields}\ncpu0 1 2 3 4 5 6 7 8 0 0\nintr 1\n")
    return path


def test_steal_is_the_eighth_field_over_all_eight(tmp_path):
    # user nice system idle iowait irq softirq steal guest guest_nice: guest is inside user.
    before = CpuTimes.read(_stat(tmp_path, "a", "100 0 50 800 10 0 5 35 20 0"))
    after = CpuTimes.read(_stat(tmp_path, "b", "300 0 90 1300 10 0 5 95 60 0"))
    assert before == CpuTimes(busy_and_idle=1000, steal=35)
    assert after == CpuTimes(busy_and_idle=1800, steal=95)
    assert steal_fraction(before, after) == 60 / 800


def test_no_reading_gives_no_fraction(tmp_path):
    assert CpuTimes.read(tmp_path / "missing") is None
    assert CpuTimes.read(_stat(tmp_path, "old", "1 2 3 4 5 6 7")) is None  # a kernel without steal
    reading = CpuTimes.read(_stat(tmp_path, "a", "1 0 1 1 0 0 0 0"))
    assert steal_fraction(None, reading) is None and steal_fraction(reading, reading) is None


def test_this_machine_measures_a_block_between_0_and_1():
    with measure_steal() as metrics:
        assert metrics == {}  # filled only when the block ends
        start = time.process_time()
        while time.process_time() - start < 0.05:  # several clock ticks (10 ms each) of work
            pass
    if PROC_STAT.exists():  # Linux
        assert 0.0 <= metrics["steal"] <= 1.0
    else:
        assert metrics == {}


def test_bench_warns_when_the_hypervisor_took_time(tmp_path, monkeypatch):
    config = tmp_path / "small.yaml"
    config.write_text("name: small\ninput: {shape: [1, 6, 6, 8]}\nops: [{conv2d: {out_channels: 4, kernel: 3}}]\n")

    # the command times each job with kernelgen.measure.bench.bench, imported into the bench command's module
    cli_bench = importlib.import_module("kernelgen.cli.bench")

    def fake(steal):
        return lambda target, job, options: [BenchRow(config=job.config.name, target="c", label="k", seconds=1e-3,
                                                      flops=1000, steal={"steal": steal})]

    monkeypatch.setattr(cli_bench, "bench", fake(0.125))
    result = CliRunner().invoke(main, ["bench", str(config), "--target", "c"])
    assert result.exit_code == 0, result.output
    assert "steal=0.125" in result.stdout
    assert "hypervisor took up to 12.5%" in result.stderr and "1 of 1 runs" in result.stderr
    monkeypatch.setattr(cli_bench, "bench", fake(0.001))
    result = CliRunner().invoke(main, ["bench", str(config), "--target", "c"])
    assert result.exit_code == 0 and "steal=0.001" in result.stdout and "hypervisor" not in result.stderr
