"""The synthetic dev split read per kind of request: each dev request is named ``seen`` (a trained tool's),
``unseen`` (a held-out tool's) or ``multi`` (composed), and :func:`dev_breakdown` averages each subset."""

from __future__ import annotations

import pytest

from toolret.adapt.run import dev_breakdown
from toolret.adapt.synthetic import holdout_units, split_queries
from toolret.catalog.model import Catalog, Tool
from toolret.errors import AdaptInputError


def _catalog(n_parents: int = 25, per_parent: int = 2) -> Catalog:
    tools = [Tool(id=f"p{p}_a{a}", name=f"api {a}", docs={"original": f"parent {p} api {a}"}, tool=f"parent{p}",
                  category=f"cat{p % 3}") for p in range(n_parents) for a in range(per_parent)]
    return Catalog("toy", tools, [], {}, {})


def test_every_dev_request_is_named_by_its_kind() -> None:
    catalog = _catalog()
    per_tool = [[f"request {j} for {t.id}" for j in range(4)] for t in catalog.tools]
    synthetic, info = split_queries(catalog, per_tool, seed=3)
    subsets = synthetic.provenance["dev_subsets"]
    dev = [q.id for q in synthetic.queries if q.split == "dev"]
    assert sorted(subsets) == sorted(dev)  # every dev request, and only those
    _, held = holdout_units(catalog, 0.2, 3)
    for qid in dev:
        gold = synthetic.gold(qid)
        if subsets[qid] == "multi":
            assert len(gold) >= 2
        else:
            assert len(gold) == 1 and subsets[qid] == ("unseen" if next(iter(gold)) in held else "seen")
    counts = {s: sum(1 for v in subsets.values() if v == s) for s in ("seen", "unseen", "multi")}
    assert counts == {"seen": info["dev_seen"], "unseen": info["dev_unseen"], "multi": info["multi_dev"]}
    assert held and counts["unseen"] == 4 * len(held)  # 4 requests of each held-out API
    assert len(held) % 2 == 0 and {t.id for t in catalog.tools if t.tool in {f"parent{i}" for i in range(25)}
                                    and t.id in held} == held  # whole parents (2 APIs each) held out


def test_breakdown_means_each_subset() -> None:
    rows = [{"query_id": "a", "ndcg@5": 1.0, "recall@5": 1.0}, {"query_id": "b", "ndcg@5": 0.5, "recall@5": 0.0},
            {"query_id": "c", "ndcg@5": 0.0, "recall@5": 0.5}, {"query_id": "d", "ndcg@5": 0.25, "recall@5": 1.0}]
    out = dev_breakdown(rows, {"a": "seen", "b": "seen", "c": "unseen", "d": "multi"})
    assert out == {"multi": {"n": 1, "ndcg@5": 0.25, "recall@5": 1.0},
                   "seen": {"n": 2, "ndcg@5": 0.75, "recall@5": 0.5},
                   "unseen": {"n": 1, "ndcg@5": 0.0, "recall@5": 0.5}}


def test_a_row_outside_the_dev_split_is_named() -> None:
    with pytest.raises(AdaptInputError, match="'zz'"):
        dev_breakdown([{"query_id": "zz", "ndcg@5": 1.0, "recall@5": 1.0}], {"a": "seen"})
