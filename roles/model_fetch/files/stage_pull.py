# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pull a checkpoint from a staging host's transient HTTP server, on the target host.

Run by the model_fetch role with the target's system Python (standard library only). Arguments
come as one JSON object on stdin: ``url`` (the server's base URL), ``dest`` (the model directory
here), ``files`` (name relative to dest -> {"size": bytes}, from the staging host's listing) and
``workers`` (files pulled in parallel). A file already here with its listed size is skipped
(model_verify judges its content afterwards); any other is written to ``<name>.gauntlet-part``
and renamed into place once its listed size has arrived, so a cut transfer never leaves a file
that looks complete. Prints one JSON object: the files pulled and their bytes. A failure names
the file and exits 1.
"""

import json
import os
import shutil
import sys
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import quote
from urllib.request import urlopen

PART_SUFFIX = ".gauntlet-part"
CHUNK = 4 * 1024 * 1024


def pull_one(url, dest, name, size):
    """Pull ``name`` unless it is already here with ``size`` bytes; return the bytes pulled."""
    target = os.path.join(dest, name)
    if os.path.isfile(target) and os.path.getsize(target) == size:
        return 0
    os.makedirs(os.path.dirname(target), exist_ok=True)
    part = target + PART_SUFFIX
    with urlopen("%s/%s" % (url.rstrip("/"), quote(name)), timeout=60) as response, open(part, "wb") as handle:
        shutil.copyfileobj(response, handle, CHUNK)
    got = os.path.getsize(part)
    if got != size:
        raise IOError("received %d bytes, the staging host listed %d" % (got, size))
    os.chmod(part, 0o644)
    os.replace(part, target)
    return size


def main():
    args = json.load(sys.stdin)
    files = args["files"]
    pulled, errors = {}, []
    with ThreadPoolExecutor(max_workers=max(1, int(args.get("workers") or 4))) as pool:
        futures = {name: pool.submit(pull_one, args["url"], args["dest"], name, int(entry["size"]))
                   for name, entry in sorted(files.items())}
        for name, future in futures.items():
            try:
                count = future.result()
            except Exception as exc:  # every failure is reported, naming its file
                errors.append("%s: %s" % (name, exc))
                continue
            if count:
                pulled[name] = count
    if errors:
        sys.stderr.write("pulling from %s failed: %s\n" % (args["url"], "; ".join(errors)))
        sys.exit(1)
    print(json.dumps({"pulled": sorted(pulled), "bytes": sum(pulled.values())}))


if __name__ == "__main__":
    main()
