"""Goal-style dev requests (toolret.adapt.synthetic) and the choice on them (toolret.adapt.run): held-out units
drawn by a hash that tools added later do not move; goal requests dev only, of held-out tools only; the
champion chosen on them, not on the dev requests written in the training requests' style."""

from __future__ import annotations

import numpy as np
import pytest

from toolret.adapt.run import choose_champion, restrict, selection_queries
from toolret.adapt.synthetic import goal_tools, holdout_units, split_queries
from toolret.catalog.model import Catalog, Tool
from toolret.errors import AdaptInputError


def _catalog(n_parents: int, per_parent: int = 2) -> Catalog:
    tools = [Tool(id=f"p{p}_a{a}", name=f"api {a}", docs={"original": f"parent {p} api {a}"}, tool=f"parent{p}",
                  category=f"cat{p % 3}") for p in range(n_parents) for a in range(per_parent)]
    return Catalog("toy", tools, [], {}, {})


def test_tools_added_later_leave_the_held_out_units_as_they_were() -> None:
    _, before = holdout_units(_catalog(40), 0.2, 13)
    _, after = holdout_units(_catalog(60), 0.2, 13)
    old_ids = {t.id for t in _catalog(40).tools}
    assert before and after & old_ids == before
    assert 0.1 < len(after) / 120 < 0.3  # about the fraction asked for


def test_a_catalog_of_two_units_holds_one_out() -> None:
    kind, held = holdout_units(_catalog(2, per_parent=1), 0.01, 13)
    assert kind == "tool" and len(held) == 1


def test_goal_requests_are_dev_only_of_held_out_tools_and_named_goal() -> None:
    catalog = _catalog(25)
    _, held = holdout_units(catalog, 0.2, 3)
    chosen = goal_tools(catalog, held, cap=3, seed=3)
    assert len(chosen) == 3 and chosen <= held
    per_tool = [[f"request {j} for {t.id}" for j in range(4)] for t in catalog.tools]
    goal = [[f"my goal {j} needs {t.id}" for j in range(2)] if t.id in chosen else [] for t in catalog.tools]
    synthetic, info = split_queries(catalog, per_tool, seed=3, goal=goal)
    subsets = synthetic.provenance["dev_subsets"]
    goal_qs = [q for q in synthetic.queries if subsets.get(q.id) == "goal"]
    assert info["dev_goal"] == 6 and len(goal_qs) == 6 + info["multi_goal"]
    assert all(q.split == "dev" for q in goal_qs)
    assert {t for q in goal_qs for t in synthetic.gold(q.id)} <= chosen
    assert not any(q.text.startswith("my goal") for q in synthetic.split("train"))


def test_a_goal_request_of_a_trained_tool_is_refused() -> None:
    catalog = _catalog(25)
    _, held = holdout_units(catalog, 0.2, 3)
    trained = next(t.id for t in catalog.tools if t.id not in held)
    goal = [["a goal"] if t.id == trained else [] for t in catalog.tools]
    with pytest.raises(AdaptInputError, match=repr(trained)):
        split_queries(catalog, [["r"] for _ in catalog.tools], seed=3, goal=goal)


def test_the_champion_is_chosen_on_the_goal_requests_only() -> None:
    # dense-ft leads on the generator-style dev requests and trails on the goal-style ones: hybrid is chosen
    subsets = {f"s{i}": "unseen" for i in range(40)} | {f"g{i}": "goal" for i in range(40)}
    ids, split = selection_queries(subsets)
    assert ids == {f"g{i}" for i in range(40)} and "goal" in split
    qids = np.array(list(subsets))
    rng = np.random.default_rng(0)
    is_goal = np.array([q.startswith("g") for q in qids])
    ft = np.where(is_goal, rng.uniform(0.3, 0.5, len(qids)), 1.0)
    hybrid = np.where(is_goal, rng.uniform(0.5, 0.7, len(qids)), 0.2)
    per_query = {"dense-ft": {"ndcg@5": ft, "query_id": qids}, "hybrid": {"ndcg@5": hybrid, "query_id": qids}}
    kinds = {"dense-ft": "trained", "hybrid": "untrained"}
    assert choose_champion(per_query, kinds)[0] == "dense-ft"  # on all of dev
    champion, why = choose_champion({n: restrict(pq, ids) for n, pq in per_query.items()}, kinds)
    assert champion == "hybrid" and "no trained candidate beats it" in why


def test_too_few_goal_requests_fall_back_to_all_of_dev() -> None:
    ids, split = selection_queries({"a": "goal", "b": "seen"}, minimum=30)
    assert ids is None and "all 2 requests" in split


def test_expansion_is_measured_as_served_when_chosen_on_goal_requests() -> None:
    from toolret.adapt.run import expansion_requests

    catalog = _catalog(25)
    _, held = holdout_units(catalog, 0.2, 3)
    per_tool = [[f"request {j} for {t.id}" for j in range(4)] for t in catalog.tools]
    synthetic, _ = split_queries(catalog, per_tool, seed=3)
    assert expansion_requests(synthetic, per_tool, goal_selection=True) == per_tool
    train_only = expansion_requests(synthetic, per_tool, goal_selection=False)
    for tool, texts in zip(catalog.tools, train_only):
        assert (not texts) if tool.id in held else set(texts) <= set(per_tool[catalog.tool_ids.index(tool.id)])
    dev_texts = {q.text for q in synthetic.split("dev")}
    assert not dev_texts & {t for texts in train_only for t in texts}


def _scores(**means: tuple[float, float]) -> dict[str, dict[str, np.ndarray]]:
    """Per candidate, 200 per-query scores uniform in (lo, hi)."""
    rng = np.random.default_rng(1)
    qids = np.array([f"q{i}" for i in range(200)])
    return {n: {"ndcg@5": rng.uniform(lo, hi, 200), "query_id": qids} for n, (lo, hi) in means.items()}


KINDS = {"bm25": "untrained", "hybrid": "untrained", "dense-ft": "trained", "hybrid-exp-ft": "expansion"}
FUSED = {"hybrid", "hybrid-exp-ft"}


def test_a_fused_candidate_tied_with_a_single_side_best_is_chosen() -> None:
    pq = _scores(bm25=(0.2, 0.6), hybrid=(0.25, 0.65), **{"dense-ft": (0.5, 0.9), "hybrid-exp-ft": (0.49, 0.89)})
    assert choose_champion(pq, KINDS)[0] == "dense-ft"  # without the fused candidates named
    champion, why = choose_champion(pq, KINDS, fused=FUSED)
    assert champion == "hybrid-exp-ft" and "not worse on dev than the best single-side dense-ft" in why


def test_a_single_side_best_clearly_ahead_stays() -> None:
    pq = _scores(bm25=(0.2, 0.6), hybrid=(0.25, 0.65), **{"dense-ft": (0.6, 1.0), "hybrid-exp-ft": (0.3, 0.7)})
    assert choose_champion(pq, KINDS, fused=FUSED)[0] == "dense-ft"


def test_a_fused_pick_still_has_to_beat_the_best_untrained() -> None:
    # dense-ft a hair above hybrid-exp-ft, a hair above hybrid, on the same queries: all tied (p >= 0.05)
    base = np.random.default_rng(2).uniform(0.3, 0.9, 200)
    wobble = np.where(np.arange(200) % 2 == 0, 0.05, -0.05)
    qids = np.array([f"q{i}" for i in range(200)])
    pq = {n: {"ndcg@5": v, "query_id": qids} for n, v in {
        "bm25": base - 0.2, "hybrid": base, "hybrid-exp-ft": base + 0.001 + wobble,
        "dense-ft": base + 0.002 - wobble}.items()}
    champion, why = choose_champion(pq, KINDS, fused=FUSED)
    # hybrid-exp-ft is not above hybrid: passed over; dense-ft is not above hybrid either: the untrained one stays
    assert champion == "hybrid" and "the untrained hybrid stays champion" in why


def test_a_tied_fused_candidate_that_does_not_beat_the_untrained_does_not_displace_one_that_does() -> None:
    base = np.random.default_rng(3).uniform(0.3, 0.7, 200)
    wobble = np.where(np.arange(200) % 2 == 0, 0.15, -0.15)
    qids = np.array([f"q{i}" for i in range(200)])
    # dense-ft clearly above hybrid; hybrid-exp-ft between them, tied with both (wide per-query swings)
    pq = {n: {"ndcg@5": v, "query_id": qids} for n, v in {
        "bm25": base - 0.2, "hybrid": base, "dense-ft": base + 0.05, "hybrid-exp-ft": base + 0.025 + wobble}.items()}
    champion, why = choose_champion(pq, KINDS, fused=FUSED)
    assert champion == "dense-ft" and "beats the best untrained hybrid" in why


def test_an_untrained_fused_candidate_is_no_tie_break_for_a_trained_best() -> None:
    # dense-ft clearly above the best untrained dense; the untrained hybrid below dense but, with wide per-query
    # swings, not significantly below dense-ft: the untrained side is rule 2's to decide, not the fused tie-break
    base = np.random.default_rng(4).uniform(0.3, 0.7, 30)
    wobble = np.where(np.arange(30) % 2 == 0, 0.3, -0.3)
    qids = np.array([f"q{i}" for i in range(30)])
    pq = {n: {"ndcg@5": v, "query_id": qids} for n, v in {
        "dense": base, "hybrid": base - 0.01 + wobble, "dense-ft": base + 0.07}.items()}
    kinds = {"dense": "untrained", "hybrid": "untrained", "dense-ft": "trained"}
    champion, why = choose_champion(pq, kinds, fused={"hybrid"})
    assert champion == "dense-ft" and "beats the best untrained dense" in why


def test_few_held_out_tools_get_more_goal_requests_each_up_to_a_cap() -> None:
    from toolret.adapt.run import goal_requests_per_tool

    assert goal_requests_per_tool(40, 3) == 3  # 120 in all: the budget's
    assert goal_requests_per_tool(13, 3) == 8  # 104 >= 100
    assert goal_requests_per_tool(4, 3) == 10  # capped
    assert goal_requests_per_tool(0, 3) == 3
