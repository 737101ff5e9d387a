# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""GPU energy over a stretch of time, through NVML, for joules per output token.

Energy comes from each GPU's total-energy counter (``nvmlDeviceGetTotalEnergyConsumption``, mJ,
Volta and newer) when every GPU has one, which is exact whatever the sampling. Otherwise it is
the integral of power samples (``nvmlDeviceGetPowerUsage``, mW) taken by a thread every
``interval`` seconds. ``average_w`` is always ``energy_j / seconds``, so the two figures agree:
NVML's power reading is itself an average over a past window (about a second on Hopper), so the
samples lag a load that changes and disagree with the counter (559 W sampled beside 2010 J over
3.0 s, 670 W, on an H200). The samples' mean is kept apart as ``sampled_average_w``. Hosts without
NVML get ``None`` and the reason, never an exception.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import threading
import time

try:
    import pynvml
except ImportError:
    pynvml = None


class PowerMeter:
    """``start()`` before a level, ``stop()`` after it; ``stop`` returns the figures or None."""

    def __init__(self, indices=None, interval=0.1, nvml=None):
        self.nvml = nvml if nvml is not None else pynvml
        self.indices = indices
        self.interval = interval
        self.reason = None
        self.handles = []
        self._samples = []
        self._thread = None
        self._stop = threading.Event()
        self._energy_start = None
        self._started = None
        if self.nvml is None:
            self.reason = "nvidia-ml-py is not installed"
            return
        try:
            self.nvml.nvmlInit()
            count = self.nvml.nvmlDeviceGetCount()
            wanted = range(count) if indices is None else [index for index in indices if index < count]
            self.handles = [self.nvml.nvmlDeviceGetHandleByIndex(index) for index in wanted]
        except Exception as exc:  # NVMLError and friends: the host simply has no usable GPU
            self.reason = "NVML: %s" % exc
            self.handles = []
            return
        if not self.handles:
            self.reason = "no GPUs"

    @property
    def available(self):
        return bool(self.handles)

    def _energy_mj(self):
        try:
            return sum(self.nvml.nvmlDeviceGetTotalEnergyConsumption(handle) for handle in self.handles)
        except Exception:  # not supported before Volta
            return None

    def _power_w(self):
        return sum(self.nvml.nvmlDeviceGetPowerUsage(handle) for handle in self.handles) / 1000.0

    def _sample(self):
        while not self._stop.is_set():
            try:
                self._samples.append((time.monotonic(), self._power_w()))
            except Exception:
                pass
            self._stop.wait(self.interval)

    def start(self):
        if not self.available:
            return
        self._samples = []
        self._stop.clear()
        self._energy_start = self._energy_mj()
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def stop(self):
        """Average watts, joules and how the joules were measured, over the time since start()."""
        if not self.available or self._thread is None:
            return None
        self._stop.set()
        self._thread.join()
        self._thread = None
        energy_end = self._energy_mj()
        elapsed = time.monotonic() - self._started
        return power_figures(self._energy_start, energy_end, elapsed, [watts for dummy, watts in self._samples],
                             len(self.handles))

    def close(self):
        if self.available:
            try:
                self.nvml.nvmlShutdown()
            except Exception:
                pass


def power_figures(energy_mj_start, energy_mj_end, seconds, samples_w, gpus):
    """The figures of one stretch of ``seconds``: energy counter readings (mJ, or None) and power samples (W).

    With a counter that advanced, joules are its difference; else the samples' mean times the
    seconds. ``average_w`` is joules / seconds either way; ``sampled_average_w`` the samples' mean.
    A counter that went backwards (reset) is not trusted. None when there is neither.
    """
    sampled_w = sum(samples_w) / len(samples_w) if samples_w else None
    counter = energy_mj_start is not None and energy_mj_end is not None and energy_mj_end >= energy_mj_start
    if counter and seconds > 0:
        joules, source = (energy_mj_end - energy_mj_start) / 1000.0, "energy counter"
    elif sampled_w is not None:
        joules, source = sampled_w * seconds, "power samples"
    else:
        return None
    return {"average_w": round(joules / seconds if seconds > 0 else sampled_w, 1),
            "sampled_average_w": round(sampled_w, 1) if sampled_w is not None else None,
            "energy_j": round(joules, 3), "seconds": round(seconds, 3), "gpus": gpus, "samples": len(samples_w),
            "source": source}


def figures_from_recording(recording, gpus=1):
    """``power_figures`` of a recorded stretch: {"energy_mj_start", "energy_mj_end", "seconds", "power_samples_mw": [...]}.

    Each sample is the sum over the measured GPUs, in mW, as NVML gives it.
    """
    return power_figures(recording.get("energy_mj_start"), recording.get("energy_mj_end"), recording["seconds"],
                         [sample / 1000.0 for sample in recording.get("power_samples_mw") or []], gpus)
