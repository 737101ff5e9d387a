# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""roles/model_fetch/files/stage_pull.py against a real http.server: files are pulled, complete ones
skipped, and a file that arrives shorter than the staging host listed fails naming it, leaving no
file that looks complete."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import functools
import importlib.util
import io
import json
import os
import sys
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import pytest

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "roles", "model_fetch", "files", "stage_pull.py")


@pytest.fixture
def stage_pull():
    spec = importlib.util.spec_from_file_location("stage_pull", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def server(tmp_path):
    source = tmp_path / "source"
    source.mkdir()
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(source))
    handler.log_message = lambda *args: None
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield source, "http://127.0.0.1:%d" % httpd.server_address[1]
    httpd.shutdown()
    httpd.server_close()


def run(stage_pull, monkeypatch, capsys, url, dest, files):
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps({"url": url, "dest": str(dest), "files": files, "workers": 2})))
    code = None
    try:
        stage_pull.main()
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def test_missing_files_are_pulled_and_complete_ones_skipped(stage_pull, server, tmp_path, monkeypatch, capsys):
    source, url = server
    (source / "a.safetensors").write_bytes(b"a" * 100)
    (source / "sub").mkdir()
    (source / "sub" / "b.json").write_bytes(b"{}")
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "a.safetensors").write_bytes(b"x" * 100)  # right size: left for model_verify to judge
    code, out, _err = run(stage_pull, monkeypatch, capsys, url, dest, {"a.safetensors": {"size": 100}, "sub/b.json": {"size": 2}})
    assert code is None
    assert json.loads(out) == {"pulled": ["sub/b.json"], "bytes": 2}
    assert (dest / "sub" / "b.json").read_bytes() == b"{}"
    assert (dest / "a.safetensors").read_bytes() == b"x" * 100


def test_a_short_file_fails_naming_it_and_leaves_no_complete_looking_file(stage_pull, server, tmp_path, monkeypatch, capsys):
    source, url = server
    (source / "model-00001-of-00002.safetensors").write_bytes(b"a" * 50)
    dest = tmp_path / "dest"
    dest.mkdir()
    code, _out, err = run(stage_pull, monkeypatch, capsys, url, dest, {"model-00001-of-00002.safetensors": {"size": 100}})
    assert code == 1
    assert "model-00001-of-00002.safetensors: received 50 bytes, the staging host listed 100" in err
    assert not (dest / "model-00001-of-00002.safetensors").exists()


def test_a_missing_file_on_the_server_fails_naming_it(stage_pull, server, tmp_path, monkeypatch, capsys):
    _source, url = server
    code, _out, err = run(stage_pull, monkeypatch, capsys, url, tmp_path, {"gone.safetensors": {"size": 1}})
    assert code == 1 and "gone.safetensors: HTTP Error 404" in err
