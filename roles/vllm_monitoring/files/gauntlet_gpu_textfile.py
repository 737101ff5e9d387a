# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""NVML textfile collector of gauntlet.vllm: the GPUs of this host as node exporter textfile metrics.

One collection per run (a systemd oneshot its timer starts every 15 s): it writes
``<textfile dir>/gauntlet_gpu.prom`` atomically (a temporary file in the same directory, renamed over
the old one, mode 0644), which node exporter's textfile collector serves. Per GPU, labelled
``gpu`` (NVML index), ``uuid`` and ``name``: utilisation (0-1), memory used and total (bytes),
power (W), temperature (C), volatile ECC error counts (corrected/uncorrected since the driver
loaded); for the host: ``NVRM: Xid`` lines in the kernel log since boot, whether NVML could be
read, and when.

An NVML query that fails (Not Supported, No Permission, ...) leaves its one sample out, with a
comment line saying why; no value is ever made up. A host where NVML cannot start (no driver, no
``pynvml``) gets ``gauntlet_gpu_collector_success 0``, no GPU samples and the reason as a comment.

Standard library and ``pynvml`` (nvidia-ml-py) only: run it with the Python of the vLLM venv.
It imports ``gpu_info.py`` (the collection's plugins/module_utils/host/gpu_info.py, written to run on
its own) from its own directory, where the role vllm_monitoring installs both.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import argparse
import math
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import gpu_info  # noqa: E402 (the sibling copy of plugins/module_utils/host/gpu_info.py)

OUTPUT_NAME = "gauntlet_gpu.prom"
DEFAULT_TEXTFILE_DIR = "/var/lib/prometheus/node-exporter"
JOURNAL_COMMAND = ("journalctl", "-k", "-b", "-o", "cat", "--no-pager")
JOURNAL_TIMEOUT_S = 20
XID_MARKER = "NVRM: Xid"

# NVML ABI values, used when the installed pynvml does not name them.
NVML_TEMPERATURE_GPU = 0
NVML_MEMORY_ERROR_TYPE_CORRECTED = 0
NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
NVML_VOLATILE_ECC = 0

# Metric families in the order written: (name, type, help).
FAMILIES = (
    ("gauntlet_gpu_collector_success", "gauge", "Whether NVML could be read (1) or not (0, the reason is a comment in the file)."),
    ("gauntlet_gpu_collector_timestamp_seconds", "gauge", "When the collector last ran, in seconds since the epoch."),
    ("gauntlet_gpu_utilization_ratio", "gauge", "Share of the last sample period in which a kernel ran on the GPU (0-1)."),
    ("gauntlet_gpu_memory_used_bytes", "gauge", "GPU memory in use, driver-reserved memory included, in bytes."),
    ("gauntlet_gpu_memory_total_bytes", "gauge", "GPU memory, in bytes."),
    ("gauntlet_gpu_power_watts", "gauge", "GPU power draw, in watts."),
    ("gauntlet_gpu_temperature_celsius", "gauge", "GPU core temperature, in degrees Celsius."),
    ("gauntlet_gpu_ecc_errors", "gauge", "Volatile ECC error count of the GPU since the driver loaded, by type."),
    ("gauntlet_gpu_xid_events", "gauge", "NVRM: Xid lines in the kernel log since boot."),
)


# ---- exposition text ----------------------------------------------------------------------------

def escape_label(value):
    """A label value as the text format wants it: backslash, double quote and newline escaped."""
    return str(value).replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n")


def format_value(value):
    """A sample value: whole numbers without a fraction, NaN/+Inf/-Inf spelled as Prometheus does."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    value = float(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(value)


def one_line(text):
    """A comment's text on one line."""
    return " ".join(str(text).split())


class Exposition(object):
    """Samples by family, plus comment lines; ``render`` writes them in FAMILIES order."""

    def __init__(self):
        self.samples = dict((name, []) for name, _type, _help in FAMILIES)
        self.comments = []

    def add(self, name, value, labels=()):
        if value is not None:
            self.samples[name].append((tuple(labels), value))

    def comment(self, text):
        self.comments.append("# " + one_line(text))

    def render(self):
        """The file's text: comments first, then each family with samples (HELP, TYPE, samples)."""
        lines = list(self.comments)
        for name, kind, text in FAMILIES:
            if not self.samples[name]:
                continue
            lines.append("# HELP %s %s" % (name, text))
            lines.append("# TYPE %s %s" % (name, kind))
            for labels, value in self.samples[name]:
                label_text = ",".join('%s="%s"' % (key, escape_label(val)) for key, val in labels)
                lines.append("%s%s %s" % (name, "{%s}" % label_text if label_text else "", format_value(value)))
        return "\n".join(lines) + "\n"


# ---- NVML -------------------------------------------------------------------------------------

def _constant(nvml, name, default):
    value = getattr(nvml, name, default)
    return value if isinstance(value, int) else default


def _problem(exposition, index, function, error):
    why = error if isinstance(error, str) else gpu_info.describe_error(error)
    exposition.comment("gpu %s: %s: %s" % (index, function, why))


def _read(api, exposition, index, function, *args):
    """One NVML query; its value, or None with a comment naming the GPU, the function and the error."""
    value, error = api.attempt(function, *args)
    if error is not None:
        _problem(exposition, index, function, error)
        return None
    return value


def device_labels(api, exposition, index, handle):
    """``gpu``, ``uuid``, ``name`` labels of one GPU (an unreadable one is an empty string)."""
    uuid = gpu_info.to_text(_read(api, exposition, index, "nvmlDeviceGetUUID", handle))
    name = gpu_info.to_text(_read(api, exposition, index, "nvmlDeviceGetName", handle))
    return (("gpu", str(index)), ("uuid", uuid or ""), ("name", name or ""))


def device_samples(api, exposition, index, handle, labels):
    """Utilisation, memory, power, temperature and ECC samples of one GPU."""
    nvml = api.nvml
    rates = _read(api, exposition, index, "nvmlDeviceGetUtilizationRates", handle)
    if rates is not None and getattr(rates, "gpu", None) is not None:
        exposition.add("gauntlet_gpu_utilization_ratio", rates.gpu / 100.0, labels)
    memory = _read(api, exposition, index, "nvmlDeviceGetMemoryInfo", handle)
    if memory is not None:
        exposition.add("gauntlet_gpu_memory_used_bytes", getattr(memory, "used", None), labels)
        exposition.add("gauntlet_gpu_memory_total_bytes", getattr(memory, "total", None), labels)
    power = _read(api, exposition, index, "nvmlDeviceGetPowerUsage", handle)
    exposition.add("gauntlet_gpu_power_watts", gpu_info.milliwatts_to_watts(power), labels)
    sensor = _constant(nvml, "NVML_TEMPERATURE_GPU", NVML_TEMPERATURE_GPU)
    exposition.add("gauntlet_gpu_temperature_celsius", _read(api, exposition, index, "nvmlDeviceGetTemperature", handle, sensor), labels)
    volatile = _constant(nvml, "NVML_VOLATILE_ECC", NVML_VOLATILE_ECC)
    for kind, constant, default in (("corrected", "NVML_MEMORY_ERROR_TYPE_CORRECTED", NVML_MEMORY_ERROR_TYPE_CORRECTED),
                                    ("uncorrected", "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", NVML_MEMORY_ERROR_TYPE_UNCORRECTED)):
        count = _read(api, exposition, index, "nvmlDeviceGetTotalEccErrors", handle, _constant(nvml, constant, default), volatile)
        exposition.add("gauntlet_gpu_ecc_errors", count, labels + (("type", kind),))


def collect_devices(nvml, exposition):
    """Every GPU's samples; True when NVML was read, False (with the reason as a comment) when not."""
    api = gpu_info._NVML(nvml)
    count, error = api.attempt("nvmlDeviceGetCount")
    if error is not None:
        exposition.comment("nvmlDeviceGetCount failed: %s" % (error if isinstance(error, str) else gpu_info.describe_error(error)))
        return False
    for index in range(count):
        handle = _read(api, exposition, index, "nvmlDeviceGetHandleByIndex", index)
        if handle is not None:
            device_samples(api, exposition, index, handle, device_labels(api, exposition, index, handle))
    return True


def collect_nvml(exposition, nvml=None):
    """Start NVML, read every GPU, shut NVML down; True when NVML was read."""
    if nvml is None:
        nvml, reason = gpu_info.import_nvml()
        if nvml is None:
            exposition.comment(reason)
            return False
    try:
        nvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, NVMLError_DriverNotLoaded, OSError, ...
        exposition.comment("NVML could not be initialised: %s" % gpu_info.describe_error(exc))
        return False
    try:
        return collect_devices(nvml, exposition)
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:  # the samples are already read
            pass


# ---- XID events ---------------------------------------------------------------------------------

def run_journal():
    """``(rc, stdout, stderr)`` of JOURNAL_COMMAND; raises OSError when it cannot run."""
    process = subprocess.run(JOURNAL_COMMAND, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             timeout=JOURNAL_TIMEOUT_S, check=False)
    return (process.returncode, process.stdout.decode("utf-8", "replace"), process.stderr.decode("utf-8", "replace"))


def count_xid(journal=run_journal):
    """``(count, None)`` of NVRM: Xid lines in the kernel log since boot, or ``(None, why not)``."""
    command = " ".join(JOURNAL_COMMAND)
    try:
        rc, out, err = journal()
    except (OSError, subprocess.SubprocessError) as exc:
        return None, "%s could not run: %s" % (command, exc)
    if rc != 0:
        return None, "%s failed (rc %s): %s" % (command, rc, one_line(err or out)[:200])
    return len([line for line in out.splitlines() if XID_MARKER in line]), None


def collect_xid(exposition, journal=run_journal):
    count, error = count_xid(journal)
    if error is not None:
        exposition.comment("gauntlet_gpu_xid_events left out: " + error)
    exposition.add("gauntlet_gpu_xid_events", count)


# ---- the file -----------------------------------------------------------------------------------

def write_atomically(directory, name, text):
    """Write ``directory/name`` through a temporary file in the same directory (mode 0644), renamed over it.

    Node exporter reads only ``*.prom``: the temporary name ends in ``.tmp``. On any error the
    temporary file is removed and the old file stays as it was.
    """
    fd, temporary = tempfile.mkstemp(dir=directory, prefix="." + name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as handle:
            os.fchmod(handle.fileno(), 0o644)
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, os.path.join(directory, name))
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise


def collect(nvml=None, journal=run_journal, now=None):
    """The whole exposition text of one run."""
    exposition = Exposition()
    success = collect_nvml(exposition, nvml)
    collect_xid(exposition, journal)
    exposition.add("gauntlet_gpu_collector_success", 1 if success else 0)
    exposition.add("gauntlet_gpu_collector_timestamp_seconds", time.time() if now is None else now)
    return exposition.render()


def parse_args(argv):
    parser = argparse.ArgumentParser(description="Write the host's NVML GPU metrics as a node exporter textfile.")
    parser.add_argument("--textfile-dir", default=DEFAULT_TEXTFILE_DIR,
                        help="node exporter's textfile collector directory (default %(default)s)")
    parser.add_argument("--stdout", action="store_true", help="print the metrics instead of writing %s" % OUTPUT_NAME)
    return parser.parse_args(argv)


def main(argv=None, nvml=None, journal=run_journal, now=None):
    args = parse_args(argv)
    text = collect(nvml, journal, now)
    if args.stdout:
        sys.stdout.write(text)
        return 0
    try:
        write_atomically(args.textfile_dir, OUTPUT_NAME, text)
    except (IOError, OSError) as exc:
        sys.stderr.write("gauntlet_gpu_textfile: could not write %s: %s\n" % (os.path.join(args.textfile_dir, OUTPUT_NAME), exc))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
