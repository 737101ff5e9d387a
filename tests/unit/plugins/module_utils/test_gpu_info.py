# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Tests for module_utils/host/gpu_info.py.

The H200 recording (tests/unit/fixtures/gpu/h200-1gpu.nvml.json) was made on a
real NVIDIA H200 by tests/unit/fixtures/gpu/record_nvml.py; replaying it must
give exactly the facts gpu_info produced there (h200-1gpu.facts.json).  The
multi-GPU cases are synthetic: they clone the recorded H200 calls to more
devices and add the topology / NVLink answers by hand.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json
import os
import re
import sys

import pytest

from ansible_collections.gauntlet.vllm.plugins.module_utils.host import gpu_info
from ansible_collections.gauntlet.vllm.tests.unit.fixtures.gpu import nvml_replay
from ansible_collections.gauntlet.vllm.tests.unit.fixtures.gpu.nvml_replay import (
    FakeNVML,
    OtherRecordedError,
    device_calls,
    nvml_error,
    retag,
    struct,
)

HERE = os.path.dirname(os.path.abspath(__file__))
GPU_FIXTURES = os.path.normpath(os.path.join(HERE, "..", "..", "fixtures", "gpu"))
RECORDING = nvml_replay.load_recording(os.path.join(GPU_FIXTURES, "h200-1gpu.nvml.json"))
with open(os.path.join(GPU_FIXTURES, "h200-1gpu.facts.json")) as _facts_file:
    H200_FACTS = json.load(_facts_file)

MAX_LINKS = RECORDING["constants"]["NVML_NVLINK_MAX_LINKS"]
SWITCH = 2


def h200():
    return copy.deepcopy(RECORDING)


def without_processes(facts):
    facts = copy.deepcopy(facts)
    for device in facts["devices"]:
        del device["processes"]
    return facts


def bus_id(index):
    return "00000000:%02X:00.0" % (0x18 + 0x10 * index)


def multi_gpu(count, level, nvlinks=None):
    """Recording of ``count`` H200s cloned from the real one.

    ``level(a, b)`` gives the NVML topology level of a pair; ``nvlinks`` maps a
    device index to its active links, a list of ``(remote_bus_id, remote_type)``.
    """
    recording = h200()
    base = device_calls(recording, 0)
    calls = dict((key, value) for key, value in recording["calls"].items() if key not in base)
    calls["nvmlDeviceGetCount()"] = count
    for index in range(count):
        device = retag(base, 0, index)
        pci = device["nvmlDeviceGetPciInfo(gpu%d)" % index]["fields"]
        pci["busId"] = {"__bytes__": bus_id(index)}
        pci["busIdLegacy"] = {"__bytes__": bus_id(index)[4:]}
        pci["bus"] = 0x18 + 0x10 * index
        device["nvmlDeviceGetUUID(gpu%d)" % index] = "GPU-00000000-0000-0000-0000-%012d" % index
        device["nvmlDeviceGetSerial(gpu%d)" % index] = "16540240000%02d" % index
        links = (nvlinks or {}).get(index)
        if links is not None:
            set_nvlinks(device, index, links)
        calls.update(device)
    for first in range(count):
        for second in range(first + 1, count):
            calls["nvmlDeviceGetTopologyCommonAncestor(gpu%d,gpu%d)" % (first, second)] = level(first, second)
    recording["calls"] = calls
    return recording


def set_nvlinks(calls, index, links, links_per_gpu=18):
    """Replace the recorded 'NVLink Not Supported' of GPU ``index`` by ``links``."""
    calls.pop("nvmlDeviceGetNvLinkState(gpu%d,0)" % index, None)
    for link in range(MAX_LINKS):
        key = "(gpu%d,%d)" % (index, link)
        if link < len(links):
            remote_bus, remote_type = links[link]
            calls["nvmlDeviceGetNvLinkState" + key] = 1
            calls["nvmlDeviceGetNvLinkRemotePciInfo" + key] = struct("nvmlPciInfo_t", busId=remote_bus.encode())
            calls["nvmlDeviceGetNvLinkRemoteDeviceType" + key] = remote_type
        elif link < links_per_gpu:
            calls["nvmlDeviceGetNvLinkState" + key] = 0
        else:
            calls["nvmlDeviceGetNvLinkState" + key] = nvml_error("NVMLError_InvalidArgument")


def collect(recording, **kwargs):
    fake = FakeNVML(recording, missing=kwargs.pop("missing", ()))
    facts = gpu_info.collect_gpu_facts(nvml=fake, **kwargs)
    json.dumps(facts)  # plain data only
    return facts, fake


# --- the real H200 recording -------------------------------------------------

def test_h200_replay_reproduces_recorded_facts():
    facts, fake = collect(h200(), include_processes=True)
    assert facts == H200_FACTS
    # the recording holds exactly the calls gpu_info makes, and NVML is shut down last
    assert sorted(fake.log) == sorted(RECORDING["calls"])
    assert fake.log[0] == "nvmlInit()"
    assert fake.log[-1] == "nvmlShutdown()"


def test_h200_default_has_no_processes():
    facts, fake = collect(h200())
    assert facts == without_processes(H200_FACTS)
    assert "nvmlDeviceGetComputeRunningProcesses(gpu0)" not in fake.log


def test_h200_recorded_values():
    gpus = H200_FACTS
    assert gpus["count"] == 1
    assert gpus["reason"] is None
    assert gpus["cuda_version"] == "13.0"
    assert gpus["topology"] == {"nvlink": False, "links": []}
    device = gpus["devices"][0]
    assert device["name"] == "NVIDIA H200"
    assert device["compute_capability"] == "9.0"
    assert (device["compute_capability_major"], device["compute_capability_minor"]) == (9, 0)
    assert device["memory_total_bytes"] == 150754820096  # 140.4 GiB
    assert device["memory_total_bytes"] == device["memory_used_bytes"] + device["memory_free_bytes"]
    assert device["nvlink_active_links"] == 0  # NVML: NVLink Not Supported in this pass-through VM
    assert device["numa_node"] == 0
    assert device["power_limit_watts"] == 700.0
    assert (device["pcie_generation_max"], device["pcie_width_max"]) == (5, 16)
    assert device["processes"] == []
    # NVML said Not Supported for these on the H200
    assert RECORDING["calls"]["nvmlDeviceGetNvLinkState(gpu0,0)"]["__error__"] == "NVMLError_NotSupported"


def smi_value(text, label):
    match = re.search(r"^\s*%s\s*:\s*(.+?)\s*$" % re.escape(label), text, re.MULTILINE)
    assert match, label
    return match.group(1)


def test_h200_facts_agree_with_nvidia_smi():
    with open(os.path.join(GPU_FIXTURES, "h200-1gpu.nvidia-smi-q.txt")) as handle:
        smi = handle.read()
    device = H200_FACTS["devices"][0]
    assert smi_value(smi, "Driver Version") == H200_FACTS["driver_version"]
    assert smi_value(smi, "CUDA Version") == H200_FACTS["cuda_version"]
    assert smi_value(smi, "Attached GPUs") == str(H200_FACTS["count"])
    assert smi_value(smi, "Product Name") == device["name"]
    assert smi_value(smi, "GPU UUID") == device["uuid"]
    assert smi_value(smi, "Serial Number") == device["serial"]
    assert smi_value(smi, "Bus Id") == device["pci_bus_id"]
    with open(os.path.join(GPU_FIXTURES, "h200-1gpu.nvidia-smi-topo.txt")) as handle:
        topo = handle.read()
    # GPU0  X  <CPU affinity>  <NUMA affinity>
    row = [cell.strip() for cell in re.search(r"^GPU0\t(.*)$", topo, re.MULTILINE).group(1).split("\t")]
    assert row[0] == "X"
    assert row[2] == str(device["numa_node"])


# --- synthetic multi-GPU topologies ------------------------------------------

def test_eight_gpus_pcie_only():
    facts, dummy = collect(multi_gpu(8, lambda a, b: 20 if a // 4 == b // 4 else 50))
    assert facts["count"] == 8
    assert [device["index"] for device in facts["devices"]] == list(range(8))
    assert [device["pci_bus_id"] for device in facts["devices"]] == [bus_id(i) for i in range(8)]
    assert all(device["nvlink_active_links"] == 0 for device in facts["devices"])
    assert facts["topology"]["nvlink"] is False
    links = facts["topology"]["links"]
    assert len(links) == 28
    assert [(link["a"], link["b"]) for link in links] == [(a, b) for a in range(8) for b in range(a + 1, 8)]
    for link in links:
        expected = "PXB" if link["a"] // 4 == link["b"] // 4 else "SYS"
        assert link == {"a": link["a"], "b": link["b"], "type": expected, "nvlink_count": 0}


@pytest.mark.parametrize("level, name", [
    (0, "SAME_BOARD"), (10, "PIX"), (20, "PXB"), (30, "PHB"), (40, "NODE"), (50, "SYS"), (77, None),
])
def test_topology_levels(level, name):
    facts, dummy = collect(multi_gpu(2, lambda a, b: level))
    assert facts["topology"]["links"] == [{"a": 0, "b": 1, "type": name, "nvlink_count": 0}]


def test_two_gpus_direct_nvlink():
    nvlinks = {0: [(bus_id(1), 0)] * 12, 1: [(bus_id(0), 0)] * 12}
    facts, dummy = collect(multi_gpu(2, lambda a, b: 30, nvlinks))
    assert [device["nvlink_active_links"] for device in facts["devices"]] == [12, 12]
    assert facts["topology"] == {"nvlink": True, "links": [{"a": 0, "b": 1, "type": "NVLINK", "nvlink_count": 12}]}


def test_nvlink_remote_bus_id_in_other_format():
    # a remote end written with a 16-bit domain still matches NVML's 32-bit one
    nvlinks = {0: [(bus_id(1)[4:].lower(), 0)] * 4, 1: []}
    facts, dummy = collect(multi_gpu(2, lambda a, b: 50, nvlinks))
    assert facts["topology"]["links"] == [{"a": 0, "b": 1, "type": "NVLINK", "nvlink_count": 4}]
    assert [device["nvlink_active_links"] for device in facts["devices"]] == [4, 0]


def test_four_gpus_bridged_pairs():
    nvlinks = {
        0: [(bus_id(1), 0)] * 4,
        1: [(bus_id(0), 0)] * 4,
        2: [(bus_id(3), 0)] * 4,
        3: [(bus_id(2), 0)] * 4,
    }
    facts, dummy = collect(multi_gpu(4, lambda a, b: 40 if a // 2 == b // 2 else 50, nvlinks))
    types = dict(((link["a"], link["b"]), (link["type"], link["nvlink_count"])) for link in facts["topology"]["links"])
    assert types == {
        (0, 1): ("NVLINK", 4), (2, 3): ("NVLINK", 4),
        (0, 2): ("SYS", 0), (0, 3): ("SYS", 0), (1, 2): ("SYS", 0), (1, 3): ("SYS", 0),
    }
    assert facts["topology"]["nvlink"] is True


def test_eight_gpus_nvswitch():
    switches = ["00000000:%02X:00.0" % bus for bus in (0xA0, 0xA1, 0xA2, 0xA3)]
    links = [(switches[link % 4], SWITCH) for link in range(18)]
    facts, dummy = collect(multi_gpu(8, lambda a, b: 50, dict((i, links) for i in range(8))))
    assert all(device["nvlink_active_links"] == 18 for device in facts["devices"])
    assert facts["topology"]["nvlink"] is True
    assert len(facts["topology"]["links"]) == 28
    assert all(link["type"] == "NVLINK" and link["nvlink_count"] == 18 for link in facts["topology"]["links"])


def test_single_gpu_on_nvswitch_reports_nvlink():
    recording = h200()
    set_nvlinks(recording["calls"], 0, [("00000000:A0:00.0", SWITCH)] * 18)
    facts, dummy = collect(recording)
    assert facts["devices"][0]["nvlink_active_links"] == 18
    assert facts["topology"] == {"nvlink": True, "links": []}


def test_nvlink_to_a_gpu_outside_the_host_is_not_a_pair():
    # remote end is a GPU this host cannot see (for example another VM's)
    nvlinks = {0: [("00000000:99:00.0", 0)] * 6, 1: []}
    facts, dummy = collect(multi_gpu(2, lambda a, b: 50, nvlinks))
    assert facts["topology"] == {"nvlink": True, "links": [{"a": 0, "b": 1, "type": "SYS", "nvlink_count": 0}]}


def test_nvlink_state_unreadable_is_null():
    recording = h200()
    calls = recording["calls"]
    del calls["nvmlDeviceGetNvLinkState(gpu0,0)"]
    for link in range(MAX_LINKS):
        calls["nvmlDeviceGetNvLinkState(gpu0,%d)" % link] = nvml_error("NVMLError_NoPermission")
    facts, dummy = collect(recording)
    assert facts["devices"][0]["nvlink_active_links"] is None
    assert facts["topology"]["nvlink"] is False


def test_nvlink_max_links_default_without_constant():
    recording = h200()
    del recording["constants"]["NVML_NVLINK_MAX_LINKS"]
    facts, fake = collect(recording)
    assert facts == without_processes(H200_FACTS)
    assert "nvmlDeviceGetNvLinkState(gpu0,0)" in fake.log


# --- values NVML cannot give ---------------------------------------------------

def test_power_draw_not_supported_is_null():
    recording = h200()
    recording["calls"]["nvmlDeviceGetPowerUsage(gpu0)"] = nvml_error("NVMLError_NotSupported")
    facts, dummy = collect(recording)
    expected = without_processes(H200_FACTS)
    expected["devices"][0]["power_draw_watts"] = None
    assert facts == expected


def test_power_limit_falls_back_to_management_limit():
    recording = h200()
    recording["calls"]["nvmlDeviceGetEnforcedPowerLimit(gpu0)"] = nvml_error("NVMLError_NotSupported")
    recording["calls"]["nvmlDeviceGetPowerManagementLimit(gpu0)"] = 600000
    facts, dummy = collect(recording)
    assert facts["devices"][0]["power_limit_watts"] == 600.0
    recording["calls"]["nvmlDeviceGetPowerManagementLimit(gpu0)"] = nvml_error("NVMLError_NoPermission")
    facts, dummy = collect(recording)
    assert facts["devices"][0]["power_limit_watts"] is None


@pytest.mark.parametrize("call, fields", [
    ("nvmlDeviceGetSerial(gpu0)", ["serial"]),
    ("nvmlDeviceGetName(gpu0)", ["name"]),
    ("nvmlDeviceGetUUID(gpu0)", ["uuid"]),
    ("nvmlDeviceGetPciInfo(gpu0)", ["pci_bus_id"]),
    ("nvmlDeviceGetMemoryAffinity(gpu0,4,0)", ["numa_node"]),
    ("nvmlDeviceGetMemoryInfo(gpu0)", ["memory_total_bytes", "memory_used_bytes", "memory_free_bytes"]),
    ("nvmlDeviceGetCudaComputeCapability(gpu0)",
     ["compute_capability", "compute_capability_major", "compute_capability_minor"]),
    ("nvmlDeviceGetCurrPcieLinkGeneration(gpu0)", ["pcie_generation"]),
    ("nvmlDeviceGetMaxPcieLinkGeneration(gpu0)", ["pcie_generation_max"]),
    ("nvmlDeviceGetCurrPcieLinkWidth(gpu0)", ["pcie_width"]),
    ("nvmlDeviceGetMaxPcieLinkWidth(gpu0)", ["pcie_width_max"]),
])
@pytest.mark.parametrize("error", ["NVMLError_NotSupported", "NVMLError_NoPermission", "NVMLError_Unknown"])
def test_any_device_error_gives_null(call, fields, error):
    recording = h200()
    recording["calls"][call] = nvml_error(error)
    facts, dummy = collect(recording)
    expected = without_processes(H200_FACTS)
    for field in fields:
        expected["devices"][0][field] = None
    assert facts == expected


@pytest.mark.parametrize("call, field", [
    ("nvmlSystemGetDriverVersion()", "driver_version"),
    ("nvmlSystemGetNVMLVersion()", "nvml_version"),
])
def test_system_error_gives_null(call, field):
    recording = h200()
    recording["calls"][call] = nvml_error("NVMLError_NotSupported")
    facts, dummy = collect(recording)
    assert facts[field] is None
    assert facts["count"] == 1


def test_cuda_version_from_older_pynvml():
    recording = h200()
    recording["calls"]["nvmlSystemGetCudaDriverVersion()"] = 12080
    facts, dummy = collect(recording, missing=["nvmlSystemGetCudaDriverVersion_v2"])
    assert facts["cuda_version"] == "12.8"


def test_function_missing_from_pynvml_gives_null():
    facts, dummy = collect(h200(), missing=["nvmlDeviceGetMemoryAffinity"])
    expected = without_processes(H200_FACTS)
    expected["devices"][0]["numa_node"] = None
    assert facts == expected


def test_numa_node_unset_mask_is_null():
    recording = h200()
    recording["calls"]["nvmlDeviceGetMemoryAffinity(gpu0,4,0)"] = [0, 0, 0, 0]
    facts, dummy = collect(recording)
    assert facts["devices"][0]["numa_node"] is None
    recording["calls"]["nvmlDeviceGetMemoryAffinity(gpu0,4,0)"] = [0, 6, 0, 0]
    facts, dummy = collect(recording)
    assert facts["devices"][0]["numa_node"] == 65


def test_lost_gpu_keeps_its_slot():
    recording = multi_gpu(2, lambda a, b: 20)
    recording["calls"]["nvmlDeviceGetHandleByIndex(1)"] = nvml_error("NVMLError_GpuIsLost")
    facts, dummy = collect(recording)
    assert facts["count"] == 2
    lost = facts["devices"][1]
    assert lost["index"] == 1
    assert all(value is None for key, value in lost.items() if key != "index")
    assert facts["topology"]["links"] == [{"a": 0, "b": 1, "type": None, "nvlink_count": 0}]


def test_lost_gpu_has_every_key_of_a_present_one_set_to_none():
    recording = multi_gpu(2, lambda a, b: 20)
    recording["calls"]["nvmlDeviceGetHandleByIndex(1)"] = nvml_error("NVMLError_GpuIsLost")
    for include_processes in (False, True):
        facts, dummy = collect(recording, include_processes=include_processes)
        present, lost = facts["devices"]
        assert list(lost) == list(present)
        assert ("processes" in lost) is include_processes
        assert all(value is None for key, value in lost.items() if key != "index")


def test_processes():
    recording = h200()
    recording["calls"]["nvmlDeviceGetComputeRunningProcesses(gpu0)"] = [
        {"__object__": "nvmlFriendlyObject", "fields": {"pid": 4242, "usedGpuMemory": 135291469824,
                                                        "gpuInstanceId": 4294967295, "computeInstanceId": 4294967295}},
        {"__object__": "nvmlFriendlyObject", "fields": {"pid": 4343, "usedGpuMemory": None}},
    ]
    facts, dummy = collect(recording, include_processes=True)
    assert facts["devices"][0]["processes"] == [
        {"pid": 4242, "used_memory_bytes": 135291469824},
        {"pid": 4343, "used_memory_bytes": None},
    ]
    recording["calls"]["nvmlDeviceGetComputeRunningProcesses(gpu0)"] = nvml_error("NVMLError_NoPermission")
    facts, dummy = collect(recording, include_processes=True)
    assert facts["devices"][0]["processes"] is None


# --- no GPU / no driver / no pynvml --------------------------------------------

EMPTY_TOPOLOGY = {"nvlink": False, "links": []}


@pytest.mark.parametrize("error, message", [
    ("NVMLError_LibraryNotFound", "NVML Shared Library Not Found"),
    ("NVMLError_DriverNotLoaded", "Driver Not Loaded"),
    ("NVMLError_NoPermission", "Insufficient Permissions"),
])
def test_driver_missing(error, message):
    facts, fake = collect({"calls": {"nvmlInit()": nvml_error(error)}})
    assert facts == {
        "count": 0,
        "driver_version": None,
        "cuda_version": None,
        "nvml_version": None,
        "devices": [],
        "topology": EMPTY_TOPOLOGY,
        "reason": "NVML could not be initialised: %s (%s)" % (message, error),
    }
    assert fake.log == ["nvmlInit()"]  # no shutdown without a successful init


def test_init_raising_something_else():
    facts, dummy = collect({"calls": {"nvmlInit()": {"__exception__": "OSError", "message": "boom"}}})
    assert facts["count"] == 0
    assert facts["reason"] == "NVML could not be initialised: OSError: boom (OtherRecordedError)"


def test_pynvml_not_installed(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes ``import pynvml`` raise ImportError
    facts = gpu_info.collect_gpu_facts()
    assert facts["count"] == 0
    assert facts["devices"] == []
    assert facts["topology"] == EMPTY_TOPOLOGY
    assert facts["reason"].startswith("pynvml (nvidia-ml-py) is not installed on the target")


def test_real_pynvml_on_this_host():
    """Whatever this host has: no traceback, and a reason exactly when there is no GPU."""
    facts = gpu_info.collect_gpu_facts()
    json.dumps(facts)
    assert facts["count"] == len(facts["devices"])
    if facts["count"] == 0:
        assert facts["reason"]
    else:
        assert facts["reason"] is None


def test_no_gpus():
    recording = h200()
    recording["calls"] = dict((key, value) for key, value in recording["calls"].items() if "gpu0" not in key
                              and "HandleByIndex" not in key)
    recording["calls"]["nvmlDeviceGetCount()"] = 0
    facts, fake = collect(recording)
    assert facts["count"] == 0
    assert facts["reason"] == "NVML reports no GPUs"
    assert facts["driver_version"] == H200_FACTS["driver_version"]
    assert fake.shutdown_called


def test_device_count_fails():
    recording = h200()
    recording["calls"]["nvmlDeviceGetCount()"] = nvml_error("NVMLError_Unknown")
    facts, fake = collect(recording)
    assert facts["count"] == 0
    assert facts["devices"] == []
    assert facts["reason"] == "nvmlDeviceGetCount failed: Unknown Error (NVMLError_Unknown)"
    assert facts["cuda_version"] == "13.0"
    assert fake.shutdown_called


def test_shutdown_after_unexpected_error():
    recording = h200()
    recording["calls"]["nvmlDeviceGetName(gpu0)"] = {"__exception__": "RuntimeError", "message": "unexpected"}
    fake = FakeNVML(recording)
    with pytest.raises(OtherRecordedError):
        gpu_info.collect_gpu_facts(nvml=fake)
    assert fake.log[-1] == "nvmlShutdown()"


def test_shutdown_failure_is_ignored():
    recording = h200()
    recording["calls"]["nvmlShutdown()"] = nvml_error("NVMLError_Uninitialized")
    facts, dummy = collect(recording)
    assert facts == without_processes(H200_FACTS)


# --- helpers -------------------------------------------------------------------

@pytest.mark.parametrize("raw, text", [
    (13000, "13.0"), (12080, "12.8"), (12010, "12.1"), (11040, "11.4"), (0, None), (None, None), ("13000", None),
])
def test_format_cuda_version(raw, text):
    assert gpu_info.format_cuda_version(raw) == text


@pytest.mark.parametrize("raw, key", [
    ("00000000:19:00.0", "0000:19:00.0"),
    (b"00000000:19:00.0", "0000:19:00.0"),
    ("0000:9A:00.0", "0000:9a:00.0"),
    ("00000001:19:00.0", "0001:19:00.0"),
    ("", None),
    (None, None),
    ("garbage", "garbage"),
])
def test_bus_id_key(raw, key):
    assert gpu_info.bus_id_key(raw) == key


def test_mask_bits():
    assert gpu_info.mask_bits([1, 0, 0, 0]) == [0]
    assert gpu_info.mask_bits([0b101, 1]) == [0, 2, 64]
    assert gpu_info.mask_bits(None) == []


def test_to_text():
    assert gpu_info.to_text(b"NVIDIA H200\x00") == "NVIDIA H200"
    assert gpu_info.to_text("x") == "x"
    assert gpu_info.to_text(None) is None


def test_gpu_info_imports_nothing_from_ansible():
    with open(gpu_info.__file__) as handle:
        source = handle.read()
    assert not re.search(r"^\s*(from|import)\s+ansible", source, re.MULTILINE)
    assert not re.search(r"^import pynvml|^from pynvml", source, re.MULTILINE)
