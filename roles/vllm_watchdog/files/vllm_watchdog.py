# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Watchdog of one of gauntlet.vllm's vLLM units: one look per run (a systemd oneshot its timer starts).

A look is skipped, and the count of failed looks reset, while a deploy holds the unit
(/run/gauntlet-vllm/hold/<unit> holds epoch seconds in the future) or while the unit is not "active"
("activating" is a planned start or restart; "inactive"/"failed" is a stop on purpose or systemd's own
Restart= at work). Otherwise it sends the readiness probe's real one-token completion (vllm-ready --once,
with the request timeout). A failed probe while vllm:generation_tokens_total still rises is a busy server,
not a hung one, and counts as alive. After N failed looks in a row the unit is restarted (systemctl restart
--no-block), at most K times in an hour; the next time it gives up: Restart=no in a runtime drop-in, SIGKILL
to the unit, so systemd marks it failed and frees the GPUs, and an alert (gave_up) says so. A later look
that finds the unit active and answering (an operator restarted it) lifts that again.

The head of a multi-node deployment (--group-node) is never restarted: a node restarted alone cannot rejoin
the others. After N failed looks the watchdog kills it at once and leaves it failed (gave_up); its group watch
(vllm-group-watch) then stops the other nodes' units (over Ray the other nodes run no vLLM unit: the head is
the deployment), and a re-run of the play starts the group again.

State: a JSON file per unit (restarts within the hour, total restarts, the last look); one the watchdog cannot
use (not a regular file, not JSON, a field of the wrong type) is renamed aside, never deleted, and counting
starts afresh. Metrics: a node exporter textfile per unit, written after every run. Both are written
atomically. The API key, when the server needs one, comes from VLLM_API_KEY (the unit's 0600
EnvironmentFile), never from the command line.
Runs on the standard library alone.
"""

import argparse
import json
import math
import os
import re
import stat
import subprocess
import sys
import tempfile
import time
import urllib.request

WINDOW_S = 3600
DROP_IN_NAME = "50-gauntlet-watchdog-gave-up.conf"
DROP_IN_MARKER = "# Written by gauntlet.vllm's watchdog (vllm-watchdog)."
DROP_IN = DROP_IN_MARKER + """
# The watchdog restarted this unit {restarts} times within an hour and it hung again, so it gave up and
# killed it. The unit has Restart=on-failure, which would start the hung server again and again: this
# runtime drop-in (gone at reboot) keeps it failed until an operator (or the vllm_service role) starts it.
[Service]
Restart=no
"""
GENERATION_TOKENS = "vllm:generation_tokens_total"
METRIC_PREFIX = "gauntlet_vllm_watchdog_"
# A state file is a few hundred bytes; one larger than this is not the watchdog's. A hold file is one number.
MAX_STATE_BYTES = 1024 * 1024
MAX_HOLD_BYTES = 4096
# How a file the watchdog did not just write is opened: never waiting (a FIFO without a writer would block a plain
# open forever, and the timer's next run behind it), never kept by a child, never a terminal.
READ_FLAGS = (os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0))


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--unit", required=True, help="the vLLM unit, e.g. vllm-tiny-llama.service")
    parser.add_argument("--url", required=True, help="base URL of the server, e.g. http://127.0.0.1:8000")
    parser.add_argument("--model", required=True, help="served model name")
    parser.add_argument("--failures", type=int, default=3, help="failed looks in a row before a restart (N)")
    parser.add_argument("--max-restarts", type=int, default=3, help="restarts within an hour before giving up (K)")
    parser.add_argument("--request-timeout", type=float, default=30.0, help="seconds one probe request may take")
    parser.add_argument("--state-file", required=True, help="the unit's JSON state file")
    parser.add_argument("--textfile-dir", required=True, help="the node exporter's textfile collector directory")
    parser.add_argument("--hold-dir", default="/run/gauntlet-vllm/hold", help="where deploys put their holds")
    parser.add_argument("--runtime-unit-dir", default="/run/systemd/system", help="where the gave-up drop-in goes")
    parser.add_argument("--ready", default=default_ready_script(), help="the readiness probe script (vllm-ready)")
    parser.add_argument("--tool-check", action="store_true", help="the probe also checks tool_choice auto (as readiness does)")
    parser.add_argument("--reasoning-check", action="store_true", help="the probe also checks the reasoning (as readiness does)")
    parser.add_argument("--group-node", action="store_true",
                        help="the unit is one node of a multi-node group: after N failed looks kill it, never restart it")
    args = parser.parse_args(argv)
    # "nan" and "inf" parse as floats: a NaN passes any comparison test unseen, and neither would ever run out.
    if args.failures < 1 or args.max_restarts < 0 or not (0 < args.request_timeout < float("inf")):
        parser.error("--failures must be >= 1, --max-restarts >= 0 and --request-timeout a finite number > 0 (got %d, %d, %s)"
                     % (args.failures, args.max_restarts, args.request_timeout))
    return args


def default_ready_script():
    """vllm-ready where the role installs it (next to this script), or vllm_ready.py in the role's files/."""
    here = os.path.dirname(os.path.abspath(__file__))
    installed = os.path.join(here, "vllm-ready")
    return installed if os.path.exists(installed) else os.path.join(here, "vllm_ready.py")


def log(message):
    """One line in the journal (the oneshot's stdout goes there)."""
    print("vllm-watchdog: " + message, flush=True)


# ---- state ---------------------------------------------------------------------------------------------

def fresh_state(unit):
    return {"unit": unit, "consecutive_failures": 0, "restarts": [], "restarts_total": 0, "gave_up": False,
            "last_probe": None, "last_restart": None, "generation_tokens": None, "last_skip": None}


def read_regular_text(path, limit):
    """The UTF-8 text of the regular file ``path``, at most ``limit`` bytes; FileNotFoundError when there is none,
    another OSError or a ValueError naming what is wrong otherwise.

    The collection's module_utils/io/safe_io.read_text follows the same rule, but this script is copied alone onto the
    host (vllm-watchdog, run by a systemd timer), where the collection is not importable: the rule is kept here.
    Opened without blocking and checked with fstat: a FIFO, socket or device is refused, never waited on."""
    descriptor = os.open(path, READ_FLAGS)
    with os.fdopen(descriptor, "rb") as handle:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise ValueError("not a regular file (a FIFO, socket, device or folder)")
        raw = handle.read(limit + 1)
    if len(raw) > limit:
        raise ValueError("larger than %d bytes" % limit)
    return raw.decode("utf-8")


def _count(value):
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _finite(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _record(value, fields):
    """None, or a dict whose ``fields`` hold a finite time, a bool ``ok`` and a str ``reason``."""
    checks = {"time": _finite, "ok": lambda v: isinstance(v, bool), "reason": lambda v: isinstance(v, str)}
    return value is None or (isinstance(value, dict) and all(checks[field](value.get(field)) for field in fields))


# What each field of a state file must hold for the watchdog to count with it; a field that is absent takes the
# fresh state's value (a state written before the field existed).
STATE_FIELDS = {
    "consecutive_failures": _count,
    "restarts_total": _count,
    "restarts": lambda v: isinstance(v, list) and all(_finite(when) for when in v),
    "gave_up": lambda v: isinstance(v, bool),
    "last_probe": lambda v: _record(v, ("time", "ok", "reason")),
    "last_restart": lambda v: _record(v, ("time", "reason")),
    "generation_tokens": lambda v: v is None or _finite(v),
    "last_skip": lambda v: v is None or isinstance(v, str),
}


def state_problem(stored, unit):
    """Why a parsed state file cannot be used for ``unit``, or None."""
    if not isinstance(stored, dict) or stored.get("unit") != unit:
        return "not a watchdog state of %s" % unit
    for field in sorted(STATE_FIELDS):
        if field in stored and not STATE_FIELDS[field](stored[field]):
            return "field %s holds %s, which the watchdog cannot count with" % (field, json.dumps(stored[field])[:80])
    return None


def set_aside(path, unit, problem, now):
    """Rename a state the watchdog cannot use to ``<path>.unreadable-<epoch seconds>`` (``-1``, ``-2`` when taken):
    kept for the operator, never deleted, never over an earlier one."""
    stamp = int(now)
    aside = "%s.unreadable-%d" % (path, stamp)
    number = 0
    while os.path.lexists(aside):
        number += 1
        aside = "%s.unreadable-%d-%d" % (path, stamp, number)
    try:
        os.rename(path, aside)
    except OSError as exc:
        log("%s: state file %s unusable (%s) and cannot be set aside (%s); starting afresh" % (unit, path, problem, exc))
        return
    log("%s: state file %s unusable (%s); kept as %s, starting afresh" % (unit, path, problem, aside))


def load_state(path, unit, now=None):
    """The unit's state; a file the watchdog cannot use (not a regular file, not UTF-8 JSON, nested too deeply, a
    field of the wrong type) is set aside, never deleted, and the count starts afresh."""
    state = fresh_state(unit)
    try:
        stored = json.loads(read_regular_text(path, MAX_STATE_BYTES))
    except FileNotFoundError:
        return state
    except RecursionError:
        problem = "JSON nested too deeply"
    except (OSError, ValueError) as exc:
        problem = str(exc)
    else:
        problem = state_problem(stored, unit)
        if problem is None:
            state.update(stored)
            return state
    set_aside(path, unit, problem, time.time() if now is None else now)
    return state


def atomic_write(path, text, mode=0o644):
    """Write ``text`` to ``path`` through a temporary file in the same directory and a rename."""
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(handle, "w") as out:
            os.fchmod(out.fileno(), mode)
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


def save_state(path, state):
    atomic_write(path, json.dumps(state, indent=2, sort_keys=True) + "\n")


# ---- what systemd and the deploys say ------------------------------------------------------------------

def systemctl(*words):
    """(exit status, stdout) of one systemctl call."""
    done = subprocess.run(["systemctl"] + list(words), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, check=False)
    return done.returncode, done.stdout.strip()


def active_state(unit):
    status, out = systemctl("show", "--property=ActiveState", "--value", unit)
    return out if status == 0 and out else "unknown (systemctl show: %s)" % out


def hold_reason(hold_dir, unit, now):
    """Why a deploy holds the unit now, or None: the hold file's epoch seconds are still ahead."""
    path = os.path.join(hold_dir, unit)
    try:
        text = read_regular_text(path, MAX_HOLD_BYTES).strip()
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        return "hold %s unreadable (%s), taken as held" % (path, exc)
    try:
        until = float(text)
    except ValueError:
        return "hold %s holds %r, not epoch seconds, taken as held" % (path, text[:40])
    if until > now:
        return "held by a deploy until %s (%s)" % (time.strftime("%H:%M:%S", time.localtime(until)), path)
    return None


def skip_reason(args, now):
    """Why this look is skipped, or None to probe."""
    held = hold_reason(args.hold_dir, args.unit, now)
    if held:
        return held
    state = active_state(args.unit)
    if state != "active":
        return "unit is %s, not active" % state
    return None


def skip(state, reason):
    """No probe: failed looks no longer count in a row, and the tokens seen are not compared across a restart."""
    if reason != state.get("last_skip"):
        log("%s: not probing: %s" % (state["unit"], reason))
    state.update(consecutive_failures=0, generation_tokens=None, last_skip=reason)


# ---- the look ------------------------------------------------------------------------------------------

def probe(args):
    """(ok, reason) of one readiness look: vllm-ready --once, the API key in its environment only."""
    command = [sys.executable, args.ready, "--once", "--url", args.url, "--model", args.model,
               "--request-timeout", str(args.request_timeout)]
    command += ["--tool-check"] if args.tool_check else []
    command += ["--reasoning-check"] if args.reasoning_check else []
    # Completion and chat request, each with the request timeout, and the interpreter's start.
    limit = 2 * args.request_timeout + 15
    try:
        done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                              timeout=limit, check=False)
    except subprocess.TimeoutExpired:
        return False, "the probe took longer than %.0f s" % limit
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    reason = lines[-1].replace("vllm-ready: ", "", 1) if lines else "exit status %d" % done.returncode
    return done.returncode == 0, reason


def generation_tokens(url, timeout):
    """vllm:generation_tokens_total summed over the server's engines and models, or None when unreadable."""
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/metrics", timeout=timeout) as response:
            text = response.read().decode("utf-8", "replace")
    except (OSError, ValueError):
        return None
    total, found = 0.0, False
    for line in text.splitlines():
        if line.startswith(GENERATION_TOKENS + "{") or line.startswith(GENERATION_TOKENS + " "):
            try:
                total += float(line.rsplit(None, 1)[1])
                found = True
            except (IndexError, ValueError):
                continue
    return total if found else None


def look(args, state, now):
    """Probe once; a failure while generation tokens rose counts as alive. Returns whether the engine is alive."""
    ok, reason = probe(args)
    tokens = generation_tokens(args.url, args.request_timeout)
    before = state.get("generation_tokens")
    if not ok and tokens is not None and before is not None and tokens > before:
        reason = "%s; but generation tokens rose %.0f -> %.0f: busy, not hung" % (reason, float(before), float(tokens))
        alive = True
    else:
        alive = ok
    state.update(last_probe={"time": now, "ok": ok, "reason": reason}, generation_tokens=tokens, last_skip=None)
    return alive


# ---- what follows from it ------------------------------------------------------------------------------

def drop_in_path(args):
    return os.path.join(args.runtime_unit_dir, args.unit + ".d", DROP_IN_NAME)


def recover(args, state):
    """The unit answers again: lift a give-up (its drop-in too) and start counting afresh."""
    if state["consecutive_failures"]:
        log("%s: alive again after %d failed look(s): %s" % (args.unit, state["consecutive_failures"], state["last_probe"]["reason"]))
    state["consecutive_failures"] = 0
    if state["gave_up"] or os.path.exists(drop_in_path(args)):
        remove_drop_in(args)
        state["gave_up"] = False
        log("%s: active and answering again: the give-up is lifted, Restart=on-failure applies again" % args.unit)


def remove_drop_in(args):
    """Remove the gave-up drop-in, only when it is the watchdog's own (it carries the marker line)."""
    path = drop_in_path(args)
    try:
        ours = DROP_IN_MARKER in read_regular_text(path, MAX_STATE_BYTES)
    except FileNotFoundError:
        return
    except (OSError, ValueError) as exc:
        log("%s: %s unreadable (%s); left alone" % (args.unit, path, exc))
        return
    if not ours:
        log("%s: %s lacks the watchdog's marker line; left alone" % (args.unit, path))
        return
    os.unlink(path)
    systemctl("daemon-reload")


def failed_look(args, state, now):
    """One more failed look; after N in a row, restart the unit or, past K restarts in the hour, give up."""
    state["consecutive_failures"] += 1
    failures, reason = state["consecutive_failures"], state["last_probe"]["reason"]
    if failures < args.failures:
        log("%s: failed look %d of %d: %s" % (args.unit, failures, args.failures, reason))
        return
    if args.group_node:
        stop_group_node(args, state, reason)
        state["consecutive_failures"] = 0
        return
    state["restarts"] = [when for when in state["restarts"] if now - when < WINDOW_S]
    if len(state["restarts"]) >= args.max_restarts:
        give_up(args, state, reason)
        state["consecutive_failures"] = 0
    elif restart(args, state, now, reason):
        state["consecutive_failures"] = 0


def restart(args, state, now, reason):
    """SIGKILL, then systemctl restart --no-block (the start may take most of an hour); False when systemctl refused.

    The engine is hung: a graceful stop would wait for it until TimeoutStopSec (120 s by default) and then
    SIGKILL it anyway, time the unit serves nothing; the kill frees the GPUs at once.
    """
    systemctl("kill", "--signal=SIGKILL", args.unit)
    status, out = systemctl("restart", "--no-block", args.unit)
    if status != 0:
        log("%s: systemctl restart failed (%s); trying again at the next look" % (args.unit, out))
        return False
    state["restarts"].append(now)
    state["restarts_total"] += 1
    state["last_restart"] = {"time": now, "reason": reason}
    log("%s: restarted after %d failed looks in a row (last: %s), killed first; restart %d of %d this hour"
        % (args.unit, args.failures, reason, len(state["restarts"]), args.max_restarts))
    return True


def give_up(args, state, reason):
    """Leave the unit failed: Restart=no in a runtime drop-in, then SIGKILL (a hung process may ignore SIGTERM)."""
    atomic_write(drop_in_path(args), DROP_IN.format(restarts=len(state["restarts"])))
    systemctl("daemon-reload")
    status, out = systemctl("kill", "--signal=SIGKILL", args.unit)
    state["gave_up"] = True
    log("%s: giving up: %d failed looks in a row (last: %s) after %d restart(s) within the hour (at most %d); "
        "the unit is killed and left failed (Restart=no until it is started again)%s"
        % (args.unit, args.failures, reason, len(state["restarts"]), args.max_restarts,
           "" if status == 0 else "; systemctl kill said: " + out))


def stop_group_node(args, state, reason):
    """Kill a hung node of a multi-node group and leave it failed: its group watch takes the other nodes down.

    Its unit already has Restart=no (the role writes it so for every node), so no drop-in is needed.
    """
    status, out = systemctl("kill", "--signal=SIGKILL", args.unit)
    state["gave_up"] = True
    log("%s: %d failed looks in a row (last: %s): a node of a multi-node group is not restarted alone, so it is "
        "killed and left failed (the other nodes go down with it); a re-run of the play starts the group%s"
        % (args.unit, args.failures, reason, "" if status == 0 else "; systemctl kill said: " + out))


# ---- metrics -------------------------------------------------------------------------------------------

def textfile_path(directory, unit):
    return os.path.join(directory, "gauntlet_vllm_watchdog_%s.prom" % re.sub(r"[^A-Za-z0-9_]", "_", unit))


def textfile_owner(path):
    """The unit whose metrics the textfile at ``path`` holds, or None (absent or unreadable: then it is replaced, as
    before). The file name folds '-', '.' and '_' together, so vllm-qwen3-8b.service and vllm-qwen3_8b.service share
    one path; overwriting would hide one unit's restarts behind the other's."""
    try:
        text = read_regular_text(path, 1 << 20)
    except (OSError, ValueError):
        return None
    match = re.search(r'\{unit="((?:[^"\\]|\\.)*)"\}', text)
    if match is None:
        return None
    escapes = {"n": "\n", '"': '"', "\\": "\\"}
    return re.sub(r"\\(.)", lambda escaped: escapes.get(escaped.group(1), escaped.group(0)), match.group(1))


def write_metrics(args, state, now):
    """The unit's textfile; refused (logged, exit status 1) when it is another unit's. Returns the exit status."""
    path = textfile_path(args.textfile_dir, args.unit)
    owner = textfile_owner(path)
    if owner is not None and owner != args.unit:
        log("not writing %s: it holds the metrics of %s, and %s maps to the same file name; rename one of the two "
            "units (the look itself was done)" % (path, owner, args.unit))
        return 1
    atomic_write(path, metrics_text(state, now))
    return 0


def metrics_text(state, now):
    """The node exporter textfile of one unit (Prometheus text format 0.0.4)."""
    unit = state["unit"].replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    series = [
        ("restarts_total", "counter", "Restarts the watchdog made of the unit, ever.", state["restarts_total"]),
        ("consecutive_failures", "gauge", "Failed looks in a row.", state["consecutive_failures"]),
        ("probe_success", "gauge", "Whether the last readiness probe passed.",
         None if state.get("last_probe") is None else int(bool(state["last_probe"]["ok"]))),
        ("gave_up", "gauge", "1 when the watchdog killed the unit and left it failed (past its restarts in the hour, "
                             "or at once for a node of a multi-node group).",
         int(bool(state["gave_up"]))),
        ("last_run_timestamp_seconds", "gauge", "When the watchdog last looked at the unit.", now),
    ]
    lines = []
    for name, kind, help_text, value in series:
        if value is None:
            continue
        lines += ["# HELP %s%s %s" % (METRIC_PREFIX, name, help_text), "# TYPE %s%s %s" % (METRIC_PREFIX, name, kind),
                  '%s%s{unit="%s"} %s' % (METRIC_PREFIX, name, unit, repr(float(value)) if isinstance(value, float) else value)]
    return "\n".join(lines) + "\n"


def run(args, now):
    """One look at the unit: skip, or probe and act; then keep the state and the metrics."""
    state = load_state(args.state_file, args.unit, now)
    reason = skip_reason(args, now)
    if reason:
        skip(state, reason)
    elif look(args, state, now):
        recover(args, state)
    else:
        failed_look(args, state, now)
    save_state(args.state_file, state)
    return write_metrics(args, state, now)


def main(argv=None):
    return run(parse_args(argv), time.time())


if __name__ == "__main__":
    sys.exit(main())
