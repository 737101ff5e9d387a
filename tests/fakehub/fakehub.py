# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A stand-in for the Hugging Face Hub, which tests cannot reach, speaking the Hub's real HTTP API
for what the collection uses:

- ``GET|HEAD /{repo_id}/resolve/{revision}/{path}``: the file, with ``X-Repo-Commit``, ``ETag``
  (``X-Linked-Etag``/``X-Linked-Size`` for LFS files, whose ETag is the sha256), ``Content-Length``;
- ``GET /api/models/{repo_id}`` and ``/api/models/{repo_id}/revision/{revision}``: ``id``, ``sha``,
  ``siblings`` (with ``blobId``/``size``/``lfs`` when asked with ``?blobs=true``);
- ``GET /api/models/{repo_id}/tree/{revision}``: the file list ``snapshot_download`` walks
  (``type``, ``path``, ``size``, ``oid``, ``lfs: {oid: sha256, size, pointerSize}``), one page;
- ``Range: bytes=N-`` requests answered with 206 and ``Content-Range``, as the Hub's CDN does, so
  an interrupted download resumes;
- errors as the Hub sends them: 401 + ``X-Error-Code: RepoNotFound`` for a missing (or private)
  repo, 401 + ``GatedRepo`` for a gated repo without a token, 404 + ``RevisionNotFound`` /
  ``EntryNotFound``.

``huggingface_hub`` itself downloads from it (tests/unit/test_fakehub.py proves that), so what the
collection does against it, it does against the Hub. Repos are given as dicts of path -> bytes;
files larger than ``LFS_THRESHOLD`` are served as LFS files. Revisions: ``main`` and the commit sha.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlparse

LFS_THRESHOLD = 10 * 1024 * 1024


def git_blob_sha1(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class FakeRepo:
    def __init__(self, repo_id, files, gated_token=None):
        self.repo_id = repo_id
        self.files = dict(files)
        self.gated_token = gated_token
        digest = hashlib.sha1(repo_id.encode())
        for path in sorted(self.files):
            digest.update(path.encode() + b"\0" + self.files[path])
        self.sha = digest.hexdigest()

    def is_lfs(self, path):
        return len(self.files[path]) > LFS_THRESHOLD or path.endswith(".safetensors")


class FakeHub:
    """Start with ``with FakeHub({...}) as hub:``; ``hub.endpoint`` is its URL."""

    def __init__(self, repos=None):
        self.repos = {}
        self.requests = []
        # path -> bytes: the next full GET of that file sends only this many bytes, then drops the
        # connection (a transfer cut off half-way).
        self.cut_next = {}
        for repo_id, files in (repos or {}).items():
            self.add_repo(repo_id, files)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def add_repo(self, repo_id, files, gated_token=None):
        self.repos[repo_id] = FakeRepo(repo_id, files, gated_token)
        return self.repos[repo_id]

    @property
    def endpoint(self):
        return "http://127.0.0.1:%d" % self._server.server_address[1]

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._server.shutdown()
        self._server.server_close()

    def _handler_class(self):
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def do_HEAD(self):
                self._serve(head=True)

            def do_GET(self):
                self._serve(head=False)

            def _error(self, status, code, message):
                body = json.dumps({"error": message}).encode()
                self.send_response(status)
                self.send_header("X-Error-Code", code)
                self.send_header("X-Error-Message", message)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def _repo(self, repo_id):
                repo = hub.repos.get(repo_id)
                if repo is None:
                    self._error(401, "RepoNotFound", "Repository not found")
                    return None
                if repo.gated_token and self.headers.get("Authorization") != "Bearer " + repo.gated_token:
                    self._error(401, "GatedRepo", "Access to model %s is restricted." % repo_id)
                    return None
                return repo

            def _serve(self, head):
                url = urlparse(self.path)
                path = unquote(url.path)
                hub.requests.append((self.command, path, self.headers.get("Authorization"), self.headers.get("Range")))
                parts = path.strip("/").split("/")
                if parts[:2] == ["api", "models"] and len(parts) >= 6 and parts[4] == "tree":
                    return self._tree("/".join(parts[2:4]), parts[5])
                if parts[:2] == ["api", "models"] and len(parts) >= 4:
                    repo_id = "/".join(parts[2:4])
                    revision = parts[5] if len(parts) >= 6 and parts[4] == "revision" else "main"
                    return self._model_info(repo_id, revision, "blobs" in parse_qs(url.query))
                if len(parts) >= 5 and parts[2] == "resolve":
                    return self._resolve("/".join(parts[:2]), parts[3], "/".join(parts[4:]), head)
                self._error(404, "NotFound", "Not found")
                return None

            def _model_info(self, repo_id, revision, blobs):
                repo = self._repo(repo_id)
                if repo is None:
                    return
                if revision not in ("main", repo.sha):
                    self._error(404, "RevisionNotFound", "Invalid rev id: %s" % revision)
                    return
                siblings = []
                for name, data in sorted(repo.files.items()):
                    entry = {"rfilename": name}
                    if blobs:
                        entry["blobId"] = git_blob_sha1(data)
                        entry["size"] = len(data)
                        if repo.is_lfs(name):
                            entry["lfs"] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data),
                                            "pointerSize": 134}
                    siblings.append(entry)
                body = json.dumps({"id": repo_id, "modelId": repo_id, "sha": repo.sha, "private": False,
                                   "gated": "manual" if repo.gated_token else False, "siblings": siblings}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _tree(self, repo_id, revision):
                repo = self._repo(repo_id)
                if repo is None:
                    return
                if revision not in ("main", repo.sha):
                    self._error(404, "RevisionNotFound", "Invalid rev id: %s" % revision)
                    return
                entries = []
                for name, data in sorted(repo.files.items()):
                    entry = {"type": "file", "path": name, "size": len(data), "oid": git_blob_sha1(data)}
                    if repo.is_lfs(name):
                        entry["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 134}
                    entries.append(entry)
                body = json.dumps(entries).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _resolve(self, repo_id, revision, filename, head):
                repo = self._repo(repo_id)
                if repo is None:
                    return
                if revision not in ("main", repo.sha):
                    self._error(404, "RevisionNotFound", "Invalid rev id: %s" % revision)
                    return
                if filename not in repo.files:
                    self._error(404, "EntryNotFound", "%s does not exist on \"%s\"" % (filename, revision))
                    return
                data = repo.files[filename]
                start = 0
                byte_range = self.headers.get("Range")
                if byte_range and byte_range.startswith("bytes="):
                    first, _sep, last = byte_range[len("bytes="):].partition("-")
                    start = int(first or 0)
                    end = int(last) if last else len(data) - 1
                    if start >= len(data):
                        self.send_response(416)
                        self.send_header("Content-Range", "bytes */%d" % len(data))
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                    self.send_response(206)
                    self.send_header("Content-Range", "bytes %d-%d/%d" % (start, end, len(data)))
                    body = data[start:end + 1]
                else:
                    self.send_response(200)
                    body = data
                self.send_header("X-Repo-Commit", repo.sha)
                if repo.is_lfs(filename):
                    sha256 = hashlib.sha256(data).hexdigest()
                    self.send_header("ETag", '"%s"' % sha256)
                    self.send_header("X-Linked-Etag", '"%s"' % sha256)
                    self.send_header("X-Linked-Size", str(len(data)))
                else:
                    self.send_header("ETag", '"%s"' % git_blob_sha1(data))
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Accept-Ranges", "bytes")
                self.end_headers()
                if head:
                    return
                cut = hub.cut_next.pop(filename, None) if start == 0 else None
                if cut is not None:
                    self.wfile.write(body[:cut])
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                self.wfile.write(body)

        return Handler


def main(argv=None):
    """Serve repos from directories until killed: ``python -m tests.fakehub.fakehub --port 8765
    --repo owner/name=/path/to/dir [--gated-token T]``. Molecule scenarios run it on the controller."""
    import argparse
    import os

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--repo", action="append", default=[], help="owner/name=DIRECTORY")
    parser.add_argument("--gated-token")
    args = parser.parse_args(argv)
    hub = FakeHub()
    for spec in args.repo:
        repo_id, directory = spec.split("=", 1)
        files = {}
        for name in sorted(os.listdir(directory)):
            with open(os.path.join(directory, name), "rb") as handle:
                files[name] = handle.read()
        hub.add_repo(repo_id, files, gated_token=args.gated_token)
    hub._server.server_close()  # replace the ephemeral-port server with one on the asked port
    hub._server = ThreadingHTTPServer(("127.0.0.1", args.port), hub._handler_class())
    print("fake hub on %s" % hub.endpoint, flush=True)
    hub._server.serve_forever()


if __name__ == "__main__":
    main()
