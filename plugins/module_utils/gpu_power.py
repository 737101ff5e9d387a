# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""GPU energy over a stretch of time, through NVML, for joules per output token.

Energy comes from each GPU's total-energy counter (``nvmlDeviceGetTotalEnergyConsumption``, mJ,
Volta and newer) when every GPU has one, which is exact whatever the sampling. Otherwise it is
the integral of power samples (``nvmlDeviceGetPowerUsage``, mW) taken by a thread every
``interval`` seconds. Average watts always come from the samples. Hosts without NVML get
``None`` and the reason, never an exception.
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
        elapsed = time.monotonic() - self._started
        energy_end = self._energy_mj()
        samples = self._samples
        average_w = sum(watts for dummy, watts in samples) / len(samples) if samples else None
        if self._energy_start is not None and energy_end is not None:
            joules, source = (energy_end - self._energy_start) / 1000.0, "energy counter"
        elif average_w is not None:
            joules, source = average_w * elapsed, "power samples"
        else:
            return None
        return {"average_w": round(average_w, 1) if average_w is not None else None, "energy_j": round(joules, 3),
                "seconds": round(elapsed, 3), "gpus": len(self.handles), "samples": len(samples), "source": source}

    def close(self):
        if self.available:
            try:
                self.nvml.nvmlShutdown()
            except Exception:
                pass
