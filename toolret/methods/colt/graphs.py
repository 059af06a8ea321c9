"""COLT's three bipartite graphs (Q-T query-tool, Q-S query-scene, S-T scene-tool), built from the TRAIN
split only, and their normalisations (scipy sparse; no torch here).

A *scene* is a distinct gold tool set of a train query. Dev and test queries never enter a graph: they are
isolated nodes at inference, represented by their semantic embedding. :func:`build_train_graphs` takes
the queries of one split (``train``) and nothing else, and records which query ids it used so a test can
check that no dev / test edge leaked in.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from toolret.catalog.model import Catalog
from toolret.errors import CatalogError


@dataclass
class TrainGraphs:
    """The train-split graphs of one catalog.

    Attributes:
        query_ids: the train queries, one graph row each (only queries with gold tools).
        tool_ids: the catalog's tools (graph columns of Q-T and S-T), in catalog order.
        scenes: each scene's tool positions (sorted), in a deterministic order.
        qt, qs, st: binary ``csr_matrix`` adjacency of Q-T ``[n_q, n_t]``, Q-S ``[n_q, n_s]``, S-T ``[n_s, n_t]``.
        gold: each train query's gold tool positions (sorted).
        scene_of: each train query's scene index ``[n_q]``.
    """

    query_ids: list[str]
    tool_ids: list[str]
    scenes: list[tuple[int, ...]]
    qt: sp.csr_matrix
    qs: sp.csr_matrix
    st: sp.csr_matrix
    gold: list[tuple[int, ...]]
    scene_of: np.ndarray

    @property
    def n_queries(self) -> int:
        return len(self.query_ids)

    @property
    def n_tools(self) -> int:
        return len(self.tool_ids)

    @property
    def n_scenes(self) -> int:
        return len(self.scenes)

    def stats(self) -> dict[str, int]:
        return {"train_queries": self.n_queries, "tools": self.n_tools, "scenes": self.n_scenes,
                "qt_edges": int(self.qt.nnz), "qs_edges": int(self.qs.nnz), "st_edges": int(self.st.nnz)}


def _binary(rows: list[int], cols: list[int], shape: tuple[int, int]) -> sp.csr_matrix:
    m = sp.coo_matrix((np.ones(len(rows), dtype=np.float32), (rows, cols)), shape=shape).tocsr()
    m.data[:] = 1.0  # duplicate pairs count once
    return m


def build_train_graphs(catalog: Catalog, split: str = "train") -> TrainGraphs:
    """Q-T, Q-S and S-T from the judged queries of ``split`` (the train split; nothing else enters).

    Raises:
        CatalogError: the split has no judged query, or a judged tool is not in the catalog.
    """
    queries = catalog.split(split)
    if not queries:
        raise CatalogError(f"colt: dataset {catalog.name!r} has no judged queries in split {split!r} to build "
                           "its graphs from")
    position = {t: i for i, t in enumerate(catalog.tool_ids)}
    gold: list[tuple[int, ...]] = []
    for q in queries:
        missing = sorted(t for t in catalog.gold(q.id) if t not in position)
        if missing:
            raise CatalogError(f"colt: query {q.id!r} of {catalog.name!r} judges unknown tool {missing[0]!r}")
        gold.append(tuple(sorted(position[t] for t in catalog.gold(q.id))))
    scenes = sorted(set(gold))
    scene_index = {s: i for i, s in enumerate(scenes)}
    scene_of = np.array([scene_index[g] for g in gold], dtype=np.int64)
    n_q, n_t, n_s = len(queries), len(position), len(scenes)
    qt = _binary([i for i, g in enumerate(gold) for _ in g], [t for g in gold for t in g], (n_q, n_t))
    qs = _binary(list(range(n_q)), scene_of.tolist(), (n_q, n_s))
    st = _binary([i for i, s in enumerate(scenes) for _ in s], [t for s in scenes for t in s], (n_s, n_t))
    return TrainGraphs([q.id for q in queries], list(catalog.tool_ids), scenes, qt, qs, st, gold, scene_of)


def sym_normalise(adj: sp.spmatrix) -> sp.csr_matrix:
    """LightGCN's symmetric normalisation of a bipartite adjacency: ``D_r^-1/2 A D_c^-1/2`` (row and column
    degrees; +1e-8 as in the authors' code, so isolated nodes get all-zero rows)."""
    adj = sp.csr_matrix(adj, dtype=np.float32)
    rows = 1.0 / (np.sqrt(np.asarray(adj.sum(axis=1)).ravel()) + 1e-8)
    cols = 1.0 / (np.sqrt(np.asarray(adj.sum(axis=0)).ravel()) + 1e-8)
    return (sp.diags(rows.astype(np.float32)) @ adj @ sp.diags(cols.astype(np.float32))).tocsr()


def row_normalise(adj: sp.spmatrix) -> sp.csr_matrix:
    """Mean pooling over a node's neighbours: ``D_r^-1 A`` (a scene = the mean of its tools, paper Eq. 5)."""
    adj = sp.csr_matrix(adj, dtype=np.float32)
    rows = 1.0 / (np.asarray(adj.sum(axis=1)).ravel() + 1e-8)
    return (sp.diags(rows.astype(np.float32)) @ adj).tocsr()


def edge_dropout(adj: sp.spmatrix, ratio: float, rng: np.random.Generator) -> sp.csr_matrix:
    """Drop each (undirected) edge with probability ``ratio`` (kept edges keep weight 1)."""
    adj = sp.coo_matrix(adj, dtype=np.float32)
    if ratio <= 0:
        return adj.tocsr()
    keep = rng.random(adj.nnz) >= ratio
    return sp.coo_matrix((adj.data[keep], (adj.row[keep], adj.col[keep])), shape=adj.shape).tocsr()


__all__ = ["TrainGraphs", "build_train_graphs", "edge_dropout", "row_normalise", "sym_normalise"]
