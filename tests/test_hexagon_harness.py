"""The Hexagon harness: clang-19 builds freestanding HVX programs with kernelgen's runtime,
qemu-hexagon runs them, results match numpy bit-exactly.

The C programs live in tests/data/hexagon. Each randomized test draws a fresh seed and
names it in its failure message.
"""
from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import pytest
from builders import toolchain
from conftest import REPO, requires_tool

from kernelgen.errors import ToolchainError
from kernelgen.targets.hvx import toolchain as hexagon

DATA = REPO / "tests" / "data" / "hexagon"
TOOLS = toolchain("hvx")


def fresh_rng() -> tuple[int, np.random.Generator]:
    seed = np.random.SeedSequence().entropy
    return seed, np.random.default_rng(seed)


# ---- without tools ---------------------------------------------------------------


def test_status_names_every_tool_and_never_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hexagon, "QEMU", "qemu-hexagon-kernelgen-missing")
    tools = {tool.name: tool for tool in hexagon.status()}
    assert set(tools) == {"clang-19", "ld.lld-19", "qemu-hexagon-kernelgen-missing"}
    missing = tools["qemu-hexagon-kernelgen-missing"]
    assert not missing.found and missing.version == ""
    assert missing.install_hint == "apt-get install clang-19 lld-19 qemu-user"
    for tool in tools.values():
        assert tool.found == bool(tool.version), tool


def test_missing_compiler_raises_with_install_hint(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(hexagon, "CLANG", "clang-kernelgen-missing")
    with pytest.raises(ToolchainError, match="apt-get install clang-19 lld-19 qemu-user"):
        hexagon.build([DATA / "counters.c"], tmp_path / "counters")


def test_unknown_arch_and_opt_level_are_rejected(tmp_path: Path) -> None:
    with pytest.raises(ToolchainError, match="v75"):
        hexagon.build([DATA / "counters.c"], tmp_path / "counters", arch="v75")
    with pytest.raises(ToolchainError, match="-Oz"):
        hexagon.build([DATA / "counters.c"], tmp_path / "counters", opt="-Oz")


def test_runtime_dir_copies_out_of_a_zipped_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    shipped = REPO / "templates" / "hvx" / "runtime"
    archive = tmp_path / "kernelgen.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        for name in (hexagon.RUNTIME_HEADER, *hexagon.RUNTIME_SOURCES):
            zipped.write(shipped / name, f"kernelgen/templates/hvx/runtime/{name}")
    package = zipfile.Path(archive, "kernelgen/templates/")
    monkeypatch.setattr(hexagon.resources, "files", lambda name: package)
    with hexagon.runtime_dir() as runtime:
        assert runtime != shipped
        for name in (hexagon.RUNTIME_HEADER, *hexagon.RUNTIME_SOURCES):
            assert (runtime / name).read_bytes() == (shipped / name).read_bytes()


def test_parse_counters_keys_by_label() -> None:
    stdout = (
        "hello\n"
        "kg_counters hvx packets=1008 instructions=2263 hvx_instructions=2002\n"
        "kg_counters scalar packets=508 instructions=1562 hvx_instructions=0\n"
    )
    assert hexagon.parse_counters(stdout) == {
        "hvx.packets": 1008,
        "hvx.instructions": 2263,
        "hvx.hvx_instructions": 2002,
        "scalar.packets": 508,
        "scalar.instructions": 1562,
        "scalar.hvx_instructions": 0,
    }
    with pytest.raises(ToolchainError, match="twice"):
        hexagon.parse_counters("kg_counters a packets=1\nkg_counters a packets=2\n")
    with pytest.raises(ToolchainError, match="malformed"):
        hexagon.parse_counters("kg_counters a packets=x\n")


# ---- build and run ---------------------------------------------------------------


def pack_32o4i(weights: np.ndarray) -> np.ndarray:
    """[O][K] -> [O/32][K/4][32][4]: one 128-byte HVX vector per (output block, input group)."""
    outputs, inputs = weights.shape
    return weights.reshape(outputs // 32, 32, inputs // 4, 4).transpose(0, 2, 1, 3).copy()


@requires_tool(*TOOLS)
@pytest.mark.parametrize("arch", ["v67", "v73"])  # v73 runs under QEMU 7.2 as -cpu v67
def test_vrmpy_matvec_matches_numpy(arch: str, tmp_path: Path) -> None:
    outputs, inputs = 96, 148  # 3 output vectors; 37 input groups, an odd count
    seed, rng = fresh_rng()
    weights = rng.integers(0, 256, size=(outputs, inputs), dtype=np.uint8)
    activations = rng.integers(0, 256, size=inputs, dtype=np.uint8)
    pack_32o4i(weights).tofile(tmp_path / "weights.bin")
    activations.tofile(tmp_path / "activations.bin")

    binary = hexagon.build(
        [DATA / "matvec_vrmpy.c"],
        tmp_path / "matvec_vrmpy",
        arch=arch,
        defines={"KG_O": outputs, "KG_K": inputs},
        extra_flags=("-Wall", "-Werror"),
    )
    hexagon.run(binary, ["weights.bin", "activations.bin", "out.bin"], cwd=tmp_path, arch=arch)

    got = np.fromfile(tmp_path / "out.bin", dtype=np.int32).reshape(2, outputs)
    wide = weights.astype(np.int64)
    want_unsigned = wide @ activations.astype(np.int64)
    want_signed = wide @ activations.view(np.int8).astype(np.int64)
    np.testing.assert_array_equal(got[0], want_unsigned, err_msg=f"ub*ub, seed={seed}")
    np.testing.assert_array_equal(got[1], want_signed, err_msg=f"ub*b, seed={seed}")


@requires_tool("clang-19")
def test_vrmpy_matvec_assembly_uses_vrmpy_without_spills() -> None:
    text = hexagon.assembly(DATA / "matvec_vrmpy.c", arch="v67", defines={"KG_O": 96, "KG_K": 148})
    assert ".w += vrmpy(" in text and ".uw += vrmpy(" in text
    assert hexagon.vector_spills(text) == 0


@requires_tool("clang-19")
def test_vector_spills_are_counted(tmp_path: Path) -> None:
    # 40 live accumulators against 32 HVX registers must spill.
    accumulators = range(40)
    source = tmp_path / "pressure.c"
    source.write_text(
        "#include <hexagon_types.h>\n#include <hvx_hexagon_protos.h>\n"
        "void f(HVX_Vector *out, const HVX_Vector *in, int n) {\n"
        + "".join(f"  HVX_Vector a{j} = Q6_V_vzero();\n" for j in accumulators)
        + "  for (int i = 0; i < n; i++) {\n"
        + "".join(f"    a{j} = Q6_Vw_vrmpyacc_VwVubRb(a{j}, in[40 * i + {j}], i);\n"
                  for j in accumulators)
        + "  }\n"
        + "".join(f"  out[{j}] = a{j};\n" for j in accumulators)
        + "}\n"
    )
    assert hexagon.vector_spills(hexagon.assembly(source, arch="v67")) > 0


@requires_tool(*TOOLS)
def test_counters_count_packets_instructions_and_hvx(tmp_path: Path) -> None:
    iterations = 1000
    binary = hexagon.build(
        [DATA / "counters.c"], tmp_path / "counters", defines={"KG_N": iterations}
    )
    counters = hexagon.parse_counters(hexagon.run(binary, [], cwd=tmp_path).stdout)

    # Two reads back to back: the reads themselves plus spilling the first snapshot.
    assert 0 < counters["empty.packets"] <= counters["empty.instructions"] < 20
    assert counters["empty.hvx_instructions"] == 0
    # c22 counts every HVX instruction: per iteration one vmem load and one vrmpy,
    # plus the vxor that zeroes the accumulator and the final store (2002 with clang-19).
    assert 2 * iterations <= counters["hvx.hvx_instructions"] <= 2 * iterations + 10
    # c20 counts packets, c21 the instructions in them (HVX included).
    assert counters["hvx.hvx_instructions"] < counters["hvx.instructions"]
    assert iterations <= counters["hvx.packets"] < counters["hvx.instructions"]
    assert counters["scalar.hvx_instructions"] == 0
    assert iterations // 2 <= counters["scalar.packets"] < counters["scalar.instructions"]


@requires_tool(*TOOLS)
def test_integer_division_links_and_truncates_like_c(tmp_path: Path) -> None:
    seed, rng = fresh_rng()
    pairs32 = edge_and_random_pairs(rng, bits=32)
    pairs64 = edge_and_random_pairs(rng, bits=64)
    count = len(pairs32)
    np.array(pairs32, dtype=np.uint32).tofile(tmp_path / "pairs32.bin")
    np.array(pairs64, dtype=np.uint64).tofile(tmp_path / "pairs64.bin")

    binary = hexagon.build([DATA / "divide.c"], tmp_path / "divide", defines={"KG_N": count})
    hexagon.run(binary, ["pairs32.bin", "pairs64.bin", "out.bin"], cwd=tmp_path)

    raw = (tmp_path / "out.bin").read_bytes()
    got32 = np.frombuffer(raw[: count * 16], dtype=np.uint32).reshape(count, 4)
    got64 = np.frombuffer(raw[count * 16 :], dtype=np.uint64).reshape(count, 4)
    for got, pairs, bits in ((got32, pairs32, 32), (got64, pairs64, 64)):
        want = np.array([c_quotients(a, b, bits) for a, b in pairs], dtype=got.dtype)
        np.testing.assert_array_equal(got, want, err_msg=f"{bits}-bit, seed={seed}")


def edge_and_random_pairs(rng: np.random.Generator, *, bits: int) -> list[tuple[int, int]]:
    """(numerator, denominator) bit patterns: edge cases, small and full-range divisors."""
    top = 1 << bits
    smallest = 1 << (bits - 1)  # the most negative signed value
    pairs = [(0, 1), (7, 1), (top - 1, 1), (top - 1, top - 1), (5, 7), (smallest, 1),
             (smallest, smallest), (smallest, 3), (top - 7, 2), (7, top - 2), (top - 7, top - 2)]
    for _ in range(100):
        numerator = int(rng.integers(0, top, dtype=np.uint64 if bits == 64 else np.int64))
        if rng.random() < 0.5:
            divisor = int(rng.integers(1, 1000))
        else:
            divisor = int(rng.integers(1, top - 1, dtype=np.uint64))
        if rng.random() < 0.5:
            divisor = top - divisor  # negative when read as signed
        if not (numerator == smallest and divisor == top - 1):  # INT_MIN / -1 overflows in C
            pairs.append((numerator, divisor))
    return pairs


def c_quotients(a: int, b: int, bits: int) -> tuple[int, int, int, int]:
    """Unsigned q, r then signed q, r (C truncates toward zero), as unsigned bit patterns."""
    top = 1 << bits

    def signed(x: int) -> int:
        return x - top if x >= top // 2 else x

    sa, sb = signed(a), signed(b)
    quotient = abs(sa) // abs(sb) * (1 if (sa < 0) == (sb < 0) else -1)
    remainder = sa - sb * quotient
    return a // b, a % b, quotient % top, remainder % top


@requires_tool("clang-19", "ld.lld-19")
def test_missing_libcall_names_the_symbol(tmp_path: Path) -> None:
    source = tmp_path / "divide_double.c"
    source.write_text(
        '#include "kg_runtime.h"\n'
        "volatile double x = 1.0, y = 3.0;\n"
        "int main(int argc, char **argv) { (void)argv; x = x / y + argc; return 0; }\n"
    )
    expected = r"undefined symbol: __hexagon_divdf3(.|\n)*hint: __hexagon_divdf3"
    with pytest.raises(ToolchainError, match=expected):
        hexagon.build([source], tmp_path / "divide_double")


@requires_tool(*TOOLS)
@pytest.mark.parametrize("access, dies", [("inside", False), ("past_end", True), ("before_start", True),
                                          ("vector_end", False)])
def test_guarded_buffers_fault_one_byte_outside(tmp_path: Path, access: str, dies: bool) -> None:
    """kg_guarded, which the hvx validation driver puts every kernel buffer in: the byte after a buffer placed at
    its end guard and the byte before one placed after its start guard fault; the last byte of the 128-byte vector
    that holds a buffer's last byte does not (an aligned HVX load never crosses it)."""
    source = tmp_path / "guard.c"
    source.write_text(
        '#include "kg_runtime.h"\n'
        "int main(int argc, char **argv)\n{\n"
        "  (void)argc;\n"
        "  volatile uint8_t *end = kg_guarded(100, 128, 1), *start = kg_guarded(100, 128, 0);\n"
        "  if (((uintptr_t)end & 127) || ((uintptr_t)start & 127)) kg_die(\"misaligned\", 0);\n"
        "  end[0] = end[99] = start[0] = start[99] = 1;\n"
        "  switch (argv[1][0]) {\n"
        "  case 'p': return end[128];\n"
        "  case 'b': return start[-1];\n"
        "  case 'v': return end[127] + 2;\n"
        "  default: return end[99] + start[99];\n"
        "  }\n}\n"
    )
    binary = hexagon.build([source], tmp_path / "guard", extra_flags=("-Wall", "-Werror"))
    result = hexagon.run(binary, [access[0] if access != "vector_end" else "v"], cwd=tmp_path, check=False)
    assert result.returncode == (-11 if dies else 2), result


@requires_tool(*TOOLS)
def test_runtime_printers_files_args_and_exit_status(tmp_path: Path) -> None:
    (tmp_path / "three.bin").write_bytes(b"abc")
    binary = hexagon.build(
        [DATA / "runtime_selftest.c"], tmp_path / "selftest", extra_flags=("-Wall", "-Werror")
    )
    result = hexagon.run(binary, ["three.bin", "two words"], cwd=tmp_path, check=False)
    assert result.returncode == 7
    assert result.stderr == ""
    assert result.stdout.splitlines() == [
        "argc=3", "three.bin", "two words",
        "0", "-1", "-9223372036854775808", "9223372036854775807", "18446744073709551615",
        "0xdeadbeef",
        "memmove ok", "memcpy memset ok",
        "file too long ok", "file too short ok", "file exact ok", "ENOENT ok",
    ]
    with pytest.raises(ToolchainError, match="exited with status 7"):
        hexagon.run(binary, ["three.bin"], cwd=tmp_path)


# ---- HVX floating point: compiled, never run (QEMU 7.2 has none) -------------------


@requires_tool("clang-19")
@pytest.mark.parametrize("arch", ["v68", "v73"])
def test_qf32_compiles_for_float_arches(arch: str) -> None:
    text = hexagon.assembly(DATA / "qf32_mul.c", arch=arch)
    assert ".qf32 = vmpy(" in text and ".sf," in text
    assert ".sf = " in text  # converted back from qf32


@requires_tool("clang-19")
def test_qf32_is_a_compile_error_before_v68() -> None:
    with pytest.raises(ToolchainError, match="Q6_Vqf32_vmpy_VsfVsf"):
        hexagon.assembly(DATA / "qf32_mul.c", arch="v67")


@requires_tool(*TOOLS)
def test_running_qf32_under_a_cpu_without_it_fails_clearly(tmp_path: Path) -> None:
    if hexagon.qemu_cpu("v68") == "v68":
        pytest.skip("this QEMU models v68; the test covers QEMU 7.2, which has only v67")
    source = tmp_path / "qf32_main.c"
    source.write_text(
        '#include "kg_runtime.h"\n#include "qf32_mul.c"\n'
        "volatile HVX_Vector a, b, c;\n"
        "int main(int argc, char **argv) {\n"
        "    (void)argc;\n    (void)argv;\n    c = kg_mul_sf(a, b);\n    return 0;\n}\n"
    )
    binary = hexagon.build([source], tmp_path / "qf32_main", arch="v68", include_dirs=[DATA])
    with pytest.raises(ToolchainError, match="could not decode an instruction"):
        hexagon.run(binary, [], cwd=tmp_path, arch="v68")
