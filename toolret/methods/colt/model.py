"""COLT's collaborative-learning stage in torch: propagation, scoring and the two losses (one paper
equation per function), and the dual-view model whose trainable parameters are the train queries' and
the tools' layer-0 features (initialised from the semantic encoder).

Importing this module imports torch: only :mod:`toolret.methods.colt.train` and the tests do.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import torch
import torch.nn.functional as F

from toolret.methods.colt.graphs import TrainGraphs, edge_dropout, row_normalise, sym_normalise


def to_torch_sparse(m: sp.spmatrix) -> torch.Tensor:
    """A scipy matrix as a torch CSR tensor (constant: no gradient flows into the graph)."""
    m = sp.csr_matrix(m, dtype=np.float32)
    m.sort_indices()
    with warnings.catch_warnings():  # "sparse CSR support is in beta": the products used here are stable
        warnings.simplefilter("ignore", UserWarning)
        return torch.sparse_csr_tensor(torch.from_numpy(m.indptr.astype(np.int64)),
                                       torch.from_numpy(m.indices.astype(np.int64)), torch.from_numpy(m.data),
                                       size=m.shape, check_invariants=False)


class _SpMM(torch.autograd.Function):
    """``adj @ x`` for a constant sparse ``adj`` whose transpose is given: the backward is ``adj_t @ grad``
    (a CSR product, several times faster on CPU than autograd through a sparse tensor)."""

    @staticmethod
    def forward(ctx, adj, adj_t, x):
        ctx.adj_t = adj_t
        return torch.sparse.mm(adj, x)

    @staticmethod
    def backward(ctx, grad):
        return None, None, torch.sparse.mm(ctx.adj_t, grad)


def spmm(adj: torch.Tensor, adj_t: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    return _SpMM.apply(adj, adj_t, x)


def propagate(adj: torch.Tensor, adj_t: torch.Tensor, a0: torch.Tensor, b0: torch.Tensor, num_layers: int,
              rows: torch.Tensor | None = None,
              adj_rows: tuple[torch.Tensor, torch.Tensor] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """LightGCN on a bipartite graph with the authors' scaling (paper Eqs. 4, 6-9; ``one_propagate``).

    ``adj`` is the symmetric-normalised ``[n_a, n_b]`` adjacency (``adj_t`` its transpose). Per layer l
    (0-based): ``a <- adj @ b / (l + 2)``, ``b <- adj_t @ a / (l + 2)`` (simultaneously); each layer's output
    is L2-normalised; the final representation is layer 0 (unnormalised) plus the normalised layers.
    An isolated node keeps its layer-0 features (its propagated rows are zero).

    With ``rows`` (and ``adj_rows`` = ``adj[rows]`` and its transpose) only those rows of the final ``a`` are
    returned, and the last layer computes no other ``a`` row (same values; a training batch needs only its
    own queries).
    """
    a, b = a0, b0
    sum_a = a0 if rows is None else a0[rows]
    sum_b = b0
    for layer in range(num_layers):
        new_b = spmm(adj_t, adj, a) / (layer + 2)
        if rows is not None and layer == num_layers - 1:
            new_a = spmm(adj_rows[0], adj_rows[1], b) / (layer + 2)
            sum_a = sum_a + F.normalize(new_a, p=2, dim=1)
        else:
            new_a = spmm(adj, adj_t, b) / (layer + 2)
            sum_a = sum_a + F.normalize(new_a if rows is None else new_a[rows], p=2, dim=1)
        a, b = new_a, new_b
        sum_b = sum_b + F.normalize(b, p=2, dim=1)
    return sum_a, sum_b


def colt_scores(query_views: list[torch.Tensor], tools: torch.Tensor,
                candidates: torch.Tensor | None = None) -> torch.Tensor:
    """Score(q, t) = cos(q_tool-view, t) + cos(q_scene-view, t) (paper Eq. 12; ``t`` = the tool-view tool).

    ``query_views``: one ``[B, d]`` tensor per view; ``tools``: ``[n_t, d]``; ``candidates``: ``[B, L]`` tool
    indices (scores ``[B, L]``) or ``None`` (every tool, ``[B, n_t]``). A single view counts twice, so
    scores keep the two-view range [-2, 2].
    """
    tn = F.normalize(tools, p=2, dim=-1)
    total = sum(F.normalize(q, p=2, dim=-1) @ tn.T for q in query_views) * (2.0 / len(query_views))
    return total if candidates is None else torch.gather(total, 1, candidates)


def listwise_loss(scores: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """List-wise multi-label loss (paper Eqs. 13-14; ``cal_multi_label_loss``): softmax over each list's
    scores vs. the labels normalised to sum 1, element-wise binary cross-entropy, mean over all entries."""
    pred = torch.softmax(scores, dim=1)
    target = labels / labels.sum(dim=1, keepdim=True)
    eps = 1e-12
    return -(target * torch.log(pred + eps) + (1 - target) * torch.log(1 - pred + eps)).mean()


def info_nce(a: torch.Tensor, b: torch.Tensor, temperature: float) -> torch.Tensor:
    """Cross-view InfoNCE (paper Eqs. 10-11; ``cal_c_loss``): row i of ``a`` against row i of ``b`` (positive)
    and every other row of ``b`` (negatives), cosine similarity over ``temperature``."""
    an, bn = F.normalize(a, p=2, dim=1), F.normalize(b, p=2, dim=1)
    logits = an @ bn.T / temperature
    return F.cross_entropy(logits, torch.arange(len(a)))


@dataclass
class GraphTensors:
    """One (possibly edge-dropped) instance of the three graphs, ready for propagation."""

    qt: torch.Tensor
    qt_t: torch.Tensor
    qs: torch.Tensor
    qs_t: torch.Tensor
    scene_mean: torch.Tensor  # row-normalised S-T: a scene = mean of its tools
    scene_mean_t: torch.Tensor
    qt_sp: sp.csr_matrix  # the normalised matrices, for row slices
    qs_sp: sp.csr_matrix

    def row_slice(self, which: str, rows: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        """``(adj[rows], adj[rows].T)`` of ``qt`` or ``qs`` as torch tensors."""
        part = getattr(self, f"{which}_sp")[rows]
        return to_torch_sparse(part), to_torch_sparse(part.T)


def graph_tensors(graphs: TrainGraphs, dropout: float = 0.0, rng: np.random.Generator | None = None) -> GraphTensors:
    """Normalised tensors of the graphs, each edge dropped with probability ``dropout`` first."""
    if dropout > 0 and rng is None:
        raise ValueError("edge dropout needs a random generator")
    qt = sym_normalise(edge_dropout(graphs.qt, dropout, rng) if dropout > 0 else graphs.qt)
    qs = sym_normalise(edge_dropout(graphs.qs, dropout, rng) if dropout > 0 else graphs.qs)
    st = row_normalise(edge_dropout(graphs.st, dropout, rng) if dropout > 0 else graphs.st)
    return GraphTensors(to_torch_sparse(qt), to_torch_sparse(qt.T), to_torch_sparse(qs), to_torch_sparse(qs.T),
                        to_torch_sparse(st), to_torch_sparse(st.T), qt, qs)


class ColtModel(torch.nn.Module):
    """Dual-view graph model. Parameters: train-query and tool layer-0 features (from the semantic encoder);
    a scene's layer-0 feature is the mean of its tools' (S-T without dropout)."""

    def __init__(self, query_features: np.ndarray, tool_features: np.ndarray, graphs: TrainGraphs,
                 views: str = "both", num_layers: int = 1) -> None:
        super().__init__()
        if views not in ("both", "tool", "scene"):
            raise ValueError(f"views must be both, tool or scene, got {views!r}")
        self.queries = torch.nn.Parameter(torch.tensor(np.asarray(query_features), dtype=torch.float32))
        self.tools = torch.nn.Parameter(torch.tensor(np.asarray(tool_features), dtype=torch.float32))
        self.views = views
        self.num_layers = num_layers
        scene_init = row_normalise(graphs.st)
        self.scene_init, self.scene_init_t = to_torch_sparse(scene_init), to_torch_sparse(scene_init.T)
        self.scene_of = torch.from_numpy(graphs.scene_of)

    def representations(self, g: GraphTensors, rows: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        """``q_tool``/``t_tool``/``s_tool`` (tool-centric view) and ``q_scene``/``s_scene`` (scene-centric view),
        for the views in use; ``tools`` = the tool representation scores use. With ``rows`` the query
        representations are those rows only (in that order)."""
        out: dict[str, torch.Tensor] = {}
        idx = None if rows is None else rows.numpy()
        if self.views in ("both", "tool"):
            sliced = None if rows is None else g.row_slice("qt", idx)
            out["q_tool"], out["t_tool"] = propagate(g.qt, g.qt_t, self.queries, self.tools, self.num_layers,
                                                     rows, sliced)
            out["s_tool"] = spmm(g.scene_mean, g.scene_mean_t, out["t_tool"])
            out["tools"] = out["t_tool"]
        else:
            out["tools"] = self.tools
        if self.views in ("both", "scene"):
            scenes0 = spmm(self.scene_init, self.scene_init_t, self.tools)
            sliced = None if rows is None else g.row_slice("qs", idx)
            out["q_scene"], out["s_scene"] = propagate(g.qs, g.qs_t, self.queries, scenes0, self.num_layers,
                                                       rows, sliced)
        return out

    def loss(self, g: GraphTensors, rows: torch.Tensor, candidates: torch.Tensor, labels: torch.Tensor,
             c_lambda: float, c_temp: float) -> tuple[torch.Tensor, dict[str, float]]:
        """List-wise loss of the batch ``rows`` (train-query indices) over their ``candidates`` ``[B, L]`` plus
        ``c_lambda`` x the cross-view contrastive term (queries of the batch; its distinct scenes)."""
        reps = self.representations(g, rows)
        views = [reps[k] for k in ("q_tool", "q_scene") if k in reps]
        scores = colt_scores(views, reps["tools"], candidates)
        ml = listwise_loss(scores, labels)
        parts = {"listwise": float(ml.detach())}
        if self.views == "both" and c_lambda > 0:
            scenes = torch.unique(self.scene_of[rows])
            cl = (info_nce(reps["q_tool"], reps["q_scene"], c_temp)
                  + info_nce(reps["s_tool"][scenes], reps["s_scene"][scenes], c_temp)) / 2
            parts["contrastive"] = float(cl.detach())
            return ml + c_lambda * cl, parts
        return ml, parts

    @torch.no_grad()
    def inference_tools(self, g: GraphTensors) -> np.ndarray:
        """The tool representations new (isolated) queries are scored against, on the full graph."""
        return self.representations(g)["tools"].detach().numpy().astype(np.float32)

    @torch.no_grad()
    def scene_representations(self, g: GraphTensors) -> dict[str, np.ndarray]:
        reps = self.representations(g)
        return {k: reps[k].detach().numpy().astype(np.float32) for k in ("s_tool", "s_scene") if k in reps}


__all__ = ["ColtModel", "GraphTensors", "colt_scores", "graph_tensors", "info_nce", "listwise_loss", "propagate",
           "to_torch_sparse"]
