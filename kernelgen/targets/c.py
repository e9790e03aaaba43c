"""Portable C99: the plan's loop nest, literally, with caches carved from a workspace."""
from .base import OutputFile, Target

C = Target(
    name="c",
    summary="portable C99 (gcc), caches in a caller-provided workspace",
    files=(OutputFile(pattern="{name}.h", template="c/kernel.h.j2"),
           OutputFile(pattern="{name}.c", template="c/kernel.c.j2")),
)
