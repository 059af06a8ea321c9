"""Written multi-tool requests (toolret.adapt.synthetic.multi_groups / split_queries): groups of related
trained-side tools only, stable when tools are added, judged with every tool of the group."""

from __future__ import annotations

import pytest

from toolret.adapt.synthetic import holdout_units, multi_groups, split_queries
from toolret.catalog.model import Catalog, Tool
from toolret.errors import AdaptInputError


def _catalog(n_parents: int, per_parent: int = 3, categories: int = 4) -> Catalog:
    tools = [Tool(id=f"p{p}_a{a}", name=f"api {a}", docs={"original": f"parent {p} api {a}"}, tool=f"parent{p}",
                  category=f"cat{p % categories}") for p in range(n_parents) for a in range(per_parent)]
    return Catalog("toy", tools, [], {}, {})


def test_groups_are_two_or_three_related_trained_side_tools() -> None:
    catalog = _catalog(30)
    _, held = holdout_units(catalog, 0.2, 13)
    groups = multi_groups(catalog, held, cap=40, seed=13)
    by_id = {t.id: t for t in catalog.tools}
    assert 20 <= len(groups) <= 40 and len(set(groups)) == len(groups)
    for g in groups:
        assert 2 <= len(g) <= 3 and not set(g) & held
        parents = {by_id[t].tool for t in g}
        assert len(parents) == 1 or (len({by_id[t].category for t in g}) == 1 and len(parents) == len(g)), g
    assert any(len({by_id[t].tool for t in g}) == 1 for g in groups)  # of one parent tool
    assert any(len({by_id[t].tool for t in g}) > 1 for g in groups)  # of one category, several parents


def test_a_catalog_without_hierarchy_still_gets_groups() -> None:
    tools = [Tool(id=f"t{i}", name=f"t{i}", docs={"original": f"tool {i}"}) for i in range(12)]
    groups = multi_groups(Catalog("flat", tools, [], {}, {}), {"t0"}, cap=5, seed=1)
    assert len(groups) == 5 and all("t0" not in g and 2 <= len(g) <= 3 for g in groups)


def test_tools_added_later_leave_most_groups_as_they_were() -> None:
    small, grown = _catalog(30), _catalog(32)
    _, held = holdout_units(small, 0.2, 13)
    _, held_grown = holdout_units(grown, 0.2, 13)
    before = set(multi_groups(small, held, cap=30, seed=13))
    after = set(multi_groups(grown, held_grown, cap=30, seed=13))
    assert len(before & after) >= 0.7 * len(before)


def test_written_multi_requests_are_judged_with_every_tool_and_split_by_seed() -> None:
    catalog = _catalog(30)
    _, held = holdout_units(catalog, 0.2, 3)
    groups = multi_groups(catalog, held, cap=60, seed=3)
    per_tool = [[f"request for {t.id}"] for t in catalog.tools]
    multi = [(g, [f"one need for {' '.join(g)}"]) for g in groups]
    synthetic, info = split_queries(catalog, per_tool, seed=3, multi=multi, dev_fraction=0.3)
    written = [q for q in synthetic.queries if q.text.startswith("one need")]
    assert len(written) == len(groups) == info["multi_generated_train"] + info["multi_generated_dev"]
    assert 0 < info["multi_generated_dev"] < len(groups) / 2
    for q in written:
        assert synthetic.gold(q.id) == set(q.text.removeprefix("one need for ").split())
    subsets = synthetic.provenance["dev_subsets"]
    assert all(subsets[q.id] == "multi" for q in written if q.split == "dev")


def test_a_written_multi_request_of_a_held_out_tool_is_refused() -> None:
    catalog = _catalog(30)
    _, held = holdout_units(catalog, 0.2, 3)
    some_held, trained = sorted(held)[0], next(t.id for t in catalog.tools if t.id not in held)
    with pytest.raises(AdaptInputError, match=some_held):
        split_queries(catalog, [["r"] for _ in catalog.tools], seed=3, multi=[((trained, some_held), ["both"])])
