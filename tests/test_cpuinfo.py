"""kernelgen.cpuinfo: the CPU named with its family, model and stepping, so hosts a hypervisor names alike differ."""
from kernelgen.cpuinfo import first_processor, model_text
from kernelgen.targets.vulkan.lavapipe_host import LavapipeHost, cpu_info

COOPER_LAKE = ("processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 85\n"
               "model name\t: Intel(R) Xeon(R) Processor\nstepping\t: 11\nflags\t\t: avx avx2 fma avx512f avx512vl\n\n"
               "processor\t: 1\ncpu family\t: 6\nmodel\t\t: 85\nmodel name\t: Intel(R) Xeon(R) Processor\n")
EMERALD_RAPIDS = COOPER_LAKE.replace(": 85", ": 207").replace("stepping\t: 11", "stepping\t: 2")


def test_the_first_processor_only():
    fields = first_processor(COOPER_LAKE)
    assert fields["model"] == "85" and fields["processor"] == "0"
    assert first_processor("") == {}


def test_the_model_name_carries_family_model_and_stepping():
    assert model_text(first_processor(COOPER_LAKE)) == "Intel(R) Xeon(R) Processor [family 6, model 85, stepping 11]"
    assert model_text({"model name": "Apple M2"}) == "Apple M2"  # no numbers: the name alone
    assert model_text({"cpu family": "6"}) == ""  # no name: the caller's fallback


def test_two_cpus_a_hypervisor_names_alike_are_two_lavapipe_hosts():
    """Their probe choices and calibrations are kept apart (issue 50: a Cooper Lake's choice was read on an
    Emerald Rapids host because both are "Intel(R) Xeon(R) Processor" under KVM)."""
    hosts = []
    for text in (COOPER_LAKE, EMERALD_RAPIDS):
        cpu, flags = cpu_info(text)
        hosts.append(LavapipeHost(cpu=cpu, flags=flags, vector_bits=256, subgroup=8, l1d_bytes=49152,
                                  driver="llvmpipe Mesa 22.3.6 (LLVM 15.0.6)"))
    assert hosts[0].flags == hosts[1].flags == ("avx", "avx2", "fma", "avx512f", "avx512vl")
    assert hosts[0].key() != hosts[1].key() and "model 207" in hosts[1].key()


def _sysfs_caches(folder, caches):
    for i, (level, kind, size) in enumerate(caches):
        index = folder / f"index{i}"
        index.mkdir(parents=True)
        for name, value in (("level", f"{level}\n"), ("type", f"{kind}\n"), ("size", f"{size}\n")):
            (index / name).write_text(value)
    return folder


def test_the_last_level_cache_is_read_from_sysfs(tmp_path):
    """This session's host as sysfs lists it (48K L1d, 64K L1i, 2 MiB L2, 480 MiB L3), and hosts without an L3."""
    from kernelgen.cpuinfo import cache_size_bytes, data_caches, last_level_cache_bytes

    assert [cache_size_bytes(t) for t in ("48K", "2048K", "491520K", "1M", "65536", "", "lots")] == \
        [48 << 10, 2 << 20, 480 << 20, 1 << 20, 65536, 0, 0]
    host = _sysfs_caches(tmp_path / "a", [(1, "Data", "48K"), (1, "Instruction", "64K"), (2, "Unified", "2048K"),
                                          (3, "Unified", "491520K")])
    assert last_level_cache_bytes(host) == 480 << 20
    assert data_caches(host) == {1: 48 << 10, 2: 2 << 20, 3: 480 << 20}  # the L1i left out
    no_l3 = _sysfs_caches(tmp_path / "b", [(1, "Data", "32K"), (1, "Instruction", "32K"), (2, "Unified", "1024K")])
    assert last_level_cache_bytes(no_l3) == 1 << 20
    assert last_level_cache_bytes(tmp_path / "missing") == 0


def test_the_triad_passes_the_last_level_cache():
    """Each of its three arrays half the LLC (a run streams 1.5x the cache past a kernel's tensors before its cold
    run), 64 MiB at least (the c target's minimum), 512 MiB at most."""
    from kernelgen.targets.c.roofline import triad_array_bytes

    assert triad_array_bytes(480 << 20) == 240 << 20
    assert triad_array_bytes(16 << 20) == 64 << 20 and triad_array_bytes(0) == 64 << 20
    assert triad_array_bytes((200 << 20) + 1) == 101 << 20  # whole MiB
    assert triad_array_bytes(8 << 30) == 512 << 20
