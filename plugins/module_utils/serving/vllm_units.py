# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Find the systemd units that run a vLLM server, and which of them stand in a new server's way.

Pure functions over the text ``systemctl show`` prints, so they can be tested without systemd.
The module ``vllm_service_info`` runs systemctl and hands the text here; ``vllm_wait`` uses
``load_phase`` to tell the controller how far a starting server has got.

Secrets: ``redact_argv`` and ``redact_text`` hide the values of vLLM's secret-bearing flags
(``SECRET_FLAGS``), secret-looking environment assignments, bearer tokens and passwords in URLs in
whatever is reported (facts, records, messages, journal lines). ``secret_input_problems`` is what
the role ``vllm_service`` refuses before it writes anything: a secret on the command line or in
the world-readable part of the unit. ``listen_host`` decides the address a server listens on.

A unit is a vLLM unit when its ExecStart runs ``vllm serve`` (any path to the ``vllm`` console
script, also inside ``sh -c``) or ``python -m vllm.entrypoints.openai.api_server``. Its GPUs are
those of ``CUDA_VISIBLE_DEVICES`` in its Environment; a unit without it sees every GPU, which on
a GPU-less host means it competes for the same CPUs and memory as any other vLLM server.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ipaddress
import re
import shlex

from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.vllm_args import flag_name

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


def served_model_name(argv):
    """The name clients ask for: the first of ``--served-model-name`` (vLLM takes one or more), else the model.

    vLLM answers a request for any other name with 404, so a probe must send this one, never the model's path.
    """
    return flag_value(argv, "--served-model-name") or served_model(argv)


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
        "served_model_name": served_model_name(argv),
        # Units written by anybody: someone's --api-key must not become a fact.
        "argv": redact_argv(argv),
    }


def find_conflicts(units, name, devices, port, side_by_side=()):
    """The units that must stop and be disabled before ``name`` can start.

    A unit conflicts when it runs or would start at boot, and shares a GPU with ``devices`` or
    listens on ``port``. ``name`` itself is never a conflict. The units of ``side_by_side`` are served beside
    ``name`` on purpose (models kept resident together, each sized to leave room for the others): sharing GPUs
    with them is no conflict, though their port still is (two servers cannot listen on one).
    """
    conflicts = []
    for unit in units:
        if unit["name"] == name or not (unit["running"] or unit["enabled"]):
            continue
        reasons = []
        if unit["name"] not in side_by_side and devices_overlap(unit["devices"], devices):
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


# ---- secrets ----------------------------------------------------------------------------------

REDACTED = "********"

# The `vllm serve` flags (vLLM 0.32) whose value is a secret, as vLLM's own redact_sensitive_args
# lists them (api_key, hf_token, watermark_config): the shortest prefix argparse accepts for
# each (it takes unambiguous abbreviations, and vLLM reads "_" as "-"), how many values follow
# ("+" one or more, "?" none or one, 1 exactly one), and what to use instead.
SECRET_FLAGS = (
    ("--api-key", "--api-k", "+", "vllm_service_api_key (the environment file's VLLM_API_KEY)"),
    ("--hf-token", "--hf-t", "?", "vllm_service_hf_token (the environment file's HF_TOKEN)"),
    ("--watermark-config", "--watermark-", 1,
     "a --config YAML file only the service user can read (no environment variable carries the watermark key)"),
)

# Flags the role sets itself; in extra_args they would override its checks (a --host there would
# listen everywhere without a key).
ROLE_FLAGS = (
    ("--host", "--host", "vllm_service_host"),
    ("--port", "--port", "vllm_service_port"),
)

# Environment names that hold secrets: ending in one of these words...
_SECRET_NAME_END = re.compile(r"(TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|API_?KEY|ACCESS_KEY|PRIVATE_KEY|SECRET_KEY|CREDENTIALS?)$")
# ...or holding one of these as a word, unless the name says it is a path to one.
_SECRET_NAME_WORD = re.compile(r"(^|_)(SECRET|PASSWORD|PASSWD|PASSPHRASE|CREDENTIALS?)(_|$)")
_PATH_NAME = re.compile(r"_(PATH|FILE|DIR)$")
# Values shaped like well-known credentials: Hugging Face tokens, OpenAI-style keys.
_SECRET_VALUE_SHAPES = re.compile(r"\bhf_[A-Za-z0-9]{30,}|\bsk-[A-Za-z0-9_-]{20,}")
# A secret shorter than this is not searched for inside other values (it would match by chance).
MIN_SECRET_LEN = 8

# Host names (not addresses) that only the host itself can reach; addresses are judged by ipaddress.
LOOPBACK_HOSTS = ("localhost",)


def secret_flag(word):
    """The ``SECRET_FLAGS`` entry a command-line word is (also abbreviated, ``_`` or ``=value``), or None."""
    name = flag_name(word)
    if name is None:
        return None
    for entry in SECRET_FLAGS:
        flag, shortest = entry[0], entry[1]
        if len(name) >= len(shortest) and flag.startswith(name):
            return entry
    return None


def _is_option(word):
    return isinstance(word, str) and word.startswith("-") and len(word) > 1


def redact_argv(argv):
    """A copy of argv with the values of secret flags replaced by ``REDACTED``.

    Handles ``--flag value`` (also several values for ``--api-key``), ``--flag=value``,
    abbreviations and underscores, plus passwords in URLs and secret-looking ``NAME=value`` words.
    """
    result = []
    pending = 0
    for word in argv or []:
        word = "" if word is None else str(word)
        if pending and not _is_option(word):
            result.append(REDACTED)
            pending = pending - 1 if pending != "+" else "+"
            continue
        pending = 0
        entry = secret_flag(word)
        if entry is None:
            result.append(redact_text(word))
        elif "=" in word:
            result.append(word.split("=", 1)[0] + "=" + REDACTED)
        else:
            result.append(word)
            nargs = entry[2]
            pending = "+" if nargs == "+" else 1
    return result


_TEXT_FLAG = re.compile(
    r"(?P<flag>--(?:api[-_]k|hf[-_]t|watermark[-_])[\w.-]*)(?P<quote>[\"']?)(?P<sep>=|\s+)"
    r"(?P<value>(?![\"']?-)\S.*?)(?=\s+[\"']?-|\s*\\?\s*$)", re.M)
_TEXT_REPR = re.compile(r"(?P<key>[\"'](?:api_key|hf_token|watermark_config)[\"']\s*:\s*)"
                        r"(?P<value>\[[^\]]*\]|\{[^}]*\}|'[^']*'|\"[^\"]*\"|[^,}\s]+)")
_TEXT_BEARER = re.compile(r"(?P<key>\b[Bb]earer\s+)[^\s\"',]+")
_TEXT_URL_PASSWORD = re.compile(r"(?P<key>\b[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]+:)[^@\s/]+@")
# Only the name is consumed, so "Environment=HF_TOKEN=x" finds HF_TOKEN too.
_TEXT_ASSIGNMENT = re.compile(r"\b(?P<name>[A-Za-z_][A-Za-z0-9_]*)=(?=(?P<value>\"[^\"]*\"|'[^']*'|[^\s\"']+))")


def redact_text(text, secrets=()):
    """``text`` with secret flag values, secret ``NAME=value`` assignments, bearer tokens, URL
    passwords and every string in ``secrets`` replaced by ``REDACTED``. A list gives a list."""
    if isinstance(text, (list, tuple)):
        return [redact_text(line, secrets) for line in text]
    if text is None:
        return None
    text = str(text)
    for secret in sorted((str(s) for s in secrets or () if s), key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    text = _TEXT_FLAG.sub(lambda m: m.group("flag") + m.group("quote") + m.group("sep") + REDACTED, text)
    text = _TEXT_REPR.sub(lambda m: m.group("key") + REDACTED, text)
    text = _TEXT_BEARER.sub(lambda m: m.group("key") + REDACTED, text)
    text = _TEXT_URL_PASSWORD.sub(lambda m: m.group("key") + REDACTED + "@", text)
    return _redact_assignments(text)


def _redact_assignments(text):
    """``NAME=value`` with a secret-looking NAME -> ``NAME=********``."""
    pieces = []
    done = 0
    for match in _TEXT_ASSIGNMENT.finditer(text):
        start, end = match.span("value")
        if start < done or not is_secret_name(match.group("name")):
            continue
        # "NAME=value with spaces", as systemd quotes an Environment= assignment: up to the closing quote.
        quote = text[match.start() - 1] if match.start() > 0 else ""
        if quote in ("'", '"') and text.find(quote, start) > 0:
            end = text.find(quote, start)
        pieces.append(text[done:start] + REDACTED)
        done = end
    return "".join(pieces) + text[done:]


def is_secret_name(name):
    """Whether an environment variable's name says it holds a secret (HF_TOKEN, S3_SECRET_ACCESS_KEY, ...)."""
    name = str(name).upper()
    if _PATH_NAME.search(name):
        return False
    return bool(_SECRET_NAME_END.search(name) or _SECRET_NAME_WORD.search(name))


def command_line_problems(words, source):
    """Secret flags and role-owned flags in ``words`` (a list of arguments from ``source``)."""
    words = [str(word) for word in words or []]
    problems = []
    for index, word in enumerate(words):
        entry = secret_flag(word)
        # --hf-token alone (use the cached login) carries no secret; followed by a value it does.
        bare = "=" not in word and (index + 1 >= len(words) or _is_option(words[index + 1]))
        if entry is not None and not (entry[2] == "?" and bare):
            problems.append("%s: %s would put a secret on the command line, which the world-readable unit, "
                            "'systemctl show', ps and the journal show; use %s instead" % (source, entry[0], entry[3]))
        name = flag_name(word)
        for flag, shortest, variable in ROLE_FLAGS:
            if name is not None and len(name) >= len(shortest) and flag.startswith(name):
                problems.append("%s: %s is set by the role; use %s instead" % (source, flag, variable))
    return problems


def environment_problems(environment, source):
    """Variables of ``environment`` (a non-secret map) whose names say they hold secrets."""
    return ["%s: %s looks like a secret by its name; put it in vllm_service_secret_env, which only the "
            "root-only 0600 environment file holds" % (source, name)
            for name in sorted(environment or {}) if is_secret_name(name)]


def exposed_secret_problems(places, secret_environment):
    """Places (name -> list of strings that end up in the unit, argv or facts) holding a secret value.

    A value of ``secret_environment`` (MIN_SECRET_LEN characters or more) found inside them, or a
    value shaped like a Hugging Face token or an OpenAI-style key, is reported by place and by the
    secret's name, never by its value.
    """
    problems = []
    secrets = [(name, str(value)) for name, value in sorted((secret_environment or {}).items())
               if value is not None and len(str(value)) >= MIN_SECRET_LEN]
    for place in sorted(places):
        texts = [str(text) for text in places[place] or [] if text is not None]
        for name, value in secrets:
            if any(value in text for text in texts):
                problems.append("%s holds the value of the secret %s; secrets go only to the environment file" % (place, name))
        if any(_SECRET_VALUE_SHAPES.search(text) for text in texts):
            problems.append("%s holds what looks like a Hugging Face token or an API key (hf_..., sk-...); "
                            "use vllm_service_hf_token, vllm_service_api_key or vllm_service_secret_env" % place)
    return problems


def secret_input_problems(inputs):
    """Everything the role refuses about where secrets go, as messages naming the variable.

    ``inputs``: ``extra_args`` (vllm_service_serving's), ``plan_args`` (the plan's vllm_args),
    ``serving_env`` (vllm_service_serving's env), ``environment``, ``nccl_environment``,
    ``secret_environment`` (every secret the environment file gets, by name) and ``other`` (name ->
    string or list of strings that also reach the unit: model, served model name, speculative config).
    """
    plain = (("serving_env", "vllm_service_serving.env"), ("environment", "vllm_service_environment"),
             ("nccl_environment", "vllm_service_nccl_environment"))
    problems = command_line_problems(inputs.get("extra_args"), "vllm_service_serving.extra_args")
    problems += command_line_problems(inputs.get("plan_args"), "vllm_service_plan.vllm_args")
    for key, name in plain:
        problems += environment_problems(inputs.get(key), name)
    secret_environment = inputs.get("secret_environment") or {}
    both = sorted(set(secret_environment) & set(name for key, dummy in plain for name in (inputs.get(key) or {})))
    if both:
        problems.append("%s: set both as a secret and in the unit's plain environment; keep only the secret"
                        % ", ".join(both))
    places = {
        "vllm_service_serving.extra_args": inputs.get("extra_args") or [],
        "vllm_service_plan.vllm_args": inputs.get("plan_args") or [],
    }
    for key, name in plain:
        places[name] = ["%s=%s" % item for item in sorted((inputs.get(key) or {}).items())]
    for name, value in sorted((inputs.get("other") or {}).items()):
        places[name] = value if isinstance(value, (list, tuple)) else [value]
    return problems + exposed_secret_problems(places, secret_environment)


def listen_kind(listen_host):
    """``all``, ``loopback`` or ``address`` for vLLM's ``--host`` (uvicorn's host; empty: every interface).

    Every address of 127.0.0.0/8 and ::1 is loopback (ipaddress decides, an IPv4-mapped one too); a name other than
    localhost is taken as given. A prefix test ("127.") would call the name 127.example.com loopback."""
    listen_host = str(listen_host or "").strip()
    bare = listen_host[1:-1] if listen_host.startswith("[") and listen_host.endswith("]") else listen_host
    if not bare:
        return "all"
    if bare.lower() in LOOPBACK_HOSTS:
        return "loopback"
    try:
        address = ipaddress.ip_address(bare)
    except ValueError:
        return "address"
    address = getattr(address, "ipv4_mapped", None) or address
    if address.is_unspecified:
        return "all"
    return "loopback" if address.is_loopback else "address"


def is_loopback(host):
    """Whether a listen address only accepts connections from the host itself."""
    return listen_kind(host) == "loopback"


def listen_host(host, api_key_set, allow_unauthenticated):
    """The address to listen on, and why it is refused (or None).

    ``auto`` (or empty): every address (0.0.0.0) when clients must send an API key or
    unauthenticated access is allowed, loopback (127.0.0.1) otherwise. Any other address is
    used as given, but one that is not loopback needs a key or the explicit allowance.
    """
    host = "" if host is None else str(host).strip()
    if host.lower() in ("", "auto"):
        return ("0.0.0.0" if api_key_set or allow_unauthenticated else "127.0.0.1"), None
    if is_loopback(host) or api_key_set or allow_unauthenticated:
        return host, None
    return host, ("vllm_service_host %s accepts connections from other machines, but no API key is set: set "
                  "vllm_service_api_key (or VLLM_API_KEY in vllm_service_secret_env), or set "
                  "vllm_service_allow_unauthenticated: true to serve without one, or listen on 127.0.0.1" % host)


# Where a host's client key can be given, in the order the vllm_service role's environment file takes them
# (roles/vllm_service/vars/main.yml: the later dict of the combine wins).
CLIENT_KEY_SOURCES = ("vllm_service_secret_env", "vllm_service_secret_environment")


def client_key(host_vars):
    """The key clients must send to a host's vLLM server, from that host's variables (a mapping), or "" for none.

    It is VLLM_API_KEY as the server's environment file holds it: from ``vllm_service_secret_env``, else from the
    deprecated ``vllm_service_secret_environment``, else ``vllm_service_api_key``. Every client (router health
    check, rollout, deploy's sweep, multinode) reads it here, so a key given only in ``secret_env`` reaches them.
    """
    for name in CLIENT_KEY_SOURCES:
        secrets = host_vars.get(name) or {}
        if not hasattr(secrets, "get"):
            raise ValueError("%s must be a dict of environment variables, got %s" % (name, type(secrets).__name__))
        key = secrets.get("VLLM_API_KEY")
        if key is not None and str(key) != "":
            return str(key)
    key = host_vars.get("vllm_service_api_key")
    return "" if key is None else str(key)


# ---- listing the host's vLLM units (vllm_service_info, vllm_monitoring_info) ---------------------

# Keep each systemctl command line short, however many units a host has.
SHOW_BATCH = 200


class UnitsError(Exception):
    """systemctl failed, or a unit asked for is not a vLLM unit."""


def _first_column(run, args):
    rc, out, err = run(args + ["--no-legend", "--plain", "--no-pager"])
    if rc != 0:
        raise UnitsError("systemctl %s failed: %s" % (" ".join(args), err.strip() or out.strip()))
    names = []
    for line in out.splitlines():
        words = line.split()
        # Templates (foo@.service) have no ExecStart of their own to read.
        if words and words[0].endswith(".service") and not words[0].endswith("@.service"):
            names.append(words[0])
    return names


def _show(run, names):
    """``systemctl show`` properties of ``names`` (in batches) -> list of property dicts."""
    blocks = []
    for start in range(0, len(names), SHOW_BATCH):
        batch = names[start:start + SHOW_BATCH]
        rc, out, err = run(["show", "--no-pager", "-p", ",".join(SHOW_PROPERTIES + ("LoadState",))] + batch)
        if rc != 0:
            raise UnitsError("systemctl show failed: %s" % (err.strip() or out.strip()))
        blocks.extend(parse_show(out))
    return blocks


def find_units(run, wanted=None):
    """The vLLM units of the host (every one, or those named in ``wanted``), sorted by name.

    Each item is ``(unit facts as vllm_units.describe_unit gives them, raw argv)``. A name in
    ``wanted`` that systemd does not know or that does not run vLLM raises UnitsError naming it.
    """
    if wanted:
        names = sorted(set(wanted))
    else:
        names = sorted(set(_first_column(run, ["list-unit-files", "--type=service"])
                           + _first_column(run, ["list-units", "--type=service", "--all"])))
    found = {}
    for props in _show(run, names):
        unit = describe_unit(props)
        if unit is not None:
            found[unit["name"]] = (unit, exec_start_argv(props.get("ExecStart")))
        elif wanted and props.get("Id") in wanted:
            found[props.get("Id")] = "not-found" if props.get("LoadState") == "not-found" else "not vLLM"
    problems = []
    for name in sorted(set(wanted or ())):
        entry = found.get(name)
        if not isinstance(entry, tuple):
            why = "its ExecStart does not run a vLLM server" if entry == "not vLLM" else "systemd has no such unit"
            problems.append("%s: %s" % (name, why))
    if problems:
        raise UnitsError("units asked for that are not vLLM units on this host: %s" % "; ".join(problems))
    return [found[name] for name in sorted(found) if isinstance(found[name], tuple)]
