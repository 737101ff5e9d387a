#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: vllm_record
short_description: Read or write one of the collection's "already done?" records
version_added: 0.1.0
description:
  - The roles of the collection keep one small JSON file per thing they did once and need not do again (a
    checkpoint fetched for a request, all-reduce measured on a host, a server instance benched with a workload).
    This module reads such a record and says whether it matches what is asked now, or writes it.
  - "The file holds, keys sorted and indented by 2: C(generator) (C(gauntlet.vllm.<generator>)), C(format) (1),
    C(key) (what identifies the thing recorded, O(key)), C(recorded_at) (UTC, ISO-8601) and C(content) (what came
    of it, O(content))."
  - A file at O(path) whose top level is not a JSON object carrying a C(generator) that starts with
    C(gauntlet.vllm.) belongs to somebody else (so does a symlink, a folder, a file over 16 MiB or nested too
    deeply, and one holding NaN or an infinity anywhere, which the collection never writes). The task fails naming it
    (and the number's place), and it is left alone.
  - A record of the collection in an older format (those written before this module, without a C(format) key) is read as existing
    but matching nothing, with an empty RV(content); O(state=present) replaces it.
author:
  - gauntlet.vllm contributors (@gauntlet)
options:
  path:
    description:
      - The record's file. A path that ends in C(/) or holds a NUL byte fails the task naming it.
    type: path
    required: true
  generator:
    description:
      - The name of the module or role that owns the record (C(model_fetch), C(vllm_bench)); the file carries
        C(gauntlet.vllm.<generator>). Only a record of this generator can match.
      - Lower-case letters, digits and C(_), starting with a letter (nothing else, not even a trailing newline).
    type: str
    required: true
  state:
    description:
      - C(read) reads the record and compares its key with O(key); nothing is written.
      - C(present) makes the file hold O(key) and O(content). A record of O(generator) with an equal key and content
        is left untouched (its C(recorded_at) kept); otherwise the record is written whole through a temporary file
        in the same folder, and missing folders above it are created with mode C(0750).
    type: str
    choices: [read, present]
    default: read
  key:
    description:
      - What identifies the thing recorded (a request, a server instance and workload, a fingerprint). A record
        matches when its key equals this one.
      - Must be JSON-serialisable.
    type: dict
    default: {}
  content:
    description:
      - The record's body (what came of it), with O(state=present). Must be JSON-serialisable.
    type: dict
    default: {}
  mode:
    description:
      - The file's mode when it is written, as in M(ansible.builtin.file) (C('0640'), C(u=rw,g=r)).
    type: raw
    default: '0640'
  owner:
    description:
      - The file's owner when it is written; unset leaves the writer's.
    type: str
  group:
    description:
      - The file's group when it is written; unset leaves the writer's.
    type: str
extends_documentation_fragment:
  # First, so its support levels win over the generic fragment's placeholders.
  - gauntlet.vllm.attributes
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    details: Reads as in a real run. With O(state=present), C(changed) says whether the record would be written, and
      RV(record) is the record that would be; nothing is written.
notes:
  - O(mode), O(owner) and O(group) are applied when the record is written; an unchanged record is not touched.
"""

EXAMPLES = r"""
- name: Read the record of an earlier fetch
  gauntlet.vllm.vllm_record:
    path: /opt/models/Qwen--Qwen3-0.6B/.gauntlet-fetch-Qwen--Qwen3-0.6B.json
    generator: model_fetch
    key:
      repo_id: Qwen/Qwen3-0.6B
      revision: main
  register: previous

- name: Fetch only when the record is not for this request
  ansible.builtin.debug:
    msg: "{{ 'fetched earlier, commit ' ~ previous.content.commit if previous.matches else 'fetching' }}"

- name: Record what the fetch gave
  gauntlet.vllm.vllm_record:
    path: /opt/models/Qwen--Qwen3-0.6B/.gauntlet-fetch-Qwen--Qwen3-0.6B.json
    generator: model_fetch
    state: present
    key:
      repo_id: Qwen/Qwen3-0.6B
      revision: main
    content:
      commit: c1899de289a04d12100db370d81485cdf75e47ca
    mode: '0640'
"""

RETURN = r"""
path:
  description: The record's file, as given.
  returned: always
  type: str
  sample: /var/lib/gauntlet-vllm/allreduce_probe.json
exists:
  description: Whether a record of the collection is there (with O(state=present), after the task).
  returned: always
  type: bool
  sample: true
record:
  description:
    - The whole stored record, or null when there is none (with O(state=present), the record after the task; in
      check mode, the one that would be written).
  returned: always
  type: dict
  sample:
    generator: gauntlet.vllm.vllm_preflight
    format: 1
    key: {gpus: 8, vllm_version: 0.28.0}
    recorded_at: "2026-12-03T14:24:10Z"
    content: {allreduce_probe: {backend: nccl}}
matches:
  description: Whether a record of O(generator) in the current format is there and its key equals O(key).
  returned: always
  type: bool
  sample: true
content:
  description:
    - The stored record's content whenever a record in the current format exists (even when its key differs, so look
      at RV(matches)); an empty dict when there is none or it is in an older format.
  returned: always
  type: dict
  sample: {allreduce_probe: {backend: nccl}}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gauntlet.vllm.plugins.module_utils.io.state_record import (
    StateRecordError,
    read_record,
    write_record,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            generator=dict(type="str", required=True),
            state=dict(type="str", choices=["read", "present"], default="read"),
            key=dict(type="dict", default={}, no_log=False),
            content=dict(type="dict", default={}),
            mode=dict(type="raw", default="0640"),
            owner=dict(type="str"),
            group=dict(type="str"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    try:
        if params["state"] == "read":
            result = dict(read_record(params["path"], params["generator"], params["key"]), changed=False)
        else:
            result = write_record(params["path"], params["generator"], params["key"], params["content"],
                                  check_mode=module.check_mode, move=module.atomic_move)
    except (StateRecordError, OSError) as exc:
        module.fail_json(msg=str(exc), path=params["path"])
    if result["changed"] and not module.check_mode:
        module.set_mode_if_different(params["path"], params["mode"], False)
        module.set_owner_if_different(params["path"], params["owner"], False)
        module.set_group_if_different(params["path"], params["group"], False)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
