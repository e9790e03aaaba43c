"""Issue 34: the CMake package (kernelgen/cmake). examples/cmake configures, builds and runs with Ninja and with
Unix Makefiles; a second build does nothing; touching the config or a template regenerates and recompiles nothing;
an edit that changes the kernel recompiles it and not the host; a bad config fails the build with kernelgen's
file:line:col: error:; a network manifest is a config like any other; toolchain files for aarch64 and Hexagon
generate and compile; and find_package's version check follows 0.x semantics.

Every build runs a copy of this checkout's kernelgen (its templates may be touched) through a small wrapper: the
`kernelgen` on PATH may be another install's, whose --cmake-dir is not this package, which the package refuses."""
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

import pytest
from click.testing import CliRunner
from builders import toolchain
from conftest import REPO, require_tools, requires_tool

from kernelgen.cli import main

ONNX = ("py:onnx", "py:onnxruntime")
GENERATORS = {"Ninja": ("cmake", "ninja", "gcc"), "Unix Makefiles": ("cmake", "make", "gcc")}
HOST_LINE = re.compile(r"^example_conv: 4096 outputs, sum -?\d+\.\d{4}, sum of \|x\| (\d+\.\d{4}), output\[0\] \S+$")
EM_AARCH64, EM_HEXAGON = 183, 164  # ELF e_machine


class Install(NamedTuple):
    bin: Path  # a folder holding `kernelgen`
    package: Path  # its CMake package (kernelgen --cmake-dir)
    root: Path  # the sources it runs


@pytest.fixture(scope="module")
def kernelgen(tmp_path_factory) -> Install:
    """This checkout's kernelgen, copied (so a test may touch its templates) and run on this interpreter by a
    `kernelgen` script; one copy for the module, whose bytecode the first run writes."""
    tmp_path = tmp_path_factory.mktemp("kernelgen")
    root = tmp_path / "kernelgen-src"
    for name in ("kernelgen", "templates", "schema"):
        shutil.copytree(REPO / name, root / name, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    folder = tmp_path / "bin"
    folder.mkdir()
    script = folder / "kernelgen"
    # a console script's shape: sys.path starts with the script's folder, never the working folder (which, for
    # `python -m kernelgen`, would put a checkout there ahead of the copy)
    script.write_text(f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(root)!r})\n"
                      f"from kernelgen.cli import main\nsys.exit(main())\n")
    script.chmod(0o755)
    return Install(folder, root / "kernelgen" / "cmake", root)


def _run(*command: str | Path, env: dict | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in command], capture_output=True, text=True, env=env, cwd=cwd, timeout=300)


def _configure(source: Path, build: Path, kernelgen: Install, *extra: str,
               generator: str = "Ninja") -> subprocess.CompletedProcess:
    return _run("cmake", "-S", source, "-B", build, "-G", generator, f"-Dkernelgen_DIR={kernelgen.package}",
                f"-DKERNELGEN_EXECUTABLE={kernelgen.bin / 'kernelgen'}", *extra)


def _build(build: Path, *extra: str) -> subprocess.CompletedProcess:
    return _run("cmake", "--build", build, "-j", "2", *extra)


def _mtimes(root: Path) -> dict[str, int]:
    """What a build makes: the generated files, stamps, objects, libraries and the program (not the files a
    reconfigure rewrites, which cmake's own dependencies decide)."""
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in root.rglob("*")
            if p.is_file() and (p.relative_to(root).parts[0] == "kernelgen" or p.suffix in {".stamp", ".o", ".a"}
                                or p.name == "host")}


def _touch(path: Path) -> None:
    time.sleep(0.05)  # newer than every stamp, and not in the future (the next stamp must be newer still)
    os.utime(path)


@pytest.mark.parametrize("generator", list(GENERATORS))
def test_the_example_project_builds_runs_and_rebuilds_only_what_changed(generator, kernelgen, tmp_path):
    require_tools(*GENERATORS[generator])
    examples = tmp_path / "examples"
    examples.mkdir()
    for name in ("conv.yaml", "host.c"):
        shutil.copy2(REPO / "examples" / name, examples / name)
    shutil.copytree(REPO / "examples" / "cmake", examples / "cmake", ignore=shutil.ignore_patterns("build*"))
    build, config = tmp_path / "build", examples / "conv.yaml"

    configured = _configure(examples / "cmake", build, kernelgen, generator=generator)
    assert configured.returncode == 0, configured.stdout + configured.stderr
    first = _build(build)
    assert first.returncode == 0, first.stdout + first.stderr
    line = _run(build / "host").stdout.strip()
    assert HOST_LINE.match(line) and float(HOST_LINE.match(line)[1]) > 0, line
    kernel = build / "kernelgen" / "example_kernels" / "example_conv"
    assert (kernel / "c" / "example_conv.c").is_file() and (kernel / "opencl" / "example_conv.cl").is_file()

    built = _mtimes(build)
    assert len([p for p in built if p.endswith(".o")]) == 2 and any(p.endswith(".stamp") for p in built)
    again = _build(build)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "kernelgen" not in again.stdout and _mtimes(build) == built  # a second build does nothing
    if generator == "Ninja":
        assert "ninja: no work to do." in again.stdout

    _touch(config)
    touched = _build(build)
    assert touched.returncode == 0, touched.stdout + touched.stderr
    assert "kernelgen: generating example_kernels" in touched.stdout  # the depfile's config is newer: regenerate
    after = _mtimes(build)
    assert {p for p in after if after[p] != built[p]} == {p for p in after if p.endswith(".stamp")}, \
        "touching the config rewrote or recompiled more than the stamp"
    assert _mtimes(build) == after and _build(build).returncode == 0 and _mtimes(build) == after

    template = kernelgen.root / "templates" / "c" / "kernel.c.j2"  # named by kernelgen's depfile
    _touch(template)
    retouched = _build(build)
    assert retouched.returncode == 0 and "kernelgen: generating example_kernels" in retouched.stdout
    assert {p for p, t in _mtimes(build).items() if t != after[p]} == {p for p in after if p.endswith(".stamp")}
    after = _mtimes(build)

    # an edit that changes the kernel's text but not its header: the kernel is recompiled and the program relinked,
    # the host's object (which includes the header) is not rebuilt
    config.write_text(config.read_text().replace("kernel: 1,", "kernel: 1, activation: relu,"))
    _touch(config)
    edited = _build(build)
    assert edited.returncode == 0, edited.stdout + edited.stderr
    changed = {p for p, t in _mtimes(build).items() if t != after.get(p)}
    assert {"kernelgen/example_kernels/example_conv/c/example_conv.c", "host"} <= changed, changed
    assert [p for p in changed if p.endswith(".o")] == [p for p in after if p.endswith("example_conv.c.o")], changed
    assert not any(p.endswith(".h") for p in changed), changed
    assert HOST_LINE.match(_run(build / "host").stdout.strip())

    config.write_text(config.read_text().replace("kernel: 3, pad: 1", "kernel: 3, pad: -1"))
    _touch(config)
    broken = _build(build)
    assert broken.returncode != 0
    line_number = next(i for i, text in enumerate(config.read_text().splitlines(), 1) if "pad: -1" in text)
    located = re.search(rf"{re.escape(str(config))}:{line_number}:\d+: error: ", broken.stdout + broken.stderr)
    assert located, broken.stdout + broken.stderr
    config.write_text(config.read_text().replace("pad: -1", "pad: 1"))
    fixed = _build(build)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert HOST_LINE.match(_run(build / "host").stdout.strip())

    # the example installs the OpenCL kernel and its launch description from the target's KERNELGEN_GPU_FILES
    installed = _run("cmake", "--install", build, "--prefix", tmp_path / "prefix")
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert sorted(p.name for p in (tmp_path / "prefix" / "share" / "kernelgen_example").iterdir()) == [
        "example_conv.cl", "example_conv.launch.json"]


def _project(folder: Path, body: str, languages: str = "C") -> Path:
    """A CMakeLists.txt; languages NONE where nothing compiles (no compiler to detect: faster)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "CMakeLists.txt").write_text(f"cmake_minimum_required(VERSION 3.20)\nproject(p {languages})\n{body}\n")
    return folder


@requires_tool("cmake", "ninja")
@pytest.mark.parametrize("request_, found", [("0.1", True), ("0.1.0 EXACT", True), ("0", False), ("0.2", False),
                                             ("1.0", False), ("0.0.9...0.3", True), ("0.2...<1.0", False),
                                             ("0.0.1...0.1.0", True), ("0.0.1...<0.1.0", False)])
def test_find_package_accepts_the_same_minor_before_1_0(request_, found, kernelgen, tmp_path):
    """0.x semantics: a minor release may break the config format or the generated API, so 0.1 accepts 0.1.z only
    (from 1.0 on, the same major); a range accepts what it holds."""
    source = _project(tmp_path / "p", f'find_package(kernelgen {request_} CONFIG)\n'
                                      f'message(STATUS "found=${{kernelgen_FOUND}} version=${{kernelgen_VERSION}}")',
                      "NONE")
    done = _configure(source, tmp_path / "b", kernelgen)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (f"found=1 version=0.1.0" if found else "found=0") in done.stdout, done.stdout + done.stderr


@requires_tool("cmake", "ninja")
def test_find_package_refuses_a_kernelgen_of_another_install(kernelgen, tmp_path):
    other = tmp_path / "other" / "kernelgen"
    other.parent.mkdir()
    other.write_text("#!/bin/sh\necho /somewhere/else/kernelgen/cmake\n")
    other.chmod(0o755)
    source = _project(tmp_path / "p", "find_package(kernelgen 0.1 CONFIG REQUIRED)", "NONE")
    done = _run("cmake", "-S", source, "-B", tmp_path / "b", "-G", "Ninja", f"-Dkernelgen_DIR={kernelgen.package}",
                f"-DKERNELGEN_EXECUTABLE={other}")
    assert done.returncode != 0
    message = " ".join(done.stderr.split())  # cmake wraps its messages
    assert (f"KERNELGEN_EXECUTABLE={other} belongs to the kernelgen whose CMake package is "
            f"/somewhere/else/kernelgen/cmake, not to this one ({kernelgen.package})") in message, done.stderr


TOOLCHAINS = {
    # No aarch64 sysroot here: freestanding objects and static libraries only, nothing linked. The find modes are
    # the NDK's: packages, libraries and headers only inside the sysroot, programs (kernelgen) on the build machine.
    "aarch64": """set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER clang-19)
set(CMAKE_C_COMPILER_TARGET aarch64-linux-gnu)
set(CMAKE_C_FLAGS_INIT "-ffreestanding")
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)
set(CMAKE_FIND_ROOT_PATH "${CMAKE_CURRENT_LIST_DIR}/sysroot")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
""",
    # The flags kernelgen's own Hexagon toolchain compiles with (targets/hvx/toolchain.py), the arch of the configs
    "hexagon": """set(CMAKE_SYSTEM_NAME Generic)
set(CMAKE_SYSTEM_PROCESSOR hexagon)
set(CMAKE_C_COMPILER clang-19)
set(CMAKE_C_COMPILER_TARGET hexagon)
set(CMAKE_C_FLAGS_INIT "-mcpu=hexagonv73 -ffreestanding -fno-stack-protector")
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)
""",
}


def _machines(archive: Path) -> set[int]:
    """The ELF e_machine of every object in a static library (ar format: 60-byte member headers)."""
    data, machines, at = archive.read_bytes(), set(), 8
    while at + 60 <= len(data):
        name, size = data[at:at + 16].decode().strip(), int(data[at + 48:at + 58].decode().strip())
        body = data[at + 60:at + 60 + size]
        if body[:4] == b"\x7fELF":
            machines.add(int.from_bytes(body[18:20], "little"))
        at += 60 + size + size % 2
    return machines


@requires_tool("cmake", "ninja", "clang-19")
@pytest.mark.parametrize("machine", list(TOOLCHAINS))
def test_a_cross_toolchain_generates_on_the_build_machine_and_compiles_for_the_target(machine, kernelgen,
                                                                                      tmp_path):
    """kernelgen is found on PATH (with -Dkernelgen_DIR, as the NDK's package mode ONLY needs) and runs here; the c
    kernels compile for the target; the hvx libraries are built by `all` for Hexagon only."""
    source = _project(tmp_path / "p", """find_package(kernelgen 0.1 CONFIG REQUIRED)
kernelgen_add_kernels(float_kernels CONFIGS conv.yaml TARGETS c hvx)
kernelgen_add_kernels(u8_kernels CONFIGS u8.yaml)""")
    shutil.copy2(REPO / "examples" / "conv.yaml", source / "conv.yaml")
    shutil.copy2(REPO / "configs" / "hvx_seed000_3x3_u8.yaml", source / "u8.yaml")
    toolchain = tmp_path / f"{machine}.cmake"
    toolchain.write_text(TOOLCHAINS[machine])
    (tmp_path / "sysroot").mkdir()
    env = {**os.environ, "PATH": f"{kernelgen.bin}{os.pathsep}{os.environ['PATH']}"}
    build = tmp_path / "b"
    configured = _run("cmake", "-S", source, "-B", build, "-G", "Ninja", f"-DCMAKE_TOOLCHAIN_FILE={toolchain}",
                      f"-Dkernelgen_DIR={kernelgen.package}", "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON", env=env)
    assert configured.returncode == 0, configured.stdout + configured.stderr
    cache = (build / "CMakeCache.txt").read_text()
    assert f"KERNELGEN_EXECUTABLE:FILEPATH={kernelgen.bin / 'kernelgen'}" in cache
    built = _run("cmake", "--build", build, "-j", "2", env=env)
    assert built.returncode == 0, built.stdout + built.stderr
    expected = EM_AARCH64 if machine == "aarch64" else EM_HEXAGON
    assert _machines(build / "libfloat_kernels.a") == {expected}
    hvx = [build / "libfloat_kernels_hvx.a", build / "libu8_kernels_hvx.a"]
    if machine == "hexagon":
        assert all(_machines(library) == {EM_HEXAGON} for library in hvx)
    else:
        assert not any(library.exists() for library in hvx)  # not in `all` off Hexagon: its intrinsics need one
    assert (build / "kernelgen" / "u8_kernels" / "hvx_seed000_3x3_u8" / "hvx" / "hvx_seed000_3x3_u8.c").is_file()
    # the c kernel keeps its flags but the build machine's CPU (-march=native would be this host's or an error)
    commands = _compile_commands(build)
    assert _flags_of(commands, "example_conv/c/example_conv.c")[-2:] == ["-O3", "-ffp-contract=fast"]
    assert "-march=native" not in _flags_of(commands, "example_conv/c/example_conv.c")
    if machine == "hexagon":  # the hvx kernel the arch its config planned for (v73), whatever the toolchain's
        assert _flags_of(commands, "hvx_seed000_3x3_u8/hvx/hvx_seed000_3x3_u8.c")[-4:] == [
            "-mcpu=hexagonv73", "-mhvx", "-mhvx-length=128b", "-O2"]


def _compile_commands(build: Path) -> list[dict]:
    import json

    return json.loads((build / "compile_commands.json").read_text())


def _flags_of(commands: list[dict], file: str) -> list[str]:
    """The compile command of the one source whose path ends in `file`, as arguments, without -o/-c and their files."""
    import shlex

    [command] = [c["command"] for c in commands if c["file"].endswith("/" + file)]
    words = shlex.split(command)
    return [w for i, w in enumerate(words) if w not in ("-o", "-c") and words[i - 1] not in ("-o", "-c")]


@requires_tool("cmake", "ninja", "gcc", *ONNX)
def test_a_network_manifest_is_a_config_like_any_other(kernelgen, tmp_path):
    """network.yaml from `kernelgen import`: every kernel and the network's driver in one library, whose include
    folders are every kernel's (network.c includes each kernel's header); editing a kernel's config is a configure
    dependency (its name and targets decide the files)."""
    import onnx
    import onnx_models

    model = tmp_path / "sr.onnx"
    onnx.save(onnx_models.small_resnet(), str(model))
    imported = CliRunner().invoke(main, ["import", str(model), "-o", str(tmp_path / "sr")])
    assert imported.exit_code == 0, imported.output
    source = _project(tmp_path / "p", f"""find_package(kernelgen 0.1 CONFIG REQUIRED)
kernelgen_add_kernels(net CONFIGS {tmp_path / 'sr' / 'network.yaml'} TARGETS c)
get_target_property(outputs net KERNELGEN_OUTPUTS)
list(LENGTH outputs count)
message(STATUS "net: ${{count}} files")""")
    build = tmp_path / "b"
    configured = _configure(source, build, kernelgen, "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON")
    assert configured.returncode == 0, configured.stdout + configured.stderr
    listed = CliRunner().invoke(main, ["build", str(tmp_path / "sr" / "network.yaml"), "--target", "c", "-o",
                                       str(build / "kernelgen" / "net"), "--list-outputs"])
    assert f"net: {len(listed.output.split())} files" in configured.stdout
    built = _build(build)
    assert built.returncode == 0, built.stdout + built.stderr
    objects = {p.name for p in (build / "CMakeFiles" / "net.dir").rglob("*.o")}
    assert "stem.c.o" in objects and "network.c.o" not in objects, objects
    assert {p.name for p in (build / "CMakeFiles" / "net_network.dir").rglob("*.o")} == {"network.c.o"}
    assert "compile it with" not in built.stdout + built.stderr  # kernelgen's advice is for a shell, not a build
    commands = _compile_commands(build)
    for file in ("stem/c/stem.c", "sr/c/network.c"):  # the kernels and their driver as validate built them
        assert _flags_of(commands, file)[-3:] == ["-O3", "-march=native", "-ffp-contract=fast"], file
    assert not list(build.glob("sr_run*"))  # a host step (the MaxPool with indices): no program, and a note says so


@requires_tool("cmake", "ninja", "gcc", *ONNX)
@pytest.mark.parametrize("embed", ["", "EMBED_WEIGHTS"])
def test_a_network_without_host_steps_gives_its_program(embed, kernelgen, tmp_path):
    """<name>_network (network.c, and with EMBED_WEIGHTS the weights compiled in) and <network>_run, built with the
    kernels' flags; the program, run from another folder, reads the weights copied beside it (or its own) and
    matches onnxruntime on the model's input."""
    import numpy as np
    import onnxruntime
    from test_network_weights import import_classifier

    manifest = import_classifier(tmp_path)
    source = _project(tmp_path / "p", f"""find_package(kernelgen 0.1 CONFIG REQUIRED)
kernelgen_add_kernels(net CONFIGS {manifest} {embed})""")
    build = tmp_path / "b"
    configured = _configure(source, build, kernelgen, "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON")
    assert configured.returncode == 0, configured.stdout + configured.stderr
    built = _build(build)
    assert built.returncode == 0, built.stdout + built.stderr
    folder = build / "kernelgen" / "net" / "classifier" / "c"
    assert (folder / "classifier_weights.c").is_file() == bool(embed)
    commands = _compile_commands(build)
    for file in ("classifier/c/network.c", "classifier/c/classifier_run.c"):
        assert _flags_of(commands, file)[-3:] == ["-O3", "-march=native", "-ffp-contract=fast"], file
    assert (build / "classifier.weights").read_bytes() == (folder / "classifier.weights").read_bytes()
    if embed:
        (build / "classifier.weights").unlink()  # the program must use the copy built into it

    session = onnxruntime.InferenceSession(str(tmp_path / "classifier.onnx"), providers=["CPUExecutionProvider"])
    feed = session.get_inputs()[0]
    x = np.random.default_rng(34).standard_normal([int(d) for d in feed.shape]).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    ran = _run(build / "classifier_run", "--repeat", "3", tmp_path / "x.npy", tmp_path / "y.npy", cwd=tmp_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert re.search(r"\d ms", ran.stdout + ran.stderr), ran.stdout + ran.stderr
    expected = session.run(None, {feed.name: x})[0]
    got = np.load(tmp_path / "y.npy")
    assert got.shape == expected.shape and got.dtype == np.float32
    # float32 through a few convs in another order of sums: the network check's 1e-4 of the largest magnitude
    assert np.abs(got - expected).max() <= 1e-4 * np.abs(expected).max()


class GpuProgram(NamedTuple):
    tools: tuple[str, ...]  # what generates it and runs it here (PoCL, lavapipe), besides cmake, ninja, gcc, onnx
    package: str  # the find_package() giving its loader
    debian: str  # the package holding the loader and headers
    cache: str  # what it writes beside itself at its first start
    cache_is_folder: bool


GPU_PROGRAMS = {
    "opencl": GpuProgram(toolchain("opencl"), package="OpenCL", debian="ocl-icd-opencl-dev",
                         cache="classifier.clcache", cache_is_folder=True),
    "vulkan": GpuProgram(toolchain("vulkan"), package="Vulkan", debian="libvulkan-dev",
                         cache="classifier.vkcache", cache_is_folder=False)}


@pytest.mark.parametrize("gpu", list(GPU_PROGRAMS))
def test_a_gpu_network_gives_its_program_in_a_folder_of_its_own(gpu, kernelgen, tmp_path):
    """<name>_<gpu>_network (network.c over the API's loader, linking OpenCL::OpenCL or Vulkan::Vulkan) and
    <network>_<gpu>_run, written as <gpu>/<network>_run with that target's weights beside it; run from another
    folder on PoCL or lavapipe, it matches onnxruntime, writes its cache beside itself, and starts warm from it."""
    program_kind = GPU_PROGRAMS[gpu]
    require_tools("cmake", "ninja", "gcc", *program_kind.tools, *ONNX)
    import numpy as np
    import onnxruntime
    from test_network_weights import import_classifier

    manifest = import_classifier(tmp_path, "net", gpu)
    source = _project(tmp_path / "p", f"""find_package(kernelgen 0.1 CONFIG REQUIRED)
kernelgen_add_kernels(net CONFIGS {manifest})""")
    build = tmp_path / "b"
    configured = _configure(source, build, kernelgen)
    assert configured.returncode == 0, configured.stdout + configured.stderr
    built = _build(build, "--target", f"classifier_{gpu}_run")
    assert built.returncode == 0, built.stdout + built.stderr
    folder = build / "kernelgen" / "net" / "classifier" / gpu
    assert {p.name for p in (build / "CMakeFiles" / f"net_{gpu}_network.dir").rglob("*.o")} == {"network.c.o"}
    program = build / gpu / "classifier_run"
    assert (build / gpu / "classifier.weights").read_bytes() == (folder / "classifier.weights").read_bytes()
    session = onnxruntime.InferenceSession(str(tmp_path / "classifier.onnx"), providers=["CPUExecutionProvider"])
    feed = session.get_inputs()[0]
    x = np.random.default_rng(34).standard_normal([int(d) for d in feed.shape]).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    ran = _run(program, tmp_path / "x.npy", tmp_path / "y.npy", cwd=tmp_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    cache = build / gpu / program_kind.cache
    assert "classifier: cold start" in ran.stdout, ran.stdout
    assert (cache.is_dir() if program_kind.cache_is_folder else cache.is_file()), sorted((build / gpu).iterdir())
    expected = session.run(None, {feed.name: x})[0]
    got = np.load(tmp_path / "y.npy")
    # float32 on both sides: the network check's 1e-4 of the largest magnitude
    assert got.shape == expected.shape and np.abs(got - expected).max() <= 1e-4 * np.abs(expected).max()
    again = _run(program, tmp_path / "x.npy", tmp_path / "y2.npy", cwd=tmp_path)
    assert again.returncode == 0 and "classifier: warm start" in again.stdout, again.stdout + again.stderr


@pytest.mark.parametrize("gpu", list(GPU_PROGRAMS))
def test_a_gpu_network_without_its_loader_fails_the_configure_naming_what_to_install(gpu, kernelgen, tmp_path):
    program_kind = GPU_PROGRAMS[gpu]
    require_tools("cmake", "ninja", "gcc", *program_kind.tools, *ONNX)
    from test_network_weights import import_classifier

    manifest = import_classifier(tmp_path, "net", gpu)
    source = _project(tmp_path / "p", f"""find_package(kernelgen 0.1 CONFIG REQUIRED)
kernelgen_add_kernels(net CONFIGS {manifest})""")
    # what a machine without the headers and loader sees: CMake's find module finding nothing
    done = _configure(source, tmp_path / "b", kernelgen, f"-DCMAKE_DISABLE_FIND_PACKAGE_{program_kind.package}=ON")
    assert done.returncode != 0
    message = " ".join(done.stderr.split())  # cmake wraps its messages
    assert re.search(rf"kernelgen_add_kernels\(net\): the {gpu} network driver needs the {program_kind.package} "
                     rf"headers and [A-Z ]*loader \(Debian: {program_kind.debian}\), which find_package\(\) did not "
                     rf"find", message), done.stderr


@requires_tool("cmake", "ninja")
@pytest.mark.parametrize("call, message", [
    ("kernelgen_add_kernels(k CONFIGS conv.yaml TARGET c)", "CONFIGS names TARGET, which is no file: a misspelt "
                                                            "keyword?"),
    ("kernelgen_add_kernels(k OUTPUT_DIR a b CONFIGS conv.yaml)", "kernelgen_add_kernels(k): unknown arguments: b"),
    ("kernelgen_add_kernels(k TARGETS c)", "kernelgen_add_kernels(k): CONFIGS names no file"),
    ("kernelgen_add_kernels(k CONFIGS missing.yaml)", "cannot read config"),
    ("kernelgen_add_kernels(k CONFIGS conv.yaml DEVICE nowhere)", "Invalid value for '--device'"),
    ("kernelgen_add_kernels(k CONFIGS conv.yaml TARGETS cuda)", "unknown target 'cuda'"),
    ("kernelgen_add_kernels(k CONFIGS conv.yaml)\nkernelgen_add_kernels(k2 CONFIGS conv.yaml OUTPUT_DIR kernelgen/k)",
     "which another config writes too"),
    ("add_library(k INTERFACE)\nkernelgen_add_kernels(k CONFIGS conv.yaml)", "a target named k exists already"),
])
def test_a_wrong_call_or_config_fails_the_configure_naming_it(call, message, kernelgen, tmp_path):
    source = _project(tmp_path / "p", f"find_package(kernelgen 0.1 CONFIG REQUIRED)\n{call}")
    shutil.copy2(REPO / "examples" / "conv.yaml", source / "conv.yaml")
    done = _configure(source, tmp_path / "b", kernelgen)
    assert done.returncode != 0
    assert message in " ".join(done.stderr.split()), done.stderr


@requires_tool("cmake", "ninja", "glslangValidator")
def test_gpu_only_kernels_are_written_by_all_and_listed_in_properties(kernelgen, tmp_path):
    """No c target: <name> is an interface library carrying the properties; the SPIR-V modules are byproducts like
    the sources (a declared file the build did not write would make every build run kernelgen again)."""
    source = _project(tmp_path / "p", """find_package(kernelgen 0.1 CONFIG REQUIRED)
kernelgen_add_kernels(gpu CONFIGS conv.yaml TARGETS opencl vulkan)
get_target_property(type gpu TYPE)
get_target_property(sources gpu KERNELGEN_GPU_SOURCES)
get_target_property(files gpu KERNELGEN_GPU_FILES)
message(STATUS "gpu: ${type}")
message(STATUS "sources: ${sources}")
message(STATUS "files: ${files}")""")
    shutil.copy2(REPO / "examples" / "conv.yaml", source / "conv.yaml")
    build = tmp_path / "b"
    configured = _configure(source, build, kernelgen)
    assert configured.returncode == 0, configured.stdout + configured.stderr
    lines = dict(line[3:].split(": ", 1) for line in configured.stdout.splitlines() if line.startswith("-- ")
                 and line[3:].split(":")[0] in {"gpu", "sources", "files"})
    folder = build / "kernelgen" / "gpu" / "example_conv"
    sources = [folder / "opencl" / "example_conv.cl", folder / "vulkan" / "example_conv.comp",
               folder / "vulkan" / "example_conv.op1.spv", folder / "vulkan" / "example_conv.op2.spv"]
    assert lines["gpu"] == "INTERFACE_LIBRARY"
    assert sorted(lines["sources"].split(";")) == sorted(map(str, sources))
    launch = [folder / "opencl" / "example_conv.launch.json", folder / "vulkan" / "example_conv.dispatch.txt"]
    assert sorted(lines["files"].split(";")) == sorted(map(str, [*sources, *launch]))
    built = _build(build)
    assert built.returncode == 0, built.stdout + built.stderr
    assert all(path.is_file() for path in sources)
    assert "ninja: no work to do." in _build(build).stdout


@requires_tool("cmake", "ninja", "gcc")
def test_each_config_is_its_own_step_so_touching_one_regenerates_only_it(kernelgen, tmp_path):
    source = _project(tmp_path / "p", """find_package(kernelgen 0.1 CONFIG REQUIRED)
kernelgen_add_kernels(k CONFIGS conv.yaml other.yaml TARGETS c)""")
    conv = (REPO / "examples" / "conv.yaml").read_text()
    (source / "conv.yaml").write_text(conv)
    (source / "other.yaml").write_text(conv.replace("name: example_conv", "name: other_conv"))
    build = tmp_path / "b"
    assert _configure(source, build, kernelgen).returncode == 0
    first = _build(build)
    assert first.returncode == 0 and first.stdout.count("kernelgen: generating k from") == 2, first.stdout
    _touch(source / "other.yaml")
    again = _build(build)
    assert again.returncode == 0, again.stdout + again.stderr
    assert re.findall(r"kernelgen: generating k from (\S+)", again.stdout) == ["other.yaml"], again.stdout


@requires_tool("cmake", "ninja", "gcc")
def test_a_configs_own_flags_and_openmp_reach_its_sources_and_the_programs_linking_them(kernelgen, tmp_path):
    """c.cflags replace the default flags on that config's sources only; threads add -fopenmp to its sources and,
    as a usage requirement, to the link of a program that uses the library (which then runs)."""
    source = _project(tmp_path / "p", """find_package(kernelgen 0.1 CONFIG REQUIRED)
kernelgen_add_kernels(k CONFIGS conv.yaml threaded.yaml TARGETS c)
add_executable(host host.c)
target_link_libraries(host PRIVATE k)""")
    conv = (REPO / "examples" / "conv.yaml").read_text()
    (source / "conv.yaml").write_text(conv)
    (source / "threaded.yaml").write_text(conv.replace("name: example_conv", "name: threaded_conv")
                                          + "c: {cflags: [-O2, -fno-tree-vectorize], threads: 2}\n")
    shutil.copy2(REPO / "examples" / "host.c", source / "host.c")
    build = tmp_path / "b"
    configured = _configure(source, build, kernelgen, "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON")
    assert configured.returncode == 0, configured.stdout + configured.stderr
    built = _build(build)
    assert built.returncode == 0, built.stdout + built.stderr
    commands = _compile_commands(build)
    assert _flags_of(commands, "example_conv/c/example_conv.c")[-3:] == ["-O3", "-march=native", "-ffp-contract=fast"]
    assert _flags_of(commands, "threaded_conv/c/threaded_conv.c")[-3:] == ["-O2", "-fno-tree-vectorize", "-fopenmp"]
    assert "-fopenmp" not in _flags_of(commands, "host.c")  # the host's own sources keep their flags
    link = (build / "build.ninja").read_text().split("build host:")[1].split("\n\n")[0]
    assert "-fopenmp" in link, link
    assert HOST_LINE.match(_run(build / "host").stdout.strip())


# clang 19 on an AVX10.1 core, played by gcc: -march=native warns (an error under -Werror) unless the quirk flag
# silences it; the flag itself is clang's, so the stand-in drops it before calling gcc.
AVX10_CLANG = """#!/bin/bash
native=0 quiet=0 werror=0 args=()
for a in "$@"; do
  case "$a" in
    -march=native) native=1 ;;
    -Werror) werror=1 ;;
    -Wno-invalid-feature-combination) quiet=1; continue ;;
  esac
  args+=("$a")
done
if [ $native = 1 ] && [ $quiet = 0 ]; then
  echo "warning: invalid feature combination: +avx10.1-256; will be promoted to avx10.1-512 [-Winvalid-feature-combination]" >&2
  [ $werror = 1 ] && exit 1
fi
exec gcc "${args[@]}"
"""


@requires_tool("cmake", "ninja", "gcc")
def test_a_compiler_that_warns_about_its_reading_of_the_host_gets_the_flag_kernelgen_builds_with(kernelgen,
                                                                                                tmp_path):
    """As kernelgen's own c builds (targets/c/toolchain.native_quirks), the package asks the project's C compiler
    once whether -march=native builds quietly; a compiler that warns about its own host features (clang 19 on
    AVX10.1) gets -Wno-invalid-feature-combination beside it, so a -Werror build of the kernels passes."""
    compiler = tmp_path / "avx10-clang"
    compiler.write_text(AVX10_CLANG)
    compiler.chmod(0o755)
    source = _project(tmp_path / "p", """find_package(kernelgen 0.1 CONFIG REQUIRED)
kernelgen_add_kernels(k CONFIGS conv.yaml TARGETS c)
add_executable(host host.c)
target_link_libraries(host PRIVATE k)""")
    shutil.copy2(REPO / "examples" / "conv.yaml", source / "conv.yaml")
    shutil.copy2(REPO / "examples" / "host.c", source / "host.c")
    build = tmp_path / "b"
    configured = _configure(source, build, kernelgen, f"-DCMAKE_C_COMPILER={compiler}", "-DCMAKE_C_FLAGS=-Werror",
                            "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON")
    assert configured.returncode == 0, configured.stdout + configured.stderr
    built = _build(build)
    assert built.returncode == 0, built.stdout + built.stderr
    assert _flags_of(_compile_commands(build), "example_conv/c/example_conv.c")[-4:] == [
        "-O3", "-march=native", "-Wno-invalid-feature-combination", "-ffp-contract=fast"]
    assert HOST_LINE.match(_run(build / "host").stdout.strip())
