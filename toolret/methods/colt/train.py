"""COLT training: list sampling, Adam over the dual-view model, dev-split selection and early stopping.

Dev queries (carved from train, never in a graph) are scored exactly as test queries will be: isolated
nodes represented by their semantic embedding, against the tool-view tool representations of the full
(no-dropout) train graph. Test queries are never read here.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from toolret.errors import CatalogError
from toolret.methods.colt.config import ColtConfig
from toolret.methods.colt.graphs import TrainGraphs
from toolret.metrics import aggregate, per_query_metrics


def sample_lists(gold: Sequence[Sequence[int]], n_tools: int, list_size: int,
                 rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Each query's candidate list: its gold tools, then uniformly sampled distinct non-gold tools up to
    ``list_size``; returns ``(candidates [n_q, L] int64, labels [n_q, L] float32)``."""
    n_q = len(gold)
    too_many = [i for i, g in enumerate(gold) if len(g) >= list_size]
    if too_many:
        raise CatalogError(f"colt: list_size={list_size} must exceed every train query's number of gold tools "
                           f"(train query #{too_many[0]} has {len(gold[too_many[0]])}); raise colt.list_size")
    if n_tools < list_size:
        raise CatalogError(f"colt: list_size={list_size} exceeds the catalog's {n_tools} tools")
    keys = rng.random((n_q, n_tools))
    for i, g in enumerate(gold):
        keys[i, list(g)] = 2.0  # gold never sampled as a negative
    # the list_size smallest keys of a row: a uniform random subset of its non-gold tools
    negatives = np.sort(np.argpartition(keys, list_size - 1, axis=1)[:, :list_size], axis=1)
    candidates = np.empty((n_q, list_size), dtype=np.int64)
    labels = np.zeros((n_q, list_size), dtype=np.float32)
    for i, g in enumerate(gold):
        candidates[i, :len(g)] = g
        candidates[i, len(g):] = negatives[i, :list_size - len(g)]
        labels[i, :len(g)] = 1.0
    return candidates, labels


def dev_metrics(tools: np.ndarray, dev_features: np.ndarray, dev_gold: Sequence[Sequence[int]], k: int,
                tool_ids: Sequence[str]) -> dict[str, float]:
    """Recall@k and COMP@k of isolated dev queries (semantic embedding vs. the tool representations)."""

    tn = tools / np.maximum(np.linalg.norm(tools, axis=1, keepdims=True), 1e-12)
    scores = dev_features @ tn.T
    top = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    ranked = {str(i): [tool_ids[j] for j in row] for i, row in enumerate(top)}
    gold = {str(i): {tool_ids[j] for j in g} for i, g in enumerate(dev_gold)}
    _, pq = per_query_metrics(ranked, gold, [k])
    m = aggregate(pq)
    return {f"recall@{k}": m[f"recall@{k}"], f"comp@{k}": m[f"comp@{k}"]}


@dataclass
class TrainResult:
    tools: np.ndarray  # the selected state's inference tool representations [n_t, d]
    scenes: dict[str, np.ndarray]
    report: dict[str, Any] = field(default_factory=dict)  # deterministic (a DVC output)
    run_info: dict[str, Any] = field(default_factory=dict)  # timings (the run-info sidecar)


def train_colt(graphs: TrainGraphs, query_features: np.ndarray, tool_features: np.ndarray,
               dev_features: np.ndarray, dev_gold: Sequence[Sequence[int]], config: ColtConfig,
               progress: bool = True) -> TrainResult:
    """Train on the graphs' train queries; keep the dev-selected state (see :mod:`toolret.methods.colt.config`)."""
    import torch
    from tqdm import tqdm

    from toolret.methods.colt.model import ColtModel, graph_tensors

    if len(dev_gold) == 0:
        raise CatalogError("colt: model selection needs a dev split carved from train (catalog.dev_fraction > 0)")
    t0 = time.perf_counter()
    torch.manual_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    model = ColtModel(query_features, tool_features, graphs, config.views, config.num_layers)
    opt = torch.optim.Adam(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    full = graph_tensors(graphs)
    k = config.select_k

    def evaluate() -> tuple[np.ndarray, dict[str, float]]:
        model.eval()
        tools = model.inference_tools(full)
        return tools, dev_metrics(tools, dev_features, dev_gold, k, graphs.tool_ids)

    tools, m = evaluate()
    best = {"epoch": 0, **m}
    best_tools, best_scenes = tools, model.scene_representations(full)
    curve = [{"epoch": 0, **m}]
    since_best = 0
    bar = tqdm(range(1, config.max_epochs + 1), desc="colt epochs", disable=not progress)
    for epoch in bar:
        model.train()
        g = graph_tensors(graphs, config.edge_dropout, rng) if config.edge_dropout > 0 else full
        candidates, labels = sample_lists(graphs.gold, graphs.n_tools, config.list_size, rng)
        order = rng.permutation(graphs.n_queries)
        losses = []
        for start in range(0, len(order), config.batch_size):
            rows = torch.from_numpy(order[start:start + config.batch_size])
            opt.zero_grad()
            loss, parts = model.loss(g, rows, torch.from_numpy(candidates[rows.numpy()]),
                                     torch.from_numpy(labels[rows.numpy()]), config.c_lambda, config.c_temp)
            loss.backward()
            opt.step()
            losses.append({"loss": float(loss.detach()), **parts})
        tools, m = evaluate()
        row = {"epoch": epoch, **m, **{key: float(np.mean([x[key] for x in losses])) for key in losses[0]}}
        curve.append(row)
        if m[f"recall@{k}"] > best[f"recall@{k}"] and m[f"comp@{k}"] > best[f"comp@{k}"]:
            best = {"epoch": epoch, **m}
            best_tools, best_scenes = tools, model.scene_representations(full)
            since_best = 0
        else:
            since_best += 1
        bar.set_postfix(loss=f"{row['loss']:.4f}", dev_r=f"{m[f'recall@{k}']:.3f}", dev_c=f"{m[f'comp@{k}']:.3f}",
                        best=best["epoch"])
        if since_best >= config.patience:
            break
    report = {"best": best, "epochs_run": curve[-1]["epoch"], "curve": curve, "graphs": graphs.stats(),
              "dev_queries": len(dev_gold)}
    return TrainResult(best_tools, best_scenes, report, {"train_s": round(time.perf_counter() - t0, 1)})


__all__ = ["TrainResult", "dev_metrics", "sample_lists", "train_colt"]
