# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""module_utils.checkpoint.hub against real local HTTP servers: the Hub token never follows a redirect to
another origin, a mistyped local path is named as such, hostile responses are errors naming them."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.gauntlet.vllm.plugins.module_utils.checkpoint import hub
from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.model_config import ModelConfigError

TOKEN = "hf_sekrit_redirect_token"
CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
          "num_attention_heads": 4, "num_hidden_layers": 2, "vocab_size": 256}


class Server(object):
    """A server on an ephemeral port: ``routes`` maps a path to ``(status, headers, body)``;
    every request is recorded as ``(path, Authorization header or None)``."""

    def __init__(self, host="127.0.0.1"):
        self.routes = {}
        self.requests = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                server.requests.append((self.path, self.headers.get("Authorization")))
                status, headers, body = server.routes.get(self.path, (404, {"X-Error-Code": "RepoNotFound"}, b"not found"))
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer((host, 0), Handler)
        self.url = "http://%s:%d" % (host, self.httpd.server_address[1])
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def resolve(repo, name="config.json"):
    return "/%s/resolve/main/%s" % (repo, name)


def test_redirect_to_another_origin_drops_the_token():
    with Server() as hub_a, Server() as cdn_b:
        body = json.dumps(CONFIG).encode("utf-8")
        hub_a.routes[resolve("org/model")] = (302, {"Location": cdn_b.url + "/blob/config"}, b"")
        cdn_b.routes["/blob/config"] = (200, {"X-Repo-Commit": "c" * 40}, body)
        data, commit = hub.fetch_hub_file("org/model", "config.json", endpoint=hub_a.url, token=TOKEN)
        assert data == body and commit == "c" * 40
        assert hub_a.requests == [(resolve("org/model"), "Bearer " + TOKEN)]
        assert cdn_b.requests == [("/blob/config", None)]


def test_same_origin_redirect_keeps_the_token_and_a_later_hop_back_does_not_regain_it():
    with Server() as hub_a, Server() as cdn_b:
        body = json.dumps(CONFIG).encode("utf-8")
        # A renamed repo: a relative redirect on the same origin keeps the token (private repos need it).
        hub_a.routes[resolve("old/name")] = (307, {"Location": resolve("new/name")}, b"")
        hub_a.routes[resolve("new/name")] = (302, {"Location": cdn_b.url + "/hop"}, b"")
        cdn_b.routes["/hop"] = (302, {"Location": hub_a.url + "/final"}, b"")
        hub_a.routes["/final"] = (200, {}, body)
        data, _commit = hub.fetch_hub_file("old/name", "config.json", endpoint=hub_a.url, token=TOKEN)
        assert data == body
        assert hub_a.requests == [(resolve("old/name"), "Bearer " + TOKEN), (resolve("new/name"), "Bearer " + TOKEN),
                                  ("/final", None)]
        assert cdn_b.requests == [("/hop", None)]


def test_other_port_or_scheme_is_another_origin():
    assert hub.origin("https://huggingface.co/a") == hub.origin("https://HuggingFace.co:443/b")
    assert hub.origin("https://huggingface.co/a") != hub.origin("https://huggingface.co:8443/a")
    assert hub.origin("https://huggingface.co/a") != hub.origin("http://huggingface.co/a")
    assert hub.origin("https://huggingface.co/a") != hub.origin("https://cdn-lfs.huggingface.co/a")


def test_redirect_loops_and_non_http_redirects_are_errors():
    with Server() as hub_a:
        hub_a.routes[resolve("org/loop")] = (302, {"Location": resolve("org/loop")}, b"")
        hub_a.routes[resolve("org/file")] = (302, {"Location": "file:///etc/passwd"}, b"")
        with pytest.raises(ModelConfigError, match="more than 10 redirects"):
            hub.fetch_hub_file("org/loop", "config.json", endpoint=hub_a.url, token=TOKEN)
        with pytest.raises(ModelConfigError, match="redirected to a URL that is not http"):
            hub.fetch_hub_file("org/file", "config.json", endpoint=hub_a.url, token=TOKEN)


@pytest.mark.parametrize("body,says", [
    (b'{"a":' + b"[" * 100000 + b"]" * 100000 + b"}", "nested too deeply"),
    (b'{"hidden_size": ' + b"1" * 5000 + b"}", "invalid JSON"),
    (b"\xff\xfe", "not UTF-8"),
])
def test_hostile_config_from_the_hub_is_an_error_naming_it(body, says):
    with Server() as hub_a:
        hub_a.routes[resolve("org/model")] = (200, {}, body)
        hub_a.routes[resolve("org/model", "hf_quant_config.json")] = (404, {"X-Error-Code": "EntryNotFound"}, b"")
        with pytest.raises(ModelConfigError) as err:
            hub.load_hub_model_config("org/model", endpoint=hub_a.url, token=TOKEN)
        assert str(err.value).startswith("org/model@main:config.json: ") and says in str(err.value)
        assert TOKEN not in str(err.value)


def test_config_larger_than_its_cap_is_not_read_whole(monkeypatch):
    monkeypatch.setattr(hub, "MAX_CONFIG_BYTES", 1000)
    with Server() as hub_a:
        hub_a.routes[resolve("org/model")] = (200, {}, b" " * 5000)
        with pytest.raises(ModelConfigError, match="config.json: larger than 1000 bytes, the most this file may hold"):
            hub.fetch_hub_file("org/model", "config.json", endpoint=hub_a.url, limit=1000)


def test_mistyped_local_path_that_looks_like_a_repo_id_names_both(tmp_path, monkeypatch):
    monkeypatch.chdir(str(tmp_path))
    with Server() as hub_a:
        with pytest.raises(ModelConfigError) as err:
            hub.load_any_model_config("models/Llama-3-8B", endpoint=hub_a.url, token=TOKEN)
        message = str(err.value)
        assert message.startswith("local path 'models/Llama-3-8B' does not exist, and the Hub has no repo 'models/Llama-3-8B' "
                                  "(HTTP 404 at %s" % hub_a.url), message
        assert TOKEN not in message
        hub_a.routes[resolve("private/model")] = (401, {}, b"")
        with pytest.raises(ModelConfigError, match=r"HTTP 401 at .*or private and the token has no access"):
            hub.load_any_model_config("private/model", endpoint=hub_a.url, token=TOKEN)


@pytest.mark.parametrize("model", ["./models/Llama-3-8B", "../models/Llama-3-8B", "/models/Llama-3-8B", "~/models/Llama-3-8B",
                                   "~models/x"])
def test_a_path_is_never_sent_to_the_hub(tmp_path, monkeypatch, model):
    monkeypatch.chdir(str(tmp_path))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    with Server() as hub_a:
        with pytest.raises(ModelConfigError, match="no such file or directory"):
            hub.load_any_model_config(model, endpoint=hub_a.url, token=TOKEN)
        assert hub_a.requests == []


def test_existing_local_directory_named_like_a_repo_is_read_locally(tmp_path, monkeypatch):
    monkeypatch.chdir(str(tmp_path))
    os.makedirs("org/model")
    with open("org/model/config.json", "w") as handle:
        json.dump(CONFIG, handle)
    with Server() as hub_a:
        model, source = hub.load_any_model_config("org/model", endpoint=hub_a.url, token=TOKEN)
        assert source == {"kind": "local", "path": "org/model"} and model["hidden_size"] == 64
        assert hub_a.requests == []


def test_endpoint_credentials_never_appear_in_messages():
    with Server() as hub_a:
        endpoint = hub_a.url.replace("http://", "http://user:%s@" % TOKEN)
        with pytest.raises(ModelConfigError) as err:
            hub.load_any_model_config("org/none", endpoint=endpoint)
        assert TOKEN not in str(err.value) and hub_a.url in str(err.value)
