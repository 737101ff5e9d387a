# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""PowerMeter against an NVML stand-in with pynvml's function names and units (mW, mJ), since the
controller has no GPU: counters that advance with time, GPUs without an energy counter, hosts
without NVML."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import json
import os
import time

import pytest

from ansible_collections.gauntlet.vllm.plugins.module_utils.host.gpu_power import PowerMeter, figures_from_recording, power_figures

# Recordings of real GPUs, if any: {"energy_mj_start", "energy_mj_end", "seconds", "power_samples_mw": [...]} (and
# optionally "gpus"), e.g. one H200 under a benchmark level.
RECORDINGS = sorted(glob.glob(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "fixtures",
                                           "gpu_power", "*.json")))


class NVMLError(Exception):
    pass


class FakeNVML:
    """Each GPU draws ``watts``; its energy counter advances at that rate (H200 idles near 75 W)."""

    def __init__(self, watts=(75.0, 700.0), energy_counter=True, init_error=None, sampled_share=1.0):
        self.watts = watts
        self.sampled_share = sampled_share      # what the power reading shows of the real draw (it lags)
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
        return int(self.watts[handle] * self.sampled_share * 1000)

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
    assert figures["average_w"] == pytest.approx(775.0, rel=0.05)
    assert figures["sampled_average_w"] == 775.0
    assert figures["energy_j"] == pytest.approx(775.0 * figures["seconds"], rel=0.1)
    assert meter.nvml.shut_down


def test_power_samples_when_there_is_no_counter():
    dummy, figures = measure(FakeNVML(watts=(300.0,), energy_counter=False))
    assert figures["source"] == "power samples"
    assert figures["energy_j"] == pytest.approx(300.0 * figures["seconds"], rel=0.01)


def test_only_the_given_gpus_count():
    dummy, figures = measure(FakeNVML(watts=(75.0, 700.0, 700.0)), indices=[1, 2, 7])
    assert figures["gpus"] == 2 and figures["sampled_average_w"] == 1400.0
    assert figures["average_w"] == pytest.approx(1400.0, rel=0.05)


@pytest.mark.parametrize("nvml, reason", [
    (FakeNVML(init_error="NVML Shared Library Not Found"), "NVML: NVML Shared Library Not Found"),
    (FakeNVML(watts=()), "no GPUs"),
])
def test_hosts_without_gpus_get_none_and_a_reason(nvml, reason):
    meter, figures = measure(nvml, seconds=0.01)
    assert figures is None
    assert not meter.available and meter.reason == reason


# ---- the counter and the samples disagree: watts follow the counter ------------------------

def test_average_watts_follow_the_energy_counter_when_the_samples_lag():
    # The H200 case: the power reading shows 559 of the 670 W the energy counter accounts for.
    dummy, figures = measure(FakeNVML(watts=(670.0,), sampled_share=559.0 / 670.0), seconds=0.5)
    assert figures["source"] == "energy counter"
    assert figures["average_w"] == pytest.approx(670.0, rel=0.05)
    assert figures["average_w"] == pytest.approx(figures["energy_j"] / figures["seconds"], rel=0.005)   # seconds are rounded
    assert figures["sampled_average_w"] == 559.0


def test_without_a_counter_the_samples_give_both_figures():
    dummy, figures = measure(FakeNVML(watts=(670.0,), energy_counter=False, sampled_share=559.0 / 670.0))
    assert figures["source"] == "power samples"
    assert figures["average_w"] == figures["sampled_average_w"] == 559.0
    assert figures["energy_j"] == pytest.approx(559.0 * figures["seconds"], rel=0.01)


H200_STRETCH = {"energy_mj_start": 81233000, "energy_mj_end": 81233000 + 2010000, "seconds": 3.0,
                # A ramp the reading trails behind, every 0.1 s: 559 W on average.
                "power_samples_mw": [233000, 383000, 483000, 553000, 603000, 633000, 653000, 673000, 683000, 693000] * 3}


def _recordings():
    recordings = [("synthetic-h200", H200_STRETCH)]
    for path in RECORDINGS:
        with open(path) as handle:
            recordings.append((os.path.basename(path), json.load(handle)))
    return recordings


@pytest.mark.parametrize("name, recording", _recordings(), ids=[name for name, dummy in _recordings()])
def test_recorded_stretches_give_watts_that_agree_with_the_joules(name, recording):
    figures = figures_from_recording(recording, gpus=recording.get("gpus", 1))
    joules = (recording["energy_mj_end"] - recording["energy_mj_start"]) / 1000.0
    samples = recording["power_samples_mw"]
    assert figures["source"] == "energy counter"
    assert figures["energy_j"] == pytest.approx(joules, abs=1e-3)
    assert figures["average_w"] == pytest.approx(joules / recording["seconds"], abs=0.05)
    assert figures["sampled_average_w"] == pytest.approx(sum(samples) / len(samples) / 1000.0, abs=0.05)
    assert figures["samples"] == len(samples)


def test_the_synthetic_h200_stretch_in_numbers():
    figures = figures_from_recording(H200_STRETCH)
    assert (figures["average_w"], figures["energy_j"], figures["seconds"]) == (670.0, 2010.0, 3.0)
    assert figures["sampled_average_w"] == 559.0


def test_a_counter_that_went_backwards_is_not_trusted():
    figures = power_figures(5000000, 1000, 2.0, [300.0, 310.0], gpus=1)
    assert figures["source"] == "power samples"
    assert figures["average_w"] == 305.0 and figures["energy_j"] == 610.0
    assert power_figures(None, None, 2.0, [], gpus=1) is None


# Recorded on one H200 by tests/unit/fixtures/gpu/record_power.py: an idle stretch, a bf16 GEMM stretch
# that starts with the window (so NVML's trailing power reading lags), and what the meter of the time
# (samples' mean as average_w) reported over another GEMM stretch.
H200_POWER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "fixtures", "gpu",
                          "h200-1gpu.power.json")


def _h200_phase(name):
    with open(H200_POWER) as handle:
        recording = json.load(handle)
    phase = dict(recording["phases"][name])
    phase["power_samples_mw"] = [milliwatts for dummy, milliwatts in phase["power_samples_mw"]]
    return recording, phase


@pytest.mark.parametrize("name", ["idle", "gemm"])
def test_the_h200_recording_gives_watts_equal_to_joules_per_second(name):
    dummy, phase = _h200_phase(name)
    figures = figures_from_recording(phase)
    joules = (phase["energy_mj_end"] - phase["energy_mj_start"]) / 1000.0
    assert figures["source"] == "energy counter"
    assert figures["average_w"] == pytest.approx(joules / phase["seconds"], abs=0.05)


def test_on_the_h200_the_samples_lag_the_counter_and_the_counter_wins():
    recording, phase = _h200_phase("gemm")
    figures = figures_from_recording(phase)
    # The GEMM stretch: 2066.7 J over 3.03 s is 682 W; the trailing samples average 578 W.
    assert figures["average_w"] == pytest.approx(682.0, abs=1.0)
    assert figures["sampled_average_w"] == pytest.approx(578.4, abs=1.0)
    # The meter as it was: 588.5 W beside 2049 J over 3.0 s; watts and joules disagreed by 14%.
    old = recording["meter_on_gemm"]
    assert old["energy_j"] / old["seconds"] > old["average_w"] * 1.1
