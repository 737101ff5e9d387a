# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fake Hub speaks the Hub's HTTP API: huggingface_hub itself (from the rig's builder venv,
the same release vLLM uses) downloads from it and gets the Hub's error classes."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import subprocess
import textwrap

import pytest

from tests.fakehub.fakehub import FakeHub

CLIENT = textwrap.dedent("""
    import json, sys
    from huggingface_hub import HfApi, hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError, GatedRepoError, RepositoryNotFoundError, RevisionNotFoundError
    endpoint, cache = sys.argv[1], sys.argv[2]
    out = {}
    path = hf_hub_download("org/model", "config.json", revision="main", endpoint=endpoint, cache_dir=cache)
    out["config"] = json.load(open(path))
    out["commit"] = path.split("/snapshots/")[1].split("/")[0]
    info = HfApi(endpoint=endpoint).model_info("org/model", files_metadata=True)
    out["sha"] = info.sha
    out["lfs"] = {s.rfilename: s.lfs.sha256 for s in info.siblings if s.lfs}
    for name, call in [("entry", lambda: hf_hub_download("org/model", "nope.json", endpoint=endpoint, cache_dir=cache)),
                       ("revision", lambda: hf_hub_download("org/model", "config.json", revision="v9", endpoint=endpoint, cache_dir=cache)),
                       ("repo", lambda: hf_hub_download("org/missing", "config.json", endpoint=endpoint, cache_dir=cache)),
                       ("gated", lambda: hf_hub_download("org/gated", "config.json", endpoint=endpoint, cache_dir=cache))]:
        try:
            call()
            out[name] = "no error"
        except (EntryNotFoundError, GatedRepoError, RepositoryNotFoundError, RevisionNotFoundError) as exc:
            out[name] = type(exc).__name__
    print(json.dumps(out))
""")


def builder_python():
    rig = os.environ.get("GAUNTLET_RIG_DIR")
    python = os.path.join(rig or "", "builder-venv", "bin", "python")
    if not rig or not os.path.exists(python):
        pytest.fail("GAUNTLET_RIG_DIR has no builder-venv with huggingface_hub: run through scripts/test.sh")
    return python


def test_huggingface_hub_downloads_from_the_fake_hub(tmp_path):
    config = {"architectures": ["LlamaForCausalLM"], "hidden_size": 128}
    with FakeHub({"org/model": {"config.json": json.dumps(config).encode(),
                                "model-00001-of-00001.safetensors": b"\0" * 64}}) as hub:
        hub.add_repo("org/gated", {"config.json": b"{}"}, gated_token="hf_secret")
        result = subprocess.run([builder_python(), "-c", CLIENT, hub.endpoint, str(tmp_path)],
                                check=True, capture_output=True, text=True,
                                env=dict(os.environ, HF_HUB_DISABLE_TELEMETRY="1", HF_HUB_ENABLE_HF_TRANSFER="0"))
        repo_sha = hub.repos["org/model"].sha
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["config"] == config
    assert out["commit"] == repo_sha == out["sha"]
    assert list(out["lfs"]) == ["model-00001-of-00001.safetensors"]
    assert out["entry"] == "RemoteEntryNotFoundError" or out["entry"] == "EntryNotFoundError"
    assert out["revision"] == "RevisionNotFoundError"
    assert out["repo"] == "RepositoryNotFoundError"
    assert out["gated"] == "GatedRepoError"
