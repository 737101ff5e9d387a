# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Secrets of vLLM units: what is redacted from facts, records and messages (redact_argv,
redact_text), what the vllm_service role refuses (secret_input_problems) and where a server
listens (listen_host). Flags as vLLM 0.32's parser reads them: argparse abbreviations, "_" for
"-", --flag=value, the JSON dotted form, and --api-key taking several keys."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gauntlet.vllm.plugins.module_utils.serving import vllm_units
from ansible_collections.gauntlet.vllm.plugins.module_utils.serving.vllm_units import (
    REDACTED,
    listen_host,
    redact_argv,
    redact_text,
    secret_input_problems,
)

KEY = "sk-gauntlet-7f3c9e1d0a"
TOKEN = "hf_abcdefghijklmnopqrstuvwxyz0123456789"
# Not shaped like a Hub token, so only the flag is what gives it away.
PLAIN_TOKEN = "tok-4b8d2a6f-gauntlet"
SERVE = ["/opt/vllm/venv/bin/vllm", "serve", "/models/m", "--port", "8000"]


@pytest.mark.parametrize("secret_args, expected", [
    (["--api-key", KEY], ["--api-key", REDACTED]),
    (["--api-key=" + KEY], ["--api-key=" + REDACTED]),
    (["--api_key", KEY], ["--api_key", REDACTED]),
    (["--api-k", KEY], ["--api-k", REDACTED]),
    (["--api-key", KEY, "second-key"], ["--api-key", REDACTED, REDACTED]),
    (["--hf-token", TOKEN], ["--hf-token", REDACTED]),
    (["--hf_token=" + TOKEN], ["--hf_token=" + REDACTED]),
    (["--hf-token", "--enforce-eager"], ["--hf-token", "--enforce-eager"]),
    (["--watermark-config", '{"key": 12345}'], ["--watermark-config", REDACTED]),
    (["--watermark-config.key", "12345"], ["--watermark-config.key", REDACTED]),
    (["--otlp-traces-endpoint", "https://user:pw123456@collector:4318"],
     ["--otlp-traces-endpoint", "https://user:%s@collector:4318" % REDACTED]),
])
def test_redact_argv_hides_every_form_of_a_secret_flag(secret_args, expected):
    argv = SERVE + secret_args + ["--max-model-len", "1024"]
    assert redact_argv(argv) == SERVE + expected + ["--max-model-len", "1024"]


def test_redact_argv_leaves_other_flags_alone():
    argv = SERVE + ["--api-server-count", "2", "--hf-overrides", "{}", "--watermark", "0.01", "--host", "0.0.0.0"]
    assert redact_argv(argv) == argv


@pytest.mark.parametrize("line", [
    'ExecStart="/opt/vllm/venv/bin/vllm" "serve" "/m" "--api-key" "%s" "--port" "8000"' % KEY,
    "argv[]=/opt/vllm/venv/bin/vllm serve /m --api-key %s --port 8000 ; ignore_errors=no" % KEY,
    "vllm serve /m --api_key=%s" % KEY,
    "    \"--api-key\" \"%s\" \\" % KEY,
    "INFO non-default args: {'model_tag': '/m', 'api_key': ['%s'], 'port': 8000}" % KEY,
    "curl -H 'Authorization: Bearer %s' http://127.0.0.1:8000/v1/models" % KEY,
    "Environment=VLLM_API_KEY=%s" % KEY,
    "Environment=\"HF_TOKEN=%s\" \"VLLM_API_KEY=%s\"" % (TOKEN, KEY),
    "HF_TOKEN=\"%s\" started" % TOKEN,
    "fetching https://bot:%s@example.com/x" % KEY,
])
def test_redact_text_hides_secrets_in_journal_lines(line):
    redacted = redact_text(line)
    assert KEY not in redacted and TOKEN not in redacted
    assert REDACTED in redacted


def test_redact_text_hides_a_quoted_value_with_spaces_whole():
    redacted = redact_text('Environment="VLLM_API_KEY=part-one part-two" "OMP_NUM_THREADS=4"')
    assert "part-one" not in redacted and "part-two" not in redacted
    assert redacted.endswith('"OMP_NUM_THREADS=4"')


def test_redact_text_keeps_ordinary_lines_and_takes_literal_secrets():
    line = "INFO Loading weights took 1.2 s; MAX_TOKENS=5 VLLM_MULTI_STREAM_GEMM_TOKEN_THRESHOLD=64 --port 8000"
    assert redact_text(line) == line
    assert redact_text(["a plain-secret-value b"], ["plain-secret-value"]) == ["a %s b" % REDACTED]
    assert redact_text(None) is None


@pytest.mark.parametrize("name, secret", [
    ("HF_TOKEN", True), ("VLLM_API_KEY", True), ("OPENAI_APIKEY", True), ("S3_SECRET_ACCESS_KEY", True),
    ("DB_PASSWORD", True), ("AWS_SESSION_TOKEN", True), ("MY_SECRET_THING", True), ("GCP_CREDENTIALS", True),
    ("VLLM_MULTI_STREAM_GEMM_TOKEN_THRESHOLD", False), ("HF_TOKEN_PATH", False), ("OMP_NUM_THREADS", False),
    ("VLLM_CPU_KVCACHE_SPACE", False), ("MAX_TOKENS", False), ("GOOGLE_CREDENTIALS_FILE", False),
])
def test_secret_names(name, secret):
    assert vllm_units.is_secret_name(name) is secret


@pytest.mark.parametrize("extra_args, flag, variable", [
    (["--api-key", KEY], "--api-key", "vllm_service_api_key"),
    (["--api-key=" + KEY], "--api-key", "vllm_service_api_key"),
    (["--enforce-eager", "--api_key", KEY], "--api-key", "vllm_service_api_key"),
    (["--api-k", KEY], "--api-key", "vllm_service_api_key"),
    (["--hf-token", PLAIN_TOKEN], "--hf-token", "vllm_service_hf_token"),
    (["--hf-token=" + PLAIN_TOKEN], "--hf-token", "vllm_service_hf_token"),
    (["--watermark-config", '{"key": 1}'], "--watermark-config", "--config YAML file"),
    (["--watermark-config.key", "1"], "--watermark-config", "--config YAML file"),
    (["--host", "0.0.0.0"], "--host", "vllm_service_host"),
    (["--port=9000"], "--port", "vllm_service_port"),
])
def test_secret_flags_in_extra_args_are_refused_with_the_variable_to_use(extra_args, flag, variable):
    problems = secret_input_problems({"extra_args": extra_args})
    assert len(problems) == 1, problems
    assert problems[0].startswith("vllm_service_serving.extra_args: %s " % flag)
    assert variable in problems[0]
    assert KEY not in problems[0] and PLAIN_TOKEN not in problems[0]


def test_harmless_extra_args_pass():
    assert secret_input_problems({"extra_args": ["--enforce-eager", "--hf-token", "--api-server-count", "2",
                                                 "--watermark", "0.01", "--max-num-seqs", "256"]}) == []
    assert secret_input_problems({"extra_args": ["--hf-token"]}) == []


def test_secret_flags_in_a_plan_are_refused_too():
    problems = secret_input_problems({"plan_args": ["--tensor-parallel-size", "8", "--api-key", KEY]})
    assert [p.split(":")[0] for p in problems] == ["vllm_service_plan.vllm_args"]


def test_secret_names_in_the_plain_environment_point_to_the_secret_map():
    problems = secret_input_problems({"environment": {"VLLM_CPU_KVCACHE_SPACE": "1", "WANDB_API_KEY": "x"},
                                      "nccl_environment": {"NCCL_IB_DISABLE": "1"}})
    assert problems == ["vllm_service_environment: WANDB_API_KEY looks like a secret by its name; put it in "
                        "vllm_service_secret_env, which only the root-only 0600 environment file holds"]


def test_a_secret_value_anywhere_in_the_unit_is_refused_by_name_never_by_value():
    secret = "db-connection-secret-42"
    problems = secret_input_problems({
        "environment": {"DB_URL": "postgres://app@db/" + secret},
        "extra_args": ["--served-model-name", secret],
        "secret_environment": {"GAUNTLET_DB": secret, "SHORT": "1"},
        "other": {"vllm_service_model": "/models/" + TOKEN},
    })
    assert any(p.startswith("vllm_service_environment holds the value of the secret GAUNTLET_DB") for p in problems)
    assert any(p.startswith("vllm_service_serving.extra_args holds the value of the secret GAUNTLET_DB") for p in problems)
    assert any(p.startswith("vllm_service_model holds what looks like a Hugging Face token") for p in problems)
    assert not any(secret in p or TOKEN in p for p in problems)
    # A one-character secret is not searched for: "1" is everywhere.
    assert not any("SHORT" in p for p in problems)


def test_a_name_both_secret_and_plain_is_refused():
    problems = secret_input_problems({"environment": {"GAUNTLET_DB": "x"}, "secret_environment": {"GAUNTLET_DB": "y"}})
    assert problems == ["GAUNTLET_DB: set both as a secret and in the unit's plain environment; keep only the secret"]


@pytest.mark.parametrize("host, key, allow, expected", [
    ("auto", False, False, "127.0.0.1"),
    ("", False, False, "127.0.0.1"),
    (None, False, False, "127.0.0.1"),
    ("auto", True, False, "0.0.0.0"),
    ("auto", False, True, "0.0.0.0"),
    ("0.0.0.0", True, False, "0.0.0.0"),
    ("0.0.0.0", False, True, "0.0.0.0"),
    ("10.0.0.5", True, False, "10.0.0.5"),
    ("127.0.0.1", False, False, "127.0.0.1"),
    ("127.0.1.1", False, False, "127.0.1.1"),
    ("::1", False, False, "::1"),
    ("localhost", False, False, "localhost"),
])
def test_listen_host(host, key, allow, expected):
    assert listen_host(host, key, allow) == (expected, None)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.0.0.5", "gpu-box-01"])
def test_listen_host_refuses_other_machines_without_a_key(host):
    address, problem = listen_host(host, False, False)
    assert address == host
    assert "vllm_service_api_key" in problem and "vllm_service_allow_unauthenticated" in problem
    assert host in problem


def test_vllm_service_info_reports_redacted_argv():
    show = "\n".join([
        "Id=vllm-handwritten.service", "ActiveState=inactive", "SubState=dead", "UnitFileState=disabled", "MainPID=0",
        "ExecStart={ path=/opt/vllm/venv/bin/vllm ; argv[]=/opt/vllm/venv/bin/vllm serve /m --port 8001 --api-key %s "
        "--hf-token=%s ; ignore_errors=no ; start_time=[n/a] ; stop_time=[n/a] ; pid=0 ; code=(null) ; status=0/0 }"
        % (KEY, TOKEN),
        "Environment=", "FragmentPath=/etc/systemd/system/vllm-handwritten.service"])
    unit = vllm_units.describe_unit(vllm_units.parse_show(show)[0])
    assert unit["argv"] == ["/opt/vllm/venv/bin/vllm", "serve", "/m", "--port", "8001", "--api-key", REDACTED,
                            "--hf-token=" + REDACTED]
    assert unit["port"] == 8001 and unit["model"] == "/m"


def test_the_serving_values_environment_is_checked_like_the_units():
    problems = secret_input_problems({"serving_env": {"VLLM_USE_DEEP_GEMM": "1", "WANDB_API_KEY": "x"},
                                      "secret_environment": {"S3_SECRET": "s"}, "environment": {"S3_SECRET": "t"}})
    assert problems[0] == ("vllm_service_serving.env: WANDB_API_KEY looks like a secret by its name; put it in "
                           "vllm_service_secret_env, which only the root-only 0600 environment file holds")
    assert "S3_SECRET: set both as a secret and in the unit's plain environment; keep only the secret" in problems
    leaked = secret_input_problems({"serving_env": {"NOTE": "db-connection-secret-42"},
                                    "secret_environment": {"GAUNTLET_DB": "db-connection-secret-42"}})
    assert any(p.startswith("vllm_service_serving.env holds the value of the secret GAUNTLET_DB") for p in leaked)
