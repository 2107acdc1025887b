"""report.html of a train.py run folder: the learning curves from its TensorBoard events beside its final table.

A training run folder (``train.py``) holds ``config.yaml``, ``tb/`` (TensorBoard events: one folder per training
session, ``ppo_0``, ``ppo_1`` after a resume, ...), ``best_model.json`` when periodic validation ran, and ``eval/``,
the run folder of its final evaluation (:mod:`evaluation.report`). The page shows the experiment's config, the best
validation score, one chart per scalar of the events (a validation metric beside the teacher heuristic's value on
the same episodes, ``eval/heuristic_KEY``, dashed), then the final evaluation's comparison table with a link to its
own report.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from envs.core.errors import ConfigError
from envs.core.files import write_text_atomically
from evaluation.html_report import esc, page, table_section
from evaluation.report_charts import figure_div, go, styled

HEURISTIC_PREFIX = "eval/heuristic_"
"""Events of the teacher heuristic on the validation episodes: drawn beside the agent's ``eval/KEY``."""

Curves = dict[str, tuple[list[int], list[float]]]
"""Scalar tag → (environment steps, values), steps in increasing order."""


def is_training_folder(folder: Path) -> bool:
    """Whether ``folder`` is a train.py run folder (config.yaml and tb/)."""
    return (folder / "config.yaml").is_file() and (folder / "tb").is_dir()


def learning_curves(tb_dir: Path) -> Curves:
    """Every scalar of the TensorBoard events under ``tb_dir``, the sessions of a resumed run joined by step (a
    step logged twice keeps its last value)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    merged: dict[str, dict[int, float]] = {}
    for session in sorted({path.parent for path in tb_dir.rglob("events.out.tfevents.*")}):
        events = EventAccumulator(str(session), size_guidance={"scalars": 0})
        events.Reload()
        for tag in events.Tags()["scalars"]:
            merged.setdefault(tag, {}).update({event.step: event.value for event in events.Scalars(tag)})
    return {tag: (sorted(points), [points[step] for step in sorted(points)]) for tag, points in sorted(merged.items())}


def curve_figures(curves: Curves) -> list[Any]:
    """One chart per scalar tag (but the heuristic's, which joins its agent metric's chart, dashed)."""
    figures = []
    for tag, (steps, values) in curves.items():
        if tag.startswith(HEURISTIC_PREFIX):
            continue
        fig = styled(go().Figure(), tag, "environment steps", tag.rsplit("/", 1)[-1])
        fig.add_scatter(x=steps, y=values, mode="lines+markers", name="agent" if tag.startswith("eval/") else tag)
        teacher = curves.get(tag.replace("eval/", HEURISTIC_PREFIX, 1)) if tag.startswith("eval/") else None
        if teacher is not None:
            fig.add_scatter(x=teacher[0], y=teacher[1], mode="lines+markers", name="teacher heuristic",
                            line={"dash": "dash"})
        fig.update_layout(height=360)
        figures.append(fig)
    return figures


def render_training(folder: Path, document: Mapping[str, Any] | None, rows: Sequence[Mapping[str, Any]]) -> str:
    """The page of a training run folder; ``document`` and ``rows``: its final evaluation's summary and rows (None:
    no final evaluation yet)."""
    config = (folder / "config.yaml").read_text()
    best = folder / "best_model.json"
    best_text = json.dumps(json.loads(best.read_text()), indent=1) if best.is_file() else "(no periodic validation)"
    curves = learning_curves(folder / "tb")
    divs = "".join(figure_div(fig, f"curve-{i}") for i, fig in enumerate(curve_figures(curves)))
    charts = f'<div class="grid">{divs}</div>' if divs else '<p class="note">No scalar in the TensorBoard events.</p>'
    final = ('<p class="note">No final evaluation yet (eval/ is written when training ends).</p>' if document is None
             else '<p><a href="eval/report.html">The final evaluation\'s own report</a> (charts, Gantt chart).</p>'
             + table_section(document["results"], rows))
    return page(f"gpusched training run {folder.name}",
                f"<h2>Experiment</h2><pre>{esc(config)}</pre><h2>Best model on validation</h2><pre>"
                f"{esc(best_text)}</pre><h2>Learning curves</h2>{charts}<h2>Final evaluation</h2>{final}")


def write_training_report(folder: Path, document: Mapping[str, Any] | None,
                          rows: Sequence[Mapping[str, Any]]) -> Path:
    """Write ``folder/report.html`` for a training run folder (atomically); return its path."""
    if not is_training_folder(folder):
        raise ConfigError(f"{folder}: not a train.py run folder (no config.yaml and tb/)")
    path = folder / "report.html"
    write_text_atomically(path, render_training(folder, document, rows))
    return path
