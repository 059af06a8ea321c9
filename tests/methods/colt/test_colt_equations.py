"""COLT's equations against hand computations: normalisations, propagation on a 3-node graph, the
list-wise multi-label loss, the cross-view InfoNCE and the two-view score."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from toolret.methods.colt.graphs import edge_dropout, row_normalise, sym_normalise
from toolret.methods.colt.model import colt_scores, info_nce, listwise_loss, propagate, to_torch_sparse

R2, R5 = math.sqrt(2), math.sqrt(5)


def _path_graph():
    """q1 - t - q2: two queries joined through one tool (3 nodes). A = [[1], [1]] (queries x tools)."""
    adj = sp.csr_matrix(np.array([[1.0], [1.0]], dtype=np.float32))
    norm = sym_normalise(adj)
    return to_torch_sparse(norm), to_torch_sparse(norm.T)


Q0 = torch.tensor([[1.0, 0.0], [0.0, 2.0]])  # q1, q2
T0 = torch.tensor([[0.0, 1.0]])  # t


def test_sym_normalise_by_hand():
    # degrees: q1 = q2 = 1, t = 2 -> every entry 1 / sqrt(1 * 2); an isolated query row stays zero
    adj = sp.csr_matrix(np.array([[1.0], [1.0], [0.0]], dtype=np.float32))
    np.testing.assert_allclose(sym_normalise(adj).toarray(), [[1 / R2], [1 / R2], [0.0]], rtol=1e-6)


def test_row_normalise_is_the_mean_of_a_scenes_tools():
    st = sp.csr_matrix(np.array([[1, 1, 0], [0, 0, 1]], dtype=np.float32))
    tools = np.array([[2.0, 0.0], [0.0, 4.0], [1.0, 1.0]])
    np.testing.assert_allclose(row_normalise(st) @ tools, [[1.0, 2.0], [1.0, 1.0]], rtol=1e-6)


def test_propagation_zero_layers_is_identity():
    adj, adj_t = _path_graph()
    q, t = propagate(adj, adj_t, Q0, T0, 0)
    assert torch.equal(q, Q0) and torch.equal(t, T0)


def test_propagation_one_layer_by_hand():
    # layer 1: q1' = q2' = (1/sqrt2) t / 2 = (0, 0.354) -> normalised (0, 1);
    #          t' = (q1 + q2) / sqrt2 / 2 = (0.354, 0.707) -> normalised (1, 2) / sqrt5
    # final = layer 0 + normalised layer 1
    adj, adj_t = _path_graph()
    q, t = propagate(adj, adj_t, Q0, T0, 1)
    np.testing.assert_allclose(q.numpy(), [[1.0, 1.0], [0.0, 3.0]], atol=1e-6)
    np.testing.assert_allclose(t.numpy(), [[1 / R5, 1 + 2 / R5]], atol=1e-6)


def test_propagation_two_layers_by_hand():
    # layer 2 propagates the UNnormalised layer-1 features (scaled by 1/3): q'' ∝ t' ∝ (1, 2) -> (1, 2)/sqrt5,
    # t'' ∝ q1' + q2' ∝ (0, 1) -> (0, 1); final = layer 0 + both normalised layers
    adj, adj_t = _path_graph()
    q, t = propagate(adj, adj_t, Q0, T0, 2)
    np.testing.assert_allclose(q.numpy(), [[1 + 1 / R5, 1 + 2 / R5], [1 / R5, 3 + 2 / R5]], atol=1e-6)
    np.testing.assert_allclose(t.numpy(), [[1 / R5, 2 + 2 / R5]], atol=1e-6)


def test_isolated_query_keeps_its_semantic_features():
    # a third query with no edge (a dev / test query): its propagated rows are 0, its representation is layer 0
    adj = sp.csr_matrix(np.array([[1.0], [1.0], [0.0]], dtype=np.float32))
    norm = sym_normalise(adj)
    q0 = torch.tensor([[1.0, 0.0], [0.0, 2.0], [0.3, -0.7]])
    q, _ = propagate(to_torch_sparse(norm), to_torch_sparse(norm.T), q0, T0, 2)
    assert torch.equal(q[2], q0[2])


def test_listwise_loss_by_hand():
    # list of 4 with equal scores: softmax = 0.25 each; labels [1, 1, 0, 0] normalised to [0.5, 0.5, 0, 0]
    # gold entry: -(0.5 ln 0.25 + 0.5 ln 0.75) = 0.836988; negative entry: -ln 0.75 = 0.287682; mean = 0.562335
    loss = listwise_loss(torch.zeros(1, 4), torch.tensor([[1.0, 1.0, 0.0, 0.0]]))
    assert float(loss) == pytest.approx(0.562335, abs=1e-5)
    # one gold of three, scores [1, 0, 0]: p = [e, 1, 1] / (e + 2) = [0.576117, 0.211942, 0.211942]
    # entries: -ln 0.576117 = 0.551451, -ln(1 - 0.211942) = 0.238183 (x2); mean = 0.342606
    loss = listwise_loss(torch.tensor([[1.0, 0.0, 0.0]]), torch.tensor([[1.0, 0.0, 0.0]]))
    assert float(loss) == pytest.approx(0.342606, abs=1e-5)


def test_listwise_loss_prefers_gold_on_top():
    labels = torch.tensor([[1.0, 1.0, 0.0, 0.0]])
    good = listwise_loss(torch.tensor([[2.0, 2.0, -2.0, -2.0]]), labels)
    bad = listwise_loss(torch.tensor([[-2.0, -2.0, 2.0, 2.0]]), labels)
    assert float(good) < float(bad)


def test_info_nce_by_hand():
    # a = b = the two unit axes, temperature 0.5: logits [[2, 0], [0, 2]]; loss = -ln(e^2 / (e^2 + 1)) = 0.126928
    eye = torch.eye(2)
    assert float(info_nce(eye, eye, 0.5)) == pytest.approx(0.126928, abs=1e-5)
    # swapped positives: -ln(1 / (e^2 + 1)) = 2.126928
    assert float(info_nce(eye, eye.flip(0), 0.5)) == pytest.approx(2.126928, abs=1e-5)


def test_two_view_score_by_hand():
    # q_tool = (1, 0), q_scene = (0, 3); tools (1, 1) and (2, 0): cos sums 1/sqrt2 + 1/sqrt2 = 1.414214 and 1 + 0 = 1
    q_tool, q_scene = torch.tensor([[1.0, 0.0]]), torch.tensor([[0.0, 3.0]])
    tools = torch.tensor([[1.0, 1.0], [2.0, 0.0]])
    np.testing.assert_allclose(colt_scores([q_tool, q_scene], tools).numpy(), [[R2, 1.0]], atol=1e-6)
    # one view counts twice (same score range): 2 cos
    np.testing.assert_allclose(colt_scores([q_tool], tools).numpy(), [[R2, 2.0]], atol=1e-6)
    # a candidate list picks columns: [t2, t1, t2]
    picked = colt_scores([q_tool, q_scene], tools, torch.tensor([[1, 0, 1]]))
    np.testing.assert_allclose(picked.numpy(), [[1.0, R2, 1.0]], atol=1e-6)


def test_edge_dropout_drops_about_the_ratio_and_keeps_weights():
    adj = sp.random(200, 50, density=0.2, format="csr", random_state=0)
    adj.data[:] = 1.0
    dropped = edge_dropout(adj, 0.2, np.random.default_rng(0))
    assert set(np.unique(dropped.data)) == {1.0}
    assert 0.75 < dropped.nnz / adj.nnz < 0.85
    assert (dropped - dropped.multiply(adj)).nnz == 0  # only existing edges survive
    assert edge_dropout(adj, 0.0, np.random.default_rng(0)).nnz == adj.nnz


def test_propagation_of_a_batch_equals_the_full_rows():
    """Training propagates only the batch's query rows in the last layer: same values as the full pass."""
    rng = np.random.default_rng(0)
    adj = sp.random(12, 5, density=0.4, format="csr", random_state=1)
    adj.data[:] = 1.0
    norm = sym_normalise(adj)
    a0 = torch.tensor(rng.standard_normal((12, 3)), dtype=torch.float32)
    b0 = torch.tensor(rng.standard_normal((5, 3)), dtype=torch.float32)
    rows = np.array([7, 2, 9])
    for layers in (0, 1, 2):
        full_a, full_b = propagate(to_torch_sparse(norm), to_torch_sparse(norm.T), a0, b0, layers)
        part_a, part_b = propagate(to_torch_sparse(norm), to_torch_sparse(norm.T), a0, b0, layers,
                                   torch.from_numpy(rows), (to_torch_sparse(norm[rows]), to_torch_sparse(norm[rows].T)))
        np.testing.assert_allclose(part_a.numpy(), full_a[rows].numpy(), atol=1e-6)
        np.testing.assert_allclose(part_b.numpy(), full_b.numpy(), atol=1e-6)
