# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Find the systemd units that run a vLLM server, and which of them stand in a new server's way.

Pure functions over the text ``systemctl show`` prints, so they can be tested without systemd.
The module ``vllm_service_info`` runs systemctl and hands the text here; ``vllm_wait`` uses
``load_phase`` to tell the controller how far a starting server has got.

A unit is a vLLM unit when its ExecStart runs ``vllm serve`` (any path to the ``vllm`` console
script, also inside ``sh -c``) or ``python -m vllm.entrypoints.openai.api_server``. Its GPUs are
those of ``CUDA_VISIBLE_DEVICES`` in its Environment; a unit without it sees every GPU, which on
a GPU-less host means it competes for the same CPUs and memory as any other vLLM server.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
import shlex

# systemctl show properties the discovery reads, in one call for every unit.
SHOW_PROPERTIES = (
    "Id",
    "ActiveState",
    "SubState",
    "UnitFileState",
    "MainPID",
    "ExecStart",
    "Environment",
    "FragmentPath",
)

# A unit in one of these states holds (or is about to hold) its GPUs.
RUNNING_STATES = frozenset(("active", "activating", "reloading", "deactivating"))

DEFAULT_PORT = 8000
ALL_DEVICES = "all"

_API_SERVER_MODULE = "vllm.entrypoints.openai.api_server"


def parse_show(text):
    """Split ``systemctl show`` output (several units, blank-line separated) into dicts."""
    units = []
    current = {}
    for line in text.splitlines():
        if not line.strip():
            if current:
                units.append(current)
                current = {}
            continue
        key, sep, value = line.partition("=")
        if sep:
            current[key] = value
    if current:
        units.append(current)
    return units


def exec_start_argv(value):
    """The argv of the first command of a ``systemctl show`` ExecStart value.

    systemd 252 joins argv with plain spaces, so an argument holding a space comes back split;
    the flags read here (``--port``, the model) never hold one.
    """
    match = re.search(r"argv\[\]=(.*?) ; ignore_errors=", value or "")
    if not match:
        return []
    return match.group(1).split()


def environment_dict(value):
    """Environment assignments of ``systemctl show -p Environment`` as a dict."""
    result = {}
    try:
        words = shlex.split(value or "")
    except ValueError:
        words = (value or "").split()
    for word in words:
        key, sep, val = word.partition("=")
        if sep:
            result[key] = val
    return result


def is_vllm_command(argv):
    """Whether an argv (as ``exec_start_argv`` returns it) starts a vLLM server."""
    for index, word in enumerate(argv):
        if word == _API_SERVER_MODULE:
            return True
        base = word.rsplit("/", 1)[-1]
        if base == "vllm" and index + 1 < len(argv) and argv[index + 1] == "serve":
            return True
    return False


def flag_value(argv, flag):
    """Value of ``--flag value`` or ``--flag=value`` in argv, or None."""
    for index, word in enumerate(argv):
        if word == flag and index + 1 < len(argv):
            return argv[index + 1]
        if word.startswith(flag + "="):
            return word[len(flag) + 1:]
    return None


def served_model(argv):
    """The model a vLLM command serves: the word after ``serve``, or ``--model``."""
    for index, word in enumerate(argv):
        if word.rsplit("/", 1)[-1] == "vllm" and index + 2 < len(argv) and argv[index + 1] == "serve":
            candidate = argv[index + 2]
            if not candidate.startswith("-"):
                return candidate
    return flag_value(argv, "--model")


def parse_devices(value):
    """``CUDA_VISIBLE_DEVICES`` (or a list of GPU ids) as a sorted list of ids, or ``ALL_DEVICES``."""
    if value is None:
        return ALL_DEVICES
    if isinstance(value, (list, tuple)):
        items = [str(item).strip() for item in value]
    else:
        items = [item.strip() for item in str(value).split(",")]
    items = [item for item in items if item]
    if not items:
        return ALL_DEVICES
    return sorted(set(items))


def devices_overlap(left, right):
    """Whether two device sets (``parse_devices`` results) share a GPU."""
    if left == ALL_DEVICES or right == ALL_DEVICES:
        return True
    return bool(set(left) & set(right))


def describe_unit(props):
    """One unit's facts, or None when it does not run vLLM."""
    argv = exec_start_argv(props.get("ExecStart"))
    if not is_vllm_command(argv):
        return None
    env = environment_dict(props.get("Environment"))
    port_text = flag_value(argv, "--port")
    try:
        port = int(port_text) if port_text is not None else DEFAULT_PORT
    except ValueError:
        port = None
    main_pid = props.get("MainPID") or "0"
    return {
        "name": props.get("Id"),
        "active_state": props.get("ActiveState"),
        "sub_state": props.get("SubState"),
        "unit_file_state": props.get("UnitFileState") or None,
        "enabled": props.get("UnitFileState") in ("enabled", "enabled-runtime", "linked", "linked-runtime"),
        "running": props.get("ActiveState") in RUNNING_STATES,
        "main_pid": int(main_pid) if main_pid.isdigit() else 0,
        "fragment_path": props.get("FragmentPath") or None,
        "devices": parse_devices(env.get("CUDA_VISIBLE_DEVICES")),
        "port": port,
        "model": served_model(argv),
        "argv": argv,
    }


def find_conflicts(units, name, devices, port):
    """The units that must stop and be disabled before ``name`` can start.

    A unit conflicts when it runs or would start at boot, and shares a GPU with ``devices`` or
    listens on ``port``. ``name`` itself is never a conflict.
    """
    conflicts = []
    for unit in units:
        if unit["name"] == name or not (unit["running"] or unit["enabled"]):
            continue
        reasons = []
        if devices_overlap(unit["devices"], devices):
            if unit["devices"] == ALL_DEVICES or devices == ALL_DEVICES:
                reasons.append("shares GPUs (one of the two units sees every GPU)")
            else:
                shared = sorted(set(unit["devices"]) & set(devices))
                reasons.append("shares GPUs %s" % ",".join(shared))
        if port is not None and unit["port"] == port:
            reasons.append("listens on port %d" % port)
        if reasons:
            conflicts.append({"name": unit["name"], "running": unit["running"], "enabled": unit["enabled"],
                              "reasons": reasons})
    return conflicts


# How far a starting vLLM server has got, from its log. Checked against every journal line in
# order; the last line that matches wins. Messages as vLLM 0.28-0.32 logs them.
LOAD_PHASES = (
    (re.compile(r"non-default args|Automatically detected platform"), "parsing arguments"),
    (re.compile(r"Initializing a V1 LLM engine|Waiting for init message from front-end"), "starting the engine"),
    (re.compile(r"Starting to load model"), "loading weights"),
    (re.compile(r"Loading (?:safetensors checkpoint )?shards:\s*(\d+)% Completed \|\s*(\d+)/(\d+)"),
     "loading weights"),
    (re.compile(r"Loading weights took|Model loading took"), "weights loaded"),
    (re.compile(r"Dynamo bytecode transform|Compiling a graph|torch\.compile takes"), "compiling (torch.compile)"),
    (re.compile(r"Memory profiling takes|Available KV cache memory|KV cache size"), "sizing the KV cache"),
    (re.compile(r"Capturing CUDA graphs"), "capturing CUDA graphs"),
    (re.compile(r"init engine \(profile, create kv cache, warmup model\) took"), "engine ready"),
    (re.compile(r"Starting vLLM (?:API )?server on|Application startup complete"), "API server up"),
)


def load_phase(lines):
    """The load phase the last matching journal line names, with shard progress when known."""
    phase = None
    for line in lines:
        # tqdm redraws with carriage returns; the latest state is after the last one.
        text = line.rstrip("\r").rsplit("\r", 1)[-1]
        for pattern, name in LOAD_PHASES:
            match = pattern.search(text)
            if match:
                phase = name
                if match.groups():
                    phase = "%s (shards %s/%s, %s%%)" % (name, match.group(2), match.group(3), match.group(1))
    return phase
