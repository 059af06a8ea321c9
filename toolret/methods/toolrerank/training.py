"""Train the ToolRerank artifact on a catalog's train split; select its hyperparameters on the dev split.

Artifact ``data/models/<train dataset>/toolrerank/`` (written atomically)::

    model/            the cross-encoder (sentence-transformers CrossEncoder folder)
    classifier.json   the single- / multi-tool query classifier
    seen.json         the APIs of the training data (hierarchy keys: [parent tool, API name])
    toolrerank.json   training report: config, data sizes, classifier accuracy, the dev grid and the
                      selected m_s / m_u / tau_s / tau_m / n (used when params leave them null)

Steps (each resumable: a killed run restarts at the step it was in): the first stage (a registered
retriever, ``first_stage``) ranks the sampled training queries; training examples are mined
(:func:`crossencoder.mine_training_pairs`, or :func:`crossencoder.mine_training_tuples` for the in-batch
loss) and the cross-encoder is trained into a work folder beside the artifact; the classifier is fitted;
the dev queries' top ``candidates`` are scored once (score cache) and the grid of paper Table 2 runs on
those scores. The test split is never read.
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from toolret.artifact_key import fingerprint, make_key, write_key
from toolret.atomic import atomic_directory, write_json
from toolret.catalog.datasets import load_dataset_for
from toolret.catalog.model import Catalog
from toolret.catalog.select import sample_queries
from toolret.errors import CatalogError
from toolret.methods.toolrerank.classifier import QueryTypeClassifier
from toolret.methods.toolrerank.config import PAPER_BEST, ToolRerankConfig
from toolret.methods.toolrerank.crossencoder import (CrossEncoderScorer, mine_training_pairs, mine_training_tuples,
                                                     train_cross_encoder)
from toolret.methods.toolrerank.hierarchy import SeenSet, apis_by_tool, is_multi_tool, parent_tool
from toolret.methods.toolrerank.rerank import (Library, QueryView, Setting, grid_search, rerank_m, select_ce_weight,
                                               toolrerank)
from toolret.metrics import per_query_metrics
from toolret.registry import BuildContext, build_component, component
from toolret.retrieval.committed_checkpoint import checkpoint_dir
from toolret.retrieval.dense import DenseRetriever
from toolret.retrieval.models import is_adapter
from toolret.roles import Corpus, index_retriever

if TYPE_CHECKING:
    from toolret.config import CoreParams

REPORT = "toolrerank.json"
SEEN = "seen.json"


def artifact_complete(folder: str | Path) -> bool:
    folder = Path(folder)
    return (folder / REPORT).is_file() and (folder / "model").is_dir() and (folder / SEEN).is_file()


def read_report(folder: str | Path) -> dict[str, Any]:
    path = Path(folder) / REPORT
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise CatalogError(f"{path}: not a ToolRerank artifact report ({e})") from None


def read_seen(folder: str | Path, level: str = "api"):
    path = Path(folder) / SEEN
    try:
        return SeenSet(json.loads(path.read_text(encoding="utf-8"))["apis"], level)
    except (OSError, ValueError, KeyError, TypeError, IndexError) as e:
        raise CatalogError(f"{path}: not a ToolRerank seen-API list ({e})") from None


def _work_dir(out_dir: Path, config: ToolRerankConfig, catalog: Catalog) -> Path:
    key = hashlib.sha256(json.dumps([config.training().to_dict(), catalog.name, len(catalog.tools)],
                                    sort_keys=True).encode()).hexdigest()[:12]
    return out_dir.with_name(f".{out_dir.name}.work-{key}")


def committed_key(work: Path, train: list, catalog: Catalog, documents: list[str]) -> str:
    """The key of a cross-encoder training's committed checkpoint: its work folder's (settings, catalog name
    and size) and the content it trains on (the sampled training queries, their gold tools, the documents), so
    that a checkpoint of a rebuilt catalog is never resumed."""

    data = {"train": [[q.id, q.text, sorted(catalog.gold(q.id))] for q in train], "documents": documents}
    return f"{work.name.rsplit('.work-', 1)[-1]}-{fingerprint(data)[:12]}"


def first_stage(catalog: Catalog, config: ToolRerankConfig, params: CoreParams, docs: str):
    """The retriever named by ``config.first_stage``, fitted and indexed on ``catalog``."""

    if component(config.first_stage).role != "retriever":
        raise CatalogError(f"toolrerank.first_stage {config.first_stage!r} is not a retriever")
    retriever = build_component(config.first_stage, BuildContext(catalog, params))
    retriever.fit(catalog)
    index_retriever(retriever, Corpus.from_catalog(catalog, docs))
    return retriever


def library(tools, seen):
    return Library(parents=[parent_tool(t) for t in tools], seen=np.array([seen.seen(t) for t in tools], dtype=bool),
                   seen_tools=set(seen.tools), by_tool=apis_by_tool(tools))


def _resolved(section, catalog: str):
    """A section as it applies to one training catalog (``finetune.datasets``): other catalogs' settings do not
    enter the key."""
    return section.for_dataset(catalog) if hasattr(section, "for_dataset") else section


def artifact_key(config: ToolRerankConfig, params: CoreParams, train_dataset: str) -> dict[str, Any]:
    """The inputs of a ToolRerank artifact (:mod:`toolret.artifact_key`): the training settings, the training
    data (a MANIFEST-verified dataset and the dev carving of ``catalog``), the base encoder, and the first
    stage that mines hard negatives and feeds the dev grid (its name and section)."""

    training = {k: v for k, v in config.training().to_dict().items() if k not in ("base_model", "train_dataset")}
    if not training["mix_datasets"]:  # nothing mixed in: the key of artifacts made before mixing existed
        del training["mix_datasets"], training["mix_queries"]
    if training["grid"].get("ce_weight") == [1.0]:  # no fusion searched: the key of artifacts made before it
        training["grid"] = {k: v for k, v in training["grid"].items() if k != "ce_weight"}
    dense_ft_catalog = params.trained_on.get(train_dataset, train_dataset)  # the first stage's dense-ft's
    sections = {s: _resolved(getattr(params, s), dense_ft_catalog).to_dict()
                for s in component(config.first_stage).sections if hasattr(params, s)}
    stage = {"component": config.first_stage, "sections": sections}
    return make_key("toolrerank", training, {"dataset": train_dataset, "catalog": params.catalog.to_dict()},
                    config.base_model, fingerprint(stage))


def train_artifact(catalog: Catalog, config: ToolRerankConfig, params: CoreParams, out_dir: str | Path,
                   docs: str = "original") -> dict[str, Any]:
    """Train (cross-encoder, classifier), select on dev, and write the artifact to ``out_dir``."""

    out_dir = Path(out_dir)
    train_all = catalog.split("train")
    if not train_all:
        raise CatalogError(f"toolrerank: dataset {catalog.name!r} has no train split to train the reranker on "
                           "(set toolrerank.train_dataset to a dataset with one)")
    dev = sample_queries(catalog.split("dev"), config.dev_queries, config.seed)
    if not dev:
        raise CatalogError(f"toolrerank: dataset {catalog.name!r} has no dev split for the grid search "
                           "(catalog.dev_fraction must be > 0)")
    train = sample_queries(train_all, config.train_queries, config.seed)
    work = _work_dir(out_dir, config, catalog)
    work.mkdir(parents=True, exist_ok=True)
    documents = catalog.docs(docs)
    retriever = first_stage(catalog, config, params, docs)

    mixed = _mixed_catalogs(config, params)

    # 1. the cross-encoder
    model_dir = work / "model"
    if not ((model_dir / "config.json").is_file() or is_adapter(model_dir)):  # written atomically: complete
        examples = _mine(train, catalog, retriever, documents, config)
        for mix, mix_train in mixed:
            examples += _mine(mix_train, mix, first_stage(mix, config, params, docs), mix.docs(docs), config)
        if mixed:
            random.Random(config.seed).shuffle(examples)
        ce = train_cross_encoder(examples, model_dir, base_model=config.base_model, max_length=config.max_length,
                                 epochs=config.epochs, batch_size=config.batch_size, lr=config.lr,
                                 warmup_ratio=config.warmup_ratio, seed=config.seed, loss=config.loss,
                                 in_batch_negatives=config.random_negatives, device=config.device, lora=config,
                                 checkpoint_dir=work / "checkpoints", save_steps=config.save_steps,
                                 committed=checkpoint_dir(out_dir),
                                 key=committed_key(work, train, catalog, documents))
        write_json(work / "cross_encoder.json", ce)
    ce_report = json.loads((work / "cross_encoder.json").read_text(encoding="utf-8"))

    # 2. the query-type classifier (training queries; accuracy on dev)
    clf = QueryTypeClassifier(params.dense)
    clf_train = sample_queries(train_all, config.classifier_queries, config.seed + 1)
    clf_report = clf.fit([q.text for q in clf_train], [is_multi_tool(catalog, q.id) for q in clf_train], config.seed)
    dev_multi = np.array([is_multi_tool(catalog, q.id) for q in dev])
    pred = clf.predict_multi([q.text for q in dev])
    clf_report["dev_accuracy"] = float((pred == dev_multi).mean())
    clf_report["dev_multi_fraction"] = float(dev_multi.mean())

    # 3. the dev grid on cached cross-encoder scores
    seen = SeenSet.from_queries(catalog, train, config.seen_level)
    for mix, mix_train in mixed:  # the mixed catalogs' gold APIs were seen in training too
        seen = SeenSet(seen.apis | SeenSet.from_queries(mix, mix_train).apis, config.seen_level)
    scorer = CrossEncoderScorer(model_dir, config.max_length, config.batch_size_predict, config.device,
                                config.score_cache, config.quantize)
    search = select_on(dev, catalog, retriever, scorer, clf, seen, config, params, documents)

    report = {"train_dataset": catalog.name, "config": config.training().to_dict(), "docs": docs,
              "n_train_queries": len(train), "n_train_split": len(train_all), "n_dev_queries": len(dev),
              "mixed": {mix.name: len(mix_train) for mix, mix_train in mixed},
              "cross_encoder": ce_report, "classifier": clf_report,
              "seen": {"apis": len(seen.apis), "tools": len(seen.tools), "level_default": config.seen_level},
              "grid": search, "selected": search["selected"], "paper_best": PAPER_BEST,
              "scorer": dict(scorer.stats)}
    with atomic_directory(out_dir) as tmp:
        shutil.copytree(model_dir, tmp / "model")
        clf.save(tmp)
        (tmp / SEEN).write_text(json.dumps({"apis": seen.to_list()}), encoding="utf-8")
        (tmp / REPORT).write_text(json.dumps(report, indent=1), encoding="utf-8")

        # the training data as `toolrerank.train_dataset` names it (a catalog folder's path, not the name inside
        # it): the identity every build of the component checks (toolret.methods.toolrerank._build)
        write_key(tmp, artifact_key(config, params, config.train_dataset or catalog.name))
    shutil.rmtree(work, ignore_errors=True)
    return report


def select_on(queries, catalog: Catalog, retriever, scorer, classifier, seen, config: ToolRerankConfig,
              params: CoreParams, documents: list[str]) -> dict[str, Any]:
    """The grid of paper Table 2 and then the fusion weight (``grid.ce_weight``) on ``queries`` of ``catalog``: their
    first-stage top ``candidates`` scored once (score cache), each query routed by ``classifier``, ``seen`` the
    training APIs. ``search["selected"]`` holds m_s / m_u / tau_s / tau_m / n / ce_weight; ``dev_baselines`` the
    first stage, Rerank-m and the hierarchy variants (oracle: the queries' gold query types) at that setting."""

    lib = library(catalog.tools, seen)
    pos = {t: i for i, t in enumerate(catalog.tool_ids)}
    ranking = retriever.search([q.text for q in queries], config.candidates)
    cands = [[int(i) for i in row if i >= 0] for row in ranking.indices]
    scorer.score_pairs([(q.text, documents[c]) for q, row in zip(queries, cands) for c in row], progress=True)
    views = _views(queries, cands, scorer, documents, _document_embeddings(params, documents))
    modes = ["multi" if m else "single" for m in classifier.predict_multi([q.text for q in queries])]
    gold = [{pos[t] for t in catalog.gold(q.id)} for q in queries]
    search = _grid_search(views, modes, gold, lib, config.grid, config)
    oracle = ["multi" if is_multi_tool(catalog, q.id) else "single" for q in queries]
    search["dev_baselines"] = _dev_baselines(views, gold, lib, search["selected"], config, modes, oracle,
                                             config.grid.metric)
    search["ce_weight"] = _select_ce_weight(views, modes, gold, lib, search["selected"], config)
    search["selected"]["ce_weight"] = search["ce_weight"]["selected"]
    return search


def grid_command(args, params: CoreParams, catalog: Catalog) -> None:
    """``toolret toolrerank-grid``: :func:`select_on` for a trained ``--artifact`` on ``--queries`` seeded queries of
    a catalog's ``--split`` (a dev catalog shaped like the target, never a benchmark's test split), beside the
    setting the artifact selected on its own dev split; JSON on stdout."""

    artifact = Path(args.artifact)
    report = read_report(artifact)
    config = params.toolrerank.component_config()
    queries = sample_queries(catalog.split(args.split), args.queries, args.seed)
    if not queries:
        raise CatalogError(f"toolrerank-grid: {catalog.name!r} has no {args.split!r} queries")
    docs = report.get("docs", "original")
    scorer = CrossEncoderScorer(artifact / "model", report["config"]["max_length"], config.batch_size_predict,
                                config.device, config.score_cache, config.quantize)
    search = select_on(queries, catalog, first_stage(catalog, config, params, docs), scorer,
                       QueryTypeClassifier.load(artifact), read_seen(artifact, config.seen_level), config, params,
                       catalog.docs(docs))
    print(json.dumps({"catalog": catalog.name, "split": args.split, "artifact": str(artifact),
                      "artifact_selected": report["selected"], **search}))


def _mixed_catalogs(config: ToolRerankConfig, params: CoreParams) -> list[tuple[Catalog, list]]:
    """``(catalog, its sampled training queries)`` for each of ``config.mix_datasets``."""

    out = []
    for name in config.mix_datasets:
        mix = load_dataset_for(name, params)
        queries = mix.split("train")
        if not queries:
            raise CatalogError(f"toolrerank.mix_datasets: {name!r} has no train split to mix into training")
        out.append((mix, sample_queries(queries, config.mix_queries, config.seed)))
    return out


def _mine(queries, catalog: Catalog, retriever, documents: list[str], config: ToolRerankConfig) -> list:
    """Training examples of ``queries`` (gold + the first stage's hard negatives over ``catalog``)."""

    pos = {t: i for i, t in enumerate(catalog.tool_ids)}
    texts, golds = [q.text for q in queries], [{pos[t] for t in catalog.gold(q.id)} for q in queries]
    ranked = [list(r) for r in retriever.search(texts, config.hard_negative_depth).indices]
    if config.loss == "bce":
        return mine_training_pairs(texts, golds, ranked, documents, hard_negatives=config.hard_negatives,
                                   hard_negative_depth=config.hard_negative_depth,
                                   random_negatives=config.random_negatives, seed=config.seed)
    return mine_training_tuples(texts, golds, ranked, documents, hard_negatives=config.hard_negatives,
                                hard_negative_depth=config.hard_negative_depth, seed=config.seed)


def _document_embeddings(params: CoreParams, documents: list[str]) -> np.ndarray:
    return DenseRetriever(params.dense).encode_documents(documents)


def _views(queries, cands, scorer, documents, emb):
    def view(text, row):
        return QueryView(row, score_fn=lambda items: scorer.score_pairs([(text, documents[i]) for i in items]),
                         sim_fn=lambda items: emb[items] @ emb[items].T)

    return [view(q.text, row) for q, row in zip(queries, cands)]


def _grid_search(views, modes, gold, lib, grid, config: ToolRerankConfig) -> dict[str, Any]:
    values = {k: getattr(grid, k) for k in ("m_s", "m_u", "tau_s", "tau_m", "n")}
    return grid_search(views, modes, gold, lib, values, grid.metric, PAPER_BEST,
                       extend_unseen=config.extend_unseen, extend_seen=config.extend_seen)


def _select_ce_weight(views, modes, gold, lib, selected, config: ToolRerankConfig) -> dict[str, Any]:
    """``grid.ce_weight``: the fusion weight of the reranked order (at the selected setting) with the first
    stage's, chosen on the same dev queries after the rest of the grid."""

    s = Setting(**selected, extend_unseen=config.extend_unseen, extend_seen=config.extend_seen)
    reranked = [toolrerank(v, m, s, lib) for v, m in zip(views, modes)]
    return select_ce_weight(reranked, [list(v.candidates) for v in views], gold, config.grid.ce_weight,
                            config.grid.metric)


def _dev_baselines(views, gold, lib, selected, config, modes, oracle, metric) -> dict[str, float]:
    """Dev ``metric`` of the first stage, Rerank-m and the hierarchy variants at the selected setting."""

    k = int(metric.split("@")[1])
    gold_map = {str(i): {str(t) for t in g} for i, g in enumerate(gold)}

    def mean(make) -> float:
        ranked = {str(i): [str(t) for t in make(i)] for i in range(len(views))}
        return float(per_query_metrics(ranked, gold_map, [k])[1][metric].mean())

    s = Setting(**selected, extend_unseen=config.extend_unseen, extend_seen=config.extend_seen)
    out = {"first_stage": mean(lambda i: views[i].candidates)}
    for m in sorted(set(config.grid.m_s) | set(config.grid.m_u)):
        out[f"rerank-{m}"] = mean(lambda i, m=m: rerank_m(views[i], m))
    for mode in ("none", "single", "multi"):
        out[f"toolrerank[{mode}]"] = mean(lambda i, mode=mode: toolrerank(views[i], mode, s, lib))
    out["toolrerank[classifier]"] = mean(lambda i: toolrerank(views[i], modes[i], s, lib))
    out["toolrerank[oracle]"] = mean(lambda i: toolrerank(views[i], oracle[i], s, lib))
    return out


__all__ = ["artifact_complete", "artifact_key", "first_stage", "grid_command", "library", "read_report", "read_seen",
           "sample_queries", "select_on", "train_artifact"]
