# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Read a model's config files straight from the Hugging Face Hub (or a
mirror speaking its API, HF_ENDPOINT), without downloading any weights and
without huggingface_hub on the host: the Hub's ``resolve`` endpoint returns
the file and names the commit it came from (``X-Repo-Commit``).

A model argument is a Hub repo id when it is ``owner/name`` and no such path
exists locally; one starting with ``/``, ``./``, ``../`` or ``~`` is always a
local path and never sent to the Hub.

Redirects are followed here, not by urllib: the token (``Authorization``) goes
only to the origin (scheme, host and port) it was given for, as
huggingface_hub does; a redirect elsewhere (a CDN) is followed without it.

Why not ``huggingface_hub.hf_hub_download`` (issue 33 asked where it is
installed): it is installed nowhere this runs. The planner runs on the
controller with Ansible's Python, which has no huggingface_hub; the release
vLLM uses (2.4.0) brings 19 distributions with it (httpx2, hf-xet, fsspec,
pyyaml, tqdm, ...), writes every file into a disk cache, and does not return
the commit a file came from (a second call, get_hf_file_metadata, would). Two
small GETs of config files do not pay for that, and a second code path used
only where the library happens to be would be tested less than this one.
The Hub's API is checked instead: tests/unit/test_fakehub.py runs the real
huggingface_hub against tests/fakehub, and the planner reads configs through
this module from that same fake Hub (tests/unit/plugins/modules/
test_vllm_plan_module.py, tests/integration/).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re

from ansible.module_utils.six.moves.urllib.error import HTTPError, URLError
from ansible.module_utils.six.moves.urllib.parse import quote, urljoin, urlsplit
from ansible.module_utils.urls import open_url
from ansible_collections.gauntlet.vllm.plugins.module_utils.io.safe_io import full_match, parse_json, size_text
from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.model_config import (
    CONFIG_FILE_NAME,
    HF_QUANT_FILE_NAME,
    MAX_CONFIG_BYTES,
    MAX_HF_QUANT_BYTES,
    ModelConfigError,
    load_model_config,
    normalize_model_config,
)

DEFAULT_ENDPOINT = "https://huggingface.co"
# ``owner/name``, matched whole (safe_io.full_match): ``$`` would also accept "owner/name\n", which then went into the
# URL and came back as a traceback (http.client.InvalidURL).
REPO_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*")
PATH_PREFIXES = ("/", "./", "../", "~")
REDIRECT_CODES = (301, 302, 303, 307, 308)
MAX_REDIRECTS = 10


class RepoNotFoundError(ModelConfigError):
    """The Hub has no such repository (or it is private and the token has no access)."""

    def __init__(self, message, status):
        super(RepoNotFoundError, self).__init__(message)
        self.status = status


def looks_like_path(model):
    return model.startswith(PATH_PREFIXES) or model in (".", "..")


def is_repo_id(model):
    return (not looks_like_path(model) and full_match(REPO_ID, model)
            and not os.path.exists(os.path.expanduser(model)))


def check_repo_id(repo_id):
    """``repo_id`` when it is ``owner/name``; ModelConfigError naming it (quoted, so a newline shows) otherwise."""
    if not full_match(REPO_ID, repo_id):
        raise ModelConfigError("%s is not a Hub repo id: owner/name, each of letters, digits, '.', '_' and '-', "
                               "with nothing around it (no space or line break)" % json.dumps(repo_id))
    return repo_id


def origin(url):
    """``(scheme, host, port)`` of a URL, the default port filled in."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower(), parts.port or {"http": 80, "https": 443}.get(scheme)


def _display(url):
    """A URL for messages: any ``user:password@`` removed."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()


def _get(url, token, timeout, limit):
    """``(bytes, commit)`` of ``url``, following redirects by hand.

    ``Authorization`` is sent only while the URL stays on the origin it was first given
    for; a redirect to another scheme, host or port drops it, for that hop and every later
    one. At most ``limit`` bytes are read.
    """
    token_origin = origin(url)
    for _hop in range(MAX_REDIRECTS + 1):
        headers = {"Accept-Encoding": "identity"}
        if token and token_origin is not None and origin(url) == token_origin:
            headers["Authorization"] = "Bearer " + token
        else:
            token_origin = None
        try:
            response = open_url(url, headers=headers, timeout=timeout, follow_redirects="none")
        except HTTPError as exc:
            location = exc.headers.get("Location") if exc.code in REDIRECT_CODES and exc.headers else None
            if not location:
                raise
            url = urljoin(url, location)
            if urlsplit(url).scheme.lower() not in ("http", "https"):
                raise ModelConfigError("%s: redirected to a URL that is not http(s): %s" % (_display(exc.geturl() or url), _display(url)))
            continue
        data = response.read(limit + 1)
        if len(data) > limit:
            raise ModelConfigError("%s: larger than %s, the most this file may hold; refusing to read it" % (_display(url), size_text(limit)))
        return data, response.headers.get("X-Repo-Commit")
    raise ModelConfigError("%s: more than %d redirects" % (_display(url), MAX_REDIRECTS))


def fetch_hub_file(repo_id, filename, revision="main", endpoint=None, token=None, timeout=30, limit=MAX_CONFIG_BYTES):
    """``(bytes, commit)`` of one file (at most ``limit`` bytes), or ``(None, None)`` when the repo has no such file.

    Errors name the repo, revision and what the Hub said (its ``X-Error-Code``);
    the token never appears in them.
    """
    check_repo_id(repo_id)
    endpoint = (endpoint or DEFAULT_ENDPOINT).rstrip("/")
    shown = _display(endpoint)
    url = "%s/%s/resolve/%s/%s" % (endpoint, repo_id, quote(revision, safe=""), quote(filename))
    try:
        return _get(url, token, timeout, limit)
    except HTTPError as exc:
        code = exc.headers.get("X-Error-Code") if exc.headers else None
        if code == "EntryNotFound":
            return None, None
        if code == "RevisionNotFound":
            raise ModelConfigError("%s: revision '%s' not found on %s" % (repo_id, revision, shown))
        if code == "GatedRepo":
            raise ModelConfigError("%s: gated repository on %s; give a token of an account that was granted access (hf_token)"
                                   % (repo_id, shown))
        if code == "RepoNotFound" or exc.code in (401, 403):
            raise RepoNotFoundError("%s: repository not found on %s, or private and the token has no access"
                                    % (repo_id, shown), exc.code)
        raise ModelConfigError("%s: %s/%s: HTTP %s from %s" % (repo_id, revision, filename, exc.code, shown))
    except URLError as exc:
        raise ModelConfigError("%s: cannot reach %s: %s" % (repo_id, shown, exc.reason))


def load_hub_model_config(repo_id, revision="main", endpoint=None, token=None, timeout=30):
    """Normalised model facts of ``repo_id`` at ``revision``, plus where they came from.

    Only ``config.json`` and ``hf_quant_config.json`` are fetched.
    """
    data, commit = fetch_hub_file(repo_id, CONFIG_FILE_NAME, revision, endpoint, token, timeout)
    where = "%s@%s:%s" % (repo_id, revision, CONFIG_FILE_NAME)
    if data is None:
        raise ModelConfigError("%s: the repository has no %s" % (where, CONFIG_FILE_NAME))
    quant_data, _commit = fetch_hub_file(repo_id, HF_QUANT_FILE_NAME, commit or revision, endpoint, token, timeout,
                                         limit=MAX_HF_QUANT_BYTES)
    quant_where = "%s@%s:%s" % (repo_id, revision, HF_QUANT_FILE_NAME) if quant_data is not None else None
    model = normalize_model_config(_parse(data, where), hf_quant=_parse(quant_data, quant_where) if quant_data else None,
                                   config_path=where, hf_quant_path=quant_where)
    source = {"kind": "hub", "repo_id": repo_id, "revision": revision, "commit": commit,
              "endpoint": _display((endpoint or DEFAULT_ENDPOINT).rstrip("/"))}
    return model, source


def _parse(data, where):
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ModelConfigError("%s: not UTF-8 text: %s" % (where, exc))
    return parse_json(text, where, ModelConfigError)


def load_any_model_config(model, revision="main", endpoint=None, token=None):
    """A local config file or model directory, or a Hub repo id.

    When ``model`` looks like a repo id only because no such local path exists, and the Hub
    has no such repo either, the error says both.
    """
    if is_repo_id(model):
        try:
            return load_hub_model_config(model, revision, endpoint, token)
        except RepoNotFoundError as exc:
            raise ModelConfigError("local path '%s' does not exist, and the Hub has no repo '%s' (HTTP %s at %s: repository "
                                   "not found, or private and the token has no access)"
                                   % (model, model, exc.status, _display((endpoint or DEFAULT_ENDPOINT).rstrip("/"))))
    path = os.path.expanduser(model)
    if not looks_like_path(model) and not os.path.exists(path) and full_match(REPO_ID, model.strip()):
        # A repo id with a space or line break around it: no path here, and no id the Hub would take.
        check_repo_id(model)
    return load_model_config(path), {"kind": "local", "path": path}
