# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""`ansible-galaxy collection build` ships what users run and leaves the rig and tests out."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import shutil
import subprocess
import tarfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def test_built_tarball_excludes_tests_and_rig(tmp_path):
    galaxy = shutil.which("ansible-galaxy")
    assert galaxy, "ansible-galaxy is not on PATH"
    subprocess.run([galaxy, "collection", "build", "--output-path", str(tmp_path), ROOT],
                   check=True, capture_output=True)
    tarball = os.path.join(str(tmp_path), "gauntlet-vllm-0.1.0.tar.gz")
    with tarfile.open(tarball) as tar:
        names = tar.getnames()
        manifest = json.load(tar.extractfile("MANIFEST.json"))
    assert manifest["collection_info"]["namespace"] == "gauntlet"
    assert manifest["collection_info"]["name"] == "vllm"
    for shipped in ("plugins/modules/model_config_info.py", "plugins/module_utils/planning/model_config.py",
                    "meta/runtime.yml", "README.md", "docs/ARCHITECTURE.md", "playbooks/deploy.yml"):
        assert shipped in names
    # The rig's playbooks live under rig/, not beside the users'.
    assert not [n for n in names if n.startswith("playbooks/") and n.split("/")[-1] in
                ("main.yml", "rig_targets.yml", "serve_tiny_model.yml", "wait_for_systemd_boot.yml")]
    top_level = {n.split("/")[0] for n in names}
    for excluded in ("tests", "rig", "scripts", ".ci", ".rig", ".git", "ansible.cfg"):
        assert excluded not in top_level, excluded
    assert not [n for n in names if n.startswith("extensions/molecule")]
    assert not [n for n in names if n.endswith(".pyc") or "__pycache__" in n]
