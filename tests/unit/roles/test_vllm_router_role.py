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
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import jinja2
import pytest
import yaml

from ansible_collections.gauntlet.vllm.plugins.module_utils.fleet import vllm_router as vr

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
    return values


def render(template, **overrides):
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(os.path.join(ROLE, "templates")), undefined=jinja2.StrictUndefined,
                             trim_blocks=True, keep_trailing_newline=True)
    env.filters["to_json"] = json.dumps
    return env.get_template(template).render(**role_vars(**overrides))


def check(path, env=None):
    return subprocess.run([haproxy(), "-c", "-f", path], capture_output=True, text=True, env=env, check=False)


# ---- the configuration as written --------------------------------------------------------------------------

def test_config_passes_haproxy_check_without_warnings(tmp_path):
    path = tmp_path / "gauntlet-vllm.cfg"
    path.write_text(render("haproxy.cfg.j2"))
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


def test_body_json_is_escaped_for_a_model_with_quotes_and_backslashes(tmp_path):
    model = 'org/model "v2" \\ x'
    text = render("haproxy.cfg.j2", vllm_router_model=model)
    body = [line for line in text.splitlines() if "http-check send" in line][0].split(" body '", 1)[1].rstrip("'")
    assert json.loads(body) == {"model": model, "prompt": "ping", "max_tokens": 1}
    path = tmp_path / "c.cfg"
    path.write_text(text)
    assert check(str(path)).returncode == 0


def test_prometheus_exporter_is_built_in():
    result = subprocess.run([haproxy(), "-vv"], capture_output=True, text=True, check=True)
    assert "prometheus-exporter" in result.stdout


# ---- a real HAProxy in front of two fake vLLM servers ----------------------------------------------------

class Fake:
    """A vLLM server: records (path, Authorization, body) per POST; ``mode`` ok, 500 or drop (closes, no answer)."""

    def __init__(self, port):
        self.mode = "ok"
        self.requests = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                fake.requests.append((self.path, self.headers.get("Authorization"), json.loads(body or b"{}")))
                if fake.mode == "drop":
                    self.close_connection = True
                    return
                status = 200 if fake.mode == "ok" else 500
                data = json.dumps({"choices": [{"text": "!"}], "port": port}).encode()
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


@pytest.fixture
def router(tmp_path):
    ports = [_free_port() for _port in range(4)]
    fakes = [Fake(ports[0]), Fake(ports[1])]
    sock = str(tmp_path / "admin.sock")
    text = render("haproxy.cfg.j2", _vllm_router_admin_socket=sock, vllm_router_port=ports[2], vllm_router_stats_port=ports[3],
                  vllm_router_bind_address="127.0.0.1", vllm_router_stats_bind_address="127.0.0.1",
                  vllm_router_backends=[{"name": "gpu-01", "address": "127.0.0.1", "port": ports[0]},
                                        {"name": "gpu-02", "address": "127.0.0.1", "port": ports[1]}])
    # No privilege drop and no syslog in a test run.
    text = text.replace("    user haproxy\n", "").replace("    group haproxy\n", "").replace("log /dev/log local0", "log stderr local0 err")
    cfg = tmp_path / "gauntlet-vllm.cfg"
    cfg.write_text(text)
    env = dict(os.environ, GAUNTLET_VLLM_ROUTER_API_KEY=KEY)
    proc = subprocess.Popen([haproxy(), "-db", "-f", str(cfg)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 10
        while not os.path.exists(sock):
            assert proc.poll() is None, proc.stdout.read().decode()
            assert time.monotonic() < deadline, "haproxy did not open its admin socket"
            time.sleep(0.05)
        for name in ("gpu-01", "gpu-02"):
            vr.wait_for(sock, "vllm", name, "up", 15)
        yield {"sock": sock, "fakes": fakes, "url": "http://127.0.0.1:%d/v1/completions" % ports[2],
               "metrics": "http://127.0.0.1:%d/metrics" % ports[3]}
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)
        for fake in fakes:
            fake.stop()


def complete(url):
    request = urllib.request.Request(url, data=json.dumps({"model": MODEL, "prompt": "hello", "max_tokens": 4}).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(request, timeout=10) as answer:
        return answer.status, json.loads(answer.read())


def test_health_check_is_a_completion_with_the_key_from_the_environment(router):
    for fake in router["fakes"]:
        path, auth, body = fake.checks()[0]
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
