"""Write the JSON Schemas of the files users write to docs/schemas/ (from the pydantic models of
:mod:`envs.core.schema`), so that an editor completes and checks the YAML (e.g. a ``# yaml-language-server:
$schema=...`` line at the top of a scenario file).

    python docs/make_schemas.py            # rewrite the schemas
    python docs/make_schemas.py --check    # exit 1 if a schema is stale (the tests run this)
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agents.experiment import ExperimentFile  # noqa: E402
from baselines.config import PolicyConfigFile  # noqa: E402
from envs.core.dynamics import ScenarioFile  # noqa: E402
from envs.core.files import write_text_atomically  # noqa: E402
from envs.core.presets import ClusterFile  # noqa: E402
from evaluation.slurm_replay import SlurmCaseFile  # noqa: E402

SCHEMAS = {"cluster": ClusterFile, "experiment": ExperimentFile, "policy-config": PolicyConfigFile,
           "scenario": ScenarioFile, "slurm-case": SlurmCaseFile}
"""File kind -> its model; the schema goes to ``docs/schemas/KIND.schema.json``."""
FOLDER = ROOT / "docs" / "schemas"


def finite(node: Any) -> Any:
    """The schema with every non-finite default (``.inf``: never) left out and said in the description: JSON
    has no infinity."""
    if isinstance(node, dict):
        out = {k: finite(v) for k, v in node.items() if not (k == "default" and isinstance(v, float)
                                                             and not math.isfinite(v))}
        if len(out) < len(node):
            out["description"] = f"{out.get('description', '')} (default: .inf, never)".strip()
        return out
    if isinstance(node, list):
        return [finite(item) for item in node]
    return node


def text(kind: str) -> str:
    """The JSON Schema of file kind ``kind``, as written."""
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", **finite(SCHEMAS[kind].model_json_schema())}
    return json.dumps(schema, indent=2, allow_nan=False) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a schema file is stale")
    args = parser.parse_args()
    stale = [kind for kind in SCHEMAS if not (FOLDER / f"{kind}.schema.json").exists()
             or (FOLDER / f"{kind}.schema.json").read_text() != text(kind)]
    if args.check:
        for kind in stale:
            print(f"docs/schemas/{kind}.schema.json is stale: run python docs/make_schemas.py", file=sys.stderr)
        return 1 if stale else 0
    FOLDER.mkdir(exist_ok=True)
    for kind in SCHEMAS:
        write_text_atomically(FOLDER / f"{kind}.schema.json", text(kind))
        print(f"wrote docs/schemas/{kind}.schema.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
