"""The CPU's FP32 peak from its ISA, cores and clock, read from synthetic /proc/cpuinfo texts (never this host's
flags), and its use: the CPU target's % peak and the compute roof of the CPU's roofline in report.html."""

from __future__ import annotations

import pytest

from hetero_dse.errors import HeteroDSEError
from hetero_dse.hardware.cpu_peak import FMA_UNITS_ENV, CpuPeak, cpu_peak, host_cpu_peak
from hetero_dse.hardware.host import host_cores
from hetero_dse.ops import get_builtin
from hetero_dse.report_html import PLOTS


def cpuinfo(flags: str, mhz: str = "2600.000", vendor: str = "GenuineIntel", family: int = 6) -> str:
    """Two processors of /proc/cpuinfo, as Linux writes them (the second's clock differs: the first counts)."""
    block = (f"processor\t: {{n}}\nvendor_id\t: {vendor}\ncpu family\t: {family}\nmodel\t\t: 85\n"
             f"model name\t: test CPU\ncpu MHz\t\t: {{mhz}}\nflags\t\t: fpu sse sse2 {flags}\n\n")
    return block.format(n=0, mhz=mhz) + block.format(n=1, mhz="1200.000")


AVX2 = cpuinfo("avx fma avx2", mhz="2300.000")  # a Haswell server core
AVX512 = cpuinfo("avx fma avx2 avx512f avx512bw avx512vl")  # a Skylake-SP or Ice Lake server core


def test_an_avx2_host_has_8_lanes_per_fma_unit():
    peak = cpu_peak(AVX2, cores=4)
    assert (peak.isa, peak.lanes, peak.fma_units, peak.clock_ghz) == ("AVX2", 8, 2, 2.3)
    assert peak.gflops == pytest.approx(4 * 2.3 * 8 * 2 * 2)  # 294.4: cores × GHz × lanes × FMA × units
    assert peak.gflops == pytest.approx(294.4)


def test_an_avx512_host_has_16_lanes_and_cpufreqs_maximum_clock_wins_over_cpu_mhz():
    assert cpu_peak(AVX512, cores=2).gflops == pytest.approx(332.8)  # 2 × 2.6 GHz × 16 × 2 × 2
    peak = cpu_peak(AVX512, cores=2, max_freq_khz="3500000\n")
    assert (peak.lanes, peak.clock_ghz, peak.clock_source) == (16, 3.5, "cpufreq maximum")
    assert peak.gflops == pytest.approx(448.0)  # 2 × 3.5 × 16 × 2 × 2
    assert "448 GFLOPS" in peak.describe() and FMA_UNITS_ENV in peak.describe()


def test_one_fma_unit_per_core_halves_the_peak():
    assert cpu_peak(AVX512, cores=2, fma_units=1).gflops == pytest.approx(166.4)


def test_zen4_runs_avx512_on_256_bit_units_and_zen5_on_512_bit_ones():
    zen4 = cpuinfo("avx fma avx2 avx512f", mhz="3700.000", vendor="AuthenticAMD", family=25)
    assert cpu_peak(zen4, cores=8).lanes == 8 and cpu_peak(zen4, cores=8).gflops == pytest.approx(947.2)
    zen5 = cpuinfo("avx fma avx2 avx512f", mhz="2596.120", vendor="AuthenticAMD", family=26)
    assert cpu_peak(zen5, cores=2).gflops == pytest.approx(2 * 2.59612 * 16 * 2 * 2)


def test_a_cpu_without_avx2_and_fma_or_without_a_clock_has_no_peak():
    assert cpu_peak(cpuinfo("avx"), cores=2) is None  # Sandy Bridge: no FMA
    assert cpu_peak(cpuinfo("avx2"), cores=2) is None  # AVX2 without FMA3 is not a CPU this rule knows
    assert cpu_peak("processor\t: 0\nFeatures\t: fp asimd\n", cores=2) is None  # aarch64
    assert cpu_peak(AVX2.replace("cpu MHz", "clock"), cores=2) is None


def test_the_host_reading_takes_the_fma_units_from_the_environment(tmp_path, monkeypatch):
    (tmp_path / "cpuinfo").write_text(AVX512)
    (tmp_path / "max_freq").write_text("3000000\n")
    monkeypatch.setenv(FMA_UNITS_ENV, "1")
    peak = host_cpu_peak(tmp_path / "cpuinfo", tmp_path / "max_freq")
    assert peak.fma_units == 1 and peak.gflops == pytest.approx(host_cores() * 3.0 * 16 * 2)
    monkeypatch.delenv(FMA_UNITS_ENV)
    peak = host_cpu_peak(tmp_path / "cpuinfo", tmp_path / "no cpufreq here")
    assert peak.fma_units == 2 and peak.clock_ghz == 2.6
    monkeypatch.setenv(FMA_UNITS_ENV, "two")
    with pytest.raises(HeteroDSEError, match=FMA_UNITS_ENV):
        host_cpu_peak(tmp_path / "cpuinfo", tmp_path / "max_freq")
    assert host_cpu_peak(tmp_path / "no cpuinfo", tmp_path / "max_freq") is None


def test_the_cpu_target_gives_fp32_rows_the_peak_and_other_arithmetic_none(monkeypatch):
    from hetero_dse.targets.cpu import CpuTarget

    monkeypatch.setattr("hetero_dse.targets.cpu.host_cpu_peak", lambda: CpuPeak(2, 2.6, "AVX-512", 16, 2, "test"))
    gemm = get_builtin("gemm").instantiate(shape="small:s2")
    target = CpuTarget()
    assert target.peak_flops(gemm) == pytest.approx(332.8e9)
    assert target.peak_flops(gemm.with_dtype("int8")) is None  # VNNI's peak, not FP32's
    assert "FP32 peak 333 GFLOPS = 2 cores × 2.60 GHz" in target.footnote()


def test_the_cpu_roofline_has_the_peak_as_its_compute_roof():
    from matplotlib import pyplot as plt

    peak = 332.8
    rows = [{"device": "cpu0", "gflops": g, "peak_fraction": g / peak, "intensity": i, "bandwidth_gbps": None}
            for g, i in ((120.0, 30.0), (60.0, 4.0))]
    fig = PLOTS["roofline"].draw({"rows": rows})
    try:
        (ax,) = fig.axes
        (roof,) = ax.lines
        ys = roof.get_ydata()
        assert min(ys) == pytest.approx(peak) and max(ys) == pytest.approx(peak)  # flat: no CPU memory roof
        assert [t.get_text() for t in ax.get_legend().get_texts()] == ["cpu0 (peak 333 GFLOPS)"]
        rows = [{**r, "peak_fraction": None} for r in rows]  # a CPU without a known peak keeps the old label
        fig2 = PLOTS["roofline"].draw({"rows": rows})
        assert not fig2.axes[0].lines and "no peak known" in fig2.axes[0].get_legend().get_texts()[0].get_text()
        plt.close(fig2)
    finally:
        plt.close(fig)
