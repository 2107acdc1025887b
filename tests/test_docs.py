"""The documentation that follows the code is current: docs/env.md is what docs/make_env_md.py makes of the envs'
docstrings and configs, docs/schemas/ what docs/make_schemas.py makes of the file models, the Slurm-steering page
what its script makes of the live records, and the README's policy-name grammar names every registered part."""

from __future__ import annotations

import subprocess
import sys

from paths import ROOT


def test_env_reference_is_generated_from_the_docstrings():
    done = subprocess.run([sys.executable, str(ROOT / "docs" / "make_env_md.py"), "--check"], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_json_schemas_are_generated_from_the_models():
    done = subprocess.run([sys.executable, str(ROOT / "docs" / "make_schemas.py"), "--check"], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_the_slurm_steering_page_is_what_the_records_give():
    done = subprocess.run([sys.executable, str(ROOT / "docs" / "results" / "slurm_steering.py"), "--date",
                           "2026-12-02", "--check"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_readme_names_every_policy_part():
    from baselines.backfill import BACKFILL_DOCS
    from baselines.orders import ORDER_DOCS
    from baselines.preemption import PREEMPT_SUFFIX
    from baselines.tiresias import TIRESIAS_DOCS
    from envs.placement import PLACEMENT_DOCS

    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("### Policy names"):readme.index("## Benchmarks")]
    parts = (*ORDER_DOCS, *BACKFILL_DOCS, *PLACEMENT_DOCS, PREEMPT_SUFFIX)
    missing = [name for name in parts if f"`{name}`" not in section]
    missing += [name for name in TIRESIAS_DOCS if f"`{name}[/PLACEMENT]`" not in section]
    assert missing == [], f"README's policy names lack {missing}"
