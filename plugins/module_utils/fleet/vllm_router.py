# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""HAProxy's runtime API (the admin UNIX socket the role ``vllm_router`` opens), for
``gauntlet.vllm.vllm_router_server`` and ``gauntlet.vllm.vllm_router_info``.

No Ansible imports and no socat: one command per connection over the socket (HAProxy answers
and closes in non-interactive mode), ``show stat`` read as CSV, ``show servers state`` for the
administrative state (its ``srv_admin_state`` bit field), ``set server <b>/<s> state ...`` to
drain, ready or maintain a server, and polling waits (idle: no session on the server; up: its
health check passes) with a clock and a sleep that tests replace.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import csv
import io
import socket
import time

from ansible_collections.gauntlet.vllm.plugins.module_utils.io.safe_io import finite_number, full_match, short_text

DEFAULT_SOCKET = "/run/haproxy/admin.sock"
DEFAULT_BACKEND = "vllm"
# Every backend that holds the server (the router's per-model backends).
ALL_BACKENDS = "*"
STATES = ("ready", "drain", "maint")
WAITS = ("none", "idle", "up")
POLL_SECONDS = 0.5
MAX_ANSWER_BYTES = 64 * 1024 * 1024
# srv_admin_state bits (HAProxy's SRV_ADMF_*): forced, inherited, configuration, resolution, health maintenance; drain.
_MAINT_BITS = 0x01 | 0x02 | 0x04 | 0x20 | 0x40
_DRAIN_BITS = 0x08 | 0x10
# HAProxy's identifier characters: a backend or server name is sent inside a runtime API command, where a line break
# or ';' would start another command.
NAME_PATTERN = r"[A-Za-z0-9._:-]+"


class RouterError(Exception):
    """A runtime API failure, or a wait that ran out; the message names the server and what was seen."""


def runtime_command(path, command, timeout=5.0):
    """Send one command to HAProxy's runtime API at ``path`` and return its whole answer as text."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(path)
        sock.sendall(command.encode("utf-8") + b"\n")
        chunks, size = [], 0
        while True:
            data = sock.recv(65536)
            if not data:
                break
            chunks.append(data)
            size += len(data)
            if size > MAX_ANSWER_BYTES:
                raise RouterError("HAProxy's answer to %r on %s is larger than %d bytes" % (command, path, MAX_ANSWER_BYTES))
    except (OSError, socket.timeout) as exc:
        raise RouterError("HAProxy's runtime API at %s did not answer %r: %s" % (path, command, exc))
    finally:
        sock.close()
    return b"".join(chunks).decode("utf-8", "replace")


def _int(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def parse_stat(text):
    """``show stat`` CSV → list of dicts keyed by the header's field names (``# pxname,svname,...``)."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines or not lines[0].startswith("# pxname,svname,"):
        raise RouterError("not the CSV of 'show stat' (first line: %r)" % (lines[0][:120] if lines else ""))
    header = lines[0][2:].rstrip(",").split(",")
    rows = []
    for values in csv.reader(io.StringIO("\n".join(lines[1:]))):
        rows.append(dict(zip(header, values)))
    return rows


def parse_servers_state(text):
    """``show servers state`` → {(backend, server): admin state bits as int}."""
    lines = [line for line in text.splitlines() if line.strip()]
    header = next((line[2:].split() for line in lines if line.startswith("# be_id")), None)
    if header is None or "srv_admin_state" not in header:
        raise RouterError("not the answer of 'show servers state' (%r)" % text[:200])
    states = {}
    for line in lines:
        if line.startswith("#") or line.strip() == "1":
            continue
        values = dict(zip(header, line.split()))
        admin = _int(values.get("srv_admin_state"))
        if admin is not None:
            states[(values.get("be_name"), values.get("srv_name"))] = admin
    return states


def admin_state(bits):
    """HAProxy's srv_admin_state bits → ready, drain or maint (maintenance wins over drain)."""
    if bits & _MAINT_BITS:
        return "maint"
    if bits & _DRAIN_BITS:
        return "drain"
    return "ready"


def server_row(row, bits):
    """One server's ``show stat`` row and admin bits → what the modules report."""
    status = row.get("status", "")
    return {
        "admin_state": admin_state(bits) if bits is not None else None,
        "operational_state": status.split(" ")[0] if status else "",
        "status": status,
        "check_status": row.get("check_status", ""),
        "current_sessions": _int(row.get("scur")) or 0,
        "queued": _int(row.get("qcur")) or 0,
        "total_sessions": _int(row.get("stot")) or 0,
        "failed_checks": _int(row.get("chkfail")) or 0,
        "address": row.get("addr", ""),
    }


def backend_servers(path, backend, command=runtime_command):
    """{server name: server_row} of ``backend``; the backend missing is an error naming the ones there are."""
    rows = parse_stat(command(path, "show stat"))
    names = sorted({row.get("pxname") for row in rows if row.get("svname") == "BACKEND"})
    if backend not in names:
        raise RouterError("HAProxy at %s has no backend %r (backends: %s)" % (path, backend, ", ".join(names) or "none"))
    bits = parse_servers_state(command(path, "show servers state %s" % backend))
    servers = {}
    for row in rows:
        if row.get("pxname") == backend and row.get("svname") not in ("BACKEND", "FRONTEND"):
            servers[row["svname"]] = server_row(row, bits.get((backend, row["svname"])))
    return servers


def find_server(servers, backend, server):
    """The server's row; an unknown name is an error naming it and the known ones."""
    if server not in servers:
        raise RouterError("backend %r has no server %r (servers: %s)" % (backend, server, ", ".join(sorted(servers)) or "none"))
    return servers[server]


def _condition(wait, row):
    if wait == "idle":
        return row["current_sessions"] == 0 and row["queued"] == 0
    return row["status"] == "UP"


def _seen(row):
    return "%d current sessions, %d queued, status %s, check %s" % (
        row["current_sessions"], row["queued"], row["status"] or "?", row["check_status"] or "?")


def check_name(value, option):
    """``value`` when it is a backend or server name HAProxy could hold; otherwise a RouterError naming ``option``."""
    if not full_match(NAME_PATTERN, value):
        raise RouterError("%s must be an HAProxy name (letters, digits, '.', '_', ':' and '-'), got %s"
                          % (option, short_text(repr(value), 80)))
    return value


def check_timeout(value):
    """Refuse a timeout that is not a finite number of seconds, 0 or more: a NaN would never run out (every comparison
    with it is false), nor would an infinity; raises a RouterError naming the option."""
    return finite_number(value, "timeout", RouterError, minimum=0)


def wait_for(path, backend, server, wait, timeout, command=runtime_command, clock=time.monotonic, sleep=time.sleep):
    """Poll until the server is idle (no session, none queued) or UP (its check passes); return (row, seconds)."""
    check_timeout(timeout)
    check_name(backend, "backend")
    check_name(server, "server")
    start = clock()
    while True:
        row = find_server(backend_servers(path, backend, command), backend, server)
        waited = clock() - start
        if _condition(wait, row):
            return row, round(waited, 3)
        if waited >= timeout:
            goal = "become idle (0 sessions)" if wait == "idle" else "become UP (health check passing)"
            raise RouterError("server %s/%s did not %s within %ss: last seen %s" % (backend, server, goal, timeout, _seen(row)))
        sleep(min(POLL_SECONDS, max(timeout - waited, 0.01)))


def set_state(path, backend, server, state, command=runtime_command):
    """``set server <backend>/<server> state <state>``; any answer but an empty one is HAProxy's error."""
    answer = command(path, "set server %s/%s state %s" % (backend, server, state)).strip()
    if answer:
        raise RouterError("HAProxy refused 'set server %s/%s state %s': %s" % (backend, server, state, answer))


def server_backends(path, server, command=runtime_command):
    """{backend: server_row} of every backend that holds ``server``: the router's per-model backends each hold the
    servers of one model, so a host serving two models is a server in two backends."""
    rows = parse_stat(command(path, "show stat"))
    bits = parse_servers_state(command(path, "show servers state"))
    found = dict((row["pxname"], server_row(row, bits.get((row["pxname"], server))))
                 for row in rows if row.get("svname") == server)
    if not found:
        known = sorted({row.get("svname") for row in rows} - {"BACKEND", "FRONTEND", None})
        raise RouterError("no backend of HAProxy at %s has a server %r (servers: %s)" % (path, server, ", ".join(known) or "none"))
    return found


def _targets(path, backend, server, command):
    """{backend: row} the call acts on: one backend, or with ALL_BACKENDS every backend holding the server."""
    if backend == ALL_BACKENDS:
        return server_backends(path, server, command)
    return {backend: find_server(backend_servers(path, backend, command), backend, server)}


def _summary(rows):
    """One row for a server seen in several backends: the worst operational state, the sessions summed."""
    ordered = [rows[name] for name in sorted(rows)]
    worst = next((row for row in ordered if row["operational_state"] != "UP"), ordered[0])
    states = sorted({row["admin_state"] for row in ordered})
    return dict(worst, admin_state=states[0] if len(states) == 1 else "mixed",
                current_sessions=sum(row["current_sessions"] for row in ordered))


def router_server(params, check_mode=False, command=runtime_command, clock=time.monotonic, sleep=time.sleep):
    """What vllm_router_server does: set the server's admin state in its backend (or every backend holding it, for
    ALL_BACKENDS), then wait as asked."""
    path, server = params["socket"], check_name(params["server"], "server")
    backend = params["backend"] if params["backend"] == ALL_BACKENDS else check_name(params["backend"], "backend")
    state, wait = params["state"], params["wait"]
    if state not in STATES or wait not in WAITS:
        raise RouterError("state must be one of %s and wait one of %s (got %r, %r)" % (STATES, WAITS, state, wait))
    # Checked before the state is set: a timeout refused after a drain would leave the server drained.
    timeout = params["timeout"]
    check_timeout(timeout)
    rows = _targets(path, backend, server, command)
    before = _summary(rows)["admin_state"]
    stale = sorted(name for name, row in rows.items() if row["admin_state"] != state)
    waited = 0.0
    if stale and not check_mode:
        for name in stale:
            set_state(path, name, server, state, command)
        rows = _targets(path, backend, server, command)
    if wait != "none" and not check_mode:
        for name in sorted(rows):
            rows[name], seconds = wait_for(path, name, server, wait, timeout, command, clock, sleep)
            waited += seconds
    row = _summary(rows)
    return {
        "server": server,
        "backend": backend,
        "backends": sorted(rows),
        "state_before": before,
        "state": state if check_mode else row["admin_state"],
        "changed": bool(stale),
        "operational_state": row["operational_state"],
        "current_sessions": row["current_sessions"],
        "check_status": row["check_status"],
        "waited_s": round(waited, 3),
    }


def router_info(params, command=runtime_command):
    """What vllm_router_info returns: every server of the backend; with ALL_BACKENDS every server of every backend,
    summarized over the backends that hold it (the worst operational state, sessions summed), and ``backends``
    {backend: {server: row}}."""
    if params["backend"] != ALL_BACKENDS:
        servers = backend_servers(params["socket"], check_name(params["backend"], "backend"), command)
        return {"backend": params["backend"], "socket": params["socket"], "servers": servers}
    rows = parse_stat(command(params["socket"], "show stat"))
    names = sorted({row.get("pxname") for row in rows if row.get("svname") == "BACKEND"})
    backends = dict((name, backend_servers(params["socket"], name, command)) for name in names)
    servers = {}
    for name in names:
        for server, row in backends[name].items():
            servers.setdefault(server, {})[name] = row
    return {"backend": ALL_BACKENDS, "socket": params["socket"], "backends": backends,
            "servers": dict((server, _summary(rows_of)) for server, rows_of in servers.items())}
