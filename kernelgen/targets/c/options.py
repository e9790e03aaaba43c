"""The `c:` block of a config: the compiler flags validate and bench build with, and OpenMP threads."""
from __future__ import annotations

from typing import Annotated, Union

from pydantic import Field, StringConstraints, conlist

from ...config import Config, options_of
from ...config.model import Count, StrictModel

NAME = "c"

# What a user building for this machine would pass: -O3 vectorizes the micro-kernels' unit-stride loops and
# -march=native lets them use the core's FMA units (without it x86-64 has no FMA at all). -ffp-contract=fast
# because -std=c99 (ISO mode) turns GCC's contraction of a * b + c into one FMA off; the float bound of
# validation (n unit roundoffs per sum) holds for fused and unfused sums alike.
DEFAULT_CFLAGS = ("-O3", "-march=native", "-ffp-contract=fast")
# Always passed, before the flags: the emitted code must be warning-free C99 whatever the flags.
CHECK_FLAGS = ("-std=c99", "-Wall", "-Wextra", "-Werror")

Flag = Annotated[str, StringConstraints(strict=True, min_length=2, pattern=r"^-\S+$")]


class CModel(StrictModel):
    """Options of the `c` target (issue 30: portable C near the core's peak)."""

    cflags: Union[conlist(Flag, min_length=1), None] = Field(
        default=None, description="a list of compiler flags, each starting with '-' (default: -O3 -march=native "
                                  "-ffp-contract=fast); -std=c99 -Wall -Wextra -Werror are always added")
    threads: Count = Field(
        default=1, description="a positive int: OpenMP threads over the output rows of each conv (default 1: no "
                               "OpenMP; more adds -fopenmp)")
    winograd: bool = Field(
        default=True, description="true or false: a lone 3x3 stride-1 conv that fits (winograd.py) computes by "
                                  "Winograd's F(2x2, 3x3), 2.25x fewer multiplies (default true)")


def c_options(config: Config) -> CModel:
    return options_of(config, NAME)


def cflags(options: CModel) -> tuple[str, ...]:
    """The flags the kernel is built with: the checks, then the config's (or the default) optimisation flags."""
    return (*CHECK_FLAGS, *speed_flags(options))


def speed_flags(options: CModel) -> tuple[str, ...]:
    """The config's (or the default) optimisation flags, and OpenMP's when it runs threads: what a user's build
    needs to get the kernel validate and bench measured (the checks are kernelgen's own)."""
    flags = tuple(options.cflags) if options.cflags is not None else DEFAULT_CFLAGS
    return (*flags, *(OPENMP if options.threads > 1 else ()))


OPENMP = ("-fopenmp",)
