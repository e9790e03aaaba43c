"""What every target is: one class per folder, supplying primitives the core's loops call.

A target plans its own tiling on top of the core plan (`target_plan`), renders files from both (`build`, which
makes a `Job`: config, plan, target plan and files, computed once per command), and, where this machine can,
`compile`s a job into an `Executable` that `run`s on the core's tensors and `time`s itself, and says which `probes`
measure its device (FMA peak, bandwidth), which the core times through the same `time`. The loops over these
(inputs, poisoning, references, oracles, comparison, repeats, statistics, sweeps) live once in kernelgen.measure,
which defines Job, Executable and the primitives it calls (measure/primitives.py); a target never makes inputs or
compares outputs. The registry in kernelgen/registry.py is the only list of targets.

A target declares the type of its plan and of its compiled job once, as Target's parameters
(`class Vulkan(Target[VulkanPlan, VulkanProgram])`); its primitives then take `Job[VulkanPlan]` and a
VulkanProgram, and read `job.target_plan` as a VulkanPlan, with no cast.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Mapping, TypeVar, cast

import numpy as np
from pydantic import BaseModel

from ..config import Config, options_of
from ..config.model import TargetInfo
from ..emit import Comment, OutputFile, render, template_files
from ..errors import KernelgenError
from ..measure.compare import Roundoff
# targets import these from here
from ..measure.primitives import BANDWIDTH, FMA, Executable, Job, Probe, TargetPlan, Traced  # noqa: F401
from ..measure.records import DeviceStats, OpEstimate, Timings
from ..measure.roofline import MachinePeaks
from ..measure.tensors import KernelArgs
from ..plan_types import Plan
from ..reference import HALF_UNIT_ROUNDOFF
from ..toolstatus import ToolStatus

if TYPE_CHECKING:
    from ..network.manifest import Network
    from ..network.program import ProgramBuild
    from ..network.weights import WeightsPlan

Compiled = TypeVar("Compiled", bound=Executable)  # what a target's compile makes of a job


@dataclass(frozen=True, slots=True)
class BuildFlags:
    """What a build system gives a kernel's generated sources (CMake's kernelgen_add_kernels): `compile`, the flags
    the target's own compile uses for speed and correctness (not its warning checks), and `link`, what a program
    linking them needs. A flag naming the build machine's CPU (`-march=native`) is the build system's to drop when it
    cross-compiles."""

    compile: tuple[str, ...] = ()
    link: tuple[str, ...] = ()

    def banner_line(self) -> str:
        """What each generated C source's banner says of its flags ("" for none): a source copied into another
        project without its build still says what it was validated and timed with."""
        if not self.compile:
            return ""
        link = f"; link with {' '.join(self.link)}" if self.link else ""
        return f"Compile with {' '.join(self.compile)}{link} (as validated; kernelgen build --list-flags)."


class Target(ABC, Generic[TargetPlan, Compiled]):
    name: ClassVar[str]
    summary: ClassVar[str]
    files: ClassVar[tuple[OutputFile, ...]]
    dtypes: ClassVar[tuple[str, ...]] = ("float32",)
    comment: ClassVar[Comment] = Comment()
    includes: ClassVar[tuple[str, ...]] = ()  # templates the files include (for depfiles)
    options_model: ClassVar[type[BaseModel] | None] = None  # the model of its `<name>:` block, if it has one
    # A target that lives outside kernelgen (a plugin, a test) keeps its templates in a folder of its own;
    # None: kernelgen's templates/ (the bundled targets).
    template_root: ClassVar[Path | None] = None
    # Devices whose compiler can judge this target's kernels without the device (stats).
    stats_devices: ClassVar[tuple[str, ...]] = ()
    # Time torch's CPU conv2d beside the kernel when torch is installed (a reference the user knows).
    torch_reference: ClassVar[bool] = False
    # schedule.order values whose stripe loops the target renders; None: it runs no stripe loops (a kernel per
    # conv), so the order does not apply
    loop_orders: ClassVar[tuple[str, ...] | None] = ("channels_outer",)

    # ------------------------------------------------------------ config

    def info(self) -> TargetInfo:
        """What the config loader needs to know of this target."""
        return TargetInfo(name=self.name, dtypes=self.dtypes, options=self.options_model, loop_orders=self.loop_orders)

    def options(self, config: Config) -> Any:
        """This target's option block, as its model checked it when the config was loaded."""
        return options_of(config, self.name)

    # ------------------------------------------------------------ generation

    def target_plan(self, config: Config, plan: Plan) -> TargetPlan:
        """The target's own tiling on top of the core plan. By default none: a Target[None]."""
        return cast(TargetPlan, None)

    def context(self, config: Config, plan: Plan, target_plan: TargetPlan) -> dict[str, Any]:
        """Template data beyond the plan."""
        return {}

    def build(self, config: Config, plan: Plan) -> Job[TargetPlan]:
        """The target plan and every file this target writes for a config."""
        tplan = self.target_plan(config, plan)
        files = render(plan, self.files, self.comment, self.context(config, plan, tplan), self.template_root,
                       self.source_note(config), self.source_suffix)
        return Job(config=config, plan=plan, target_plan=tplan, files=files)

    # the names of the files network_files writes (build --list-outputs lists them without planning a network)
    network_file_names: ClassVar[tuple[str, ...]] = ()
    # its network program runs on this host and, built with -DKG_TIMERS, prints each step's time: bench times it
    program_timers: ClassVar[bool] = False

    def network_files(self, network: Network, jobs: Mapping[str, Job[TargetPlan]], weights: WeightsPlan
                      ) -> dict[str, str]:
        """A driver that runs a whole network's kernels (`jobs`: this target's, by config name) in order, reading
        their weights where `weights` (this target's pack_weights, network/weights.py) put them: {file name: text}.
        Only a target that can call its kernels from one host program writes one."""
        raise KernelgenError(f"the {self.name} target writes no network driver (network.c is the c target's)")

    def network_note(self, network: Network, jobs: Mapping[str, Job[TargetPlan]]) -> str:
        """A line about the memory the driver runs in (build prints it): by default one arena for the tensors
        between steps and the kernels' workspaces (network/program.arena_note)."""
        from ..network.program import arena_note

        return arena_note(network, jobs)

    def network_refusal(self, network: Network) -> str:
        """Why this target writes no driver for this network although it writes drivers ("" when it does): build
        then writes its kernels alone and says why, as for a target that writes none."""
        return ""

    def network_program(self, network: Network, jobs: Mapping[str, Job[TargetPlan]]) -> ProgramBuild | None:
        """How this target's `<network>_run` program (network/program.py: main, Makefile) compiles and runs around
        network_files' driver; None: it writes no program."""
        return None

    def pack_weights(self, job: Job[TargetPlan], logical: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """A kernel's weights as the model holds them (by argument name: OIHW filters, O biases; a uint8 kernel's
        int8 or uint8 filters and int32 biases) -> the arrays its function takes, in its physical layout and dtype:
        what a network's weights file holds (kernelgen/network/weights.py). Layout padding the kernel never reads
        is zeros, so the same weights pack to the same bytes."""
        raise KernelgenError(f"the {self.name} target packs no weights")

    # the generated files a compiler compiles (their banners carry source_note); headers take their includer's flags
    source_suffix: ClassVar[str] = ".c"

    def source_note(self, config: Config) -> str:
        """What the banner of each compiled source (`source_suffix`) says of how it was compiled and validated, so a
        source copied into another project without its build still says it: by default build_flags' line."""
        return self.build_flags(config).banner_line()

    def build_flags(self, config: Config) -> BuildFlags:
        """The flags the config's generated C sources need in a user's build (none: nothing to compile, or any
        compiler's defaults will do)."""
        return BuildFlags()

    def network_flags(self, network: Network) -> BuildFlags:
        """The flags of a network's driver and program (network.c, <network>_run.c): its first kernel's, so the driver
        and the kernels it calls are built alike (build --list-flags prints them for the network's folder, and the
        files' banners say them)."""
        return self.build_flags(network.kernels[0].config)

    def binaries(self, job: Job[TargetPlan]) -> tuple[dict[str, bytes], str]:
        """Compiled artifacts `kernelgen build` writes beside the sources (never goldens: they depend on the
        compiler's version), and a note when they cannot be made here ("": nothing to say)."""
        return {}, ""

    def binary_names(self, config: Config) -> tuple[str, ...]:
        """The names of the files binaries() would write for a config on this machine, without planning or compiling
        (`build --list-outputs`, which a build system reads to know every file a build writes)."""
        return ()

    # ------------------------------------------------------------ primitives on this machine

    @abstractmethod
    def toolchain(self) -> tuple[ToolStatus, ...]:
        """The tools this target builds and runs with, found or not."""

    @abstractmethod
    def compile(self, job: Job[TargetPlan], workdir: Path, device: str | None = None) -> Compiled:
        """Write the job's files into workdir and build them for this machine's device (`device`: which one,
        for targets with several). Raises ToolchainError when a tool is missing or fails."""

    @abstractmethod
    def run(self, executable: Compiled, args: KernelArgs, poison: int) -> np.ndarray:
        """Run once on `args` with the output (and any intermediate or workspace) pre-filled with the `poison`
        byte; the output, flat, in the plan's output layout and the config's element type."""

    def run_poisoned(self, executable: Compiled, args: KernelArgs,
                     poisons: tuple[int, ...]) -> dict[int, np.ndarray]:
        """One run per poison byte; a target whose device starts slowly overrides this to run them together."""
        return {poison: self.run(executable, args, poison) for poison in poisons}

    def run_traced(self, executable: Compiled, args: KernelArgs, poison: int) -> Traced | None:
        """A run that also returns each op's output (a chain's intermediates), for the check op by op; None when
        the kernel keeps them only in its caches (the chain is then checked end to end)."""
        return None

    def time(self, executable: Compiled, args: KernelArgs | None, repeat: int,
             probes: tuple[Probe, ...] = ()) -> tuple[Timings, ...]:
        """The kernel timed `repeat` times (first), and any row the target measures beside it. Each of `probes`
        runs right before each repeat, timed as the kernel is (its first row's probe_seconds); args None: the
        probes alone. A target without probes may keep the three-argument form."""
        raise NotImplementedError(f"the {self.name} target has no timer")

    def probes(self, executable: Compiled, kind: str) -> tuple[Probe, ...]:
        """What measures this device's FMA peak (kind FMA) or bandwidth (BANDWIDTH): the candidate shapes of the
        probe kernel, ready to run on the executable's device; the core chooses among them and times them
        (measure/probes.py). (): no such probe."""
        return ()

    def roundoff(self, job: Job[TargetPlan]) -> Roundoff:
        """The unit roundoffs of this target's arithmetic and storage for a float config (half storage for
        float16 with float32 arithmetic by default)."""
        return Roundoff(storage=HALF_UNIT_ROUNDOFF if job.config.dtype == "float16" else 0.0)

    def stats(self, job: Job[TargetPlan], device: str, gpu: str | None = None) -> tuple[DeviceStats, ...]:
        """Per op, what `device`'s compiler makes of the kernel (registers, spills, occupancy, code size), for
        `gpu`, one part of the profile where it covers several (None: its default part)."""
        raise NotImplementedError(f"the {self.name} target has no compiler statistics")

    def stats_compiler(self, device: str, gpu: str | None = None) -> str:
        """The compiler (and part) behind `stats` for `device`, as reports name it."""
        return device

    def stats_parts(self) -> dict[str, str]:
        """The parts `stats` can compile for where one of its profiles covers several (--gpu): {part: profile}."""
        return {}

    def time_estimate(self, job: Job[TargetPlan], rows: tuple[DeviceStats, ...], device: str,
                      gpu: str | None = None) -> tuple[OpEstimate, ...]:
        """Per op, its estimated time on `gpu` (the profile's default part when None) from `rows`, what `stats`
        reported; () when this target or that part has no estimate."""
        return ()

    def stats_target_occupancy(self, device: str, gpu: str | None = None) -> tuple[int, str] | None:
        """The occupancy `stats` holds the kernels to on that part, and its compiler's unit of it (waves,
        threads); None: no target."""
        return None

    def stats_assumptions(self, device: str, gpu: str | None = None) -> str:
        """The part's figures behind time_estimate, one line; "" without an estimate."""
        return ""

    def tile_variants(self, config: Config) -> list[tuple[str, Config]]:
        """The tiles `stats --compare-tiles` estimates beside the default: the sweep's tiles at the config's own
        work-group size; [] for a target without any."""
        return []

    def spill_warning(self, row: DeviceStats, device: str, compiler: str) -> str:
        """What `stats` warns of an op that spills on `device` (compiled by `compiler`): the numbers that
        compiler reports and the option that would keep the op in registers; "" when it does not spill."""
        return f"op {row.op} spills {row.spills} registers on {device} ({compiler})" if row.spills else ""

    def host_peaks(self) -> MachinePeaks | None:
        """This host CPU's FMA peak and copy bandwidth, measured by this target's own probes (the roofs of
        `bench --plot`); None when it has none."""
        return None

    def bench_notes(self, jobs: list[Job[TargetPlan]]) -> list[str]:
        """Lines `bench` prints after this target's rows measured on this host's default device: what the host
        makes of the kernels' defaults; [] when there is nothing to say."""
        return []

    def estimate(self, job: Job[TargetPlan]) -> Timings | None:
        """A static estimate instead of a clock when the job's device is not here but its compiler is (a sweep
        ranks by it); None: time it."""
        return None

    # ------------------------------------------------------------ sweeps

    def sweep_variants(self, config: Config) -> list[tuple[str, Config]]:
        """The permutations `bench --sweep` tries, each a key (what a resumed sweep matches) and the config with
        that tile / work-group; [] for a target without any."""
        return []


def file_names(target: Target, config_name: str) -> tuple[str, ...]:
    """The files a target writes for a config, without planning or rendering."""
    return tuple(f.pattern.format(name=config_name) for f in target.files)


def templates(target: Target) -> tuple[Path, ...]:
    """Every template file a target's output depends on (for depfiles)."""
    return template_files([f.template for f in target.files] + list(target.includes), target.template_root)
