#!/usr/bin/env bash
# The screenshot of the default run's report.html in docs/figures/ (the README shows it): the Quickstart's
# evaluation into runs/report-default, then the top of its report in headless Chromium (apt-get install chromium).
# About a minute on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
python evaluate.py --out runs/report-default
python -m evaluation.report runs/report-default --screenshot docs/figures/report-default.png
