# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Collect NVIDIA GPU facts through NVML (the ``pynvml`` module of the
``nvidia-ml-py`` package) for ``gauntlet.vllm.gpu_facts``.

This file deliberately imports nothing from Ansible and only the standard
library at module level, so it can be copied to a GPU host and run on its own
(``tests/unit/fixtures/gpu/record_nvml.py`` does exactly that).  ``pynvml`` is
imported lazily inside ``import_nvml`` so importing this file never needs it.

Rules:

* Every NVML query that raises ``NVMLError`` (Not Supported, Insufficient
  Permissions, ...) turns into ``None`` for that one field; it never fails the
  collection.  A function that the installed ``pynvml`` does not provide is
  treated the same way.
* A host without ``pynvml`` or whose ``nvmlInit`` fails (no driver, no
  ``libnvidia-ml.so.1``) gets ``count: 0``, no devices and a ``reason``.
* ``nvmlShutdown`` is always called after a successful ``nvmlInit``.
* ``numa_node`` is the CPU-side NUMA node closest to the GPU
  (``nvmlDeviceGetMemoryAffinity``, scope node), i.e. the "NUMA Affinity"
  column of ``nvidia-smi topo -m``; not ``nvmlDeviceGetNumaNodeId``, which is
  the NUMA node of the GPU's own memory on coherent (Grace) systems and says
  Not Supported on PCIe/SXM hosts.
* Memory comes from ``nvmlDeviceGetMemoryInfo`` version 1, whose ``used``
  includes the driver-reserved memory (``total == used + free``).
* Topology: for every pair ``a < b`` the NVML common-ancestor level is mapped
  to the ``nvidia-smi topo -m`` names; the pair is ``NVLINK`` when NVLinks join
  the two GPUs, either directly (the remote PCI bus id of an active link on one
  GPU is the other GPU's bus id) or through NVSwitches (both GPUs have active
  links whose remote end is an NVSwitch; ``nvlink_count`` is then the smaller
  of the two switch-link counts, as ``nvidia-smi topo -m`` shows ``NV18`` for
  every pair of an HGX H100/H200 board).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


# NVML ABI values (stable across driver releases; repeated here so that a
# fake NVML in tests only has to provide the functions).
NVML_FEATURE_ENABLED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_NVLINK_DEVICE_TYPE_SWITCH = 2
NVML_AFFINITY_SCOPE_NODE = 0
DEFAULT_NVLINK_MAX_LINKS = 18
# 64-bit words asked for in NUMA node masks (4 words: up to 256 NUMA nodes)
NUMA_NODE_SET_WORDS = 4

# nvmlGpuTopologyLevel_t -> nvidia-smi topo -m legend
TOPOLOGY_LEVELS = {
    0: "SAME_BOARD",   # NVML_TOPOLOGY_INTERNAL
    10: "PIX",         # NVML_TOPOLOGY_SINGLE
    20: "PXB",         # NVML_TOPOLOGY_MULTIPLE
    30: "PHB",         # NVML_TOPOLOGY_HOSTBRIDGE
    40: "NODE",        # NVML_TOPOLOGY_NODE (formerly NVML_TOPOLOGY_CPU)
    50: "SYS",         # NVML_TOPOLOGY_SYSTEM
}
NVLINK = "NVLINK"

PYNVML_MISSING = "pynvml (nvidia-ml-py) is not installed on the target"


def empty_facts(reason, driver_version=None, cuda_version=None, nvml_version=None):
    """Facts for a host where no GPU can be seen; ``reason`` says why."""
    return {
        "count": 0,
        "driver_version": driver_version,
        "cuda_version": cuda_version,
        "nvml_version": nvml_version,
        "devices": [],
        "topology": {"nvlink": False, "links": []},
        "reason": reason,
    }


def import_nvml():
    """Import ``pynvml`` lazily; return ``(module, None)`` or ``(None, reason)``."""
    try:
        import pynvml
    except ImportError as exc:
        return None, "%s: %s" % (PYNVML_MISSING, exc)
    return pynvml, None


def describe_error(exc):
    """``str(exc)`` with the exception class name, never raising."""
    try:
        text = str(exc)
    except Exception:  # NVMLError.__str__ may call into a half-loaded library
        text = ""
    name = type(exc).__name__
    if not text:
        code = getattr(exc, "value", None)
        text = "error code %s" % code if code is not None else "no message"
    return "%s (%s)" % (text, name)


def to_text(value):
    """NVML strings arrive as ``bytes`` from older pynvml and inside structs."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace").rstrip("\x00")
    return value


def milliwatts_to_watts(value):
    if value is None:
        return None
    return value / 1000.0


def format_cuda_version(value):
    """``13000`` -> ``"13.0"``, ``12080`` -> ``"12.8"`` (NVML's CUDA_VERSION_MAJOR/MINOR)."""
    if value is None or isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        return None
    return "%d.%d" % (value // 1000, (value % 1000) // 10)


def bus_id_key(bus_id):
    """Canonical form of a PCI bus id for comparisons.

    NVML writes ``00000000:19:00.0`` (32-bit domain); sysfs and some callers
    ``0000:19:00.0``.  Both become ``0000:19:00.0``.
    """
    bus_id = to_text(bus_id)
    if not bus_id:
        return None
    bus_id = bus_id.strip().lower()
    domain, sep, rest = bus_id.partition(":")
    if not sep:
        return bus_id
    try:
        return "%04x:%s" % (int(domain, 16), rest)
    except ValueError:
        return bus_id


def mask_bits(words, word_bits=64):
    """Set bit numbers of an NVML bitmask (a sequence of ``word_bits``-bit words); [] for None."""
    bits = []
    for position, word in enumerate(words or ()):
        for bit in range(word_bits):
            if int(word) >> bit & 1:
                bits.append(position * word_bits + bit)
    return bits


def _error_code(error):
    return getattr(error, "value", None)


class _NVML(object):
    """Calls into an NVML module, turning errors into ``None``."""

    def __init__(self, nvml):
        self.nvml = nvml
        self.error_class = getattr(nvml, "NVMLError", None) or Exception

    def attempt(self, name, *args):
        """Return ``(value, error)``; ``error`` is None on success.

        ``error`` is the NVMLError raised, or a string when the installed
        pynvml has no such function.
        """
        func = getattr(self.nvml, name, None)
        if func is None:
            return None, "%s is not provided by this pynvml" % name
        try:
            return func(*args), None
        except self.error_class as exc:
            return None, exc

    def get(self, name, *args):
        return self.attempt(name, *args)[0]

    def first(self, names, *args):
        """Value of the first of ``names`` that answers."""
        for name in names:
            value, error = self.attempt(name, *args)
            if error is None:
                return value
        return None


def _nvlink_links(api, handle, max_links):
    """Active links of one GPU: ``(links, known)``.

    ``links`` is a list of ``{"link", "remote_bus_id", "remote_type"}`` for
    every link whose state is enabled.  ``known`` is False when link states
    could not be read for a reason other than Not Supported / Invalid
    Argument (which mean "no NVLink" / "no such link").
    """
    links = []
    known = True
    for link in range(max_links):
        state, error = api.attempt("nvmlDeviceGetNvLinkState", handle, link)
        if error is not None:
            code = _error_code(error)
            if code == NVML_ERROR_NOT_SUPPORTED and link == 0:
                break  # the GPU has no NVLink at all
            if code not in (NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_INVALID_ARGUMENT):
                known = False
            continue
        if state != NVML_FEATURE_ENABLED:
            continue
        remote = api.get("nvmlDeviceGetNvLinkRemotePciInfo", handle, link)
        links.append({
            "link": link,
            "remote_bus_id": bus_id_key(getattr(remote, "busId", None)) if remote is not None else None,
            "remote_type": api.get("nvmlDeviceGetNvLinkRemoteDeviceType", handle, link),
        })
    return links, known


def _processes(api, handle):
    procs = api.get("nvmlDeviceGetComputeRunningProcesses", handle)
    if procs is None:
        return None
    result = []
    for proc in procs:
        result.append({
            "pid": getattr(proc, "pid", None),
            "used_memory_bytes": getattr(proc, "usedGpuMemory", None),
        })
    return result


def _empty_device(index, include_processes):
    """Every fact of one GPU set to None (a GPU NVML could not open keeps them so)."""
    device = {
        "index": index,
        "name": None,
        "uuid": None,
        "serial": None,
        "pci_bus_id": None,
        "numa_node": None,
        "memory_total_bytes": None,
        "memory_used_bytes": None,
        "memory_free_bytes": None,
        "compute_capability": None,
        "compute_capability_major": None,
        "compute_capability_minor": None,
        "pcie_generation": None,
        "pcie_generation_max": None,
        "pcie_width": None,
        "pcie_width_max": None,
        "power_limit_watts": None,
        "power_draw_watts": None,
        "nvlink_active_links": None,
    }
    if include_processes:
        device["processes"] = None
    return device


def _identity_facts(api, handle, device):
    """Name, UUID, serial, PCI bus id and NUMA node."""
    device["name"] = to_text(api.get("nvmlDeviceGetName", handle))
    device["uuid"] = to_text(api.get("nvmlDeviceGetUUID", handle))
    device["serial"] = to_text(api.get("nvmlDeviceGetSerial", handle)) or None

    pci = api.get("nvmlDeviceGetPciInfo", handle)
    if pci is not None:
        device["pci_bus_id"] = to_text(getattr(pci, "busId", None)) or None

    nodes = mask_bits(api.get("nvmlDeviceGetMemoryAffinity", handle, NUMA_NODE_SET_WORDS, NVML_AFFINITY_SCOPE_NODE))
    if nodes:
        device["numa_node"] = nodes[0]


def _memory_and_capability_facts(api, handle, device):
    """Memory totals and the CUDA compute capability."""
    memory = api.get("nvmlDeviceGetMemoryInfo", handle)
    if memory is not None:
        device["memory_total_bytes"] = getattr(memory, "total", None)
        device["memory_used_bytes"] = getattr(memory, "used", None)
        device["memory_free_bytes"] = getattr(memory, "free", None)

    capability = api.get("nvmlDeviceGetCudaComputeCapability", handle)
    if capability is not None:
        major, minor = capability[0], capability[1]
        device["compute_capability"] = "%d.%d" % (major, minor)
        device["compute_capability_major"] = major
        device["compute_capability_minor"] = minor


def _pcie_and_power_facts(api, handle, device):
    """PCIe link generation and width (current and maximum), power limit and draw in watts."""
    device["pcie_generation"] = api.get("nvmlDeviceGetCurrPcieLinkGeneration", handle)
    device["pcie_generation_max"] = api.get("nvmlDeviceGetMaxPcieLinkGeneration", handle)
    device["pcie_width"] = api.get("nvmlDeviceGetCurrPcieLinkWidth", handle)
    device["pcie_width_max"] = api.get("nvmlDeviceGetMaxPcieLinkWidth", handle)

    device["power_limit_watts"] = milliwatts_to_watts(
        api.first(("nvmlDeviceGetEnforcedPowerLimit", "nvmlDeviceGetPowerManagementLimit"), handle))
    device["power_draw_watts"] = milliwatts_to_watts(api.get("nvmlDeviceGetPowerUsage", handle))


def _device_facts(api, index, handle, max_links, include_processes):
    """Facts for one GPU plus its active NVLinks (internal, for the topology)."""
    device = _empty_device(index, include_processes)
    if handle is None:
        return device, []

    _identity_facts(api, handle, device)
    _memory_and_capability_facts(api, handle, device)
    _pcie_and_power_facts(api, handle, device)

    links, known = _nvlink_links(api, handle, max_links)
    device["nvlink_active_links"] = len(links) if (links or known) else None

    if include_processes:
        device["processes"] = _processes(api, handle)
    return device, links


def _pair_facts(api, first, second):
    """Topology entry for GPUs ``first`` and ``second`` (dicts from ``_collect``)."""
    level = None
    if first["handle"] is not None and second["handle"] is not None:
        level = api.get("nvmlDeviceGetTopologyCommonAncestor", first["handle"], second["handle"])
    link_type = TOPOLOGY_LEVELS.get(level)

    a_bus = bus_id_key(first["facts"]["pci_bus_id"])
    b_bus = bus_id_key(second["facts"]["pci_bus_id"])
    direct_ab = len([lnk for lnk in first["links"] if b_bus and lnk["remote_bus_id"] == b_bus])
    direct_ba = len([lnk for lnk in second["links"] if a_bus and lnk["remote_bus_id"] == a_bus])
    nvlink_count = max(direct_ab, direct_ba)
    if not nvlink_count:
        switch_a = len([lnk for lnk in first["links"] if lnk["remote_type"] == NVML_NVLINK_DEVICE_TYPE_SWITCH])
        switch_b = len([lnk for lnk in second["links"] if lnk["remote_type"] == NVML_NVLINK_DEVICE_TYPE_SWITCH])
        nvlink_count = min(switch_a, switch_b)
    if nvlink_count:
        link_type = NVLINK
    return {"a": first["facts"]["index"], "b": second["facts"]["index"], "type": link_type, "nvlink_count": nvlink_count}


def _collect(nvml, include_processes):
    api = _NVML(nvml)
    driver_version = to_text(api.get("nvmlSystemGetDriverVersion"))
    cuda_version = format_cuda_version(
        api.first(("nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion")))
    nvml_version = to_text(api.get("nvmlSystemGetNVMLVersion"))

    count, error = api.attempt("nvmlDeviceGetCount")
    if error is not None:
        reason = "nvmlDeviceGetCount failed: %s" % (error if isinstance(error, str) else describe_error(error))
        return empty_facts(reason, driver_version, cuda_version, nvml_version)
    if not count:
        return empty_facts("NVML reports no GPUs", driver_version, cuda_version, nvml_version)

    max_links = getattr(nvml, "NVML_NVLINK_MAX_LINKS", DEFAULT_NVLINK_MAX_LINKS)
    gpus = []
    for index in range(count):
        handle = api.get("nvmlDeviceGetHandleByIndex", index)
        facts, links = _device_facts(api, index, handle, max_links, include_processes)
        gpus.append({"handle": handle, "facts": facts, "links": links})

    pairs = []
    for position, first in enumerate(gpus):
        for second in gpus[position + 1:]:
            pairs.append(_pair_facts(api, first, second))

    return {
        "count": count,
        "driver_version": driver_version,
        "cuda_version": cuda_version,
        "nvml_version": nvml_version,
        "devices": [gpu["facts"] for gpu in gpus],
        "topology": {
            "nvlink": any(gpu["links"] for gpu in gpus),
            "links": pairs,
        },
        "reason": None,
    }


def collect_gpu_facts(nvml=None, include_processes=False):
    """Return the ``gpus`` facts dictionary.

    ``nvml`` is the NVML module to use (``pynvml`` is imported when None); tests
    pass a fake.  Never raises for a missing library or driver: the result then
    has ``count: 0`` and a ``reason``.
    """
    if nvml is None:
        nvml, reason = import_nvml()
        if nvml is None:
            return empty_facts(reason)
    try:
        nvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, NVMLError_DriverNotLoaded, OSError, ...
        return empty_facts("NVML could not be initialised: %s" % describe_error(exc))
    try:
        return _collect(nvml, include_processes)
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:  # nothing useful to do; the facts are already collected
            pass
