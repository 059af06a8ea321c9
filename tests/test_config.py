"""params.yaml is validated on load: unknown or mistyped keys are errors naming the key and the file."""

from __future__ import annotations

import pytest
import yaml

from toolret.cli import main
from toolret.config import apply_overrides, load_params, validate_params
from toolret.errors import ConfigError


def _write(tmp_path, data):
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_defaults_come_from_the_models():
    p = validate_params({})
    assert (p.bm25.k1, p.bm25.b, p.dense.model, p.finetune.epochs) == (1.2, 0.75, "all-MiniLM-L6-v2", 2)
    assert p.reinvoke.n_queries == 10 and p.reinvoke.generate_queries == 10


def test_unknown_key_names_key_and_file(tmp_path):
    path = _write(tmp_path, {"bm25": {"k1": 1.2, "k3": 8}})
    with pytest.raises(ConfigError) as e:
        load_params(path)
    assert "bm25.k3" in str(e.value) and str(path) in str(e.value)
    with pytest.raises(ConfigError, match="reinvoke.ablations.x.methd"):
        validate_params({"reinvoke": {"ablations": {"x": {"methd": "bm25"}}}})
    with pytest.raises(ConfigError, match="'nonsense'"):
        validate_params({"nonsense": 1})


def test_mistyped_value_names_key(tmp_path):
    with pytest.raises(ConfigError, match="bm25.k1"):
        load_params(_write(tmp_path, {"bm25": {"k1": "high"}}))
    with pytest.raises(ConfigError, match="reinvoke.aggregation"):
        validate_params({"reinvoke": {"aggregation": "median"}})


def test_evaluate_exits_nonzero_naming_the_key(tmp_path, fixture_catalog_dir, capsys):
    path = _write(tmp_path, {"bm25": {"k1": 1.2, "k3": 8}})
    code = main(["--params", str(path), "evaluate", "--dataset", str(fixture_catalog_dir), "--method", "bm25",
                 "--output", str(tmp_path / "r.json")])
    err = capsys.readouterr().err
    assert code == 2 and "bm25.k3" in err and str(path) in err
    assert not (tmp_path / "r.json").exists()


def test_overrides_are_validated():
    p = apply_overrides(validate_params({}), ["bm25.k1=0.9", "reinvoke.n_queries=12"])
    # generating fewer queries than are used is never valid: generate_queries is raised to n_queries
    assert p.bm25.k1 == 0.9 and p.reinvoke.n_queries == 12 and p.reinvoke.generate_queries == 12
    with pytest.raises(ConfigError, match="bm25.k9"):
        apply_overrides(p, ["bm25.k9=1"])


def test_a_synthetic_catalog_may_name_a_dataset_outside_datasets():
    """A corpus too large to evaluate in `make run` (the 46,879-API environment) is a training source without
    being in `datasets`: the synthesize stage loads it from its sources (tests/test_stages.py)."""
    from toolret.config import validate_params

    p = validate_params({"datasets": ["toollens"], "synthetic": {
        "syn": {"source": "toollens"}, "env": {"source": "toolbench-env-g1-instruction", "sample_tools": 20}}})
    assert p.synthetic["env"].source == "toolbench-env-g1-instruction" and p.synthetic["env"].sample_tools == 20


def test_a_selection_is_sliced_from_a_built_or_synthetic_catalog():
    base = {"datasets": ["toollens"], "synthetic": {"syn": {"source": "toollens"}}}
    ok = validate_params({**base, "selections": {"syn-dev": {"source": "syn", "split": "dev", "min_gold": 2}}})
    assert ok.selections["syn-dev"].min_gold == 2 and ok.selections["syn-dev"].split == "dev"
    with pytest.raises(ConfigError, match="selections.*'x': 'mtrb-restbench'.*neither in `datasets` nor"):
        validate_params({**base, "selections": {"x": {"source": "mtrb-restbench", "split": "dev"}}})
    with pytest.raises(ConfigError, match="min_gold"):
        validate_params({**base, "selections": {"x": {"source": "syn", "split": "dev", "min_gold": 0}}})


def test_params_files_read_fast_as_the_pure_python_loader_reads_them(tmp_path):
    """read_params_file parses with libyaml where built: the project's params.yaml reads exactly as with
    yaml.SafeLoader (the reference); a result is the caller's own copy; an edited file is read again."""
    import yaml

    from toolret.paths import PACKAGE_ROOT, read_params_file

    project = PACKAGE_ROOT / "params.yaml"
    data, _ = read_params_file(project)
    assert data == yaml.load(project.read_text(encoding="utf-8"), Loader=yaml.SafeLoader)
    data["bm25"]["k1"] = -1.0  # the caller's copy: the next read is not affected
    assert read_params_file(project)[0]["bm25"]["k1"] != -1.0
    path = tmp_path / "params.yaml"
    path.write_text("bm25: {k1: 1.1}\n")
    assert read_params_file(path)[0] == {"bm25": {"k1": 1.1}}
    path.write_text("bm25: {k1: 1.3}\n")  # same size, same second
    assert read_params_file(path)[0] == {"bm25": {"k1": 1.3}}


def test_dvc_lock_reads_fast_as_the_pure_python_loader_reads_it():
    """The orchestration reads dvc.lock after every step (asset metadata): libyaml's parse of the project's
    4 MB lock is what yaml.SafeLoader (the reference) makes of it, and a second read parses nothing."""
    import yaml

    from toolret import paths
    from toolret.paths import PACKAGE_ROOT
    from toolret.provenance import read_dvc_lock

    lock = read_dvc_lock(PACKAGE_ROOT)
    assert lock == yaml.load((PACKAGE_ROOT / "dvc.lock").read_text(encoding="utf-8"), Loader=yaml.SafeLoader)
    parsed = paths._YAML_MEMO[str((PACKAGE_ROOT / "dvc.lock").resolve())][1]
    lock["stages"].clear()  # the caller's copy
    assert read_dvc_lock(PACKAGE_ROOT)["stages"] and paths._YAML_MEMO[str((PACKAGE_ROOT / "dvc.lock").resolve())][1] is parsed
