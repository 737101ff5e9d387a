# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The role vllm_router's HAProxy configuration (roles/vllm_router/templates/haproxy.cfg.j2), rendered with
the role's defaults and vars as Ansible renders it (Jinja, trim_blocks), checked by the real ``haproxy -c``,
then run by a real HAProxy in front of two fake vLLM servers (local HTTP servers that record every request):
the health check is a one-token completion with the key from the environment, the runtime API drains and
readies servers, and a server that fails before answering has its request retried on the other one.

HAProxy is required (Debian's package ``haproxy``; the rig installs it): without it these tests fail."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import contextlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import jinja2
import pytest
import yaml

from ansible_collections.gauntlet.vllm.plugins.module_utils.fleet import vllm_router as vr
from ansible_collections.gauntlet.vllm.plugins.module_utils.fleet.vllm_router_layout import LayoutError, router_layout
from ansible_collections.gauntlet.vllm.plugins.module_utils.io.prometheus_text import parse_exposition

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
ROLE = os.path.join(ROOT, "roles", "vllm_router")
KEY = "gauntlet-router-key-5c2d9e01"
MODEL = "tiny-llama"


def haproxy():
    path = shutil.which("haproxy") or ("/usr/sbin/haproxy" if os.path.exists("/usr/sbin/haproxy") else None)
    assert path, "haproxy is not installed: apt-get install -y haproxy (scripts/rig.sh installs it on the controller)"
    return path


def _free_port():
    with contextlib.closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def role_vars(**overrides):
    values = {}
    for name in ("defaults", "vars"):
        with open(os.path.join(ROLE, name, "main.yml")) as handle:
            values.update(yaml.safe_load(handle))
    values.update(vllm_router_backends=[{"name": "gpu-01", "address": "127.0.0.1", "port": 18001},
                                        {"name": "gpu-02", "address": "127.0.0.1", "port": 18002}],
                  vllm_router_model=MODEL, vllm_router_api_key=KEY)
    values.update(overrides)
    # What main.yml's set_fact computes with the filter gauntlet.vllm.vllm_router_layout.
    values.setdefault("__vllm_router_layout", router_layout(values["vllm_router_backends"], values["vllm_router_model"]))
    return values


def render(template, **overrides):
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(os.path.join(ROLE, "templates")), undefined=jinja2.StrictUndefined,
                             trim_blocks=True, keep_trailing_newline=True)
    env.filters["to_json"] = json.dumps
    return env.get_template(template).render(**role_vars(**overrides))


def write_config(tmp_path, **overrides):
    """The role's three files in ``tmp_path``: the model map and /v1/models answer (which haproxy -c reads), then
    haproxy.cfg pointing at them; returns the configuration's path."""
    overrides = dict(overrides, _vllm_router_map_file=str(tmp_path / "models.map"),
                     _vllm_router_models_file=str(tmp_path / "models.json"),
                     _vllm_router_backends_metrics_file=str(tmp_path / "backends.prom"))
    values = role_vars(**overrides)
    (tmp_path / "models.map").write_text(render("gauntlet-vllm-models.map.j2", **overrides))
    (tmp_path / "models.json").write_text(values["__vllm_router_layout"]["models_json"] + "\n")
    (tmp_path / "backends.prom").write_text(values["__vllm_router_layout"]["metrics"])
    path = tmp_path / "gauntlet-vllm.cfg"
    path.write_text(render("haproxy.cfg.j2", **overrides))
    return path


def check(path, env=None):
    return subprocess.run([haproxy(), "-c", "-f", path], capture_output=True, text=True, env=env, check=False)


# ---- the configuration as written --------------------------------------------------------------------------

def test_config_passes_haproxy_check_without_warnings(tmp_path):
    path = write_config(tmp_path)
    result = check(str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "WARNING" not in result.stdout + result.stderr and "ALERT" not in result.stdout + result.stderr


def test_config_never_holds_the_api_key_only_its_variable():
    text = render("haproxy.cfg.j2")
    assert KEY not in text
    assert 'hdr Authorization "Bearer ${GAUNTLET_VLLM_ROUTER_API_KEY}"' in text


def test_env_file_holds_the_key_and_the_config_path():
    lines = render("gauntlet-vllm.env.j2").splitlines()
    assert "GAUNTLET_VLLM_ROUTER_API_KEY=%s" % KEY in lines
    assert "CONFIG=/etc/haproxy/gauntlet-vllm.cfg" in lines


def test_dropin_points_the_package_unit_at_the_role_files():
    lines = render("haproxy-gauntlet.conf.j2").splitlines()
    assert lines.index("[Service]") < lines.index('Environment="CONFIG=/etc/haproxy/gauntlet-vllm.cfg"')
    assert lines.index("[Service]") < lines.index("EnvironmentFile=/etc/haproxy/gauntlet-vllm.env")
    # No chroot in the role's configuration: the package's /dev/log bind mount is reset.
    assert lines.index("[Service]") < lines.index("BindReadOnlyPaths=")
    assert "chroot" not in render("haproxy.cfg.j2")


def test_no_key_no_authorization_header():
    text = render("haproxy.cfg.j2", vllm_router_api_key="")
    assert "Authorization" not in text


def test_backend_settings():
    lines = [line.strip() for line in render("haproxy.cfg.j2").splitlines()]
    for wanted in ("balance leastconn", "option http-buffer-request", "retries 3", "option redispatch 1",
                   "retry-on conn-failure empty-response response-timeout 503", "option httpchk",
                   "http-check expect status 200", "default-server check inter 1s fall 2 rise 2",
                   "timeout server 600s", "timeout client 600s", "bind 0.0.0.0:8000", "bind 0.0.0.0:8404",
                   "http-request use-service prometheus-exporter if { path /metrics }",
                   "stats socket /run/haproxy/admin.sock mode 600 level admin expose-fd listeners",
                   "server gpu-01 127.0.0.1:18001", "server gpu-02 127.0.0.1:18002", "backend vllm"):
        assert wanted in lines, wanted


def test_health_check_body_is_json_for_every_model_character_allowed(tmp_path):
    model = "org/Model-v2.5_a:b@c+d"
    path = write_config(tmp_path, vllm_router_model=model,
                        vllm_router_backends=[{"name": "gpu-01", "address": "127.0.0.1", "port": 18001}])
    text = path.read_text()
    body = [line for line in text.splitlines() if "http-check send" in line][0].split(" body '", 1)[1].rstrip("'")
    assert json.loads(body) == {"model": model, "prompt": "ping", "max_tokens": 1}
    assert check(str(path)).returncode == 0


@pytest.mark.parametrize("model", ['org/model "v2"', "a b", "x'y", "m\n", "#m", "50%", ""])
def test_a_model_name_the_config_would_misread_is_refused_by_name(model):
    with pytest.raises(LayoutError, match=r"vllm_router_model must be a model name"):
        router_layout([{"name": "gpu-01", "address": "127.0.0.1", "port": 18001}], model)
    with pytest.raises(LayoutError, match=r"vllm_router_backends\[1\] \(gpu-02\)\.models\[1\] must be a model name"):
        router_layout([{"name": "gpu-01", "address": "127.0.0.1", "port": 18001},
                       {"name": "gpu-02", "address": "127.0.0.1", "port": 18002, "models": [MODEL, model]}], MODEL)


def test_prometheus_exporter_is_built_in():
    result = subprocess.run([haproxy(), "-vv"], capture_output=True, text=True, check=True)
    assert "prometheus-exporter" in result.stdout


# ---- a real HAProxy in front of two fake vLLM servers ----------------------------------------------------

class Fake:
    """A vLLM server: records (path, Authorization, body, headers) per POST; ``mode`` ok, 500 or drop (closes, no
    answer); a completion of a model it does not serve gets vLLM's 404, as the real server answers it."""

    def __init__(self, port, models=(MODEL,)):
        self.mode = "ok"
        self.requests = []
        self.models = list(models)
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                fake.requests.append((self.path, self.headers.get("Authorization"), body,
                                      dict((key.lower(), value) for key, value in self.headers.items())))
                if fake.mode == "drop":
                    self.close_connection = True
                    return
                status = 200 if fake.mode == "ok" else 500
                data = {"choices": [{"text": "!"}], "port": port, "model": body.get("model")}
                if body.get("model", fake.models[0]) not in fake.models:
                    status, data = 404, {"error": {"message": "The model `%s` does not exist." % body.get("model"),
                                                   "type": "NotFoundError", "param": "model", "code": 404}}
                data = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except OSError:
                    pass  # a health check reads the status line and closes

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def checks(self):
        return [r for r in self.requests if r[2].get("prompt") == "ping"]

    def clients(self):
        return [r for r in self.requests if r[2].get("prompt") != "ping"]

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


@contextlib.contextmanager
def running_router(tmp_path, served=((MODEL,), (MODEL,)), **overrides):
    """A real HAProxy with the role's configuration in front of one fake server per entry of ``served`` (the models
    each serves, listed in vllm_router_backends[].models unless ``overrides`` says otherwise)."""
    ports = [_free_port() for _port in range(len(served) + 2)]
    fakes = [Fake(port, models) for port, models in zip(ports, served)]
    names = ["gpu-%02d" % (index + 1) for index in range(len(served))]
    sock = str(tmp_path / "admin.sock")
    backends = [{"name": name, "address": "127.0.0.1", "port": port, "models": list(models)}
                for name, port, models in zip(names, ports, served)]
    settings = dict(_vllm_router_admin_socket=sock, vllm_router_port=ports[-2], vllm_router_stats_port=ports[-1],
                    vllm_router_bind_address="127.0.0.1", vllm_router_stats_bind_address="127.0.0.1",
                    vllm_router_backends=backends)
    settings.update(overrides)
    cfg = write_config(tmp_path, **settings)
    # No privilege drop and no syslog in a test run.
    text = cfg.read_text().replace("    user haproxy\n", "").replace("    group haproxy\n", "")
    cfg.write_text(text.replace("log /dev/log local0", "log stderr local0 err"))
    env = dict(os.environ, GAUNTLET_VLLM_ROUTER_API_KEY=KEY)
    proc = subprocess.Popen([haproxy(), "-db", "-f", str(cfg)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 10
        while not os.path.exists(sock):
            assert proc.poll() is None, proc.stdout.read().decode()
            assert time.monotonic() < deadline, "haproxy did not open its admin socket"
            time.sleep(0.05)
        for name in names:
            vr.router_server({"socket": sock, "backend": "*", "server": name, "state": "ready", "wait": "up",
                              "timeout": 15})
        yield {"sock": sock, "fakes": fakes, "base": "http://127.0.0.1:%d" % ports[-2],
               "url": "http://127.0.0.1:%d/v1/completions" % ports[-2],
               "metrics": "http://127.0.0.1:%d/metrics" % ports[-1],
               "backends_metrics": "http://127.0.0.1:%d/gauntlet/metrics" % ports[-1]}
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)
        for fake in fakes:
            fake.stop()


@pytest.fixture
def router(tmp_path):
    with running_router(tmp_path) as running:
        yield running


def post(url, body, headers=None):
    """(status, JSON answer) of a POST, error statuses included."""
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers=dict({"Content-Type": "application/json"}, **(headers or {})))
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def get(url, headers=None):
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def complete(url, model=MODEL, prompt="hello", headers=None):
    return post(url, {"model": model, "prompt": prompt, "max_tokens": 4}, headers)


def test_health_check_is_a_completion_with_the_key_from_the_environment(router):
    for fake in router["fakes"]:
        path, auth, body = fake.checks()[0][:3]
        assert path == "/v1/completions"
        assert auth == "Bearer " + KEY
        assert body == {"model": MODEL, "prompt": "ping", "max_tokens": 1}


def test_requests_pass_and_drain_sends_no_new_request(router):
    assert complete(router["url"])[0] == 200
    result = vr.router_server({"socket": router["sock"], "backend": "vllm", "server": "gpu-01", "state": "drain",
                               "wait": "idle", "timeout": 10})
    assert result["changed"] and result["state_before"] == "ready" and result["state"] == "drain"
    assert vr.router_info({"socket": router["sock"], "backend": "vllm"})["servers"]["gpu-01"]["operational_state"] == "DRAIN"
    before = len(router["fakes"][0].clients())
    for _attempt in range(6):
        assert complete(router["url"])[0] == 200
    assert len(router["fakes"][0].clients()) == before
    result = vr.router_server({"socket": router["sock"], "backend": "vllm", "server": "gpu-01", "state": "ready",
                               "wait": "up", "timeout": 10})
    assert result["changed"] and result["state"] == "ready" and result["operational_state"] == "UP"


def test_failing_check_takes_the_server_down_and_back_up(router):
    sock = router["sock"]
    router["fakes"][1].mode = "500"
    deadline = time.monotonic() + 10
    while vr.router_info({"socket": sock, "backend": "vllm"})["servers"]["gpu-02"]["operational_state"] != "DOWN":
        assert time.monotonic() < deadline, "gpu-02 never went DOWN"
        time.sleep(0.2)
    wanted = r"server vllm/gpu-02 did not become UP \(health check passing\) within 1.5s: last seen .*status DOWN, check L7STS"
    with pytest.raises(vr.RouterError, match=wanted):
        vr.wait_for(sock, "vllm", "gpu-02", "up", 1.5)
    router["fakes"][1].mode = "ok"
    assert vr.wait_for(sock, "vllm", "gpu-02", "up", 10)[0]["check_status"] == "L7OK"


def test_a_server_that_closes_without_answering_is_retried_on_the_other(router):
    router["fakes"][0].mode = "drop"
    for _attempt in range(6):
        status, body = complete(router["url"])
        assert status == 200
    assert len(router["fakes"][1].clients()) == 6


def test_prometheus_exporter_serves_the_backend(router):
    with urllib.request.urlopen(router["metrics"], timeout=5) as answer:
        text = answer.read().decode()
    assert 'haproxy_server_status{proxy="vllm",server="gpu-01"' in text


# ---- one endpoint for several models; affinity -------------------------------------------------------------

MOE = "org/tiny-moe"
AUTH = {"Authorization": "Bearer " + KEY}


def served_by(fakes, model):
    return [index for index, fake in enumerate(fakes) for request in fake.clients() if request[2].get("model") == model]


def test_each_model_goes_only_to_its_servers_each_checked_with_its_own_model(tmp_path):
    with running_router(tmp_path, served=((MODEL,), (MODEL, MOE))) as router:
        for _attempt in range(8):
            assert complete(router["url"], MOE)[0] == 200
            assert complete(router["url"], MODEL)[0] == 200
        assert served_by(router["fakes"], MOE) == [1] * 8
        assert sorted(set(served_by(router["fakes"], MODEL))) == [0, 1]
        # gpu-01 is never asked for the model it lacks, so it is never marked down for it.
        assert {check[2]["model"] for check in router["fakes"][0].checks()} == {MODEL}
        assert {check[2]["model"] for check in router["fakes"][1].checks()} == {MODEL, MOE}
        info = vr.router_info({"socket": router["sock"], "backend": "*"})
        assert sorted(info["backends"]) == ["vllm", "vllm_model_1"]
        assert sorted(info["backends"]["vllm_model_1"]) == ["gpu-02"]
        assert {row["operational_state"] for row in info["servers"].values()} == {"UP"}


def test_the_stats_port_names_the_model_or_adapter_of_each_backend(tmp_path):
    """HAProxy's exporter labels a backend only; the router's info series names its model, and an adapter as one."""
    with running_router(tmp_path, served=((MODEL, "tiny-lora"), (MOE,))) as router:
        assert complete(router["url"], "tiny-lora")[0] == 200
        with urllib.request.urlopen(router["backends_metrics"], timeout=5) as answer:
            assert answer.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            samples = parse_exposition(answer.read().decode())
        with urllib.request.urlopen(router["metrics"], timeout=5) as answer:
            exported = answer.read().decode()
    info = sorted((labels["proxy"], labels["model"], labels["kind"]) for name, labels, value in samples)
    assert info == [("vllm", MODEL, "model"), ("vllm_model_1", MOE, "model"), ("vllm_model_2", "tiny-lora", "adapter")]
    assert all(name == "gauntlet_router_backend_info" and value == 1 for name, labels, value in samples)
    # The adapter's request is counted on the backend the info series names it by.
    assert 'haproxy_backend_http_requests_total{proxy="vllm_model_2"} 1' in exported


def test_a_model_one_server_loaded_is_a_model_even_where_another_serves_it_as_an_adapter():
    layout = router_layout([{"name": "a", "address": "127.0.0.1", "port": 1, "models": [MODEL, "lora-x"]},
                            {"name": "b", "address": "127.0.0.1", "port": 2, "models": ["lora-x", MODEL]}], MODEL)
    assert [(entry["model"], entry["kind"]) for entry in layout["backends"]] == [(MODEL, "model"), ("lora-x", "model")]
    assert parse_exposition(layout["metrics"]) == [
        ("gauntlet_router_backend_info", {"proxy": "vllm", "model": MODEL, "kind": "model"}, 1.0),
        ("gauntlet_router_backend_info", {"proxy": "vllm_model_1", "model": "lora-x", "kind": "model"}, 1.0)]


def test_a_request_without_model_goes_to_the_default_models_servers(tmp_path):
    with running_router(tmp_path, served=((MOE,), (MODEL,))) as router:
        for _attempt in range(4):
            assert post(router["url"], {"prompt": "hello", "max_tokens": 4})[0] == 200
        assert len(router["fakes"][1].clients()) == 4 and not router["fakes"][0].clients()


def test_v1_models_lists_every_model_whatever_server_and_asks_for_the_key(tmp_path):
    with running_router(tmp_path, served=((MODEL,), (MOE,))) as router:
        answers = [get(router["base"] + "/v1/models", AUTH) for _attempt in range(4)]
        assert all(status == 200 for status, _body in answers)
        assert all(body == answers[0][1] for _status, body in answers)
        assert answers[0][1]["object"] == "list"
        assert [card["id"] for card in answers[0][1]["data"]] == [MODEL, MOE]
        assert {card["object"] for card in answers[0][1]["data"]} == {"model"}
        assert get(router["base"] + "/v1/models") == (401, {"error": "Unauthorized"})
        assert get(router["base"] + "/v1/models", {"Authorization": "Bearer wrong"})[0] == 401


def test_an_unknown_model_gets_vllms_404_and_reaches_no_server(tmp_path):
    with running_router(tmp_path, served=((MODEL,), (MOE,))) as router:
        name = 'no-such "model" \\ x'
        status, body = complete(router["url"], name, headers=AUTH)
        assert status == 404
        message = "The model `%s` does not exist. Valid aliases: %s, %s." % (name, MODEL, MOE)
        assert body == {"error": {"message": message, "type": "NotFoundError",
                                  "param": "model", "code": 404}}
        # A name HAProxy cannot decode (a \\u escape) loses those characters in the message; the answer stays JSON.
        status, body = complete(router["url"], "caf\u00e9-model", headers=AUTH)
        assert status == 404 and body["error"]["message"].startswith("The model `caf")
        # Without the key the router says 401 first, as vLLM does.
        assert complete(router["url"], name) == (401, {"error": "Unauthorized"})
        assert not router["fakes"][0].clients() and not router["fakes"][1].clients()


def test_drain_of_a_server_takes_it_out_of_every_models_backend(tmp_path):
    with running_router(tmp_path, served=((MODEL, MOE), (MODEL, MOE))) as router:
        result = vr.router_server({"socket": router["sock"], "backend": "*", "server": "gpu-01", "state": "drain",
                                   "wait": "idle", "timeout": 10})
        assert result["changed"] and result["backends"] == ["vllm", "vllm_model_1"] and result["state"] == "drain"
        before = len(router["fakes"][0].clients())
        for _attempt in range(4):
            assert complete(router["url"], MOE)[0] == 200
            assert complete(router["url"], MODEL)[0] == 200
        assert len(router["fakes"][0].clients()) == before
        result = vr.router_server({"socket": router["sock"], "backend": "*", "server": "gpu-01", "state": "ready",
                                   "wait": "up", "timeout": 10})
        assert result["changed"] and result["state_before"] == "drain" and result["operational_state"] == "UP"


def where_sessions_land(router, sessions, rounds=3):
    """{session: set of server indexes} for ``rounds`` requests of each session."""
    landed = {}
    for _round in range(rounds):
        for session in sessions:
            mark = "%s-%d" % (session, len(landed.get(session, ())))
            assert complete(router["url"], prompt=mark, headers={"X-Session-ID": session})[0] == 200
    for index, fake in enumerate(router["fakes"]):
        for request in fake.clients():
            landed.setdefault(request[3]["x-session-id"], set()).add(index)
    return landed


def test_session_affinity_keeps_a_session_on_one_server_and_moves_few_when_one_leaves(tmp_path):
    served = ((MODEL,), (MODEL,), (MODEL,))
    with running_router(tmp_path, served=served, vllm_router_affinity="session") as router:
        sessions = ["conversation-%d" % index for index in range(30)]
        landed = where_sessions_land(router, sessions)
        assert all(len(servers) == 1 for servers in landed.values()), landed
        assert len({min(servers) for servers in landed.values()}) == 3, "sessions should spread over the servers"
        home = dict((session, min(servers)) for session, servers in landed.items())
        vr.router_server({"socket": router["sock"], "backend": "*", "server": "gpu-03", "state": "drain",
                          "wait": "idle", "timeout": 10})
        for fake in router["fakes"]:
            fake.requests.clear()
        moved = where_sessions_land(router, sessions, rounds=1)
        # Consistent hashing: only the drained server's sessions move.
        assert all(moved[session] == {home[session]} for session in sessions if home[session] != 2)
        assert all(moved[session] != {2} for session in sessions)


def test_prefix_affinity_sends_a_shared_prompt_start_to_one_server(tmp_path):
    with running_router(tmp_path, vllm_router_affinity="prefix", vllm_router_prefix_bytes=64) as router:
        systems = ["System prompt number %d: you are a careful assistant who answers briefly. " % index
                   for index in range(12)]
        # In a shuffled order: a balancer that ignored the prompt (round robin) must not pass by its rhythm.
        sends = [(system, turn, kind) for system in systems for turn in range(3) for kind in ("prompt", "chat")]
        random.Random(7).shuffle(sends)
        for system, turn, kind in sends:
            if kind == "prompt":
                assert complete(router["url"], prompt=system + "question %d" % turn)[0] == 200
                continue
            body = {"model": MODEL, "max_tokens": 4,
                    "messages": [{"role": "system", "content": system}, {"role": "user", "content": "q%d" % turn}]}
            assert post(router["base"] + "/v1/chat/completions", body)[0] == 200
        homes = {}
        for index, fake in enumerate(router["fakes"]):
            for request in fake.clients():
                text = request[2].get("prompt") or request[2]["messages"][0]["content"]
                homes.setdefault((text[:60], "prompt" in request[2]), set()).add(index)
        assert all(len(servers) == 1 for servers in homes.values()), homes
        assert {min(servers) for servers in homes.values()} == {0, 1}
