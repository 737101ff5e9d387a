# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gauntlet.vllm.plugins.module_utils.host import cpu_device
from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.vllm_hardware import check_device_spec
from ansible_collections.gauntlet.vllm.plugins.modules import cpu_device_info

CPUINFO = """processor\t: 0
model name\t: Example Xeon 9999
cpu MHz\t\t: 2500.000
flags\t\t: fpu sse2 avx2 avx512f
"""


def test_the_spec_is_one_the_planner_accepts(tmp_path):
    path = tmp_path / "cpuinfo"
    path.write_text(CPUINFO)
    spec, basis = cpu_device.cpu_device_spec(cores=2, cpuinfo_path=str(path), bandwidth_gbs=10.0)
    assert check_device_spec(spec) == spec
    assert spec["name"] == "cpu (Example Xeon 9999, 2 cores)"
    # 2 cores x 2.5 GHz x 64 FLOPs per cycle (AVX-512) = 0.32 TFLOP/s.
    assert spec["tflops"] == {"bf16": 0.32} and spec["cuda_graphs"] is False
    assert spec["async_scheduling"] is False  # vllm/platforms/cpu.py turns it off
    assert basis["vector"] == "avx512f" and basis["bandwidth_from"] == "given"


def test_missing_clock_and_flags_fall_back_and_say_so(tmp_path):
    path = tmp_path / "cpuinfo"
    path.write_text("processor: 0\n")
    spec, basis = cpu_device.cpu_device_spec(cores=1, cpuinfo_path=str(path), bandwidth_gbs=5.0)
    assert basis["mhz_from"] == "default 2000 MHz" and basis["vector"] == "scalar"
    assert spec["tflops"]["bf16"] == pytest.approx(1 * 2000e6 * 8 / 1e12)


def test_an_unreadable_cpuinfo_names_the_file(tmp_path):
    with pytest.raises(cpu_device.CpuDeviceError, match="cannot read .*missing"):
        cpu_device.cpu_device_spec(cpuinfo_path=str(tmp_path / "missing"), bandwidth_gbs=1.0)


def test_the_copy_bandwidth_is_measured():
    assert cpu_device.measure_copy_bandwidth_gbs(mib=8, rounds=2) > 0.1


def test_the_module_returns_the_spec_and_refuses_zero_cores(run_module):
    result, failed = run_module(cpu_device_info.main, {"cores": 1})
    assert not failed, result.get("msg")
    assert result["changed"] is False and result["device_spec"]["memory_bandwidth_gbs"] > 0
    result, failed = run_module(cpu_device_info.main, {"cores": 0})
    assert failed and "cores must be at least 1, got 0" in result["msg"]
