# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one serving value is described in four places that Ansible reads apart: vllm_args.SERVING_SPEC (the
builder and the module's suboptions), the vllm_service role's argument spec (what a play may pass), the role's
_vllm_service_serving_defaults (what the role fills in) and the module's DOCUMENTATION. They must say the same
fields, types and defaults; the role README's table must name every field."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

import yaml

from ansible_collections.gauntlet.vllm.plugins.module_utils.planning import vllm_args
from ansible_collections.gauntlet.vllm.plugins.modules import vllm_args_check

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
ROLE = os.path.join(ROOT, "roles", "vllm_service")


def _yaml(*parts):
    with open(os.path.join(ROLE, *parts)) as handle:
        return yaml.safe_load(handle)


def _spec_table(options):
    return dict((name, (option["type"], option.get("default"))) for name, option in options.items())


EXPECTED = dict((name, (kind, default)) for name, kind, default in vllm_args.SERVING_SPEC)


def test_the_role_argument_spec_says_the_serving_spec():
    serving = _yaml("meta", "argument_specs.yml")["argument_specs"]["main"]["options"]["vllm_service_serving"]
    assert serving["type"] == "dict" and serving["default"] == {}
    assert _spec_table(serving["options"]) == EXPECTED
    assert serving["options"]["extra_args"]["elements"] == "str"


def test_the_roles_defaults_are_the_serving_defaults():
    assert _yaml("vars", "main.yml")["_vllm_service_serving_defaults"] == vllm_args.serving_defaults()
    assert _yaml("defaults", "main.yml")["vllm_service_serving"] == {}


def test_the_module_documents_the_serving_spec():
    documented = yaml.safe_load(vllm_args_check.DOCUMENTATION)["options"]["serving"]["suboptions"]
    assert _spec_table(documented) == EXPECTED
    assert _spec_table(vllm_args_check.ARGUMENT_SPEC["serving"]["options"]) == EXPECTED


def test_the_role_readme_names_every_field():
    with open(os.path.join(ROLE, "README.md")) as handle:
        readme = handle.read()
    table = readme[readme.index("The fields of `vllm_service_serving`"):]
    named = set(re.findall(r"^\| `([a-z_0-9]+)`", table, re.M)) | set(re.findall(r", `([a-z_0-9]+)`", table))
    assert set(vllm_args.SERVING) <= named


def test_the_deploy_hands_the_verdicts_fields_under_the_same_names():
    """The vllm_deploy verdict's serving (vllm_recipes.RECIPE_FIELDS) merges into vllm_service_serving as it is."""
    from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.vllm_recipes import RECIPE_FIELDS
    assert set(RECIPE_FIELDS) <= set(vllm_args.SERVING)
