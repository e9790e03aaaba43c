"""`make mesa-compilers`, second part: build Mesa's rusticl (OpenCL) with the freedreno and panfrost Gallium
drivers into kernelgen's cache folder, so that `kernelgen stats --target opencl --device adreno-7xx|adreno-6xx|
mali-valhall` can run their compilers over the opencl target's kernels without the GPUs (issue 47). The noop DRM
shims that stand in for the GPUs come from the first part (tools/mesa_compilers.py).

- Apt (as root): Debian's rustc-web / cargo-web 1.96 (bookworm-security: bookworm's rustc is 1.63), LLVM 15 with
  libclang, libclc and the SPIR-V translator (rusticl compiles OpenCL C with clang 15 -> SPIR-V -> NIR).
- bindgen >= 0.65 (bookworm has 0.60): trixie's librust-*-dev packages, pinned in
  kernelgen/targets/opencl/rusticl_pin.py, unpacked into a cargo directory source; cargo builds the small
  bindgen command line in tools/rusticl_bindgen offline from them.
- Mesa: the Vulkan part's pinned source tree; meson with only rusticl and the two Gallium drivers; ninja builds
  only libRusticlOpenCL.so and what it links.

`--dry-run` stops after meson and prints what `ninja -n` would build (tests the script without the hour of
compiling). KERNELGEN_CACHE_DIR moves the cache root (a fresh folder builds from scratch).
"""
from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import mesa_compilers as mesa  # noqa: E402  (tools/ is this script's folder)
from kernelgen.targets.opencl import rusticl_pin as pin  # noqa: E402
from mesa_compilers import Missing, _run  # noqa: E402

APT_PACKAGES = (*mesa.APT_PACKAGES, "rustc-web", "cargo-web", "llvm-15-dev", "libclang-15-dev",
                "libclang-cpp15-dev", "libclc-15", "libclc-15-dev", "libllvmspirvlib-15-dev", "spirv-tools")
PIP_PACKAGES = ("meson>=1.4", "mako>=0.8", "pyyaml>=5", "packaging>=20")  # rusticl uses meson 1.4's rust.bindgen
LLVM_CONFIG = "/usr/lib/llvm-15/bin/llvm-config"
RUSTC, CARGO = "/usr/bin/rustc", "/usr/bin/cargo"  # Debian's 1.96 (rustc-web), not whatever rustup put first
MESON_OPTIONS = ("-Dgallium-drivers=freedreno,panfrost", "-Dgallium-rusticl=true", "-Dvulkan-drivers=",
                 "-Dllvm=enabled", "-Dshared-llvm=enabled", "-Dtools=", "-Dplatforms=", "-Dglx=disabled",
                 "-Degl=disabled", "-Dgbm=disabled", "-Dopengl=false", "-Dgles1=disabled", "-Dgles2=disabled",
                 "-Dgallium-xa=disabled", "-Dvalgrind=disabled", "-Dlibunwind=disabled", "-Dlmsensors=disabled",
                 "-Dzstd=disabled", "-Dxmlconfig=disabled", "-Dvideo-codecs=", "-Dbuild-tests=false",
                 "-Dbuildtype=release", "-Db_ndebug=true", "--wrap-mode=nodownload")
BINDGEN_SOURCE = Path(__file__).resolve().parent / "rusticl_bindgen"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="configure, then print `ninja -n`'s step count")
    dry_run = parser.parse_args(argv).dry_run
    if pin.is_installed() and not dry_run:
        print(f"mesa-compilers: rusticl (freedreno, panfrost) in {pin.install_dir()}")
        return 0
    start = time.monotonic()
    try:
        mesa._apt_packages(APT_PACKAGES)
        python = mesa._tool_venv(pin.install_dir(), PIP_PACKAGES)
        source = mesa._source()
        bindgen = _bindgen()
        build, env = _configure(python, source, bindgen)
        if dry_run:
            steps = _dry_run(build, env)
            print(f"mesa-compilers: rusticl configured in {build}; ninja would run {steps} steps for "
                  f"{pin.LIBRARY}")
            return 0
        _run(["ninja", "-C", str(build), pin.LIBRARY], "ninja (rusticl)", pin.install_dir(), env)
        _install(build)
    except Missing as why:
        print(f"mesa-compilers: rusticl not built: {why}")
        return 1 if mesa.REQUIRED else 0
    print(f"mesa-compilers: built rusticl (freedreno, panfrost) in {time.monotonic() - start:.0f} s into "
          f"{pin.install_dir()}")
    return 0


def _bindgen() -> Path:
    """bindgen-cli 0.71.1 built offline by cargo from the pinned trixie crates."""
    folder = pin.install_dir()
    binary = folder / "bin" / "bindgen"
    if binary.is_file():
        return binary
    vendor = _vendor(folder / "vendor")
    cargo_home = folder / "cargo-home"
    cargo_home.mkdir(parents=True, exist_ok=True)
    # every crates.io dependency comes from the unpacked .debs: no index, no network
    (cargo_home / "config.toml").write_text(f'[source.crates-io]\nreplace-with = "debian"\n\n'
                                            f'[source.debian]\ndirectory = "{vendor}"\n')
    target = folder / "bindgen-target"
    env = os.environ | {"CARGO_HOME": str(cargo_home), "RUSTC": RUSTC}
    _run([CARGO, "build", "--release", "--offline", "--locked", "--manifest-path",
          str(BINDGEN_SOURCE / "Cargo.toml"), "--target-dir", str(target)], "cargo build (bindgen)", folder, env)
    binary.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(target / "release" / "bindgen", binary)
    shutil.rmtree(target)  # ~120 MB of intermediate objects
    return binary


def _vendor(vendor: Path) -> Path:
    """Each pinned crate package downloaded (sha256-checked) and its /usr/share/cargo/registry unpacked."""
    done = vendor / ".complete"
    if done.is_file():
        return vendor
    debs = pin.install_dir() / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    vendor.mkdir(parents=True, exist_ok=True)
    for path, sha256 in pin.CRATES:
        deb = _download(path, sha256, debs)
        with tempfile.TemporaryDirectory(dir=debs) as tmp:
            _run(["dpkg-deb", "-x", str(deb), tmp], f"unpacking {deb.name}", pin.install_dir())
            for crate in (Path(tmp) / "usr/share/cargo/registry").iterdir():
                if not (vendor / crate.name).exists():
                    shutil.copytree(crate, vendor / crate.name)
    done.write_text("\n".join(path for path, _ in pin.CRATES) + "\n")
    return vendor


def _download(path: str, sha256: str, folder: Path) -> Path:
    target = folder / Path(path).name
    if target.is_file() and _sha256(target.read_bytes()) == sha256:
        return target
    try:
        with urllib.request.urlopen(pin.POOL_URL + path, timeout=60) as response:
            data = response.read()
    except OSError as error:
        raise Missing(f"cannot download {pin.POOL_URL + path} ({error}); Debian may have replaced it: update "
                      f"the pin in {pin.__name__}") from None
    if _sha256(data) != sha256:
        raise Missing(f"{pin.POOL_URL + path} does not match its pinned sha256")
    partial = target.with_name(target.name + ".part")
    partial.write_bytes(data)
    partial.replace(target)
    return target


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _configure(python: Path, source: Path, bindgen: Path) -> tuple[Path, dict[str, str]]:
    folder = pin.install_dir()
    build = folder / "build"
    native = folder / "native.ini"
    # LLVM 15 (what libclc-15 and the SPIR-V translator are built against), not the host's default clang 19
    native.write_text(f"[binaries]\nllvm-config = '{LLVM_CONFIG}'\nrust = ['{RUSTC}']\nbindgen = '{bindgen}'\n")
    env = os.environ | {"PATH": f"{python.parent}{os.pathsep}{os.environ['PATH']}",
                        "LIBCLANG_PATH": "/usr/lib/llvm-15/lib"}  # the libclang bindgen loads at run time
    if not (build / "build.ninja").is_file():
        _run([str(python.parent / "meson"), "setup", str(build), str(source), "--native-file", str(native),
              *MESON_OPTIONS], "meson setup (rusticl)", folder, env)
    return build, env


def _dry_run(build: Path, env: dict[str, str]) -> int:
    done = subprocess.run(["ninja", "-C", str(build), "-n", pin.LIBRARY], capture_output=True, text=True, env=env)
    if done.returncode:
        raise Missing(f"ninja -n {pin.LIBRARY} failed: {(done.stdout + done.stderr).strip()[-300:]}")
    return sum(1 for line in done.stdout.splitlines() if line.startswith("["))


def _install(build: Path) -> None:
    """The library, and an ICD file naming it (OCL_ICD_VENDORS); the stamp last."""
    library = pin.installed_library()
    library.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(build / pin.LIBRARY, library)
    pin.icd_dir().mkdir(exist_ok=True)
    (pin.icd_dir() / "rusticl.icd").write_text(f"{library}\n")
    pin.stamp_path().write_text(f"rusticl {pin.DEBIAN_VERSION}\n")


if __name__ == "__main__":
    sys.exit(main())
