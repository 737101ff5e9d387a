# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""PowerMeter against an NVML stand-in with pynvml's function names and units (mW, mJ), since the
controller has no GPU: counters that advance with time, GPUs without an energy counter, hosts
without NVML."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

import pytest

from ansible_collections.gauntlet.vllm.plugins.module_utils.gpu_power import PowerMeter


class NVMLError(Exception):
    pass


class FakeNVML:
    """Each GPU draws ``watts``; its energy counter advances at that rate (H200 idles near 75 W)."""

    def __init__(self, watts=(75.0, 700.0), energy_counter=True, init_error=None):
        self.watts = watts
        self.energy_counter = energy_counter
        self.init_error = init_error
        self.t0 = time.monotonic()
        self.shut_down = False

    def nvmlInit(self):
        if self.init_error:
            raise NVMLError(self.init_error)

    def nvmlShutdown(self):
        self.shut_down = True

    def nvmlDeviceGetCount(self):
        return len(self.watts)

    def nvmlDeviceGetHandleByIndex(self, index):
        return index

    def nvmlDeviceGetPowerUsage(self, handle):
        return int(self.watts[handle] * 1000)

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        if not self.energy_counter:
            raise NVMLError("Not Supported")
        return int((time.monotonic() - self.t0) * self.watts[handle] * 1000)


def measure(nvml, seconds=0.3, **kwargs):
    meter = PowerMeter(nvml=nvml, interval=0.02, **kwargs)
    meter.start()
    time.sleep(seconds)
    figures = meter.stop()
    meter.close()
    return meter, figures


def test_energy_counter_gives_the_joules():
    meter, figures = measure(FakeNVML())
    assert figures["source"] == "energy counter"
    assert figures["gpus"] == 2 and figures["samples"] >= 5
    assert figures["average_w"] == 775.0
    assert figures["energy_j"] == pytest.approx(775.0 * figures["seconds"], rel=0.1)
    assert meter.nvml.shut_down


def test_power_samples_when_there_is_no_counter():
    dummy, figures = measure(FakeNVML(watts=(300.0,), energy_counter=False))
    assert figures["source"] == "power samples"
    assert figures["energy_j"] == pytest.approx(300.0 * figures["seconds"], rel=0.01)


def test_only_the_given_gpus_count():
    dummy, figures = measure(FakeNVML(watts=(75.0, 700.0, 700.0)), indices=[1, 2, 7])
    assert figures["gpus"] == 2 and figures["average_w"] == 1400.0


@pytest.mark.parametrize("nvml, reason", [
    (FakeNVML(init_error="NVML Shared Library Not Found"), "NVML: NVML Shared Library Not Found"),
    (FakeNVML(watts=()), "no GPUs"),
])
def test_hosts_without_gpus_get_none_and_a_reason(nvml, reason):
    meter, figures = measure(nvml, seconds=0.01)
    assert figures is None
    assert not meter.available and meter.reason == reason
