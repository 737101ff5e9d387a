#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: model_space_check
short_description: Refuse a checkpoint transfer that would not fit, before any byte moves
version_added: 0.1.0
description:
  - Adds up the bytes still to transfer into a destination directory and compares them with the free bytes of the file
    system that will hold it (the nearest existing ancestor of O(path) when it does not exist yet).
  - A file already under O(path) with exactly its expected size counts as complete and needs nothing; any other file
    counts with its whole size.
  - Fails, with the numbers (bytes needed, the path, the file system and its free bytes), when the files do not fit with
    O(min_free_bytes) left over, unless O(fail_on_error=false).
  - A destination that cannot be created does not fit either, whatever the free bytes - when O(path), or its nearest
    existing ancestor, is not a directory (a regular file such as C(/etc/hostname) in C(/etc/hostname/models/x), a
    symbolic link to nothing, a FIFO); the message names what is in the way.
  - Only reads; never changes anything.
author:
  - gauntlet.vllm contributors (@gauntlet)
options:
  path:
    description:
      - The destination directory; it need not exist.
    type: path
    required: true
  files:
    description:
      - The files to transfer, by name relative to O(path), each with its size in bytes (an integer, or a dict with the key
        C(size) such as the Hub's metadata in C(model_fetch_result.files)).
    type: dict
    required: true
  min_free_bytes:
    description:
      - Bytes that must stay free on the file system after the transfer (a safety margin).
    type: int
    default: 0
  fail_on_error:
    description:
      - Fail the task when the files do not fit. With V(false) the module returns RV(fits=false) and the numbers.
    type: bool
    default: true
extends_documentation_fragment:
  - gauntlet.vllm.attributes
  - ansible.builtin.action_common_attributes
notes:
  - The free bytes are those an unprivileged user may use (C(statvfs) C(f_bavail)), the ones a download can count on.
seealso:
  - module: gauntlet.vllm.model_verify
"""

EXAMPLES = r"""
- name: Refuse a download that would not fit, keeping 10 GiB free
  gauntlet.vllm.model_space_check:
    path: /opt/models/Qwen--Qwen3-30B-A3B
    files: "{{ hub_files }}"  # {"model-00001-of-00016.safetensors": {"size": 3996250744}, ...}
    min_free_bytes: "{{ 10 * 1024 ** 3 }}"

- name: Only report whether it fits
  gauntlet.vllm.model_space_check:
    path: /opt/models/small
    files:
      model.safetensors: 1048576
    fail_on_error: false
  register: space
"""

RETURN = r"""
fits:
  description:
    - Whether the bytes still to transfer fit, with O(min_free_bytes) left over.
    - False too when O(path) cannot be created (RV(checked_path) is not a directory); RV(msg) says why.
  returned: always
  type: bool
  sample: false
needed_bytes:
  description: Bytes of the files not yet complete under O(path).
  returned: always
  type: int
  sample: 61066099200
free_bytes:
  description: Free bytes of the file system that will hold O(path).
  returned: always
  type: int
  sample: 1048576
min_free_bytes:
  description: The safety margin applied.
  returned: always
  type: int
  sample: 0
checked_path:
  description:
    - The nearest existing ancestor of O(path) (O(path) itself when it exists), whose file system was asked.
    - When it is not a directory (a file in the way), the file system of the nearest directory above it is asked.
  returned: always
  type: str
  sample: /opt/models
filesystem:
  description: The mount point of that file system.
  returned: always
  type: str
  sample: /opt
files_total:
  description: Files in O(files).
  returned: always
  type: int
  sample: 17
files_complete:
  description: Files already complete under O(path) (right size), which need no transfer.
  returned: always
  type: int
  sample: 3
msg:
  description: The numbers in words; also the failure message when the files do not fit.
  returned: always
  type: str
  sample: needs 61066099200 bytes (56.87 GiB) at /opt/models/x, /opt has 1048576 bytes free (0.00 GiB)
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.model_space import SpaceError, check_space


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            files=dict(type="dict", required=True),
            min_free_bytes=dict(type="int", default=0),
            fail_on_error=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    params = module.params
    try:
        result = check_space(params["path"], params["files"], params["min_free_bytes"])
    except (SpaceError, OSError) as exc:
        module.fail_json(msg="%s: %s" % (params["path"], exc))
    if not result["fits"] and params["fail_on_error"]:
        module.fail_json(changed=False, **result)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
