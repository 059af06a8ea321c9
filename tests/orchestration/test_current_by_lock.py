"""Which stale stages a run may leave unbuilt: only missing files, chained by dvc.lock to unchanged inputs."""

from __future__ import annotations

from dagster_project.current_by_lock import missing_only, plan

# catalog -> index -> evaluate (its results kept in git), and catalog -> report (a leaf only the cache keeps)
UPSTREAM = {"catalog": (), "index": ("catalog",), "evaluate": ("index", "catalog"), "report": ("catalog",)}
OUTS = {"catalog": ("data/catalogs/x",), "index": ("data/indexes/x",), "evaluate": ("data/runs/x",),
        "report": ("data/reports/x",)}
GONE = "deleted"


def _fresh_clone_status(**extra):
    """What ``dvc status`` says in a clone that has git's outputs (the evaluation) and not the cache's."""
    status = {
        "catalog": [{"changed outs": {"data/catalogs/x": GONE}}],
        "index": [{"changed deps": {"data/catalogs/x": GONE}}, {"changed outs": {"data/indexes/x": GONE}}],
        "evaluate": [{"changed deps": {"data/indexes/x": GONE, "data/catalogs/x": GONE}}],
    }
    status.update(extra)
    return status


def _present(*stages):
    return lambda s: s in stages


def test_missing_files_chained_to_produced_inputs_are_missing_only() -> None:
    produced = [o for os_ in OUTS.values() for o in os_]
    assert missing_only([{"changed outs": {"data/catalogs/x": GONE}}], produced)
    assert missing_only([{"changed deps": {"data/indexes/x/part": GONE}}], produced)  # inside a produced dir
    assert missing_only([{"changed outs": {"data/indexes/x": "not in cache"}}], produced)  # an empty cache


def test_a_deleted_input_no_stage_makes_is_a_real_change() -> None:
    produced = [o for os_ in OUTS.values() for o in os_]
    assert not missing_only([{"changed deps": {"../shared/datasets/x": GONE}}], produced)


def test_modified_files_params_and_commands_are_real_changes() -> None:
    produced = [o for os_ in OUTS.values() for o in os_]
    assert not missing_only([{"changed deps": {"toolret/index.py": "modified"}}], produced)
    assert not missing_only([{"changed deps": {"params.yaml": {"bm25.k1": "modified"}}}], produced)
    assert not missing_only(["changed command"], produced)
    assert not missing_only([{"changed outs": {"data/indexes/x": "modified"}}], produced)
    assert not missing_only([], produced)


def test_a_fresh_clone_builds_nothing_when_the_results_it_would_make_are_in_git() -> None:
    p = plan(_fresh_clone_status(), UPSTREAM, OUTS, {"catalog", "index", "evaluate"}, _present("evaluate"))
    assert p.deferred == {"catalog", "index", "evaluate"}
    assert p.build == set()


def test_a_real_change_builds_the_missing_inputs_it_reads_and_not_the_others() -> None:
    status = _fresh_clone_status(index=[{"changed deps": {"toolret/index.py": "modified", "data/catalogs/x": GONE}},
                                        {"changed outs": {"data/indexes/x": GONE}}])
    p = plan(status, UPSTREAM, OUTS, {"catalog", "index", "evaluate"}, _present("evaluate"))
    assert p.build == {"catalog"}  # the index reads it
    assert "index" not in p.deferred and "evaluate" not in p.deferred  # it changed; what reads it re-runs
    assert "catalog" not in p.deferred


def test_a_missing_output_the_run_exists_to_produce_is_built_with_its_missing_inputs() -> None:
    status = _fresh_clone_status(report=[{"changed deps": {"data/catalogs/x": GONE}},
                                         {"changed outs": {"data/reports/x": GONE}}])
    p = plan(status, UPSTREAM, OUTS, set(UPSTREAM), _present("evaluate"))
    assert "report" not in p.deferred
    assert p.build == {"catalog"}
    assert p.deferred == {"index", "evaluate"}


def test_a_stage_outside_the_run_never_makes_the_run_build_anything() -> None:
    status = _fresh_clone_status(report=[{"changed deps": {"data/catalogs/x": GONE}},
                                         {"changed outs": {"data/reports/x": GONE}}])
    p = plan(status, UPSTREAM, OUTS, {"catalog", "index", "evaluate"}, _present("evaluate"))
    assert p.build == set() and {"catalog", "index", "evaluate"} <= p.deferred
