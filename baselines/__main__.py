"""``python -m baselines``: list every priority order, backfilling mode and placement rule."""

import sys

from baselines.registry import catalogue
from envs.core.cli import ArgumentParser

ArgumentParser(prog="python -m baselines", description=__doc__.split(": ", 1)[1]).parse_args(sys.argv[1:])
print(catalogue())
