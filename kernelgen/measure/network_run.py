"""A network validated end to end on one target, beside the kernel loops: each kernel step through the one
validation loop (validate.py) on its real input, the host steps in onnxruntime (kernelgen/network/execute.py), every
tensor compared with onnxruntime running the whole model; then the network's verdict. The command line prints what
this yields; nothing here prints."""
from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Mapping

import numpy as np

from ..config import Config
from ..errors import ConfigError, KernelgenError
from ..network import execute
from ..network.execute import Agreement, StepRun
from ..network.manifest import Network
from ..onnx.u8s8 import QuantOracle
from .primitives import Job, Primitives
from .program_run import ProgramRun, run_program
from .records import ValidationResult, not_built
from .run import checked_inputs
from .validate import validate_with_output

QUANTIZED = ("uint8", "int8")


@dataclass(frozen=True, slots=True, kw_only=True)
class NetworkVerdict:
    """The whole network's verdict on one target, from its steps' runs."""

    network: str
    target: str
    failed: bool
    stopped: str  # "stopped at <step>: <why>" when a kernel could not run here ("": every step ran)
    outputs: tuple[Agreement, ...]  # the network's outputs against the model's
    quantized: tuple[Agreement, ...]  # every uint8 tensor's agreement
    oracle: QuantOracle | None  # the session the uint8 tensors were held to (None: no uint8 tensor)
    program: ProgramRun | None = None  # the shipped program on the same input (None: not asked for)
    reference: str = ""  # how onnxruntime ran the whole model when not its default session (subgraph.session)

    @property
    def status(self) -> str:
        return ("FAIL" if self.failed else "pass") if not self.stopped else ("FAIL" if self.failed else "incomplete")

    @property
    def summary(self) -> str:
        text = (f"network {self.network} on {self.target}: {self.status}; "
                + (self.stopped or "; ".join(f"output {a.tensor!r} {a.text()}" for a in self.outputs)))
        if self.quantized:
            exact = sum(not a.max_abs for a in self.quantized)
            text += (f"; {exact} of {len(self.quantized)} uint8 tensors bit-exact"
                     + (f" (the rest: {next(a.why for a in self.quantized if a.max_abs)})"
                        if exact < len(self.quantized) else "")
                     + f"; oracle: {self._oracle_text}")
        text += f"; the model's run: {self.reference}" if self.reference else ""
        return text + (f"; {self.program.text()}" if self.program is not None else "")

    @property
    def _oracle_text(self) -> str:
        oracle = self.oracle
        return "" if oracle is None else oracle.text if oracle.why else oracle.name + " (its default session)"


def step_status(run: StepRun) -> tuple[str, bool]:
    """A step's status as the output names it (its kernel's record's, or a host step's agreement) and whether it
    failed."""
    record, agreed = run.record, all(a.passed for a in run.agreement)
    status = record.status.value if record is not None else ("pass" if agreed else "FAIL")
    return status, (record is not None and record.status.counts_as_failure) or not agreed


class NetworkValidation:
    """One network run end to end on one target from `seed`'s input. Iterating runs the steps in order, yielding
    each StepRun as it finishes (it stops after a kernel that cannot run here); `verdict()` then judges them."""

    def __init__(self, target: Primitives, network: Network, jobs: Mapping[str, Job], seed: int):
        """`jobs`: each kernel step's job for the target, by its config's name (api plans and builds them)."""
        self.target, self.network, self.jobs, self.seed = target, network, jobs, seed
        self.feeds = execute.network_input(network, seed)
        self.oracle = execute.network_oracle(network)  # one scan of the model's weights for everything below
        self.fallbacks: list[str] = []  # the whole model run without onnxruntime's fusions, and why
        self.expected = execute.reference(network, self.feeds, self.oracle, self.fallbacks)
        self.runs: list[StepRun] = []
        self.program: ProgramRun | None = None

    def run_program(self) -> ProgramRun | None:
        """The end-to-end verdict: the program `kernelgen build` writes for this target (its Makefile, `make run`)
        on the same input, against the whole model (program_run.py); None when the build writes no program."""
        # a quantized network's output is its last uint8 tensor dequantized: bit for bit the step-by-step run's
        stepwise = {t: v for run in self.runs for t, v in run.values.items()}
        quantized = any(s.convert == "dequantize" for s in self.network.steps) and all(
            t in stepwise for t in self.network.outputs)
        reference, against = (stepwise, "the step-by-step run") if quantized else (self.expected, "")
        with tempfile.TemporaryDirectory(prefix="kernelgen-program-") as folder:
            self.program = run_program(self.network, self.target, self.jobs, self.feeds, reference, Path(folder),
                                       against)
        return self.program

    def __iter__(self) -> Iterator[StepRun]:
        for run in execute.run_steps(self.network, self.feeds, self._kernel, self.expected, self.oracle):
            self.runs.append(run)
            yield run

    def _kernel(self, config: Config, arrays: dict[str, np.ndarray]
                ) -> tuple[np.ndarray | None, ValidationResult]:
        """A kernel step: its job validated on the step's input."""
        job = self.jobs[config.name]
        args = checked_inputs(config, job.plan, arrays)
        try:
            result, output = validate_with_output(self.target, job, self.seed, args)
            return output, result
        except ConfigError:
            raise
        except KernelgenError as error:
            return None, not_built(config.name, self.target.name, self.seed, error)

    def verdict(self) -> NetworkVerdict:
        """The network's verdict over the steps run so far."""
        failed = any(step_status(run)[1] for run in self.runs) or (self.program is not None and
                                                                    not self.program.passed)
        last = self.runs[-1] if self.runs else None
        stopped = next((f"stopped at {r.step.label}: {r.record.detail}" for r in self.runs
                        if not r.ran and r.record is not None), "")
        quantized = tuple(a for r in self.runs for a in r.agreement if a.dtype in QUANTIZED)
        return NetworkVerdict(network=self.network.name, target=self.target.name, failed=failed, stopped=stopped,
                              outputs=tuple(a for a in (last.agreement if last else ())
                                            if a.tensor in self.network.outputs),
                              quantized=quantized, oracle=self.oracle if quantized else None, program=self.program,
                              reference="; ".join(self.fallbacks))
