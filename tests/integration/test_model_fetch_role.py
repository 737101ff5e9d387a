# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The model_fetch role, run by ansible-playbook on localhost against the fake Hub with the rig's
huggingface_hub: a download that verifies, a rerun that fetches nothing, a transfer cut off
half-way that resumes with a Range request, and a token that never shows."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os

import pytest

from tests.fakehub.fakehub import FakeHub
from ansible_collections.gauntlet.vllm.tests.integration.playbook_runner import run_playbook

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

PLAYBOOK = """
- hosts: localhost
  connection: local
  gather_facts: false
  roles:
    - role: gauntlet.vllm.model_fetch
      vars:
        model_fetch_repo_id: {repo}
        model_fetch_endpoint: {endpoint}
        model_fetch_dest: {dest}
        model_fetch_python: {python}
        model_fetch_token: {token}
        model_fetch_workers: 2
{extra}"""


def rig_models():
    models = os.environ.get("GAUNTLET_MODELS")
    if not models or not os.path.isdir(models):
        pytest.fail("GAUNTLET_MODELS is not set: run the tests through scripts/test.sh")
    return models


def repo_files(name):
    directory = os.path.join(rig_models(), name)
    files = {}
    for filename in sorted(os.listdir(directory)):
        with open(os.path.join(directory, filename), "rb") as handle:
            files[filename] = handle.read()
    return files


def run_role(tmp_path, hub, repo, dest, token="''", check=False, **extra):
    python = os.path.join(os.environ.get("GAUNTLET_RIG_DIR", ""), "builder-venv", "bin", "python")
    playbook = tmp_path / "fetch.yml"
    extra_vars = "".join("        model_fetch_%s: %s\n" % (key, json.dumps(value)) for key, value in extra.items())
    playbook.write_text(PLAYBOOK.format(repo=repo, endpoint=hub.endpoint if hub else "''", dest=dest, python=python,
                                        token=token, extra=extra_vars))
    return run_playbook([playbook] + (["--check"] if check else []))


def recap(result):
    line = [text for text in result.stdout.splitlines() if text.startswith("localhost")][-1]
    return dict(part.split("=") for part in line.split(":", 1)[1].split())


def downloads(hub):
    return [r for r in hub.requests if r[0] == "GET" and "/resolve/" in r[1]]


def test_fetch_verifies_and_a_rerun_fetches_nothing(tmp_path):
    files = repo_files("tiny-llama")
    dest = tmp_path / "models" / "tiny-llama"
    with FakeHub({"gauntlet/tiny-llama": files}) as hub:
        first = run_role(tmp_path, hub, "gauntlet/tiny-llama", dest)
        assert first.returncode == 0, first.stdout[-4000:]
        commit = hub.repos["gauntlet/tiny-llama"].sha
        fetched = len(downloads(hub))
        second = run_role(tmp_path, hub, "gauntlet/tiny-llama", dest)
        assert second.returncode == 0, second.stdout[-4000:]
        assert len(downloads(hub)) == fetched, "the rerun downloaded again"
    assert recap(second)["changed"] == "0"
    for name, data in files.items():
        assert (dest / name).read_bytes() == data
    record = json.loads((dest / ".gauntlet-fetch-gauntlet--tiny-llama.json").read_text())
    assert record["format"] == 1 and record["content"]["commit"] == commit
    assert record["key"]["revision"] == "main"
    shard = "model-00001-of-00003.safetensors"
    assert record["content"]["result"]["files"][shard]["sha256"] == hashlib.sha256(files[shard]).hexdigest()


@pytest.mark.parametrize("from_hub", [True, False])
def test_check_mode_on_a_first_fetch_predicts_it_and_touches_nothing(tmp_path, from_hub):
    # deploy.yml --check on a fresh host: the fetch is predicted, nothing is written, nothing verified yet.
    dest = tmp_path / "models" / "tiny-llama"
    if from_hub:
        with FakeHub({"gauntlet/tiny-llama": repo_files("tiny-llama")}) as hub:
            result = run_role(tmp_path, hub, "gauntlet/tiny-llama", dest, check=True)
            assert downloads(hub) == []
    else:
        result = run_role(tmp_path, None, "gauntlet/tiny-llama", dest, check=True,
                          source_dir=os.path.join(rig_models(), "tiny-llama"))
    assert result.returncode == 0, result.stdout[-4000:]
    assert not dest.exists()


def safetensors_checkpoint(shards, tensor_bytes):
    """A real sharded safetensors checkpoint (F32 tensors of seeded bytes) with its index."""
    files, weight_map, total = {}, {}, 0
    for number in range(1, shards + 1):
        name = "model-%05d-of-%05d.safetensors" % (number, shards)
        tensor = "model.layers.%d.mlp.down_proj.weight" % number
        header = json.dumps({tensor: {"dtype": "F32", "shape": [tensor_bytes // 4],
                                      "data_offsets": [0, tensor_bytes]}}).encode()
        header += b" " * (-len(header) % 8)
        payload = hashlib.sha256(name.encode()).digest() * (tensor_bytes // 32)
        files[name] = len(header).to_bytes(8, "little") + header + payload
        weight_map[tensor] = name
        total += tensor_bytes
    files["model.safetensors.index.json"] = json.dumps({"metadata": {"total_size": total},
                                                        "weight_map": weight_map}).encode()
    files["config.json"] = b'{"architectures": ["LlamaForCausalLM"]}'
    return files


def test_cut_off_transfer_resumes_with_a_range_request(tmp_path):
    # huggingface_hub writes what it received in 10 MiB chunks; a transfer cut after 12 MiB of a
    # 24 MiB shard leaves one chunk on disk, which the retry must not fetch again.
    files = safetensors_checkpoint(2, 24 * 1024 * 1024)
    shard = "model-00002-of-00002.safetensors"
    dest = tmp_path / "big"
    with FakeHub({"gauntlet/big": files}) as hub:
        hub.cut_next[shard] = 12 * 1024 * 1024
        result = run_role(tmp_path, hub, "gauntlet/big", dest)
        if result.returncode != 0:  # the client gave up on the cut transfer: a rerun resumes it
            result = run_role(tmp_path, hub, "gauntlet/big", dest)
        assert result.returncode == 0, result.stdout[-4000:]
        ranges = [r[3] for r in downloads(hub) if r[1].endswith(shard) and r[3]]
    assert ranges, "no resuming Range request"
    assert int(ranges[0].split("=")[1].split("-")[0]) >= 10 * 1024 * 1024
    assert (dest / shard).read_bytes() == files[shard]


def test_token_reaches_the_hub_and_never_the_output(tmp_path):
    files = repo_files("tiny-llama")
    with FakeHub() as hub:
        hub.add_repo("gated/tiny-llama", files, gated_token="hf_fetch_secret")
        denied = run_role(tmp_path, hub, "gated/tiny-llama", tmp_path / "denied")
        assert denied.returncode != 0
        granted = run_role(tmp_path, hub, "gated/tiny-llama", tmp_path / "granted", token="hf_fetch_secret")
        assert granted.returncode == 0, granted.stdout[-4000:]
    assert "hf_fetch_secret" not in granted.stdout + granted.stderr + denied.stdout + denied.stderr
    assert (tmp_path / "granted" / "config.json").read_bytes() == files["config.json"]


def test_hf_cache_layout_verifies_through_the_snapshot_symlinks(tmp_path):
    files = repo_files("tiny-llama")
    cache = tmp_path / "hf-cache"
    with FakeHub({"gauntlet/tiny-llama": files}) as hub:
        result = run_role(tmp_path, hub, "gauntlet/tiny-llama", cache, layout="hf_cache")
        commit = hub.repos["gauntlet/tiny-llama"].sha
    assert result.returncode == 0, result.stdout[-4000:]
    snapshot = cache / "models--gauntlet--tiny-llama" / "snapshots" / commit
    assert (snapshot / "model-00002-of-00003.safetensors").is_symlink()
    assert (snapshot / "model-00002-of-00003.safetensors").read_bytes() == files["model-00002-of-00003.safetensors"]
    assert "model_verify" in result.stdout or "Verify the checkpoint" in result.stdout


def test_air_gapped_copy_from_the_controller_is_verified_and_idempotent(tmp_path):
    source = os.path.join(rig_models(), "tiny-llama")
    dest = tmp_path / "copied"
    first = run_role(tmp_path, None, "gauntlet/tiny-llama", dest, source_dir=source)
    assert first.returncode == 0, first.stdout[-4000:]
    second = run_role(tmp_path, None, "gauntlet/tiny-llama", dest, source_dir=source)
    assert second.returncode == 0, second.stdout[-4000:]
    assert recap(second)["changed"] == "0"
    assert (dest / "model-00003-of-00003.safetensors").read_bytes() == \
        open(os.path.join(source, "model-00003-of-00003.safetensors"), "rb").read()
    # A shard cut short on the host is caught on the next run, and nothing is deleted.
    shard = dest / "model-00002-of-00003.safetensors"
    shard.write_bytes(shard.read_bytes()[:1000])
    broken = run_role(tmp_path, None, "gauntlet/tiny-llama", dest, source_dir=source)
    assert broken.returncode != 0
    assert "model-00002-of-00003.safetensors" in broken.stdout
    assert shard.exists()


def test_a_lost_record_over_a_complete_copy_is_written_again(tmp_path):
    # The copy then changes no file; the role must still know what it holds (it used to read the lost record).
    source = os.path.join(rig_models(), "tiny-llama")
    dest = tmp_path / "copied"
    first = run_role(tmp_path, None, "gauntlet/tiny-llama", dest, source_dir=source)
    assert first.returncode == 0, first.stdout[-4000:]
    record = dest / ".gauntlet-fetch-gauntlet--tiny-llama.json"
    record.unlink()
    again = run_role(tmp_path, None, "gauntlet/tiny-llama", dest, source_dir=source)
    assert again.returncode == 0, again.stdout[-4000:]
    assert json.loads(record.read_text())["content"]["result"]["path"] == str(dest)


def test_a_foreign_file_at_the_record_path_is_refused_and_kept(tmp_path):
    files = repo_files("tiny-llama")
    dest = tmp_path / "models" / "tiny-llama"
    dest.mkdir(parents=True)
    # Somebody's own notes where the role keeps its record: not a record of this role.
    foreign = dest / ".gauntlet-fetch-gauntlet--tiny-llama.json"
    foreign.write_text('{"request": {}, "mine": true}\n')
    with FakeHub({"gauntlet/tiny-llama": files}) as hub:
        result = run_role(tmp_path, hub, "gauntlet/tiny-llama", dest)
        assert result.returncode != 0
        assert downloads(hub) == []
    assert "%s exists but was not written by gauntlet.vllm.model_fetch" % foreign in result.stdout
    assert foreign.read_text() == '{"request": {}, "mine": true}\n'
    assert sorted(os.listdir(str(dest))) == [foreign.name]


def test_the_record_is_marked_and_not_world_readable(tmp_path):
    files = repo_files("tiny-llama")
    dest = tmp_path / "models" / "tiny-llama"
    with FakeHub({"gauntlet/tiny-llama": files}) as hub:
        result = run_role(tmp_path, hub, "gauntlet/tiny-llama", dest)
        assert result.returncode == 0, result.stdout[-4000:]
    record = dest / ".gauntlet-fetch-gauntlet--tiny-llama.json"
    assert json.loads(record.read_text())["generator"] == "gauntlet.vllm.model_fetch"
    assert os.stat(str(record)).st_mode & 0o777 == 0o640


def test_a_record_in_the_older_format_is_fetched_again_and_replaced(tmp_path):
    files = repo_files("tiny-llama")
    dest = tmp_path / "models" / "tiny-llama"
    with FakeHub({"gauntlet/tiny-llama": files}) as hub:
        first = run_role(tmp_path, hub, "gauntlet/tiny-llama", dest)
        assert first.returncode == 0, first.stdout[-4000:]
        # The record as this role wrote it before gauntlet.vllm.vllm_record: no format key.
        path = dest / ".gauntlet-fetch-gauntlet--tiny-llama.json"
        record = json.loads(path.read_text())
        path.write_text(json.dumps({"generator": "gauntlet.vllm.model_fetch", "request": record["key"],
                                    "commit": record["content"]["commit"], "result": record["content"]["result"]}))
        again = run_role(tmp_path, hub, "gauntlet/tiny-llama", dest)
        assert again.returncode == 0, again.stdout[-4000:]
    assert recap(again)["changed"] != "0"
    assert json.loads(path.read_text())["content"] == record["content"]
    for name, data in files.items():
        assert (dest / name).read_bytes() == data
