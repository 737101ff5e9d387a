# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Tests for roles/vllm_monitoring/files/gauntlet_gpu_textfile.py, the NVML textfile collector.

The collector is copied with plugins/module_utils/host/gpu_info.py into one directory, as the role
installs them, and imported (or run) from there. NVML answers from the H200 recording
(tests/unit/fixtures/gpu/h200-1gpu.nvml.json) cloned to two GPUs, with the calls gpu_facts does not
make (utilisation, temperature, ECC) added by hand; the fake raises for any call not in it. Every
text written is checked with Debian's promtool (GAUNTLET_PROMTOOL, from scripts/lib.sh).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import importlib.util
import os
import re
import shutil
import subprocess
import sys

import pytest

from ansible_collections.gauntlet.vllm.tests.unit.fixtures.gpu import nvml_replay
from ansible_collections.gauntlet.vllm.tests.unit.fixtures.gpu.nvml_replay import FakeNVML, device_calls, nvml_error, retag, struct

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", "..", ".."))
COLLECTOR = os.path.join(ROOT, "roles", "vllm_monitoring", "files", "gauntlet_gpu_textfile.py")
GPU_INFO = os.path.join(ROOT, "plugins", "module_utils", "host", "gpu_info.py")
RECORDING = nvml_replay.load_recording(os.path.join(ROOT, "tests", "unit", "fixtures", "gpu", "h200-1gpu.nvml.json"))
UUID0 = "GPU-16fb8516-9f03-8d84-eb33-9dfbc4d69c74"
UUID1 = "GPU-00000000-0000-0000-0000-000000000001"
NOW = 1796334700.5


@pytest.fixture
def installed(tmp_path):
    """The collector and gpu_info.py side by side, as the role installs them; the collector module."""
    libexec = tmp_path / "libexec"
    libexec.mkdir()
    shutil.copy(COLLECTOR, str(libexec))
    shutil.copy(GPU_INFO, str(libexec))
    spec = importlib.util.spec_from_file_location("gauntlet_gpu_textfile_under_test", str(libexec / "gauntlet_gpu_textfile.py"))
    module = importlib.util.module_from_spec(spec)
    saved = sys.modules.pop("gpu_info", None)
    spec.loader.exec_module(module)
    assert module.gpu_info.__file__ == str(libexec / "gpu_info.py")
    yield module
    sys.modules.pop("gpu_info", None)
    if saved is not None:
        sys.modules["gpu_info"] = saved


def extras(index, utilization, temperature, corrected, uncorrected):
    """The calls gpu_facts does not make, for GPU ``index``."""
    tag = "gpu%d" % index
    return {
        "nvmlDeviceGetUtilizationRates(%s)" % tag: struct("c_nvmlUtilization_t", gpu=utilization, memory=3),
        "nvmlDeviceGetTemperature(%s,0)" % tag: temperature,
        "nvmlDeviceGetTotalEccErrors(%s,0,0)" % tag: corrected,
        "nvmlDeviceGetTotalEccErrors(%s,1,0)" % tag: uncorrected,
    }


def two_h200s():
    """The recorded H200 as GPU 0 and a clone as GPU 1, with only the calls the collector makes."""
    base = device_calls(RECORDING, 0)
    wanted = ("nvmlDeviceGetHandleByIndex", "nvmlDeviceGetUUID", "nvmlDeviceGetName", "nvmlDeviceGetMemoryInfo",
              "nvmlDeviceGetPowerUsage")
    base = dict((key, value) for key, value in base.items() if key.split("(")[0] in wanted)
    calls = {"nvmlInit()": None, "nvmlDeviceGetCount()": 2, "nvmlShutdown()": None}
    calls.update(base)
    calls.update(extras(0, 0, 31, 0, 0))
    second = retag(base, 0, 1)
    second["nvmlDeviceGetUUID(gpu1)"] = UUID1
    second["nvmlDeviceGetPowerUsage(gpu1)"] = 250000
    calls.update(second)
    calls.update(extras(1, 87, 55, 3, 1))
    recording = copy.deepcopy(RECORDING)
    recording["calls"] = calls
    return recording


def journal_of(text, rc=0, err=""):
    return lambda: (rc, text, err)


NO_XID = journal_of("Linux version 6.1.0\nnvidia: module verification failed\n")

HEADER = "# HELP gauntlet_gpu_collector_success Whether NVML could be read (1) or not (0, the reason is a comment in the file).\n"
TWO_GPUS = """\
# HELP gauntlet_gpu_collector_success Whether NVML could be read (1) or not (0, the reason is a comment in the file).
# TYPE gauntlet_gpu_collector_success gauge
gauntlet_gpu_collector_success 1
# HELP gauntlet_gpu_collector_timestamp_seconds When the collector last ran, in seconds since the epoch.
# TYPE gauntlet_gpu_collector_timestamp_seconds gauge
gauntlet_gpu_collector_timestamp_seconds 1796334700.5
# HELP gauntlet_gpu_utilization_ratio Share of the last sample period in which a kernel ran on the GPU (0-1).
# TYPE gauntlet_gpu_utilization_ratio gauge
gauntlet_gpu_utilization_ratio{gpu="0",uuid="%(u0)s",name="NVIDIA H200"} 0.0
gauntlet_gpu_utilization_ratio{gpu="1",uuid="%(u1)s",name="NVIDIA H200"} 0.87
# HELP gauntlet_gpu_memory_used_bytes GPU memory in use, driver-reserved memory included, in bytes.
# TYPE gauntlet_gpu_memory_used_bytes gauge
gauntlet_gpu_memory_used_bytes{gpu="0",uuid="%(u0)s",name="NVIDIA H200"} 644939776
gauntlet_gpu_memory_used_bytes{gpu="1",uuid="%(u1)s",name="NVIDIA H200"} 644939776
# HELP gauntlet_gpu_memory_total_bytes GPU memory, in bytes.
# TYPE gauntlet_gpu_memory_total_bytes gauge
gauntlet_gpu_memory_total_bytes{gpu="0",uuid="%(u0)s",name="NVIDIA H200"} 150754820096
gauntlet_gpu_memory_total_bytes{gpu="1",uuid="%(u1)s",name="NVIDIA H200"} 150754820096
# HELP gauntlet_gpu_power_watts GPU power draw, in watts.
# TYPE gauntlet_gpu_power_watts gauge
gauntlet_gpu_power_watts{gpu="0",uuid="%(u0)s",name="NVIDIA H200"} 101.411
gauntlet_gpu_power_watts{gpu="1",uuid="%(u1)s",name="NVIDIA H200"} 250.0
# HELP gauntlet_gpu_temperature_celsius GPU core temperature, in degrees Celsius.
# TYPE gauntlet_gpu_temperature_celsius gauge
gauntlet_gpu_temperature_celsius{gpu="0",uuid="%(u0)s",name="NVIDIA H200"} 31
gauntlet_gpu_temperature_celsius{gpu="1",uuid="%(u1)s",name="NVIDIA H200"} 55
# HELP gauntlet_gpu_ecc_errors Volatile ECC error count of the GPU since the driver loaded, by type.
# TYPE gauntlet_gpu_ecc_errors gauge
gauntlet_gpu_ecc_errors{gpu="0",uuid="%(u0)s",name="NVIDIA H200",type="corrected"} 0
gauntlet_gpu_ecc_errors{gpu="0",uuid="%(u0)s",name="NVIDIA H200",type="uncorrected"} 0
gauntlet_gpu_ecc_errors{gpu="1",uuid="%(u1)s",name="NVIDIA H200",type="corrected"} 3
gauntlet_gpu_ecc_errors{gpu="1",uuid="%(u1)s",name="NVIDIA H200",type="uncorrected"} 1
# HELP gauntlet_gpu_xid_events NVRM: Xid lines in the kernel log since boot.
# TYPE gauntlet_gpu_xid_events gauge
gauntlet_gpu_xid_events 0
""" % {"u0": UUID0, "u1": UUID1}


def promtool_check(text, tmp_path):
    """promtool check metrics on ``text``; fails (never skips) when promtool is missing."""
    promtool = os.environ.get("GAUNTLET_PROMTOOL")
    assert promtool and os.access(promtool, os.X_OK), "GAUNTLET_PROMTOOL is not set to promtool: source scripts/lib.sh"
    result = subprocess.run([promtool, "check", "metrics"], input=text.encode(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, check=False)
    assert result.returncode == 0, result.stdout.decode()
    return result.stdout.decode()


def test_two_gpus_exactly(installed, tmp_path):
    fake = FakeNVML(two_h200s())
    text = installed.collect(nvml=fake, journal=NO_XID, now=NOW)
    assert text == TWO_GPUS
    assert fake.log[0] == "nvmlInit()" and fake.log[-1] == "nvmlShutdown()"
    promtool_check(text, tmp_path)


def test_a_field_nvml_does_not_support_is_left_out_and_the_rest_stays(installed, tmp_path):
    recording = two_h200s()
    recording["calls"]["nvmlDeviceGetTotalEccErrors(gpu1,0,0)"] = nvml_error("NVMLError_NotSupported")
    recording["calls"]["nvmlDeviceGetTotalEccErrors(gpu1,1,0)"] = nvml_error("NVMLError_NotSupported")
    recording["calls"]["nvmlDeviceGetTemperature(gpu0,0)"] = nvml_error("NVMLError_NoPermission")
    text = installed.collect(nvml=FakeNVML(recording), journal=NO_XID, now=NOW)
    expected = "".join(line + "\n" for line in TWO_GPUS.splitlines()
                       if not (line.startswith("gauntlet_gpu_ecc_errors{gpu=\"1\"")
                               or line.startswith("gauntlet_gpu_temperature_celsius{gpu=\"0\"")))
    comments = ("# gpu 0: nvmlDeviceGetTemperature: Insufficient Permissions (NVMLError_NoPermission)\n"
                "# gpu 1: nvmlDeviceGetTotalEccErrors: Not Supported (NVMLError_NotSupported)\n"
                "# gpu 1: nvmlDeviceGetTotalEccErrors: Not Supported (NVMLError_NotSupported)\n")
    assert text == comments + expected
    promtool_check(text, tmp_path)


def test_a_function_the_installed_pynvml_lacks_is_left_out(installed):
    text = installed.collect(nvml=FakeNVML(two_h200s(), missing=("nvmlDeviceGetUtilizationRates",)), journal=NO_XID, now=NOW)
    assert "gauntlet_gpu_utilization_ratio" not in text
    assert "# gpu 1: nvmlDeviceGetUtilizationRates: nvmlDeviceGetUtilizationRates is not provided by this pynvml\n" in text
    assert 'gauntlet_gpu_power_watts{gpu="1",uuid="%s",name="NVIDIA H200"} 250.0\n' % UUID1 in text


def test_no_driver_gives_success_0_no_gpu_samples_and_the_reason(installed, tmp_path):
    recording = two_h200s()
    recording["calls"] = {"nvmlInit()": nvml_error("NVMLError_DriverNotLoaded")}
    fake = FakeNVML(recording)
    text = installed.collect(nvml=fake, journal=NO_XID, now=NOW)
    assert text == ("# NVML could not be initialised: Driver Not Loaded (NVMLError_DriverNotLoaded)\n"
                    "# HELP gauntlet_gpu_collector_success Whether NVML could be read (1) or not (0, the reason is a "
                    "comment in the file).\n"
                    "# TYPE gauntlet_gpu_collector_success gauge\n"
                    "gauntlet_gpu_collector_success 0\n"
                    "# HELP gauntlet_gpu_collector_timestamp_seconds When the collector last ran, in seconds since the epoch.\n"
                    "# TYPE gauntlet_gpu_collector_timestamp_seconds gauge\n"
                    "gauntlet_gpu_collector_timestamp_seconds 1796334700.5\n"
                    "# HELP gauntlet_gpu_xid_events NVRM: Xid lines in the kernel log since boot.\n"
                    "# TYPE gauntlet_gpu_xid_events gauge\n"
                    "gauntlet_gpu_xid_events 0\n")
    assert fake.log == ["nvmlInit()"]  # no shutdown without an init
    promtool_check(text, tmp_path)


def test_device_count_failing_is_success_0(installed):
    recording = two_h200s()
    recording["calls"]["nvmlDeviceGetCount()"] = nvml_error("NVMLError_Unknown")
    fake = FakeNVML(recording)
    text = installed.collect(nvml=fake, journal=NO_XID, now=NOW)
    assert text.startswith("# nvmlDeviceGetCount failed: Unknown Error (NVMLError_Unknown)\n")
    assert "gauntlet_gpu_collector_success 0\n" in text and "{gpu=" not in text
    assert fake.log[-1] == "nvmlShutdown()"


def test_label_values_are_escaped(installed, tmp_path):
    recording = two_h200s()
    recording["calls"]["nvmlDeviceGetName(gpu1)"] = {"__bytes__": 'Odd "GPU" \\ model\nB'}
    text = installed.collect(nvml=FakeNVML(recording), journal=NO_XID, now=NOW)
    assert 'gauntlet_gpu_power_watts{gpu="1",uuid="%s",name="Odd \\"GPU\\" \\\\ model\\nB"} 250.0\n' % UUID1 in text
    promtool_check(text, tmp_path)
    assert installed.escape_label('a"b\\c\nd') == 'a\\"b\\\\c\\nd'


KERNEL_LOG = """\
Linux version 6.1.0-28-amd64
NVRM: loading NVIDIA UNIX x86_64 Kernel Module  580.159.04
NVRM: Xid (PCI:0000:18:00): 79, pid=1234, name=python3, GPU has fallen off the bus.
nvidia 0000:18:00.0: something else
[  123.4] NVRM: Xid (PCI:0000:28:00): 48, pid='<unknown>', name=<unknown>, An uncorrectable double bit error
NVRM: GPU at PCI:0000:18:00: GPU-16fb8516
NVRM: Xid (PCI:0000:18:00): 13, Graphics Exception
"""


def test_xid_lines_of_the_kernel_log_are_counted(installed):
    assert installed.count_xid(journal_of(KERNEL_LOG)) == (3, None)
    text = installed.collect(nvml=FakeNVML(two_h200s()), journal=journal_of(KERNEL_LOG), now=NOW)
    assert text.endswith("gauntlet_gpu_xid_events 3\n")


def test_an_unreadable_kernel_log_leaves_the_xid_sample_out_with_why(installed, tmp_path):
    failing = journal_of("", rc=1, err="No journal files were found.\n-- No entries --")
    text = installed.collect(nvml=FakeNVML(two_h200s()), journal=failing, now=NOW)
    assert text.startswith("# gauntlet_gpu_xid_events left out: journalctl -k -b -o cat --no-pager failed (rc 1): "
                           "No journal files were found. -- No entries --\n")
    assert "\ngauntlet_gpu_xid_events " not in text and "# HELP gauntlet_gpu_xid_events" not in text
    assert "gauntlet_gpu_collector_success 1\n" in text
    promtool_check(text, tmp_path)

    def missing():
        raise OSError(2, "No such file or directory", "journalctl")
    assert installed.count_xid(missing)[0] is None
    assert installed.count_xid(missing)[1].startswith("journalctl -k -b -o cat --no-pager could not run: ")


def test_the_file_is_written_atomically_with_mode_0644(installed, tmp_path, monkeypatch):
    directory = tmp_path / "textfile"
    directory.mkdir()
    (directory / "gauntlet_gpu.prom").write_text("old\n")
    seen = []
    real_replace = os.replace

    def replace(source, target):
        # just before the rename: the new text is complete in a .tmp the node exporter ignores, the old file untouched
        seen.append((os.path.basename(source), open(source).read(), open(target).read(), os.stat(source).st_mode & 0o777))
        real_replace(source, target)

    monkeypatch.setattr(installed.os, "replace", replace)
    assert installed.main(["--textfile-dir", str(directory)], nvml=FakeNVML(two_h200s()), journal=NO_XID, now=NOW) == 0
    name, new, old, mode = seen[0]
    assert name.startswith(".gauntlet_gpu.prom.") and name.endswith(".tmp")
    assert (new, old, mode) == (TWO_GPUS, "old\n", 0o644)
    assert os.listdir(str(directory)) == ["gauntlet_gpu.prom"]
    assert (directory / "gauntlet_gpu.prom").read_text() == TWO_GPUS
    assert os.stat(str(directory / "gauntlet_gpu.prom")).st_mode & 0o777 == 0o644


def test_a_failed_write_removes_the_temporary_file_and_keeps_the_old(installed, tmp_path, monkeypatch, capsys):
    directory = tmp_path / "textfile"
    directory.mkdir()
    (directory / "gauntlet_gpu.prom").write_text("old\n")

    def full_disk(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(installed.os, "fsync", full_disk)
    assert installed.main(["--textfile-dir", str(directory)], nvml=FakeNVML(two_h200s()), journal=NO_XID, now=NOW) == 1
    assert os.listdir(str(directory)) == ["gauntlet_gpu.prom"]
    assert (directory / "gauntlet_gpu.prom").read_text() == "old\n"
    assert "could not write %s: [Errno 28] No space left on device" % (directory / "gauntlet_gpu.prom") in capsys.readouterr().err


def test_run_as_installed_on_a_host_without_a_driver(installed, tmp_path):
    """The real entry point, by the test's Python, into a textfile directory: on this GPU-less machine either
    pynvml is missing or it finds no libnvidia-ml.so.1."""
    directory = tmp_path / "textfile"
    directory.mkdir()
    script = os.path.join(os.path.dirname(installed.__file__), "gauntlet_gpu_textfile.py")
    env = dict(os.environ, PYTHONPATH="")
    result = subprocess.run([sys.executable, script, "--textfile-dir", str(directory)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, check=False)
    assert result.returncode == 0 and result.stderr == b""
    text = (directory / "gauntlet_gpu.prom").read_text()
    assert re.match(r"# (NVML could not be initialised: NVML Shared Library Not Found \(NVMLError_LibraryNotFound\)|"
                    r"pynvml \(nvidia-ml-py\) is not installed on the target: No module named 'pynvml')\n", text), text
    assert "gauntlet_gpu_collector_success 0\n" in text and "{gpu=" not in text
    promtool_check(text, tmp_path)
