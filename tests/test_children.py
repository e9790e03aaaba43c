"""Compile and run children (kernelgen.children, issue 32 item 2): a time limit that kills the child's whole
process group and says "did not compile in N s", and no child left behind when kernelgen dies, even by SIGKILL."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO

from kernelgen.children import run_child
from kernelgen.errors import ToolchainError


def _alive(pid: int) -> bool:
    """True while pid exists and is not a zombie (a killed child of init waits briefly to be reaped)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def _wait_gone(pid: int, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def _read_pids(path: Path, count: int, seconds: float = 10.0) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        lines = path.read_text().split() if path.exists() else []
        if len(lines) >= count:
            return [int(p) for p in lines[:count]]
        time.sleep(0.05)
    raise AssertionError(f"the child did not write {count} pids to {path}")


def test_a_child_past_its_time_is_killed_with_its_group(tmp_path: Path):
    pids = tmp_path / "pids"
    script = f"sleep 60 & echo $! >> {pids}; echo $$ >> {pids}; echo compiling >&2; wait"
    started = time.monotonic()
    with pytest.raises(ToolchainError, match=r"^the test shader did not compile in 0\.5 s \(killed\): compiling$"):
        run_child(["sh", "-c", script], what="the test shader", timeout=0.5)
    assert time.monotonic() - started < 5
    grandchild, child = _read_pids(pids, 2)
    assert _wait_gone(child) and _wait_gone(grandchild)  # the sleep the shell started died with the group


def test_a_child_in_time_returns_its_output_and_status():
    done = run_child(["sh", "-c", "echo out; echo err >&2; exit 3"], what="sh", timeout=10, text=True)
    assert (done.returncode, done.stdout, done.stderr) == (3, "out\n", "err\n")
    with pytest.raises(OSError):
        run_child(["kernelgen-no-such-tool"], what="nothing", timeout=1)


def test_no_child_outlives_kernelgen_killed_by_sigkill(tmp_path: Path):
    """A kernelgen process compiling through run_child is killed with SIGKILL (no Python cleanup runs): the
    compile child (PR_SET_PDEATHSIG) dies within seconds instead of holding its memory as an orphan."""
    pids = tmp_path / "pids"
    code = ("import sys\nfrom kernelgen.children import run_child\n"
            f"run_child(['sh', '-c', 'echo $$ > {pids}; exec sleep 60'], what='a stuck compiler', timeout=120)\n")
    env = os.environ | {"PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    parent = subprocess.Popen([sys.executable, "-c", code], env=env)
    try:
        (child,) = _read_pids(pids, 1)
        assert _alive(child)
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
        assert _wait_gone(child), f"compile child {child} outlived its parent"
    finally:
        if parent.poll() is None:
            parent.kill()
