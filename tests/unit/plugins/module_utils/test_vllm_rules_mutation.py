# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Mutation check: leaving any one rule out of vllm_rules.RULES must make a
case of test_vllm_rules.CASES fail. The rule list is read from the module, so
a rule added later is covered (or this test names it)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import importlib.util
import os

import pytest

from ansible_collections.gauntlet.vllm.plugins.module_utils.planning import vllm_rules


def _rule_cases():
    # Loaded from its path, so this works whatever pytest's import mode.
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "test_vllm_rules.py")
    spec = importlib.util.spec_from_file_location("gauntlet_vllm_rule_cases", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CASES = _rule_cases()


def test_the_cases_hold_with_every_rule():
    assert CASES.failing_cases() == []


@pytest.mark.parametrize("removed", [rule[0] for rule in vllm_rules.RULES])
def test_removing_a_rule_fails_a_case(monkeypatch, removed):
    monkeypatch.setattr(vllm_rules, "RULES", tuple(rule for rule in vllm_rules.RULES if rule[0] != removed))
    failing = CASES.failing_cases()
    assert failing, "no case of test_vllm_rules.CASES fails without rule %s: add one" % removed
    # The case written for that rule is among those that fail.
    assert set(failing) & {case[0] for case in CASES.CASES if case[1] == removed}


def _returns_nothing(*_args):
    return None


def _with_body_removed(name):
    return tuple(rule[:1] + (_returns_nothing,) + rule[2:] if rule[0] == name else rule for rule in vllm_rules.RULES)


@pytest.mark.parametrize("removed", [rule[0] for rule in vllm_rules.RULES])
def test_disabling_a_rule_function_fails_a_case(monkeypatch, removed):
    # The same, keeping the entry but emptying the check: the rule never fires.
    monkeypatch.setattr(vllm_rules, "RULES", _with_body_removed(removed))
    assert CASES.failing_cases(), "no case fails when rule %s never fires" % removed
