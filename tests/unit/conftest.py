# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Shared helpers for unit-testing gauntlet.vllm modules.

Follows the community.general pattern: module arguments are injected with
``set_module_args`` and ``AnsibleModule.exit_json`` / ``fail_json`` are patched
to raise ``AnsibleExitJson`` / ``AnsibleFailJson`` carrying the result.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import contextlib
import json
import os

import pytest

from ansible.module_utils import basic
from ansible.module_utils.common.text.converters import to_bytes

FIXTURES_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")


class AnsibleExitJson(Exception):
    """Raised by the patched ``exit_json``; ``args[0]`` is the result dict."""

    @property
    def result(self):
        return self.args[0]


class AnsibleFailJson(Exception):
    """Raised by the patched ``fail_json``; ``args[0]`` is the result dict."""

    @property
    def result(self):
        return self.args[0]


class _ExitFail:
    """What the ``patch_exit_fail`` fixture returns."""

    exit = AnsibleExitJson
    fail = AnsibleFailJson


def exit_json(*args, **kwargs):
    if "changed" not in kwargs:
        kwargs["changed"] = False
    raise AnsibleExitJson(kwargs)


def fail_json(*args, **kwargs):
    kwargs["failed"] = True
    raise AnsibleFailJson(kwargs)


@contextlib.contextmanager
def module_args(args=None):
    """Expose ``args`` to AnsibleModule instances created inside the context."""
    args = dict(args or {})
    args.setdefault("_ansible_remote_tmp", "/tmp")
    args.setdefault("_ansible_keep_remote_files", False)
    try:
        from ansible.module_utils.testing import patch_module_args  # ansible-core >= 2.19
    except ImportError:
        serialized = to_bytes(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(basic, "_ANSIBLE_ARGS", serialized)
            yield
    else:
        with patch_module_args(args):
            yield


@pytest.fixture
def set_module_args():
    """The ``module_args`` context manager: ``with set_module_args({...}): main()``."""
    return module_args


@pytest.fixture
def patch_exit_fail(monkeypatch):
    """Patch AnsibleModule.exit_json/fail_json; returns the two exception classes.

    ``patch_exit_fail.exit`` is AnsibleExitJson, ``patch_exit_fail.fail`` is AnsibleFailJson.
    """
    monkeypatch.setattr(basic.AnsibleModule, "exit_json", exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", fail_json)
    return _ExitFail


@pytest.fixture
def run_module(patch_exit_fail):
    """Run a module's ``main`` with ``args``; return ``(result, failed)``."""

    def _run(main, args):
        with module_args(args):
            try:
                main()
            except AnsibleExitJson as exc:
                return exc.result, False
            except AnsibleFailJson as exc:
                return exc.result, True
        raise AssertionError("module returned without calling exit_json or fail_json")

    return _run


@pytest.fixture
def model_configs_dir():
    """Directory holding the copies of the real model configs."""
    return os.path.join(FIXTURES_DIR, "model_configs")
