"""``toolret promote --catalog NAME [--feedback DIR] [--receipts LOG...]``: does the challenger become champion?

The challenger (``models:/adapt-<catalog>@challenger``, :mod:`toolret.adapt.champions`) is promoted when it
wins on either evidence, each at ``p < ALPHA``:

- **held-out feedback** (``--feedback``, a ``toolret feedback`` folder): both models search its held-out
  queries (the newest traffic, never trained on); per-query ndcg@5, the paired randomization test of
  :func:`toolret.metrics.paired_test` (adapt's own test), the challenger's mean above the champion's;
- **interleaving** (``--receipts``, gateway logs with ``interleave`` on): the calls on the searches that
  interleaved these two versions credited to the team that showed the tool, and the binomial sign test
  over the searches with a non-tied credit (:mod:`toolret.feedback.interleaving`), more wins than losses.

Otherwise it stays challenger. Every decision -- promote or keep, with ``n``, wins, losses, ``p`` and the
metric values -- is logged as an MLflow run (``toolret-adapt`` experiment, the catalog's runs, run name
``<catalog>/promote``, tag ``toolret.kind = promotion``) and returned.

Promoting, with adapt's layout (``<out>/champion``, ``<out>/challenger``): the champion's folder is copied to
``<out>/previous``, the challenger's to ``<out>/champion`` (each replaced atomically), the challenger's
folder removed; the registry gets a version of each folder, aliases ``champion`` (tag ``promoted_from``:
the challenger's version) and ``previous`` (the champion before, tag ``was``), and loses ``challenger``.
Every alias thus names a folder holding its files, and the folder ``data/adapt/<catalog>/champion`` is the
champion a gateway reads: a running gateway that polls (``adapt_poll_s``) swaps to it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from toolret.adapt.champions import CHALLENGER, CHAMPION, PREVIOUS, alias_version, model_name
from toolret.adapt.run import EXPERIMENT, evaluate_pipeline
from toolret.atomic import atomic_directory
from toolret.catalog.model import Catalog, Tool
from toolret.errors import ToolretError
from toolret.feedback.interleaving import interleaving_credit, interleaving_verdict
from toolret.feedback.labelled_set import HELD_OUT, held_out_catalog, load_feedback
from toolret.metrics import paired_test
from toolret.paths import portable_path, project_dir
from toolret.pipeline import Pipeline
from toolret.tracking import get_client, get_or_create_experiment

ALPHA = 0.05
METRIC = "ndcg@5"


def version_id(model: str, version: Any) -> str:
    """How receipts and decisions name a model version: ``adapt-<catalog>/<version>``."""
    return f"{model}/{version}"


def version_folder(mv: Any) -> Path:
    source = Path(mv.source)
    return source if source.is_absolute() else project_dir() / source


def _tools(pipe: Any, folder: Path) -> Catalog:
    if not pipe.tool_records:
        raise ToolretError(f"{folder}: a saved pipeline without tools.jsonl: its tools are unknown")
    return Catalog(folder.name, [Tool(id=r["id"], name=r.get("name") or r["id"],
                                      docs={"original": r.get("description") or r["id"]})
                                 for r in pipe.tool_records], [], {})


def feedback_verdict(champion: str | Path, challenger: str | Path, feedback: str | Path,
                     metric: str = METRIC, alpha: float = ALPHA) -> dict[str, Any]:
    """Both saved indexes on the held-out queries of the ``toolret feedback`` folder ``feedback`` (their tools
    common to both): ``n``, the challenger's per-query ``wins`` / ``losses`` / ``ties`` on ``metric``, the
    two means, the paired randomization test's ``p`` and ``challenger_wins`` (higher mean, ``p < alpha``).

    Raises:
        CatalogError: a feedback folder that is not one (naming the file);
        ToolretError: an index without its tools.
    """
    pipes = {role: Pipeline.load(folder) for role, folder in ((CHAMPION, champion), (CHALLENGER, challenger))}
    tools = {role: _tools(pipe, Path(folder)) for (role, pipe), folder in zip(pipes.items(), (champion, challenger))}
    common = [t for t in tools[CHAMPION].tool_ids if t in set(tools[CHALLENGER].tool_ids)]
    fb = load_feedback(feedback, common)
    scores = {}
    for role, pipe in pipes.items():
        held = held_out_catalog(tools[role], fb)
        if not held.split(HELD_OUT):
            scores[role] = np.array([])
            continue
        _, per_query = evaluate_pipeline(pipe, held, HELD_OUT, role)
        scores[role] = per_query[metric]
    a, b = scores[CHALLENGER], scores[CHAMPION]
    n = len(a)
    p = float(paired_test(a, b, method="randomization", seed=13)["p_value"]) if n else 1.0
    means = {role: round(float(np.mean(s)), 4) if n else None for role, s in scores.items()}
    return {"test": f"paired randomization test of per-query {metric} on the held-out feedback",
            "feedback": str(feedback), "metric": metric, "n": n, "wins": int(np.sum(a > b)),
            "losses": int(np.sum(a < b)), "ties": int(np.sum(a == b)), "p": round(p, 6), "alpha": alpha,
            f"champion_{metric}": means[CHAMPION], f"challenger_{metric}": means[CHALLENGER],
            "challenger_wins": bool(n and np.mean(a) > np.mean(b) and p < alpha)}


def _promote_in_registry(client: Any, model: str, champ: Any, chall: Any) -> dict[str, Any]:
    """Move the aliases (and, in adapt's layout, the folders): see the module docstring."""
    champ_dir, chall_dir = version_folder(champ), version_folder(chall)
    moved = {"champion_before": str(champ_dir), "challenger": str(chall_dir)}
    if champ_dir.name == CHAMPION and chall_dir == champ_dir.parent / CHALLENGER:
        out = champ_dir.parent
        for src, dst in ((champ_dir, out / PREVIOUS), (chall_dir, out / CHAMPION)):
            with atomic_directory(dst) as tmp:
                shutil.copytree(src, tmp, dirs_exist_ok=True)
        shutil.rmtree(chall_dir, ignore_errors=True)
        prev = client.create_model_version(model, source=portable_path(str((out / PREVIOUS).resolve())),
                                           run_id=champ.run_id, description=champ.description,
                                           tags={**(champ.tags or {}), "role": PREVIOUS, "was": str(champ.version)})
        new = client.create_model_version(model, source=portable_path(str((out / CHAMPION).resolve())),
                                          run_id=chall.run_id, description=chall.description,
                                          tags={**(chall.tags or {}), "role": CHAMPION,
                                                "promoted_from": str(chall.version),
                                                "predecessor": str(champ.version)})
        prev_version, new_version = prev.version, new.version
        moved.update(champion=str(out / CHAMPION), previous=str(out / PREVIOUS))
    else:  # folders adapt did not lay out: the aliases only
        prev_version, new_version = champ.version, chall.version
    client.set_registered_model_alias(model, PREVIOUS, prev_version)
    client.set_registered_model_alias(model, CHAMPION, new_version)
    client.delete_registered_model_alias(model, CHALLENGER)
    return {**moved, "champion_version": str(new_version), "previous_version": str(prev_version)}


def promote(catalog: str, *, feedback: str | Path | None = None, receipts: list[str | Path] | None = None,
            tracking_uri: str | None = None, alpha: float = ALPHA) -> dict[str, Any]:
    """Decide (and apply) whether the challenger of ``catalog`` becomes champion; the decision, also logged
    to MLflow (see the module docstring).

    Raises:
        ToolretError: no evidence given, no champion or no challenger registered, a folder that is gone.
    """
    if feedback is None and not receipts:
        raise ToolretError("toolret promote: give --feedback DIR (held-out feedback) and/or --receipts LOG "
                           "(interleaved searches)")
    client = get_client(tracking_uri)
    model = model_name(catalog)
    champ, chall = alias_version(client, model, CHAMPION), alias_version(client, model, CHALLENGER)
    for alias, mv in ((CHAMPION, champ), (CHALLENGER, chall)):
        if mv is None:
            raise ToolretError(f"--catalog {catalog}: no {alias} registered (models:/{model}@{alias}); "
                               "toolret adapt registers a challenger once a champion exists")
        if not (version_folder(mv) / "pipeline.json").is_file():
            raise ToolretError(f"--catalog {catalog}: the {alias} (version {mv.version}) folder "
                               f"{version_folder(mv)} holds no saved pipeline")
    pair = (version_id(model, champ.version), version_id(model, chall.version))
    decision: dict[str, Any] = {"catalog": catalog, "model": model, "champion": pair[0], "challenger": pair[1],
                                "alpha": alpha, "feedback": None, "interleaving": None}
    if feedback is not None:
        decision["feedback"] = feedback_verdict(version_folder(champ), version_folder(chall), feedback,
                                                alpha=alpha)
    if receipts:
        credits, counts = interleaving_credit(list(receipts), pair=pair)
        decision["interleaving"] = {**interleaving_verdict(credits, alpha), "receipts": [str(r) for r in receipts],
                                    "searches_read": counts["searches"]}
    won = [k for k in ("feedback", "interleaving") if decision[k] and decision[k]["challenger_wins"]]
    decision["decision"] = "promote" if won else "keep"
    given = [k for k in ("feedback", "interleaving") if decision[k]]
    decision["why"] = (f"the challenger wins on {' and '.join(won)} (p < {alpha})" if won else
                       f"the challenger does not win on {' or '.join(given)} at p < {alpha}: it stays challenger")
    if won:
        decision["registry"] = _promote_in_registry(client, model, champ, chall)
    decision["mlflow_run_id"] = log_decision(client, EXPERIMENT, decision)
    return decision


def log_decision(client: Any, experiment: str, d: dict[str, Any]) -> str:
    exp = get_or_create_experiment(client, experiment)
    run = client.create_run(exp, run_name=f"{d['catalog']}/promote",
                            tags={"toolret.catalog": d["catalog"], "toolret.kind": "promotion",
                                  "toolret.decision": d["decision"]})
    rid = run.info.run_id
    for k in ("champion", "challenger", "alpha", "decision"):
        client.log_param(rid, k, d[k])
    for evidence in ("feedback", "interleaving"):
        for k, v in (d[evidence] or {}).items():
            if isinstance(v, (int, float)):  # a bool as 0 / 1
                client.log_metric(rid, f"{evidence}.{k.replace('@', '_at_')}", float(v))
    client.log_text(rid, json.dumps(d, indent=1, default=str), "decision.json")
    client.set_terminated(rid)
    return rid


def champion_held_up(catalog: str, feedback: str | Path, tracking_uri: str | None = None) -> dict[str, Any]:
    """The promoted champion against its predecessor (alias ``previous``) on the held-out (newest) feedback:
    ``passed`` unless the champion's mean is lower with paired ``p < 0.05``; ``None`` verdict where there is
    no predecessor or no feedback yet."""
    client = get_client(tracking_uri)
    champ = alias_version(client, model_name(catalog), CHAMPION)
    prev = alias_version(client, model_name(catalog), PREVIOUS)
    if champ is None or prev is None or not (Path(feedback) / "queries.jsonl").is_file():
        return {"passed": True, "verdict": None, "why": "no promoted champion with a predecessor, or no feedback"}
    v = feedback_verdict(version_folder(prev), version_folder(champ), feedback)  # "challenger" = the champion
    worse = v["n"] and v["challenger_ndcg@5"] < v["champion_ndcg@5"] and v["p"] < v["alpha"]
    return {"passed": not worse, "verdict": v,
            "why": (f"champion v{champ.version} ndcg@5 {v['challenger_ndcg@5']} vs predecessor v{prev.version} "
                    f"{v['champion_ndcg@5']} on {v['n']} held-out feedback queries (paired p {v['p']})")}


def format_decision(d: dict[str, Any]) -> str:
    lines = [f"promote {d['catalog']}: {d['decision'].upper()} -- {d['why']}",
             f"  champion {d['champion']}, challenger {d['challenger']}"]
    f = d.get("feedback")
    if f:
        lines.append(f"  held-out feedback: n {f['n']}, challenger wins {f['wins']} / losses {f['losses']} / ties "
                     f"{f['ties']}; {f['metric']} champion {f['champion_' + f['metric']]} vs challenger "
                     f"{f['challenger_' + f['metric']]}; paired p {f['p']}")
    i = d.get("interleaving")
    if i:
        lines.append(f"  interleaving: {i['searches_with_clicks']} searches with clicks, n {i['n']} non-tied: "
                     f"challenger wins {i['wins']} / losses {i['losses']}; sign test p {i['p']}")
    return "\n".join(lines)


__all__ = ["ALPHA", "METRIC", "champion_held_up", "feedback_verdict", "format_decision", "promote", "version_folder", "version_id"]
