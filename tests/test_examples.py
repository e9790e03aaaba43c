"""examples/Makefile: builds, is idempotent, and rebuilds when a template changes."""
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from conftest import requires_tool


@requires_tool("make", "gcc")
def test_examples_makefile(repo, tmp_path):
    work = tmp_path / "examples"
    shutil.copytree(repo / "examples", work, ignore=shutil.ignore_patterns("build"))
    env = {**os.environ, "KERNELGEN": str(Path(sys.executable).parent / "kernelgen")}

    def make(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["make", "-C", str(work), *args], capture_output=True, text=True, env=env)

    first = make()
    assert first.returncode == 0, first.stderr
    assert "example_conv: 4096 outputs" in (work / "build" / "checksum.txt").read_text()
    assert make("-q").returncode == 0  # a second make has nothing to do

    template = repo / "templates" / "c" / "kernel.c.j2"
    stat = template.stat()
    try:
        time.sleep(0.05)
        os.utime(template)  # "touch": newer than the stamp, older than the next build
        assert make("-q").returncode == 1  # touching a template makes the build stale
        again = make()
        assert again.returncode == 0 and "kernelgen" in again.stdout and "host.c" in again.stdout
        assert make("-q").returncode == 0
    finally:
        os.utime(template, (stat.st_atime, stat.st_mtime))
