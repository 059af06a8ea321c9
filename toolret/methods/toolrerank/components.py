"""ToolRerank and Rerank-m on the common method shape (role: Reranker).

- :class:`ToolRerankReranker` (``toolrerank-ce``): Adaptive Truncation + the trained cross-encoder +
  Hierarchy-Aware Reranking (classifier-routed Alg. 1 with the extended list / Alg. 2); ``plain_m`` set:
  Rerank-m (``ce-top10`` / ``ce-top30`` / ``ce-top50``), the same cross-encoder over the top ``m``.

Both read the trained artifact (``data/models/<train dataset>/toolrerank``); ``fit`` (and, when the
artifact is still absent, the first ``rerank``) trains it through the builder's ``trainer``. ``index``
keeps the library (documents + hierarchy from the catalog's tool records). A saved component holds
its config, the artifact path, the tool records and the document embeddings of Alg. 2.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from toolret.artifact_key import require_current
from toolret.atomic import atomic_directory
from toolret.catalog.model import Catalog, Tool
from toolret.errors import CatalogError
from toolret.jsonl_artifacts import read_jsonl
from toolret.methods.toolrerank.algorithms import adaptive_truncation
from toolret.methods.toolrerank.classifier import QueryTypeClassifier
from toolret.methods.toolrerank.config import ToolRerankConfig
from toolret.methods.toolrerank.crossencoder import CrossEncoderScorer
from toolret.methods.toolrerank.rerank import QueryView, Setting, fuse_with_first_stage, rank_rows, rerank_m, toolrerank
from toolret.methods.toolrerank.training import artifact_complete, library, read_report, read_seen
from toolret.paths import project_path
from toolret.registry import COMPONENT_FILE, write_component_meta
from toolret.roles import Ranking
from toolret.retrieval.dense import DenseConfig, DenseRetriever


def view_texts(queries: Sequence[str], rewrites: Sequence[Sequence[str]] | None) -> list[list[str]]:
    """The texts the cross-encoder scores each API against: the query, then its distinct rewrites."""
    if rewrites is None:
        return [[q] for q in queries]
    if len(rewrites) != len(queries):
        raise CatalogError(f"toolrerank-ce: {len(rewrites)} rewrite groups for {len(queries)} queries")
    return [list(dict.fromkeys([q, *(r for r in group if r.strip())])) for q, group in zip(queries, rewrites)]


def max_view_scores(scorer, texts: Sequence[str], docs: Sequence[str], items: Sequence[int]) -> np.ndarray:
    """Each API's cross-encoder score: the max over ``texts`` (one text: its plain score)."""
    per_text = [np.asarray(scorer.score_pairs([(t, docs[c]) for c in items]), dtype=float) for t in texts]
    return np.max(np.stack(per_text), axis=0)


class ToolRerankReranker:
    name = "toolrerank-ce"

    def __init__(self, config: ToolRerankConfig, artifact: str | Path, *, plain_m: int | None = None,
                 dense_config=None, trainer: Callable[[], Any] | None = None,
                 oracle: Mapping[str, bool] | None = None, expected_key: Mapping[str, Any] | None = None) -> None:
        self.config = config
        self.artifact = Path(artifact)
        self.plain_m = plain_m
        self.dense_config = dense_config or DenseConfig()
        self.trainer = trainer
        self.oracle = dict(oracle) if oracle is not None else None
        self.expected_key = dict(expected_key) if expected_key is not None else None
        self._checked = False
        self.tool_ids: list[str] = []
        self.tools: list[Tool] = []
        self.documents: list[str] = []
        self._emb: np.ndarray | None = None
        self._scorer = None
        self._classifier = None
        self._lib = None
        self._setting = None
        self.stats: dict[str, Any] = {}

    # ------------------------------------------------------------------ role
    @property
    def reads_rewrites(self) -> bool:
        """Whether the pipeline passes its rewriter's rewrites (``score_views: rewrites``)."""
        return self.config.score_views == "rewrites"

    @property
    def candidate_depth(self) -> int:
        """First-stage results this reranker asks for (the pipeline searches at least this deep)."""
        return self.plain_m or self.config.candidates

    @property
    def trained(self) -> bool:
        return artifact_complete(self.artifact)

    def fit(self, catalog: Catalog) -> None:
        """Train the artifact unless it exists (on ``toolrerank.train_dataset``; never modified when present)."""
        self._ensure_trained()

    def _ensure_trained(self) -> None:
        if self.trained:
            if self.expected_key is not None and not self._checked:

                require_current(self.artifact, self.expected_key,
                                f"remove {self.artifact} and run `toolret fit --component {self.name} --dataset "
                                f"<toolrerank.train_dataset> --out {self.artifact}`")
                self._checked = True
            return
        if self.trainer is None:
            raise CatalogError(f"{self.name}: {self.artifact} is not a trained ToolRerank artifact; train it with "
                               f"`toolret fit --component {self.name} --dataset <train dataset> --out {self.artifact}`")
        self.trainer()
        if not self.trained:
            raise CatalogError(f"{self.name}: training did not produce {self.artifact}")

    def index(self, corpus) -> None:
        self.tool_ids, self.documents, self.tools = list(corpus.tool_ids), list(corpus.documents), list(corpus.tools)
        self._emb, self._lib = None, None

    # ------------------------------------------------------------------ parts (lazy)
    @property
    def scorer(self):
        if self._scorer is None:

            self._ensure_trained()
            self._scorer = CrossEncoderScorer(self.artifact / "model", self.config.max_length,
                                              self.config.batch_size_predict, self.config.device,
                                              self.config.score_cache, self.config.quantize)
        return self._scorer

    @property
    def library(self):
        if self._lib is None:

            self._ensure_trained()
            self._lib = library(self.tools, read_seen(self.artifact, self.config.seen_level))
        return self._lib

    def setting(self):
        """The run's hyperparameters: params values where set, else the artifact's dev-selected ones."""
        if self._setting is None:

            self._ensure_trained()
            selected = read_report(self.artifact)["selected"]
            values = {k: getattr(self.config, k) if getattr(self.config, k) is not None else selected[k]
                      for k in ("m_s", "m_u", "tau_s", "tau_m", "n")}
            self._setting = Setting(**values, extend_unseen=self.config.extend_unseen,
                                    extend_seen=self.config.extend_seen)
        return self._setting

    def embeddings(self) -> np.ndarray:
        if self._emb is None:

            self._emb = DenseRetriever(self.dense_config).encode_documents(self.documents)
        return self._emb

    def query_modes(self, queries: Sequence[str]) -> list[str]:
        """Which algorithm each query gets (``hierarchy``: the classifier, the oracle, or one for all)."""
        mode = self.config.hierarchy
        if mode in ("none", "single", "multi"):
            return [mode] * len(queries)
        if mode == "oracle":
            if self.oracle is None:
                raise CatalogError(f"{self.name}: hierarchy 'oracle' needs the catalog's gold query types")
            missing = [q for q in queries if q not in self.oracle]
            if missing:
                raise CatalogError(f"{self.name}: no gold query type for query {missing[0]!r} (oracle mode)")
            return ["multi" if self.oracle[q] else "single" for q in queries]
        if self._classifier is None:

            self._ensure_trained()
            self._classifier = QueryTypeClassifier.load(self.artifact)
        return ["multi" if m else "single" for m in self._classifier.predict_multi(list(queries))]

    # ------------------------------------------------------------------ rerank
    def _candidates(self, ranking: Ranking) -> list[list[int]]:
        """Each row's first-stage results (all of them) as positions in this reranker's library."""
        if ranking.tool_ids == self.tool_ids:
            remap = None
        else:
            where = {t: i for i, t in enumerate(self.tool_ids)}
            unknown = [t for t in ranking.tool_ids if t not in where]
            if unknown:
                raise CatalogError(f"{self.name}: the first stage ranks tools this reranker was not indexed on "
                                   f"(first: {unknown[0]!r})")
            remap = [where[t] for t in ranking.tool_ids]
        out = []
        for row in ranking.indices:
            cands = [int(i) for i in row if i >= 0]
            out.append(cands if remap is None else [remap[i] for i in cands])
        return out

    def rerank(self, queries: Sequence[str], ranking: Ranking, k: int,
               rewrites: Sequence[Sequence[str]] | None = None) -> Ranking:
        from tqdm import tqdm

        if not self.tool_ids:
            raise CatalogError(f"{self.name}: rerank before index")
        queries = list(queries)
        full = self._candidates(ranking)
        cands = [row[: self.candidate_depth] for row in full]  # C; deeper results follow the reranked list
        scorer, docs = self.scorer, self.documents
        if self.plain_m is None:
            setting, lib = self.setting(), self.library
            modes = self.query_modes(queries)
            first = [[row[p] for p in adaptive_truncation([bool(lib.seen[c]) for c in row], setting.m_s, setting.m_u)]
                     for row in cands]
        else:
            first = [row[: self.plain_m] for row in cands]
        # score every truncated list in one batch (cached); the extended list adds a few pairs per query
        texts = view_texts(queries, rewrites if self.reads_rewrites else None)
        scorer.score_pairs([(t, docs[c]) for ts, row in zip(texts, first) for t in ts for c in row],
                           progress=len(queries) > 50)
        emb = self.embeddings() if self.plain_m is None and "multi" in modes else None
        out_rows, info_sum = [], {"t": 0, "f1": 0, "extended": 0}
        # the extended lists are scored per query (on a 46,879-API corpus they can hold hundreds of APIs)
        for i, row in enumerate(tqdm(cands, desc=f"{self.name} rerank", unit="query", disable=len(queries) <= 50)):
            view = QueryView(row, score_fn=lambda items, ts=texts[i]: max_view_scores(scorer, ts, docs, items),
                             sim_fn=(lambda items: emb[items] @ emb[items].T) if emb is not None else None)
            if self.plain_m is None:
                info: dict[str, Any] = {}
                out_rows.append(toolrerank(view, modes[i], setting, lib, info))
                for key in info_sum:
                    info_sum[key] += info[key]
            else:
                out_rows.append(rerank_m(view, self.plain_m))
            out_rows[-1] += [c for c in full[i][len(row):] if c not in set(out_rows[-1])]
        self._update_stats(len(queries), info_sum, modes if self.plain_m is None else None)
        reranked = rank_rows(out_rows, list(ranking.query_ids), self.tool_ids, k)
        weight = self.ce_weight()
        if weight >= 1.0:
            return reranked
        first_stage = rank_rows(full, list(ranking.query_ids), self.tool_ids, k)
        return fuse_with_first_stage(reranked, first_stage, weight, reranked.indices.shape[1])

    def ce_weight(self) -> float:
        """``toolrerank.ce_weight`` where set, else the artifact's dev-selected one (1.0, the paper's reranked
        order alone, for an artifact selected without a ``grid.ce_weight``)."""
        if self.config.ce_weight is not None:
            return self.config.ce_weight

        self._ensure_trained()
        return float(read_report(self.artifact)["selected"].get("ce_weight", 1.0))

    def _update_stats(self, n: int, info: dict[str, int], modes: list[str] | None) -> None:
        st = self.stats
        st["queries"] = st.get("queries", 0) + n
        if modes is not None:
            st["multi_routed"] = st.get("multi_routed", 0) + sum(m == "multi" for m in modes)
            for key, v in info.items():
                st[f"sum_{key}"] = st.get(f"sum_{key}", 0) + v
            st["setting"] = {k: getattr(self._setting, k) for k in ("m_s", "m_u", "tau_s", "tau_m", "n",
                                                                     "extend_unseen", "extend_seen")}
            st["hierarchy"] = self.config.hierarchy
        st["cross_encoder"] = dict(self.scorer.stats)

    # ------------------------------------------------------------------ persistence
    def save(self, path: str | Path) -> None:
        with atomic_directory(path) as tmp:
            rows = [{"id": t.id, "name": t.name, "tool": t.tool, "category": t.category, "document": d}
                    for t, d in zip(self.tools, self.documents)]
            (tmp / "tools.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                                             encoding="utf-8")
            if self.plain_m is None and self.config.hierarchy in ("classifier", "multi", "oracle") and self.documents:
                np.save(tmp / "embeddings.npy", self.embeddings())
            write_component_meta(tmp, self.name, config=self.config.to_dict(), artifact=str(self.artifact),
                                 plain_m=self.plain_m, dense=self.dense_config.to_dict(), oracle=self.oracle)

    @classmethod
    def load(cls, path: str | Path) -> ToolRerankReranker:
        path = Path(path)
        meta = json.loads((path / COMPONENT_FILE).read_text(encoding="utf-8"))

        r = cls(ToolRerankConfig.model_validate(meta["config"]), project_path(meta["artifact"]), plain_m=meta.get("plain_m"),
                dense_config=DenseConfig.model_validate(meta["dense"]), oracle=meta.get("oracle"))

        rows = read_jsonl(path / "tools.jsonl")
        r.tools = [Tool(id=x["id"], name=x["name"], docs={"original": x["document"]}, tool=x["tool"],
                        category=x["category"]) for x in rows]
        r.tool_ids, r.documents = [x["id"] for x in rows], [x["document"] for x in rows]
        if (path / "embeddings.npy").is_file():
            r._emb = np.load(path / "embeddings.npy")
        return r


__all__ = ["ToolRerankReranker", "max_view_scores", "view_texts"]
