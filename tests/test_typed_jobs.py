"""Each target declares its plan type and compiled-job type once, as Target's parameters; the jobs it builds carry
that plan and its primitives are annotated with it (no `Any` re-annotated at each use)."""
from __future__ import annotations

import typing

import pytest

import kernelgen
from kernelgen.measure.primitives import Executable, Job
from kernelgen.targets import TARGETS
from kernelgen.targets.base import Target

CONFIGS = {"c": "seed000_3x3.yaml", "hvx": "hvx_seed000_3x3_u8.yaml", "opencl": "seed002_opencl_small.yaml",
           "vulkan": "seed002_vulkan_small.yaml"}


def _parameters(cls: type, generic: type) -> tuple:
    """The parameters `cls` gives `generic` or a generic subclass of it (GpuTarget[OpenCLPlan, OpenCLProgram])."""
    base = next(b for b in cls.__orig_bases__ if isinstance(typing.get_origin(b), type)
                and issubclass(typing.get_origin(b), generic))
    return typing.get_args(base)


def test_every_registered_target_is_covered():
    assert set(CONFIGS) == set(TARGETS)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_a_target_declares_its_plan_and_the_job_carries_it(name, repo):
    target = TARGETS[name]
    plan_type, compiled = _parameters(type(target), Target)
    assert isinstance(plan_type, type) and issubclass(compiled, Executable)
    assert _parameters(compiled, Executable) == (plan_type,)  # its executable holds a Job of the same plan
    config = kernelgen.load_config(repo / "configs" / CONFIGS[name])
    job = target.build(config, kernelgen.plan(config))
    assert type(job.target_plan) is plan_type
    hints = typing.get_type_hints(type(target).compile)
    assert hints["job"] == Job[plan_type] and hints["return"] is compiled
    timed = typing.get_type_hints(type(target).time)["executable"]  # its own, or the GPU layer's Program
    assert timed is compiled or (isinstance(timed, typing.TypeVar) and issubclass(compiled, timed.__bound__))
