"""`<network>_run`: a network as a command-line program, written beside its driver (network.c) for a target that
can build one: `<network>_run.c` (templates/_common/program/main.c.j2: read the input .npy, load and check the
weights file, run, write the output .npy, print the median time), the small C headers it includes (kg_npy.h,
kg_weights.h), a Makefile whose default goal builds it and whose `run` goal runs it, and with --embed-weights the
weights file as a C array (`<network>_weights.c`).

The target says how its program compiles and runs (a ProgramBuild: its compiler, its kernels' flags, a runner such as
a simulator); the rest is the same for every target. A network a program cannot run alone (a host step, more than one
input or output, a dtype the .npy reader does not take) gets no program, and a note saying why.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

import jinja2
import numpy as np

from ..emit import TemplateError, environment, template_files
from ..version import __version__
from .arena import plan_arena
from .manifest import Network, Tensor
from .weights import ALIGNMENT, WeightsPlan, pack_network_weights, weights_file

if TYPE_CHECKING:
    from ..measure.primitives import Job

PROGRAM = "_common/program"
HEADERS = ("kg_npy.h", "kg_weights.h")  # copied as they are
NPY_DESCR = {"float32": "<f4", "uint8": "|u1"}  # the dtypes the program reads and writes, as numpy names them


@dataclass(frozen=True, slots=True, kw_only=True)
class ProgramBuild:
    """How a target's network program compiles and runs: what its Makefile says."""

    compiler: str  # CC
    flags: tuple[str, ...]  # CFLAGS: the program's and, unless kernel_flags says otherwise, each kernel's
    kernel_flags: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # by kernel: flags other than `flags`
    kernel_sources: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # by kernel: its .c files
    link: tuple[str, ...] = ("-lm",)  # LDLIBS
    driver_sources: tuple[str, ...] = ("network.c",)  # beside the program
    runner: str = ""  # what `make run` puts before ./<network>_run (a simulator and its options, then a space)
    main_template: str = f"{PROGRAM}/main.c.j2"  # a target's own may {% extends %} it
    clean: tuple[str, ...] = ()  # what `make clean` removes besides the program and its objects (a cache folder)
    main_values: Mapping[str, Any] = field(default_factory=dict)  # what the target's main template reads besides


@dataclass(frozen=True, slots=True, kw_only=True)
class NetworkBuild:
    """What one target writes for a whole network, in <network>/<target>/."""

    files: dict[str, str | bytes]  # by file name: the weights file, the driver, the program
    weights: WeightsPlan | None  # None: the target writes no network files
    program: bool  # whether the files hold the program (<network>_run.c and its Makefile)
    why: str  # what is missing and why ("" when the program is there)


def build_network(network: Network, target: Any, jobs: Mapping[str, Job], embed: bool = False) -> NetworkBuild:
    """The weights file (the target's pack_weights), the driver (its network_files) and, when the target builds one
    and the network can run alone, the program: the one sequence `kernelgen build` writes and validation runs."""
    if not target.network_file_names:
        return NetworkBuild(files={}, weights=None, program=False,
                            why=f"kernelgen writes no weights file, driver or program for the {target.name} target yet")
    refusal = target.network_refusal(network)
    if refusal:
        return NetworkBuild(files={}, weights=None, program=False, why=f"no {target.name} driver: {refusal}")
    plan, data = pack_network_weights(network, jobs, target)
    files: dict[str, str | bytes] = {f"{network.name}.weights": weights_file(plan, data)}
    files |= target.network_files(network, jobs, plan)
    build, why = target.network_program(network, jobs), why_no_program(network)
    if build is None or why:
        return NetworkBuild(files=files, weights=plan, program=False,
                            why=why or f"the {target.name} target writes no program")
    files |= program_files(network, target.name, build, plan, data, embed, target.network_flags(network).banner_line())
    return NetworkBuild(files=files, weights=plan, program=True, why="")


def arena_note(network: Network, jobs: Mapping[str, Job], workspace: Callable[[Job], int] | None = None) -> str:
    """A line about the arena network.c runs in; `workspace`: a kernel's bytes in it (by default its plan's)."""
    steps = {s.config.name: s.index for s in network.kernels}
    size = workspace or (lambda job: job.plan.workspace_bytes)
    arena = plan_arena(network, {steps[name]: size(job) for name, job in jobs.items()})
    return (f"{network.name}: network.c runs {len(network.steps)} steps over a {arena.size_bytes:,}-byte arena "
            f"(each tensor and workspace alone: {arena.naive_bytes:,} bytes; the most alive at once: "
            f"{arena.peak_bytes:,})")


def program_templates(build: ProgramBuild | None = None) -> tuple[str, ...]:
    """The template files the program depends on (depfiles)."""
    names = [f"{PROGRAM}/{n}" for n in ("main.c.j2", "Makefile.j2", "weights.c.j2", *HEADERS)]
    return tuple(str(p) for p in template_files([*names, *((build.main_template,) if build else ())]))


def program_names(network: Network, embed: bool) -> tuple[str, ...]:
    """The files program_files writes (build --list-outputs), when the network gets a program."""
    net = network.name
    return (f"{net}_run.c", *HEADERS, "Makefile", *((f"{net}_weights.c",) if embed else ()))


def why_no_program(network: Network) -> str:
    """Why the network cannot be a program on its own; "" when it can."""
    hosts = [s for s in network.steps if s.is_host]
    if hosts:
        return (f"{len(hosts)} host step(s) ({', '.join(dict.fromkeys(t for s in hosts for t in s.op_types))}), "
                f"which run in onnxruntime: call {network.name}_run from your own program with a host callback")
    if len(network.inputs) != 1 or len(network.outputs) != 1:
        return (f"{len(network.inputs)} inputs and {len(network.outputs)} outputs; the program reads one input .npy "
                f"and writes one output .npy")
    ends = [network.tensors[network.inputs[0]], network.tensors[network.outputs[0]]]
    odd = [t for t in ends if t.dtype not in NPY_DESCR]
    if odd:
        return f"its {odd[0].name!r} is {odd[0].dtype}; the program reads and writes {', '.join(NPY_DESCR)}"
    return ""


def program_files(network: Network, target: str, build: ProgramBuild, weights: WeightsPlan, data: bytes,
                  embed: bool, flags_line: str = "") -> dict[str, str]:
    """{file name: text} of the program, for the folder <network>/<target>/ beside network.c; `flags_line` in its
    .c files' banners (the folder's flags, as build --list-flags prints them)."""
    net = network.name
    source = network.tensors[network.inputs[0]]
    sink = network.tensors[network.outputs[0]]
    kernels = []
    for step in network.kernels:
        name = step.config.name
        for source_file in build.kernel_sources.get(name, (f"{name}.c",)):
            kernels.append(dict(
                folder=f"{name}/{target}", source=f"{name}/{target}/{source_file}", header=f"{name}/{target}/{name}.h",
                object=f"{Path(source_file).stem}.o", flags=" ".join(build.kernel_flags[name])
                if name in build.kernel_flags else "$(CFLAGS)"))
    headers = ["network.h", *dict.fromkeys(f"$(KERNELS)/{k['header']}" for k in kernels)]
    program_objects = [dict(object=f"{net}_run.o", source=f"{net}_run.c", headers=("network.h", *HEADERS))]
    program_objects += [dict(object=f"{Path(s).stem}.o", source=s, headers=headers) for s in build.driver_sources]
    if embed:
        program_objects.append(dict(object=f"{net}_weights.o", source=f"{net}_weights.c", headers=()))
    context: dict[str, Any] = dict(
        net=net, upper=net.upper(), target=target, compiler=build.compiler, flags=build.flags, link=build.link,
        runner=build.runner, clean=build.clean, kernels=kernels, program_objects=program_objects,
        objects=[o["object"] for o in program_objects],
        defines=[f"{net.upper()}_EMBEDDED_WEIGHTS"] if embed else [],
        input=_end(source), output=_end(sink), weights_alignment=ALIGNMENT,
        embedded_note=(" or, without --weights, the copy built into it (--embed-weights)" if embed else ""),
        **build.main_values)
    files = {f"{net}_run.c": _render(build.main_template, context, network, "c", flags_line),
             "Makefile": _render(f"{PROGRAM}/Makefile.j2", context, network, "make")}
    files |= {name: environment().get_template(f"{PROGRAM}/{name}").render(weights_alignment=ALIGNMENT)
              for name in HEADERS}
    if embed:
        whole = weights_file(weights, data)
        files[f"{net}_weights.c"] = _render(f"{PROGRAM}/weights.c.j2", {
            **context, "file_bytes": len(whole), "data_offset": len(whole) - len(data),
            "data_lines": c_bytes(whole)}, network, "c", flags_line)
    return dict(sorted(files.items()))


def _end(tensor: Tensor) -> dict[str, Any]:
    """The network's input or output as the program reads or writes it."""
    return dict(comment=tensor.name.replace("*/", "*\\/"), dtype=tensor.dtype, shape=tensor.shape,
                bytes=tensor.nbytes, descr=NPY_DESCR[tensor.dtype])


def c_bytes(data: bytes, per_line: int = 32) -> str:
    """`data` as C string literals of hex escapes, `  "\\x00\\x1f..."` a line of `per_line` bytes (the compiler joins
    them): much quicker to compile than an initializer list of numbers. Made with numpy, column by column: a
    network's weights are tens of megabytes."""
    if not data:
        return '  ""'
    values = np.frombuffer(data, np.uint8)
    rows = -(-len(values) // per_line)
    padded = np.zeros(rows * per_line, np.uint8)
    padded[:len(values)] = values
    digits = np.frombuffer(b"0123456789abcdef", np.uint8)
    escapes = np.empty((rows, per_line, 4), np.uint8)
    escapes[..., 0], escapes[..., 1] = ord("\\"), ord("x")
    escapes[..., 2] = digits[padded.reshape(rows, per_line) >> 4]
    escapes[..., 3] = digits[padded.reshape(rows, per_line) & 15]
    lines = np.empty((rows, 4 * per_line + 5), np.uint8)
    lines[:, :3] = np.frombuffer(b'  "', np.uint8)
    lines[:, 3:-2] = escapes.reshape(rows, 4 * per_line)
    lines[:, -2:] = np.frombuffer(b'"\n', np.uint8)
    text = lines.tobytes().decode("ascii")
    tail = len(values) - (rows - 1) * per_line  # the last line's bytes
    cut = len(text) - (4 * per_line + 5) + 3 + 4 * tail
    return text[:cut] + '"'


def _render(template: str, context: dict[str, Any], network: Network, kind: str, note: str = "") -> str:
    text = "\n".join([f"Generated by kernelgen {__version__} from {Path(network.path).name} with template {template}.",
                      "Do not edit: change the manifest, its configs or the template and run `kernelgen build`.",
                      *([note] if note else [])])
    banner = "".join(f"# {line}\n" for line in text.splitlines()).rstrip("\n") if kind == "make" else \
        "/* " + text.replace("\n", "\n   ").replace("*/", "*\\/") + " */"
    try:
        return environment().get_template(template).render(banner=banner, **context)
    except jinja2.TemplateError as error:
        raise TemplateError(f"{template}: {error}") from None
