"""`validate --sources DIR`: a job whose kernel sources are the ones in a folder (as `kernelgen build` wrote them,
perhaps edited by hand) instead of the ones its config renders; the same plan, tensors, oracles and verdicts.

Only the kernel's sources may differ from what the config renders: the text a target compiles (.c and .h for c
and hvx, .cl for opencl, .comp for vulkan, whose SPIR-V is compiled again from the .comp read here). The other
files a target writes describe its launch (opencl's .launch.json, vulkan's .dispatch.txt); the launch itself
comes from the target's plan of the config, so such a file that differs from the rendered one means the folder
was built from another config or device profile, or edited where an edit has no effect: refused, as a folder
that lacks a file is. Compiled files build writes beside the sources (vulkan's .spv) are not read.

Every folder is resolved and read before anything runs: a refusal (exit 2) leaves nothing half done.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ..errors import KernelgenError
from .primitives import Job

# What targets compile; every other file a target writes must be as the config renders it.
KERNEL_SOURCES = (".c", ".h", ".cl", ".comp", ".S")
# Larger than any generated source by far; a file beyond it is not one `kernelgen build` wrote.
MAX_SOURCE_BYTES = 64 * 1024 * 1024


class SourcesError(KernelgenError):
    """The folder given to --sources does not hold what the config's target writes (a usage error: exit 2)."""

    exit_code = 2


def sources_folder(root: Path, config_name: str, target: str, names: tuple[str, ...]) -> Path:
    """Where a config's sources for `target` are under `root`: `root` itself (out/<name>/<target>/), its <target>/
    (out/<name>/), or its <name>/<target>/ (out/, what `build -o out/` wrote for several configs), the first that
    holds any of the files the target writes. Raises SourcesError when none does."""
    root = Path(root)
    if not root.is_dir():
        raise SourcesError(f"{root}: no such folder")
    if root.parent.name == config_name and (root.parent / "plan.txt").is_file() and root.name != target \
            and not (root / target).is_dir():
        # out/<name>/c/ (build's layout: plan.txt beside it) given for hvx: both write <name>.c and <name>.h, and one
        # target's C is not the other's
        raise SourcesError(f"{root} is where `kernelgen build` writes {config_name}'s {root.name} sources; the "
                           f"{target} target's are in {root.parent / target}/")
    for folder in (root / config_name / target, root / target, root):
        if folder.is_dir() and any((folder / name).is_file() for name in names):
            return folder
    raise SourcesError(f"{root} has no {', '.join(names)} (nor {root / target}/ or {root / config_name / target}/); "
                       f"`kernelgen build` writes {', '.join(names)} into <output>/{config_name}/{target}/")


def with_sources(job: Job, target: str, root: Path) -> Job:
    """The job with its files read from `root` (see sources_folder), the kernel sources as found there and every
    other file checked to be the one rendered. Raises SourcesError naming the folder and what it lacks."""
    names = tuple(job.files)
    folder = sources_folder(root, job.config.name, target, names)
    missing = [name for name in names if not (folder / name).is_file()]
    if missing:
        raise SourcesError(f"{folder} has no {', '.join(missing)}; `kernelgen build` writes {', '.join(names)} here "
                           f"for {job.config.name} on {target}")
    read = {name: _read(folder / name) for name in names}
    for name in names:
        if not name.endswith(KERNEL_SOURCES) and read[name] != job.files[name]:
            raise SourcesError(
                f"{folder / name} differs from what {job.config.path} renders for {target}: it describes the launch, "
                f"which comes from the config (only {', '.join(n for n in names if n.endswith(KERNEL_SOURCES))} may "
                f"be edited); was {folder} built from another config or with another --device?")
    edited = [name for name in names if read[name] != job.files[name]]
    origin = f"sources from {folder}/ ({', '.join(edited) + ' edited' if edited else 'as generated'})"
    return replace(job, files=read, origin=origin)


def _read(path: Path) -> str:
    size = path.stat().st_size
    if size > MAX_SOURCE_BYTES:
        raise SourcesError(f"{path}: {size:,} bytes, more than a kernel source holds ({MAX_SOURCE_BYTES:,})")
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as error:
        raise SourcesError(f"{path}: not UTF-8 text ({error.reason} at byte {error.start})") from None
