# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every role's public variables are declared once, in its argument spec: each default in defaults/main.yml that
carries the role's prefix is an option of some entry point, with the same default where the value is literal,
and the README names every entry point. vllm_service names the group watch's unit as vllm_watchdog does
(tests/unit/roles/test_vllm_watchdog.py checks the watchdog role against its script)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import os

import pytest
import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
ROLES = sorted(os.path.basename(path) for path in glob.glob(os.path.join(ROOT, "roles", "*")))


def _yaml(*parts):
    with open(os.path.join(ROOT, "roles", *parts)) as handle:
        return yaml.safe_load(handle) or {}


def _defaults(role):
    """defaults/main.yml, or every file of defaults/main/ (a role that splits its defaults)."""
    split = sorted(glob.glob(os.path.join(ROOT, "roles", role, "defaults", "main", "*.yml")))
    merged = {}
    for path in split or [os.path.join(ROOT, "roles", role, "defaults", "main.yml")]:
        with open(path) as handle:
            merged.update(yaml.safe_load(handle) or {})
    return merged


def _options(role):
    """option name -> [(entry point, option spec)]"""
    declared = {}
    for entry_point, spec in _yaml(role, "meta", "argument_specs.yml")["argument_specs"].items():
        for name, option in (spec.get("options") or {}).items():
            declared.setdefault(name, []).append((entry_point, option))
    return declared


@pytest.mark.parametrize("role", ROLES)
def test_every_public_default_is_declared_with_the_same_default(role):
    defaults, declared = _defaults(role), _options(role)
    assert defaults, "%s has no defaults" % role
    public = [name for name in defaults if name.startswith(role + "_")]
    assert [name for name in public if name not in declared] == [], "%s: defaults not in meta/argument_specs.yml" % role
    for name in public:
        value = defaults[name]
        if isinstance(value, str) and "{{" in value:
            continue  # a template (another role's default): the spec documents its usual value
        for entry_point, option in declared[name]:
            assert option.get("default", value) == value, "%s: %s of entry point %s" % (role, name, entry_point)


@pytest.mark.parametrize("role", ROLES)
def test_every_role_has_a_readme_naming_its_entry_points(role):
    with open(os.path.join(ROOT, "roles", role, "README.md")) as handle:
        readme = handle.read()
    for entry_point in _yaml(role, "meta", "argument_specs.yml")["argument_specs"]:
        if entry_point != "main":
            assert "`%s`" % entry_point in readme, "%s README does not name its entry point %s" % (role, entry_point)


def test_vllm_service_names_the_group_watch_as_the_watchdog_role_does():
    service_vars, watchdog_vars = _yaml("vllm_service", "vars", "main.yml"), _yaml("vllm_watchdog", "vars", "main.yml")
    assert service_vars["_vllm_service_group_unit"] == "{{ _vllm_service_unit_stem }}-group.service"
    assert watchdog_vars["_vllm_watchdog_group_unit"] == "{{ _vllm_watchdog_unit_stem }}-group.service"
    assert (service_vars["_vllm_service_unit_stem"].replace("__vllm_service_unit", "U")
            == watchdog_vars["_vllm_watchdog_unit_stem"].replace("vllm_watchdog_unit", "U"))
