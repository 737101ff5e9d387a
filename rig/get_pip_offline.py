"""Stand-in for ansible-test's pip bootstrap script (get-pip.py), which it downloads from a host
this machine cannot reach. It does what get-pip.py does, `pip install <args>`, running pip out of
a wheel taken from PyPI by scripts/rig.sh, which substitutes the wheel's path below.
"""
import os
import sys

PIP_WHEEL = "@PIP_WHEEL@"

# get-pip.py's own flags; pip itself does not know them.
args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
sys.path.insert(0, PIP_WHEEL)
from pip._internal.cli.main import main  # noqa: E402  (importable only once the wheel is on the path)

sys.exit(main(["install", "--upgrade", "--force-reinstall", "--find-links", os.path.dirname(PIP_WHEEL)] + args))
