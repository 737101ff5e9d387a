# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Read a model's config files straight from the Hugging Face Hub (or a
mirror speaking its API, HF_ENDPOINT), without downloading any weights and
without huggingface_hub on the host: the Hub's ``resolve`` endpoint returns
the file and names the commit it came from (``X-Repo-Commit``).

A model argument is a Hub repo id when it is ``owner/name`` and no such path
exists locally.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re

from ansible.module_utils.six.moves.urllib.error import HTTPError, URLError
from ansible.module_utils.six.moves.urllib.parse import quote
from ansible.module_utils.urls import open_url

from ansible_collections.gauntlet.vllm.plugins.module_utils.model_config import (
    CONFIG_FILE_NAME,
    HF_QUANT_FILE_NAME,
    ModelConfigError,
    load_model_config,
    normalize_model_config,
)

DEFAULT_ENDPOINT = "https://huggingface.co"
REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")


def is_repo_id(model):
    return bool(REPO_ID.match(model)) and not os.path.exists(os.path.expanduser(model))


def _get(url, token, timeout):
    headers = {"Accept-Encoding": "identity"}
    if token:
        headers["Authorization"] = "Bearer " + token
    response = open_url(url, headers=headers, timeout=timeout, follow_redirects="all")
    return response.read(), response.headers.get("X-Repo-Commit")


def fetch_hub_file(repo_id, filename, revision="main", endpoint=None, token=None, timeout=30):
    """``(bytes, commit)`` of one file, or ``(None, None)`` when the repo has no such file.

    Errors name the repo, revision and what the Hub said (its ``X-Error-Code``);
    the token never appears in them.
    """
    endpoint = (endpoint or DEFAULT_ENDPOINT).rstrip("/")
    url = "%s/%s/resolve/%s/%s" % (endpoint, repo_id, quote(revision, safe=""), quote(filename))
    try:
        return _get(url, token, timeout)
    except HTTPError as exc:
        code = exc.headers.get("X-Error-Code") if exc.headers else None
        if code == "EntryNotFound":
            return None, None
        if code == "RevisionNotFound":
            raise ModelConfigError("%s: revision '%s' not found on %s" % (repo_id, revision, endpoint))
        if code == "GatedRepo":
            raise ModelConfigError("%s: gated repository on %s; give a token of an account that was granted access (hf_token)"
                                   % (repo_id, endpoint))
        if code == "RepoNotFound" or exc.code in (401, 403):
            raise ModelConfigError("%s: repository not found on %s, or private and the token has no access"
                                   % (repo_id, endpoint))
        raise ModelConfigError("%s: %s/%s: HTTP %s from %s" % (repo_id, revision, filename, exc.code, endpoint))
    except URLError as exc:
        raise ModelConfigError("%s: cannot reach %s: %s" % (repo_id, endpoint, exc.reason))


def load_hub_model_config(repo_id, revision="main", endpoint=None, token=None, timeout=30):
    """Normalised model facts of ``repo_id`` at ``revision``, plus where they came from.

    Only ``config.json`` and ``hf_quant_config.json`` are fetched.
    """
    data, commit = fetch_hub_file(repo_id, CONFIG_FILE_NAME, revision, endpoint, token, timeout)
    where = "%s@%s:%s" % (repo_id, revision, CONFIG_FILE_NAME)
    if data is None:
        raise ModelConfigError("%s: the repository has no %s" % (where, CONFIG_FILE_NAME))
    quant_data, _commit = fetch_hub_file(repo_id, HF_QUANT_FILE_NAME, commit or revision, endpoint, token, timeout)
    quant_where = "%s@%s:%s" % (repo_id, revision, HF_QUANT_FILE_NAME) if quant_data is not None else None
    model = normalize_model_config(_parse(data, where), hf_quant=_parse(quant_data, quant_where) if quant_data else None,
                                   config_path=where, hf_quant_path=quant_where)
    source = {"kind": "hub", "repo_id": repo_id, "revision": revision, "commit": commit,
              "endpoint": (endpoint or DEFAULT_ENDPOINT).rstrip("/")}
    return model, source


def _parse(data, where):
    try:
        return json.loads(data.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ModelConfigError("%s: not valid JSON: %s" % (where, exc))


def load_any_model_config(model, revision="main", endpoint=None, token=None):
    """A local config file or model directory, or a Hub repo id."""
    if is_repo_id(model):
        return load_hub_model_config(model, revision, endpoint, token)
    path = os.path.expanduser(model)
    return load_model_config(path), {"kind": "local", "path": path}
