"""What the commands share: loading every config with its problems reported together, the exit codes of
library errors (ConfigError -> 2, any other KernelgenError -> 1), the common options, progress (a bar, a status
line: on a terminal only) and JSON numbers."""
from __future__ import annotations

import difflib
import functools
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import Callable

import click

from ..api import TARGETS, applicable, chosen_targets, load_config, with_device
from ..config import Config
from ..devices import PROFILES
from ..config.diagnostics import render
from ..errors import ConfigError, KernelgenError
from ..files import display_path


def echo_problems(error: ConfigError) -> None:
    """Each problem on stderr; on a terminal with its source line and a caret under the column."""
    for problem in error.problems:
        click.echo(render(problem, with_source=sys.stderr.isatty()), err=True)


def handle_errors(fn: Callable) -> Callable:
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except ConfigError as error:
            echo_problems(error)
            sys.exit(2)
        except KernelgenError as error:
            click.echo(f"error: {error}", err=True)
            sys.exit(error.exit_code)
    return wrapper


def load_all(paths: tuple[str, ...], targets: tuple[str, ...] = (), device: str | None = None) -> list[Config]:
    """Load every config first and report all problems together, before writing anything. With --target, the
    configs none of those targets takes (by dtype) are left out with a note; none left is a config error."""
    from ..network.manifest import is_manifest

    configs, problems = [], []
    manifests = [p for p in paths if is_manifest(p)]
    if manifests:
        click.echo(f"note: {', '.join(manifests)}: a network manifest, left out among configs (give it alone to run "
                   f"the whole network)", err=True)
    for path in (p for p in paths if p not in manifests):
        try:
            configs.append(load_config(path))
        except ConfigError as error:
            problems += error.problems
    if problems:
        raise ConfigError(problems)
    names: dict[str, str] = {}
    for config in configs:
        if config.name in names and names[config.name] != config.path:
            raise ConfigError([_problem(config, "name", f"{config.name!r} is also the name of {names[config.name]}; "
                                                        f"names must be unique (they name output folders)")])
        names[config.name] = config.path
    if device:
        configs = [with_device(c, device) for c in configs]
    kept, left_out = applicable(configs, targets)
    if not kept and left_out:
        chosen_targets(left_out[0], targets)  # raises: dtype, with the dtypes the targets take
    if left_out:
        click.echo(f"note: --target {', '.join(targets)} takes none of: "
                   + ", ".join(f"{c.name} ({c.dtype})" for c in left_out), err=True)
    return kept


def number(value):
    """JSON has no NaN: a measurement that does not exist (skipped run, no wall time) is null."""
    return value if not isinstance(value, float) or value == value and abs(value) != float("inf") else None


def _problem(config: Config, key: str, message: str):
    from ..errors import ConfigProblem

    return ConfigProblem(config.path, 1, 1, key, message)


configs_argument = click.argument("configs", nargs=-1, required=True, type=click.Path(dir_okay=False))
def _known_targets(ctx, param, value: tuple[str, ...]) -> tuple[str, ...]:
    """A --target typo is a usage error naming the known targets (registered ones included)."""
    for name in value:
        if name not in TARGETS:
            hint = difflib.get_close_matches(name, list(TARGETS), n=1)
            raise click.BadParameter(f"unknown target {name!r}{f' (did you mean {hint[0]!r}?)' if hint else ''}; "
                                     f"known targets: {', '.join(TARGETS)}")
    return value


target_option = click.option("--target", "targets", multiple=True, metavar="NAME", callback=_known_targets,
                             help=f"Target to use (repeatable); overrides the config's targets. One of: {', '.join(TARGETS)}.")
json_option = click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of text.")


def device_choice(help: str):
    """--device NAME: a device profile (kernelgen devices), the same option on every command that takes one."""
    return click.option("--device", type=click.Choice(sorted(PROFILES)), help=help)


device_option = device_choice("A device profile (kernelgen devices) for every target that takes it, over the "
                              "configs' vulkan/opencl.device: its defaults (tiles, work sizes) apply.")


def on_terminal() -> bool:
    """Whether progress may be shown: stderr is a terminal (CI logs and pipes stay clean)."""
    return sys.stderr.isatty()


def progress(items: list, label: str):
    """A progress bar on a terminal; silent otherwise (CI logs stay clean)."""
    if on_terminal() and len(items) > 1:
        return click.progressbar(items, label=label, file=sys.stderr)
    from contextlib import nullcontext

    return nullcontext(items)


def make_folder(root: Path) -> None:
    """Create the output folder before writing any file, so a bad -o is a usage error (exit 2)
    with nothing written; a write that fails later (disk full) is a WriteError (exit 1)."""
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise click.BadParameter(f"cannot create folder {display_path(root)}: {error.strerror or error}",
                                 param_hint="'-o' / '--output'") from None


def _duration(seconds: float) -> str:
    minutes, seconds = divmod(int(seconds), 60)
    return f"{minutes} min {seconds:02d} s" if minutes else f"{seconds} s"


class StatusLine:
    """One line on stderr saying what runs, in which phase and for how long, redrawn every `interval` seconds (a
    first Vulkan validation compiles for minutes); only on a terminal (on_terminal), silent otherwise. Lines printed
    through echo() clear it first, so results and the status never share a line."""

    def __init__(self, interval: float = 1.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.enabled, self.interval, self.clock = on_terminal(), interval, clock
        self.label, self.phase, self.started, self.began = "", "", 0.0, clock()
        self._lock, self._stop = threading.Lock(), threading.Event()
        self._thread = threading.Thread(target=self._tick, daemon=True)

    def __enter__(self) -> "StatusLine":
        if self.enabled:
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        with self._lock:
            self._clear()

    def start(self, label: str) -> None:
        """A new item: its label ("[2/7] seed002_vulkan on vulkan"), its clock from zero."""
        with self._lock:
            self.label, self.phase, self.started = label, "", self.clock()
            self._draw()

    def set_phase(self, phase: str) -> None:
        """What the item is doing now: compiling, running, comparing."""
        with self._lock:
            self.phase = phase
            self._draw()

    def echo(self, line: str) -> None:
        """A line of the command's own output (stdout), printed under no status."""
        with self._lock:
            self._clear()
            click.echo(line)
            self._draw()

    def _tick(self) -> None:
        while not self._stop.wait(self.interval):
            with self._lock:
                self._draw()

    def _draw(self) -> None:
        if not self.enabled or not self.label:
            return
        now = self.clock()
        text = (f"{self.label}: {self.phase or 'starting'}, {_duration(now - self.started)} "
                f"(all: {_duration(now - self.began)})")
        columns = shutil.get_terminal_size().columns
        sys.stderr.write("\r\033[K" + text[:max(columns - 1, 20)])  # never wider than the line: \r must reach it
        sys.stderr.flush()

    def _clear(self) -> None:
        if self.enabled and self.label:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()
