"""``python -m baselines``: list every priority order, backfilling mode and placement rule."""

from baselines.registry import catalogue

print(catalogue())
