"""Hexagon HVX (clang-19, 128-byte vectors): the plan's schedule with HVX stripe compute.

uint8: vrmpy (32 output channels x 4 input channels per instruction) with zero-point
corrections and fixed-point requantization; float32: the plan's loop nest as scalar C,
plus an HVX qf32 variant for v68+ (compile-only under QEMU 7.2). Arithmetic: plan.py;
running under qemu-hexagon: runtime.py.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from ...config import Config
from ...config.model import TargetInfo
from ...emit import OutputFile
from ...measure.primitives import Traced
from ...measure.records import Timings
from ...measure.tensors import KernelArgs
from ...plan_types import Plan
from ...toolstatus import ToolStatus
from ..base import BuildFlags, Job, Target
from .depthwise import depthwise as depthwise_convs
from .names import NAMES
from .network import FILES as NETWORK_FILES, memory_note, network_files as network_driver, pack_weights, refusal
from .program import RUNTIME_FILES, network_program
from .options import HVX_ROOFS, NAME, HvxModel, default_budget, hvx_options
from .plan import FILTER_LAYOUT, HvxPlan, hvx_plan
from .runtime import HvxProgram, compile_program, timings
from .toolchain import kernel_flags, status

if TYPE_CHECKING:
    from ...network.manifest import Network
    from ...network.program import ProgramBuild
    from ...network.weights import WeightsPlan


class Hvx(Target[HvxPlan, HvxProgram]):
    name = NAME
    summary = "Hexagon HVX C (clang-19, qemu-hexagon): uint8 vrmpy, float32 scalar + qf32 (v68+)"
    files = (OutputFile(pattern="{name}.h", template="hvx/kernel.h.j2"),
             OutputFile(pattern="{name}.c", template="hvx/kernel.c.j2"))
    dtypes = ("float32", "uint8")
    includes = ("hvx/conv2d_uint8.c.j2", "hvx/depthwise_uint8.c.j2", "hvx/depthwise_sweep_uint8.c.j2",
                "hvx/depthwise_weights_uint8.c.j2",
                "hvx/pool_uint8.c.j2", "hvx/conv2d_float32.c.j2", "hvx/helpers.c.j2")
    options_model = HvxModel
    # the plan's stripe loops with HVX section bodies; rows_outer keeps ko_outer (now inside the row stripe) and the
    # write-back of one channel stripe, so the helpers' calls are the same
    loop_orders = ("channels_outer", "rows_outer")

    def info(self) -> TargetInfo:
        # `schedule: auto` fits the splits to the VTCM when the hvx target builds the config.
        # an op naming no filter_layout takes the one the uint8 kernel's vrmpy reads (dense and depthwise)
        return TargetInfo(name=self.name, dtypes=self.dtypes, options=self.options_model,
                          default_budget=default_budget, roofs=HVX_ROOFS, loop_orders=self.loop_orders,
                          filter_layouts=(("uint8", FILTER_LAYOUT),),
                          # not sigmoid in float: HVX has no exp or divide in qf32; uint8 looks any table up
                          activations=("none", "clamp", "hardsigmoid", "leaky_relu"), uint8_tables=True)

    def target_plan(self, config: Config, plan: Plan) -> HvxPlan:
        return hvx_plan(config, plan)

    def context(self, config: Config, plan: Plan, target_plan: HvxPlan) -> dict[str, Any]:
        # helpers: the functions kernels.py calls, by name; depthwise: the convs of the vector depthwise path
        return {"hvx": target_plan, "helpers": NAMES, "depthwise": depthwise_convs(config, plan, target_plan.ops)}

    network_file_names = (*NETWORK_FILES, *RUNTIME_FILES)

    def network_files(self, network: Network, jobs: Mapping[str, Job[HvxPlan]], weights: WeightsPlan
                      ) -> dict[str, str]:
        """network.c/.h: the kernels in order over a DDR arena and a VTCM region, weights from the weights file's
        data section (network.py)."""
        return network_driver(network, jobs, weights, self.network_flags(network).banner_line())

    def network_refusal(self, network: Network) -> str:
        return refusal(network)

    def network_note(self, network: Network, jobs: Mapping[str, Job[HvxPlan]]) -> str:
        return memory_note(network, jobs)

    def network_program(self, network: Network, jobs: Mapping[str, Job[HvxPlan]]) -> ProgramBuild:
        return network_program(network, jobs)  # clang-19 for the arch, freestanding; make run: qemu-hexagon

    def pack_weights(self, job: Job[HvxPlan], logical: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return pack_weights(job, logical)  # filters in the plan's layout and the weights' type, int32 biases

    def toolchain(self) -> tuple[ToolStatus, ...]:
        return status()

    def build_flags(self, config: Config) -> BuildFlags:
        return BuildFlags(compile=kernel_flags(hvx_options(config).arch))

    def compile(self, job: Job[HvxPlan], workdir: Path, device: str | None = None) -> HvxProgram:
        return compile_program(job, workdir)

    def run(self, executable: HvxProgram, args: KernelArgs, poison: int) -> np.ndarray:
        return self.run_poisoned(executable, args, (poison,))[poison]

    def run_poisoned(self, executable: HvxProgram, args: KernelArgs, poisons: tuple[int, ...]) -> dict[int, np.ndarray]:
        outputs, _, _ = executable.execute(args, poisons)  # one QEMU start for every poison
        return dict(zip(poisons, outputs))

    def run_traced(self, executable: HvxProgram, args: KernelArgs, poison: int) -> Traced | None:
        """A chain's run with each intermediate as the kernel stored it (a KG_TRACE_INTERMEDIATES build of the
        driver: one more QEMU start)."""
        if not executable.trace_shapes():
            return None
        (output,), _, intermediates = executable.execute(args, (poison,), trace=True)
        return Traced(output=output, intermediates=intermediates)

    def time(self, executable: HvxProgram, args: KernelArgs, repeat: int) -> tuple[Timings, ...]:
        return timings(executable, args)  # QEMU's counters are deterministic: one run says it all
