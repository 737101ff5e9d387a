# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where vllm_wait (module_utils/serving/vllm_probe) and the units' ExecStartPost probe (vllm_ready.py)
send the API key: never on through a redirect, https verified by default; and what they report:
journal lines without secrets."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import importlib.util
import os
import ssl
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from ansible_collections.gauntlet.vllm.plugins.module_utils.serving import vllm_probe

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
KEY = "k-gauntlet-redirect-7f3c9e1d"
PARAMS = dict((key, spec.get("default")) for key, spec in vllm_probe.ARGUMENT_SPEC.items())
PARAMS.update(unit="vllm-tiny-llama.service", model="tiny-llama")


def params(**overrides):
    result = dict(PARAMS)
    result.update(overrides)
    return result


class _Recorder(BaseHTTPRequestHandler):
    """Another address: records every Authorization header that reaches it."""

    seen = []

    def log_message(self, *args):
        pass

    def _record(self):
        type(self).seen.append(self.headers.get("Authorization"))
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    do_GET = _record
    do_POST = _record


class _Redirector(BaseHTTPRequestHandler):
    """A server (or a proxy in front of it) that redirects every request elsewhere."""

    target = None
    code = 302

    def log_message(self, *args):
        pass

    def _redirect(self):
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        self.send_response(self.code)
        self.send_header("Location", self.target + self.path)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = _redirect
    do_POST = _redirect


def _serve(handler):
    httpd = HTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


@pytest.fixture(params=[301, 302, 303, 307, 308])
def redirect(request, monkeypatch):
    """(URL of a server redirecting to the recorder, what the recorder saw)."""
    seen = []
    monkeypatch.setattr(_Recorder, "seen", seen)
    recorder = _serve(_Recorder)
    monkeypatch.setattr(_Redirector, "target", "http://127.0.0.1:%d" % recorder.server_address[1])
    monkeypatch.setattr(_Redirector, "code", request.param)
    redirector = _serve(_Redirector)
    yield "http://127.0.0.1:%d" % redirector.server_address[1], seen
    for httpd in (redirector, recorder):
        httpd.shutdown()
        httpd.server_close()


def test_vllm_wait_never_follows_a_redirect_with_the_key(redirect):
    url, seen = redirect
    answer = vllm_probe.try_completion(params(base_url=url, api_key=KEY))
    health = vllm_probe._request(url + "/health", None, KEY, 5)
    assert seen == []
    assert answer["ok"] is False
    assert "not followed" in answer["error"] and "/v1/completions" in answer["error"]
    assert KEY not in answer["error"]
    assert health["status"] in (301, 302, 303, 307, 308) and "not followed" in health["error"]


def _load_ready_probe():
    spec = importlib.util.spec_from_file_location(
        "gauntlet_vllm_ready", os.path.join(ROOT, "roles", "vllm_service", "files", "vllm_ready.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_units_readiness_probe_never_follows_a_redirect_with_the_key(redirect, monkeypatch):
    url, seen = redirect
    monkeypatch.setenv("VLLM_API_KEY", KEY)
    ok, reason = _load_ready_probe().completion_works(url, "tiny-llama", 5)
    assert seen == []
    assert ok is False and "redirect" in reason


def _self_signed(directory):
    """A certificate for 127.0.0.1 that no CA signed, as a server with a home-made certificate has."""
    import datetime
    import ipaddress
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, u"127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(u"127.0.0.1"))]), critical=False)
            .sign(key, hashes.SHA256()))
    cert_file, key_file = os.path.join(directory, "cert.pem"), os.path.join(directory, "key.pem")
    with open(cert_file, "wb") as handle:
        handle.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(key_file, "wb") as handle:
        handle.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    return cert_file, key_file


@pytest.fixture
def tls_recorder(tmp_path, monkeypatch):
    """(https URL of a server with a self-signed certificate, the Authorization headers it received)."""
    seen = []
    monkeypatch.setattr(_Recorder, "seen", seen)
    cert_file, key_file = _self_signed(str(tmp_path))
    httpd = HTTPServer(("127.0.0.1", 0), _Recorder)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_file, key_file)
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield "https://127.0.0.1:%d" % httpd.server_address[1], seen
    httpd.shutdown()
    httpd.server_close()


def test_vllm_wait_sends_the_key_over_https_only_to_a_verified_server(tls_recorder):
    url, seen = tls_recorder
    assert vllm_probe.ARGUMENT_SPEC["validate_certs"] == dict(type="bool", default=True)
    refused = vllm_probe.try_completion(params(base_url=url, api_key=KEY))
    assert refused["ok"] is False and refused["status"] is None and "CERTIFICATE_VERIFY_FAILED" in refused["error"]
    assert seen == []
    # Turned off on purpose (a self-signed certificate on a trusted network), the request goes through.
    vllm_probe.try_completion(params(base_url=url, api_key=KEY, validate_certs=False))
    assert seen == ["Bearer %s" % KEY]


def test_the_readiness_probe_verifies_https_certificates(tls_recorder, monkeypatch):
    url, seen = tls_recorder
    monkeypatch.setenv("VLLM_API_KEY", KEY)
    ok, reason = _load_ready_probe().completion_works(url, "tiny-llama", 5)
    assert ok is False and "CERTIFICATE_VERIFY_FAILED" in reason
    assert seen == []


class _FakeModule(object):
    """systemctl and journalctl as vllm_wait's module sees them, for one failed start."""

    def __init__(self, journal_lines):
        self.journal_lines = journal_lines

    def get_bin_path(self, name, required=False):
        return "/usr/bin/" + name

    def run_command(self, args):
        if args[0].endswith("systemctl"):
            return 0, "ActiveState=failed\nSubState=failed\nResult=exit-code\nMainPID=0\nLoadState=loaded\n", ""
        return 0, "\n".join(self.journal_lines) + "\n", ""

    def fail_json(self, **kwargs):
        raise AssertionError(kwargs)


def test_vllm_wait_reports_journal_lines_without_secrets():
    lines = [
        "2026-01-01T00:00:00 host systemd[1]: Started vllm-x.service.",
        "2026-01-01T00:00:01 host vllm[9]: usage: vllm serve /m --api-key %s --hf-token=hf_gauntletTestToken4b8d2a6f" % "other-key-1234",
        "2026-01-01T00:00:02 host vllm[9]: error: the key %s is not valid" % KEY,
        "2026-01-01T00:00:03 host vllm[9]: HF_TOKEN=hf_gauntletTestToken4b8d2a6f",
    ]
    look = vllm_probe.probe(_FakeModule(lines), params(api_key=KEY))
    text = "\n".join(look["journal_tail"])
    for secret in (KEY, "other-key-1234", "hf_gauntletTestToken4b8d2a6f"):
        assert secret not in text
    assert "Started vllm-x.service." in text and text.count("********") == 4


def test_a_failed_wait_redacts_the_journal_in_its_message():
    state = {"active_state": "failed", "sub_state": "failed", "result": "exit-code", "n_restarts": 0, "main_pid": 0,
             "job_pending": False, "exec_main_status": 1, "exec_main_code": 1}
    look = {"unit_state": state, "journal_tail": ["vllm serve /m --api-key %s" % KEY, "token %s" % KEY]}
    result = vllm_probe.wait_until_ready(lambda: look, params(api_key=KEY, timeout=60), lambda line: None,
                                         sleep=lambda seconds: None, clock=lambda: 0.0)
    assert result["failed"] is True
    assert KEY not in result["msg"] and KEY not in "\n".join(result["journal_tail"])
