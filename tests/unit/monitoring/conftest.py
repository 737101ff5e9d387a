# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Shared by the monitoring tests: the rule file rendered as Ansible's template module renders it, and promtool.

promtool is Debian's (prometheus 2.42, the release the monitoring host runs), unpacked by the rig;
`source scripts/lib.sh` exports its path as GAUNTLET_PROMTOOL. Without it the tests fail, naming the
variable: a check of the alert rules that silently does not run is no check.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import os
import subprocess

import jinja2
import pytest
import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
ROLE = os.path.join(ROOT, "roles", "vllm_monitoring")
RULES_TEMPLATE = "gauntlet-vllm.rules.yml.j2"
RULES_DEFAULTS = os.path.join(ROLE, "defaults", "main", "rules.yml")
RULE_TESTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rules")
RENDERED_RULES_NAME = "gauntlet-vllm.rules.yml"
DASHBOARDS_DIR = os.path.join(ROLE, "files", "dashboards")
DASHBOARD_QUERIES = os.path.join(ROOT, "tests", "monitoring", "dashboard_queries.py")


def promtool_path():
    """GAUNTLET_PROMTOOL, or the test fails saying how to get it."""
    path = os.environ.get("GAUNTLET_PROMTOOL")
    if not path or not os.path.isfile(path) or not os.access(path, os.X_OK):
        pytest.fail("GAUNTLET_PROMTOOL=%r is not an executable promtool: `source scripts/lib.sh` after scripts/rig.sh "
                    "(it unpacks Debian's prometheus package into the rig cache)" % (path,))
    return path


def run_promtool(*args, **kwargs):
    """promtool's exit status and its stdout+stderr."""
    proc = subprocess.run([promtool_path()] + list(args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=120, check=False, **kwargs)
    return proc.returncode, proc.stdout


def rule_defaults():
    with open(RULES_DEFAULTS) as handle:
        return yaml.safe_load(handle)


def render_rules(variables):
    """The rule file as Ansible's template module renders it: trim_blocks, undefined variables fail."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(os.path.join(ROLE, "templates")), trim_blocks=True,
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    return env.get_template(RULES_TEMPLATE).render(**variables)


def render_rules_with(**overrides):
    variables = copy.deepcopy(rule_defaults())
    variables.update(overrides)
    return render_rules(variables)


@pytest.fixture(scope="session")
def rules_text():
    return render_rules(rule_defaults())


@pytest.fixture(scope="session")
def rules(rules_text):
    return yaml.safe_load(rules_text)


def all_rules(rule_file):
    return [rule for group in rule_file["groups"] for rule in group["rules"]]


def alert_rules(rule_file):
    return dict((rule["alert"], rule) for rule in all_rules(rule_file) if "alert" in rule)
