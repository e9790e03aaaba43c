"""The phones' GPUs behind the mobile profiles, as the time estimate (vulkan/estimate.py) needs them: cores,
FP32 lanes per core, clock, DRAM bandwidth, and the occupancy the profile's default tiles aim for. Every number is
a public spec figure (vendor product briefs and datasheets, Mesa's device tables), named beside it; none was
measured on the part, so an estimate made from them ranks tilings and networks, it does not promise a time."""
from __future__ import annotations

from dataclasses import dataclass, field

FREEDRENO = "Mesa 25.0.7 src/freedreno/common/freedreno_devices.py"
VALHALL_STATS = ("Mesa 25.0.7 src/panfrost/compiler/bifrost_compile.c va_print_stats: its cycles per thread are "
                 "normalised to 64 FMA, 64 CVT, 16 SFU, 4 texture and 1 load/store instruction per core and cycle")


@dataclass(frozen=True, slots=True, kw_only=True)
class PartSpec:
    name: str  # mobilestats' part name (--gpu)
    part: str  # the GPU and the chip it ships in
    cores: int  # Adreno: shader processors (SPs); Mali: shader cores
    lanes_per_core: int  # FP32 multiply-add lanes per core and cycle
    clock_mhz: int
    dram_gbps: float  # the chip's DRAM bandwidth, GB/s (1e9 bytes)
    target_occupancy: int  # Adreno: waves per SP; Mali: threads per slot (2 = full): what the defaults keep
    occupancy_unit: str  # how the compiler counts it
    sources: dict[str, str] = field(default_factory=dict)

    @property
    def lanes(self) -> int:
        return self.cores * self.lanes_per_core

    @property
    def clock_hz(self) -> float:
        return self.clock_mhz * 1e6

    def assumptions(self) -> str:
        """One line for the report, beside the estimate."""
        return (f"{self.part}: {self.cores} cores x {self.lanes_per_core} FP32 lanes at {self.clock_mhz} MHz "
                f"({2 * self.lanes * self.clock_hz / 1e9:.0f} GFLOP/s), DRAM {self.dram_gbps:g} GB/s")


PARTS = {p.name: p for p in (
    PartSpec(name="a740", part="Adreno 740 (Snapdragon 8 Gen 2)", cores=6, lanes_per_core=256, clock_mhz=680,
             dram_gbps=68.3, target_occupancy=8, occupancy_unit="waves",
             sources={"cores": FREEDRENO + " (A740: num_ccu = 6, and SP cores match CCUs there)",
                      "lanes_per_core": "1536 FP32 ALUs in all, as reported for the Adreno 740 (~2.1 TFLOPS FP32 at "
                                        "680 MHz), over its 6 SPs",
                      "clock_mhz": "Qualcomm Snapdragon 8 Gen 2 (SM8550) GPU clock, 680 MHz (719 MHz in the "
                                   "'for Galaxy' bin)",
                      "dram_gbps": "Snapdragon 8 Gen 2 product brief: LPDDR5X at 4200 MHz (8533 MT/s) x 64 bits",
                      "target_occupancy": "kernelgen devices adreno-7xx register_budget: 8 waves at <= 24 vec4 "
                                          "registers (reg_size_vec4 96)"}),
    PartSpec(name="a660", part="Adreno 660 (Snapdragon 888)", cores=3, lanes_per_core=341, clock_mhz=840,
             dram_gbps=51.2, target_occupancy=6, occupancy_unit="waves",
             sources={"cores": FREEDRENO + " (A660: num_ccu = 3)",
                      "lanes_per_core": "1024 FP32 ALUs in all, as reported for the Adreno 660 (~1.72 TFLOPS FP32 "
                                        "at 840 MHz), over its 3 SPs (rounded down)",
                      "clock_mhz": "Qualcomm Snapdragon 888 (SM8350) GPU clock, 840 MHz",
                      "dram_gbps": "Snapdragon 888 product brief: LPDDR5 at 3200 MHz (6400 MT/s) x 64 bits",
                      "target_occupancy": "kernelgen devices adreno-6xx register_budget: 6 waves at <= 21 vec4 "
                                          "registers (reg_size_vec4 64)"}),
    PartSpec(name="g610", part="Mali-G610 MP4 (Rockchip RK3588)", cores=4, lanes_per_core=64, clock_mhz=1000,
             dram_gbps=33.8, target_occupancy=2, occupancy_unit="threads",
             sources={"cores": "Rockchip RK3588 datasheet: Mali-G610 MP4",
                      "lanes_per_core": VALHALL_STATS + " (64 FP32 FMA lanes per core: 2 execution engines; the "
                                                        "RK3588's GPU is quoted at ~512 GFLOPS FP32)",
                      "clock_mhz": "Rockchip RK3588 datasheet: GPU up to 1.0 GHz",
                      "dram_gbps": "Rockchip RK3588 datasheet: LPDDR4X at up to 2112 MHz (4224 MT/s) x 64 bits",
                      "target_occupancy": "kernelgen devices mali-valhall register_budget: 2 threads per slot at "
                                          "<= 32 work registers"}),
)}
