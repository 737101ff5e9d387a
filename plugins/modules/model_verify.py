#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: model_verify
short_description: Verify a downloaded safetensors checkpoint before vLLM loads it
version_added: 0.1.0
description:
  - Checks a model directory against its C(model.safetensors.index.json), or a single C(model.safetensors) when there
    is no index, and reports every problem at once, naming each bad file and what is wrong with it.
  - A PEFT (LoRA) adapter directory, whose weights are one C(adapter_model.safetensors) beside C(adapter_config.json),
    is checked like a single-file checkpoint, with the same structure, size and sha256 checks.
  - "Completeness: every shard the index's C(weight_map) names is present (RV(missing)); a shard that is on disk under
    another spelling of the same C(-NNNNN-of-MMMMM) name (zero padding or case) is reported as RV(misnamed), not as
    missing plus unexpected; gaps and disagreements in the index's own shard numbering are reported in RV(numbering);
    C(*.safetensors) files in the directory that the index does not name (stale shards of another revision) are
    reported in RV(unexpected)."
  - "Structure, for every shard: a valid safetensors header (8-byte little-endian length, JSON object, C(__metadata__)
    allowed); every tensor's byte range inside the file (else RV(truncated)); a dtype the safetensors library knows,
    every range the size dtype x shape needs, and the ranges tiling the data area without gap, overlap or trailing
    bytes (else RV(corrupt), naming the tensor); every tensor the index assigns to the shard present in its header (else
    RV(tensors_missing)). Every file the safetensors library refuses to open is reported, and a tensor defined twice in
    one header too (the library would silently keep the last)."
  - "Content, when O(expected_files) gives sizes and sha256 digests (for example the Hub's LFS metadata): sizes
    (RV(size_mismatch)) and sha256 digests (RV(checksum_mismatch)), hashed by O(workers) threads in parallel."
  - "Safety: an index entry that is an absolute path or contains C(..) is refused and never opened (RV(unsafe)), as is a
    shard that resolves through symlinks outside the model directory (except into the Hugging Face cache's C(blobs)
    directory beside a C(snapshots/<revision>) model directory) or that is not a regular file. The same rules apply to
    the names in O(expected_files)."
  - Fails the task, with a message naming each bad file and what is wrong plus every return value, unless
    O(fail_on_error=false).
  - "The module only reads the checkpoint. The one thing it may write is its digest cache (O(cache_path)); C(changed)
    is V(true) exactly when it created or rewrote that file (RV(cache_written)). In check mode the cache is read but not
    written, and C(changed) and RV(cache_written) say whether a real run would write it."
  - "It never replaces a file it did not write: the cache carries the marker key C(gauntlet_vllm_verify_cache), and
    when O(cache_path) names anything else (a C(config.json), a file that is not JSON, a symlink, a directory) the task
    fails naming that path, before any hashing."
author:
  - gauntlet.vllm contributors (@gauntlet)
options:
  path:
    description:
      - The model directory.
    type: path
    required: true
  index_file:
    description:
      - Name of the safetensors index, relative to O(path).
      - When not set, C(model.safetensors.index.json) is used if it exists, else the directory must hold a single
        C(model.safetensors) (a checkpoint without an index), else a PEFT adapter's C(adapter_model.safetensors). When
        set, the file must exist.
      - A C(model.safetensors) or C(adapter_model.safetensors) beside an index, or an C(adapter_model.safetensors) beside
        a C(model.safetensors), is reported in RV(unexpected) unless O(expected_files) or O(ignore_files) names it.
    type: str
  expected_files:
    description:
      - What the files should be, by file name relative to O(path), for example from the Hub's LFS metadata.
      - Each value is a dict with the keys C(size) (bytes) and/or C(sha256) (64 hexadecimal digits); a key that is
        absent or null means unknown.
      - Entries for shards are checked against the shard; entries for other files (C(config.json), tokenizer files,
        C(consolidated.safetensors)) are checked when the file exists, and their absence is not an error. A
        C(.safetensors) file named here is not reported as unexpected.
      - A file whose size differs from its expected size is not hashed, since its digest cannot match.
    type: dict
  checksum:
    description:
      - When to compute sha256 digests.
      - V(auto) hashes exactly the files that have an expected C(sha256) in O(expected_files).
      - V(true) hashes every shard (and every file O(expected_files) names that is present) and returns the digests in
        RV(sha256), for example to record them after a first download; files without an expected digest are hashed
        but not judged.
      - V(false) never hashes; sizes and structure are still checked.
    type: str
    choices: [auto, 'true', 'false']
    default: auto
  workers:
    description:
      - Files checked and hashed in parallel (threads). Defaults to the number of CPUs this process may use, at most 8.
    type: int
  cache:
    description:
      - Keep a digest cache so that re-verifying unchanged files does not hash them again.
      - A cached digest is only used while the file's real path, size, mtime, ctime, inode and device are all as they
        were when it was hashed; any write to the file changes its ctime (which cannot be set back), so a changed file
        is always hashed again and a corrupted file cannot pass on a stale digest. Files modified within the last two
        seconds before hashing are not cached.
      - The cache does not detect silent media corruption (bit rot) that changes no file metadata; set V(false) to hash
        everything afresh.
    type: bool
    default: true
  cache_path:
    description:
      - The digest cache file. Defaults to C(.gauntlet-verify-cache.json) in O(path).
      - One cache may serve many model directories (entries are keyed on real paths). The cache is trusted, so keep it
        where only the owner of the model files can write it.
      - The file must be missing or a cache this module wrote (marked with the key C(gauntlet_vllm_verify_cache)); anything
        else there fails the task, naming the path, and is left as it is. It is replaced atomically, with mode C(0640).
      - When it cannot be written (a read-only model directory), a warning is given and the verification still counts.
    type: path
  ignore_files:
    description:
      - Shell-style patterns of C(*.safetensors) files in O(path) that the index does not name but that are not to be
        reported as unexpected, for example V(consolidated*.safetensors) for Mistral repositories that ship both layouts.
      - C(*.bin), C(*.pt) and C(*.pth) files are never reported (many repositories ship PyTorch weights beside
        safetensors, and vLLM ignores them when safetensors files exist).
    type: list
    elements: str
    default: []
  follow_external_symlinks:
    description:
      - Accept shards that are symlinks resolving outside the model directory. Index entries that are absolute paths or
        contain C(..) are refused regardless.
    type: bool
    default: false
  fail_on_error:
    description:
      - Fail the task when the checkpoint has any problem. With V(false) the module returns RV(ok=false) and the same
        details without failing. Bad input (no such directory, unreadable index) always fails.
    type: bool
    default: true
extends_documentation_fragment:
  # First, so its support levels win over the generic fragment's placeholders.
  - gauntlet.vllm.attributes
  - ansible.builtin.action_common_attributes
notes:
  - The checks run on the managed node, in parallel threads; hashing reads every byte of the hashed files.
  - "A dtype the safetensors library does not know makes the shard RV(corrupt): vLLM could not load it. A
    C(metadata.total_size) in the index that disagrees with the tensor bytes in the shards gives a warning (some
    published indexes are inaccurate)."
  - "Files read whole are capped: the index at 64 MiB, the digest cache at 64 MiB, a safetensors header at 100 MB (the
    safetensors library's own limit); a larger one is an error naming the file."
seealso:
  - module: gauntlet.vllm.model_config_info
"""

EXAMPLES = r"""
- name: Check a downloaded model before starting vLLM
  gauntlet.vllm.model_verify:
    path: /models/Qwen/Qwen3-30B-A3B

- name: Check sizes and sha256 digests against the Hub's LFS metadata
  gauntlet.vllm.model_verify:
    path: /models/moonshotai/Kimi-K2.5
    expected_files: "{{ hub_files }}"  # {"model-00001-of-000064.safetensors": {"size": 123, "sha256": "ab12..."}, ...}
    workers: 8

- name: Record the digests of a fresh download, without failing the play
  gauntlet.vllm.model_verify:
    path: /models/meta-llama/Llama-3.1-70B
    checksum: true
    fail_on_error: false
  register: verify

- name: Show what is wrong
  ansible.builtin.debug:
    msg: "{{ verify.errors }}"
  when: not verify.ok

- name: Verify a read-only model share, keeping the digest cache elsewhere
  gauntlet.vllm.model_verify:
    path: /mnt/models/mistralai/Mistral-Large-Instruct-2411
    cache_path: /var/cache/gauntlet/verify-cache.json
    ignore_files:
      - consolidated*.safetensors
"""

RETURN = r"""
ok:
  description: Whether the checkpoint has no problem (every problem list below is empty).
  returned: always
  type: bool
  sample: false
directory:
  description: The model directory, absolute.
  returned: always
  type: str
  sample: /models/Qwen/Qwen3-30B-A3B
index:
  description: The index file that was read; null for a single C(model.safetensors) or C(adapter_model.safetensors)
    without an index.
  returned: always
  type: str
  sample: /models/Qwen/Qwen3-30B-A3B/model.safetensors.index.json
expected:
  description: Shard file names the index names (the distinct C(weight_map) values), or C(model.safetensors) or
    C(adapter_model.safetensors).
  returned: always
  type: list
  elements: str
  sample: [model-00001-of-00002.safetensors, model-00002-of-00002.safetensors]
present:
  description: Expected shards found under their exact name.
  returned: always
  type: list
  elements: str
  sample: [model-00001-of-00002.safetensors]
missing:
  description: Expected shards not on disk (and not found under another spelling).
  returned: always
  type: list
  elements: str
  sample: [model-00002-of-00002.safetensors]
misnamed:
  description: Expected shards found on disk only under another spelling of the same shard name (zero padding, case).
  returned: always
  type: list
  elements: dict
  sample: [{expected: model-00001-of-000064.safetensors, found: model-00001-of-00064.safetensors}]
numbering:
  description: Problems with the index's C(-NNNNN-of-MMMMM) shard numbering (gaps, totals that disagree, numbers out of range), each naming the files.
  returned: always
  type: list
  elements: str
  sample: ["model-00017-of-00064.safetensors: the index names no shard 17 of 64 (it names 63 shards)"]
unsafe:
  description: Files refused without being opened (absolute paths, C(..), symlinks leading outside, not regular files).
  returned: always
  type: list
  elements: dict
  sample: [{file: ../escape.safetensors, reason: "'..' climbs out of the model directory"}]
unexpected:
  description: C(*.safetensors) files in the directory that the index does not name (stale shards?).
  returned: always
  type: list
  elements: str
  sample: [model-00003-of-00003.safetensors]
truncated:
  description: Files shorter than their header says (C(size), C(needed) bytes where known, C(reason)).
  returned: always
  type: list
  elements: dict
  sample: [{file: model-00002-of-00002.safetensors, size: 1048576, needed: 4194304, reason: "tensor ... ends at byte 4194304 ..."}]
corrupt:
  description:
    - Files whose header or layout is invalid; one entry per file with the first bad tensor (C(tensor), null when the
      problem is not a tensor's), the first problem (C(reason)), up to 20 C(problems) and their C(count).
  returned: always
  type: list
  elements: dict
  sample: [{file: model-00001-of-00002.safetensors, tensor: lm_head.weight, count: 1,
            reason: "tensor \"lm_head.weight\": data_offsets [0, 100] hold 100 bytes but BF16 x [64, 64] needs 8192",
            problems: ["tensor \"lm_head.weight\": data_offsets [0, 100] hold 100 bytes but BF16 x [64, 64] needs 8192"]}]
tensors_missing:
  description: Shards whose header lacks tensors the index assigns to them (up to 20 C(tensors) and their C(count)).
  returned: always
  type: list
  elements: dict
  sample: [{file: model-00001-of-00002.safetensors, tensors: [model.embed_tokens.weight], count: 1}]
size_mismatch:
  description: Files whose size differs from O(expected_files) (C(expected) and C(actual) bytes).
  returned: always
  type: list
  elements: dict
  sample: [{file: model-00001-of-00002.safetensors, expected: 4994552384, actual: 4994552000}]
checksum_mismatch:
  description: Files whose sha256 differs from O(expected_files) (C(expected) and C(actual) digests).
  returned: always
  type: list
  elements: dict
  sample: [{file: model-00001-of-00002.safetensors, expected: "9f86d0...", actual: "2c26b4..."}]
sha256:
  description: Digest of every file hashed this run or taken from the cache, by file name.
  returned: always
  type: dict
  sample: {model-00001-of-00002.safetensors: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08}
hashed:
  description: Files actually read and hashed this run.
  returned: always
  type: list
  elements: str
  sample: [model-00002-of-00002.safetensors]
from_cache:
  description: Files whose digest came from the cache (unchanged since they were hashed).
  returned: always
  type: list
  elements: str
  sample: [model-00001-of-00002.safetensors]
bytes_total:
  description: Total size of the shards found (including misnamed ones), in bytes.
  returned: always
  type: int
  sample: 61066099200
bytes_hashed:
  description: Bytes read for hashing this run.
  returned: always
  type: int
  sample: 4994552384
checksum:
  description: The checksum mode that was applied.
  returned: always
  type: str
  sample: auto
cache_path:
  description: The digest cache file; null when no cache was used (O(cache=false) or O(checksum=false)).
  returned: always
  type: str
  sample: /models/Qwen/Qwen3-30B-A3B/.gauntlet-verify-cache.json
cache_written:
  description:
    - Whether the digest cache was created or rewritten (only when its content changed); C(changed) is the same.
    - In check mode nothing is written, and this says whether a real run would write it.
  returned: always
  type: bool
  sample: true
errors:
  description: One message per problem, each starting with the file it concerns; empty when RV(ok).
  returned: always
  type: list
  elements: str
  sample: ["model-00002-of-00002.safetensors: missing"]
elapsed_s:
  description: Seconds the verification took.
  returned: always
  type: float
  sample: 12.345
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gauntlet.vllm.plugins.module_utils.checkpoint.shards import CheckpointError
from ansible_collections.gauntlet.vllm.plugins.module_utils.checkpoint.verify import failure_message, verify_checkpoint


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            index_file=dict(type="str"),
            expected_files=dict(type="dict"),
            checksum=dict(type="str", default="auto", choices=["auto", "true", "false"]),
            workers=dict(type="int"),
            cache=dict(type="bool", default=True),
            cache_path=dict(type="path"),
            ignore_files=dict(type="list", elements="str", default=[]),
            follow_external_symlinks=dict(type="bool", default=False),
            fail_on_error=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    params = module.params
    try:
        result = verify_checkpoint(
            params["path"],
            index_file=params["index_file"],
            expected_files=params["expected_files"],
            checksum=params["checksum"],
            workers=params["workers"],
            cache=params["cache"],
            cache_path=params["cache_path"],
            write_cache_file=not module.check_mode,
            ignore_files=params["ignore_files"],
            follow_external_symlinks=params["follow_external_symlinks"],
        )
    except CheckpointError as exc:
        module.fail_json(msg=str(exc))
    for warning in result.pop("warnings"):
        module.warn(warning)
    changed = result["cache_written"]
    if not result["ok"] and params["fail_on_error"]:
        module.fail_json(msg=failure_message(result), changed=changed, **result)
    module.exit_json(changed=changed, **result)


if __name__ == "__main__":
    main()
