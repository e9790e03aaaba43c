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
