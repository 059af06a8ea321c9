"""ToolRerank's overall procedure (Sec. 3.1) on a hand-built seen / unseen library, Rerank-m, the dev grid
and the training-example mining. Scores are fixed numbers per API (the procedure's input), so every
expected list below is worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from toolret.methods.toolrerank.crossencoder import mine_training_pairs, mine_training_tuples
from toolret.methods.toolrerank.rerank import Library, QueryView, Setting, grid_search, rerank_m, toolrerank

pytestmark = pytest.mark.slow

# library positions: 0 x1, 1 y1, 2 z1, 3 y2, 4 x2, 5 x3   (tool X unseen, tool Y seen, tool Z unseen)
PARENTS = ["X", "Y", "Z", "Y", "X", "X"]
LIB = Library(parents=PARENTS, seen=np.array([False, True, False, True, False, False]), seen_tools={"Y"},
              by_tool={"X": [0, 4, 5], "Y": [1, 3], "Z": [2]})
SCORES = {0: 0.9, 1: 0.5, 2: 0.2, 3: 0.1, 4: 0.7, 5: 0.95}
C = [1, 0, 3, 2, 4]  # first stage: y1, x1, y2, z1, x2 (x3 is not a candidate)


def view(sim=None, calls=None):
    def score_fn(items):
        if calls is not None:
            calls.extend(items)
        return np.array([SCORES[i] for i in items])

    return QueryView(list(C), score_fn, (lambda items: sim[np.ix_(items, items)]) if sim is not None else None)


def test_adaptive_truncation_on_the_seen_unseen_fixture_and_plain_cross_encoder_order():
    # m_s = 1, m_u = 4: y1 (seen, i=1) kept, x1 (unseen, 2) kept, y2 (seen, 3) dropped, z1 (unseen, 4) kept,
    # x2 (unseen, 5) dropped -> T = [y1, x1, z1] -> R = [x1 .9, y1 .5, z1 .2]; then the dropped in C order
    calls: list[int] = []
    info: dict = {}
    out = toolrerank(view(calls=calls), "none", Setting(1, 4, 0.85, 0.7, 3), LIB, info)
    assert out == [0, 1, 2, 3, 4]
    assert sorted(calls) == [0, 1, 2]  # only T is scored
    assert info == {"t": 3, "extended": 0, "f1": 3}
    # without truncation (m_s = m_u = 5): R = [x2 .7 ... ] -> x1 .9, x2 .7, y1 .5, z1 .2, y2 .1
    assert toolrerank(view(), "none", Setting(5, 5, 0.85, 0.7, 3), LIB) == [0, 4, 1, 2, 3]
    # m_s > m_u: seen kept deeper than unseen: y1, x1 (i=2 <= 2), y2 (3 <= 3) -> R = x1, y1, y2; dropped z1, x2
    assert toolrerank(view(), "none", Setting(3, 2, 0.85, 0.7, 3), LIB) == [0, 1, 3, 2, 4]


def test_alg1_with_the_extended_list_for_unseen_tools():
    s = Setting(1, 4, tau_s=0.85, tau_m=0.7, n=3)
    # X = {X} (tool(r1) = X; y1 .5 and z1 .2 not > .85); X is unseen -> F1 = x1 + every API of X in the
    # library (x2, x3), reranked: x3 .95, x1 .9, x2 .7; F2 = y1, z1; then the dropped y2 (x2 already in F)
    info: dict = {}
    assert toolrerank(view(), "single", s, LIB, info) == [5, 0, 4, 1, 2, 3]
    assert info["extended"] == 2 and info["f1"] == 3
    # extended list off: F1 = [x1]; F = x1, y1, z1; then dropped y2, x2 in C order
    off = Setting(1, 4, 0.85, 0.7, 3, extend_unseen=False)
    assert toolrerank(view(), "single", off, LIB) == [0, 1, 2, 3, 4]


def test_alg1_seen_tools_are_not_extended_unless_asked():
    # tau_s = 0.4: X = {X, Y}; Y is seen: only X is extended -> F1 = x3, x1, x2, y1; F2 = z1; dropped y2
    assert toolrerank(view(), "single", Setting(1, 4, 0.4, 0.7, 3), LIB) == [5, 0, 4, 1, 2, 3]
    # extend_seen too: y2 (.1) joins F1 -> x3, x1, x2, y1, y2; F2 = z1
    both = Setting(1, 4, 0.4, 0.7, 3, extend_unseen=True, extend_seen=True)
    assert toolrerank(view(), "single", both, LIB) == [5, 0, 4, 1, 3, 2]


def test_alg2_on_the_fixture():
    sim = np.eye(6)
    sim[0, 1] = sim[1, 0] = 0.8  # x1 ~ y1
    # T = [y1, x1, z1], R = [x1, y1, z1]; components {x1, y1} (0.8 > 0.7) and {z1}; n = 1 keeps x1, z1
    assert toolrerank(view(sim), "multi", Setting(1, 4, 0.85, 0.7, 1), LIB) == [0, 2, 1, 3, 4]
    # tau_m = 0.8: no edge (0.8 is not > 0.8), every result is its own component: F = R
    assert toolrerank(view(sim), "multi", Setting(1, 4, 0.85, 0.8, 1), LIB) == [0, 1, 2, 3, 4]
    with pytest.raises(ValueError, match="mode"):
        toolrerank(view(sim), "both", Setting(1, 4, 0.85, 0.8, 1), LIB)


def test_rerank_m_reorders_the_top_m_only():
    # top 3 = y1 .5, x1 .9, y2 .1 -> x1, y1, y2; then z1, x2 unchanged
    assert rerank_m(view(), 3) == [0, 1, 3, 2, 4]
    assert rerank_m(view(), 1) == C


def _grid(**over):
    g = {"m_s": [10, 30, 50], "m_u": [10, 30, 50], "tau_s": [0.6, 0.85, 0.9], "tau_m": [0.6, 0.7], "n": [2, 3, 4]}
    g.update(over)
    return g


PAPER = {"m_s": 10, "m_u": 50, "tau_s": 0.85, "tau_m": 0.7, "n": 3}


def _deep_case(gold_pos: int):
    """60 seen APIs of 60 tools; the first stage ranks them in order; the gold API sits at ``gold_pos``
    with the best cross-encoder score."""
    lib = Library(parents=[f"t{i}" for i in range(60)], seen=np.ones(60, dtype=bool), seen_tools={f"t{i}" for i in range(60)},
                  by_tool={f"t{i}": [i] for i in range(60)})
    scores = {i: (0.99 if i == gold_pos else 0.5 - i / 1000) for i in range(60)}
    v = QueryView(list(range(60)), lambda items: np.array([scores[i] for i in items]), lambda items: np.eye(len(items)))
    return v, lib


def test_grid_search_prefers_the_paper_values_on_ties():
    v, lib = _deep_case(gold_pos=0)  # gold first everywhere: every setting scores recall@5 = 1
    out = grid_search([v], ["single"], [{0}], lib, _grid(), "recall@5", PAPER)
    assert out["selected"] == PAPER
    assert out["dev_recall@5"] == 1.0


def test_grid_search_finds_the_truncation_depth_the_dev_queries_need():
    # gold at position 20 (1-based 21): only m_s >= 30 lets the cross-encoder see it (all APIs seen);
    # 30 is closer to the paper's 10 than 50 is
    v, lib = _deep_case(gold_pos=20)
    out = grid_search([v], ["single"], [{20}], lib, _grid(), "recall@5", PAPER)
    assert out["selected"]["m_s"] == 30 and out["dev_recall@5"] == 1.0
    assert {r["m_s"]: r["recall@5"] for r in out["by_truncation"] if r["m_u"] == 50} == {10: 0.0, 30: 1.0, 50: 1.0}


def test_mine_training_pairs():
    docs = [f"doc{i}" for i in range(20)]
    pairs = mine_training_pairs(["q1", "q2"], [{3}, {5, 6}], [[3, 1, 2, 4, 7, 8], [9, 5, 6, 10, 11, 12]], docs,
                                hard_negatives=2, hard_negative_depth=4, random_negatives=1, seed=0)
    by_q = {q: [(d, lab) for qq, d, lab in pairs if qq == q] for q in ("q1", "q2")}
    assert sorted(d for d, lab in by_q["q1"] if lab == 1.0) == ["doc3"]
    assert sorted(d for d, lab in by_q["q2"] if lab == 1.0) == ["doc5", "doc6"]
    neg1 = [int(d[3:]) for d, lab in by_q["q1"] if lab == 0.0]
    neg2 = [int(d[3:]) for d, lab in by_q["q2"] if lab == 0.0]
    # hard: 2 of the top-4 non-gold (q1: {1, 2, 4}; q2: {9, 10}: only two exist in the top 4), + 1 random
    assert len(neg1) == 3 and len(set(neg1[:])) == 3 and len(set(neg1) & {1, 2, 4}) >= 2 and 3 not in neg1
    assert len(neg2) == 3 and {9, 10} <= set(neg2) and not {5, 6} & set(neg2)
    assert pairs == mine_training_pairs(["q1", "q2"], [{3}, {5, 6}], [[3, 1, 2, 4, 7, 8], [9, 5, 6, 10, 11, 12]], docs,
                                        hard_negatives=2, hard_negative_depth=4, random_negatives=1, seed=0)


def test_mine_training_tuples_one_row_per_gold_api_with_hard_negatives_from_the_pool():
    docs = [f"doc{i}" for i in range(20)]
    ranked = [[3, 1, 2, 4, 7, 8], [9, 5, 6, 10, 11, 12], [0, 13]]
    rows = mine_training_tuples(["q1", "q2", "q3"], [{3}, {5, 6}, {0, 13}], ranked, docs,
                                hard_negatives=2, hard_negative_depth=4, seed=0)
    # q3's pool (top 4 minus gold) is empty: no row; q1: one row, q2: one per gold API
    assert sorted((r[0], r[1]) for r in rows) == [("q1", "doc3"), ("q2", "doc5"), ("q2", "doc6")]
    assert all(len(r) == 4 for r in rows)
    for q, _pos, *neg in rows:
        pool = {"q1": {"doc1", "doc2", "doc4"}, "q2": {"doc9", "doc10"}}[q]
        assert set(neg) <= pool and len(set(neg)) == 2  # sampled without replacement while the pool lasts
    # a pool shorter than h repeats entries so every row has the same width
    short = mine_training_tuples(["q"], [{0}], [[0, 1]], docs, hard_negatives=3, hard_negative_depth=2, seed=1)
    assert short == [("q", "doc0", "doc1", "doc1", "doc1")]
    assert rows == mine_training_tuples(["q1", "q2", "q3"], [{3}, {5, 6}, {0, 13}], ranked, docs,
                                        hard_negatives=2, hard_negative_depth=4, seed=0)


TOPICS = {"weather": "current weather forecast and temperature for a city",
          "stocks": "real-time stock quotes and share prices for a ticker symbol",
          "recipes": "cooking recipes with ingredients and preparation steps",
          "flights": "flight schedules, departures and airline booking",
          "movies": "movie reviews, ratings and cinema showtimes",
          "football": "football match scores, fixtures and league tables",
          "translate": "translate text between languages",
          "currency": "currency exchange rates and money conversion"}
ASKS = {"weather": ["will it rain in Paris tomorrow", "how hot is it in Cairo today"],
        "stocks": ["what is Apple's share price", "show me the Tesla stock quote"],
        "recipes": ["how do I cook a lasagna", "give me a recipe for pancakes"],
        "flights": ["find a flight from Rome to Oslo", "when does the next plane to Tokyo leave"],
        "movies": ["is the new Batman film any good", "which cinemas show Dune tonight"],
        "football": ["who won the Arsenal game", "show the Premier League table"],
        "translate": ["say good morning in Spanish", "translate this sentence into German"],
        "currency": ["how many yen is 100 dollars", "convert 50 euros to pounds"]}


def test_in_batch_loss_trains_a_cross_encoder_that_ranks_the_positive_first(tmp_path):
    """The list-wise (in-batch) loss on a small topical set: after training, every query scores its own
    API above the others (the offline MiniLM encoder with a fresh head starts at chance)."""
    from toolret.methods.toolrerank.crossencoder import CrossEncoderScorer, train_cross_encoder

    names = list(TOPICS)
    rows = [(q, TOPICS[t], TOPICS[names[(i + 1) % len(names)]]) for i, t in enumerate(names) for q in ASKS[t]]
    report = train_cross_encoder(rows, tmp_path / "ce", base_model="all-MiniLM-L6-v2", max_length=32, epochs=12,
                                 batch_size=8, lr=1e-4, warmup_ratio=0.1, seed=0, loss="in_batch",
                                 in_batch_negatives=4)
    assert report["loss"] == "in_batch" and report["n_examples"] == 16 and report["steps"] == 24
    scorer = CrossEncoderScorer(tmp_path / "ce", 32, cache="off")
    queries = [q for t in names for q in ASKS[t]]
    scores = scorer.score_pairs([(q, TOPICS[t]) for q in queries for t in names]).reshape(len(queries), len(names))
    own = np.array([names.index(t) for t in names for _ in ASKS[t]])
    assert (scores.argmax(1) == own).mean() >= 0.9
    with pytest.raises(ValueError, match="toolrerank.loss"):
        train_cross_encoder(rows, tmp_path / "x", base_model="all-MiniLM-L6-v2", max_length=32, epochs=1,
                            batch_size=8, lr=1e-4, warmup_ratio=0.1, seed=0, loss="hinge")


def test_the_same_training_run_twice_gives_the_same_cross_encoder(tmp_path):
    """Seeded training is reproducible: the new head and the LoRA matrices are initialised from the seed, not from
    whatever the process's random state was (two runs of the stage's command gave train loss 0.332 and 0.352)."""
    import torch
    from safetensors.torch import load_file

    from toolret.methods.toolrerank.crossencoder import train_cross_encoder
    from toolret.retrieval.models import LoraSettings

    names = list(TOPICS)
    rows = [(q, TOPICS[t], TOPICS[names[(i + 1) % len(names)]]) for i, t in enumerate(names) for q in ASKS[t]]
    weights = []
    for run, noise in enumerate((1, 2)):
        torch.manual_seed(noise)  # a different process state before each run
        train_cross_encoder(rows, tmp_path / f"ce{run}", base_model="all-MiniLM-L6-v2", max_length=32, epochs=1,
                            batch_size=8, lr=1e-4, warmup_ratio=0.1, seed=0, loss="in_batch", in_batch_negatives=4,
                            lora=LoraSettings(method="lora"))
        weights.append(load_file(tmp_path / f"ce{run}" / "adapter_model.safetensors"))
    assert weights[0].keys() == weights[1].keys() and len(weights[0]) > 0
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])


def test_separation_auc_counts_ordered_pairs_and_half_ties():
    from toolret.methods.toolrerank.diagnostics import separation_auc

    # (0.9 > 0.85) (0.9 > 0.1) (0.8 < 0.85) (0.8 > 0.1): 3 of 4
    assert separation_auc([0.9, 0.8], [0.85, 0.1]) == pytest.approx(0.75)
    assert separation_auc([0.5, 0.2], [0.5]) == pytest.approx(0.25)  # one tie (1/2) and one loss, of 2
    with pytest.raises(ValueError):
        separation_auc([], [0.1])
