"""The ``colt`` retriever: semantic encoder (dense-ft by default) + learned tool representations.

``fit(catalog)`` trains the semantic stage when it is absent (dense-ft's own ``fit``), encodes the train /
dev queries and the tool documents, builds the train graphs, trains the collaborative stage with dev
selection and writes the artifact (``data/models/<dataset>/<colt.model_name>``):

    colt.json   settings, the encoder's identity, tool ids, sha256 of the documents and of the train / dev
                data, the training report (dev curve, selected epoch, graph sizes); the training time goes
                to the run-info sidecar (``toolret.evaluation.run_info_path``), so the artifact is deterministic
    tools.npy   the selected tool representations (tool-centric view) [n_tools, d]
    scenes.npz  scene representations of both views (analysis only) and each scene's tools

A present artifact is used as is when it matches the settings, encoder, tools and data (else a clear
error: delete it or choose another ``colt.model_name`` / ``--model``). Queries at search time are new,
isolated nodes: score(q, t) = 2 cos(e_q, t) with e_q the semantic embedding.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from toolret.atomic import atomic_directory, write_json
from toolret.catalog.model import Catalog
from toolret.errors import CatalogError
from toolret.evaluation import run_info_path
from toolret.methods.colt.config import ColtConfig
from toolret.paths import portable_path
from toolret.registry import COMPONENT_FILE, write_component_meta
from toolret.roles import Ranking
from toolret.retrieval.dense import DenseConfig, DenseRetriever
from toolret.retrieval.embedding_store import encoder_fingerprint

ARTIFACT_FILE = "colt.json"


def _sha(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, ensure_ascii=False, sort_keys=True).encode("utf-8")).hexdigest()


def docs_sha(tool_ids: Sequence[str], documents: Sequence[str]) -> str:
    return _sha([list(tool_ids), list(documents)])


def learning_data_sha(catalog: Catalog) -> str:
    """Identity of what COLT learns and selects from: train and dev queries with their gold tools."""
    rows = [[q.id, q.text, q.split, sorted(catalog.gold(q.id))] for s in ("train", "dev") for q in catalog.split(s)]
    return _sha(rows)


class ColtRetriever:
    """COLT as a :class:`toolret.roles.Retriever` (see the module docstring)."""

    name = "colt"

    def __init__(self, config: ColtConfig, encoder: DenseRetriever, artifact: str | Path | None = None) -> None:
        self.config = config
        self.encoder = encoder  # DenseRetriever or FinetunedDenseRetriever (the semantic stage)
        self.artifact = Path(artifact) if artifact is not None else None
        self._tools: np.ndarray | None = None
        self._meta: dict[str, Any] = {}
        self.stats: dict[str, Any] = {}

    @property
    def tool_ids(self) -> list[str]:
        return self.encoder.tool_ids

    # ------------------------------------------------------------------ fit
    def encoder_fingerprint(self) -> str:
        """The semantic encoder's content hash (weights, max length, normalisation): a moved checkout or
        another path to the same weights matches, retrained weights do not."""

        return encoder_fingerprint(self.encoder.config)

    def _expected(self, catalog: Catalog) -> dict[str, Any]:
        docs = catalog.docs(self.config.docs)
        return {"settings": self.config.learned_settings(), "encoder_fingerprint": self.encoder_fingerprint(),
                "tool_ids": list(catalog.tool_ids), "docs_sha256": docs_sha(catalog.tool_ids, docs),
                "data_sha256": learning_data_sha(catalog)}

    def fit(self, catalog: Catalog) -> None:
        """Train the semantic stage if absent, then COLT unless a matching artifact exists."""
        if self._tools is not None:
            return
        self.encoder.fit(catalog)  # dense-ft trains itself when its artifact is absent; dense: no-op
        expected = self._expected(catalog)
        if self.artifact is not None and (self.artifact / ARTIFACT_FILE).is_file():
            self._load_artifact(self.artifact)
            stored = {k: self._meta.get(k) for k in expected}
            diff = sorted(k for k in expected if stored[k] != expected[k])
            if diff:
                self._tools, self._meta = None, {}
                detail = {k: (stored[k], expected[k]) for k in diff if k in ("settings", "encoder_fingerprint")}
                raise CatalogError(f"colt: the artifact {self.artifact} was learned with other {diff} than asked "
                                   f"({detail or 'see colt.json'}); delete it, or set another colt.model_name / "
                                   "--model")
            return
        self._train(catalog, expected)

    def _train(self, catalog: Catalog, expected: dict[str, Any]) -> None:
        from toolret.methods.colt.graphs import build_train_graphs
        from toolret.methods.colt.train import train_colt

        graphs = build_train_graphs(catalog, "train")
        position = {t: i for i, t in enumerate(catalog.tool_ids)}
        text = {q.id: q.text for q in catalog.queries}
        dev = catalog.split("dev")
        enc = self.encoder.encode_documents  # through the embedding store: ablation rows encode once
        query_features = enc([text[q] for q in graphs.query_ids])
        tool_features = enc(catalog.docs(self.config.docs))
        dev_features = enc([q.text for q in dev]) if dev else np.zeros((0, tool_features.shape[1]), np.float32)
        dev_gold = [sorted(position[t] for t in catalog.gold(q.id)) for q in dev]
        result = train_colt(graphs, query_features, tool_features, dev_features, dev_gold, self.config)
        self._tools = result.tools
        self._meta = {"component": self.name, **expected, "encoder_model": portable_path(self.encoder.config.model),
                      "dataset": catalog.name,
                      "train_query_ids_sha256": _sha(graphs.query_ids), "training": result.report}
        self.stats = self._stats()
        if self.artifact is not None:
            with atomic_directory(self.artifact) as tmp:
                np.save(tmp / "tools.npy", result.tools)
                np.savez(tmp / "scenes.npz", **result.scenes,
                         scene_tools=np.array([",".join(map(str, s)) for s in graphs.scenes]))
                (tmp / ARTIFACT_FILE).write_text(json.dumps(self._meta, indent=1), encoding="utf-8")

            write_json(run_info_path(self.artifact), result.run_info)

    def _load_artifact(self, path: Path) -> None:
        meta_file = path / ARTIFACT_FILE
        try:
            self._meta = json.loads(meta_file.read_text(encoding="utf-8"))
            self._tools = np.load(path / "tools.npy")
        except (OSError, ValueError) as e:
            raise CatalogError(f"colt: {path} is not a readable COLT artifact: {e}") from None
        if len(self._tools) != len(self._meta.get("tool_ids", [])):
            raise CatalogError(f"colt: {path}/tools.npy has {len(self._tools)} rows for "
                               f"{len(self._meta.get('tool_ids', []))} tool ids in {ARTIFACT_FILE}")
        self.stats = self._stats()

    def _stats(self) -> dict[str, Any]:
        training = self._meta.get("training", {})
        return {"best_epoch": training.get("best", {}).get("epoch"), "epochs_run": training.get("epochs_run"),
                "dev": {k: v for k, v in training.get("best", {}).items() if k != "epoch"},
                "graphs": training.get("graphs"), "encoder": self._meta.get("encoder_model")}

    # ------------------------------------------------------------------ index / search
    def index(self, tool_ids: Sequence[str], documents: Sequence[str]) -> None:
        if self._tools is None:
            if self.artifact is None or not (self.artifact / ARTIFACT_FILE).is_file():
                raise CatalogError("colt: not fitted (no artifact); fit it first (`toolret fit --component colt ...`)")
            self._load_artifact(self.artifact)
        if list(tool_ids) != self._meta["tool_ids"]:
            raise CatalogError(f"colt: the learned model covers {len(self._meta['tool_ids'])} other tools than the "
                               f"{len(tool_ids)} being indexed")
        if docs_sha(tool_ids, documents) != self._meta["docs_sha256"]:
            raise CatalogError(f"colt: the model was learned on the {self._meta['settings']['docs']!r} documents "
                               "(colt.docs); index those (--docs " + self._meta["settings"]["docs"] + ")")
        self.encoder.index_embeddings(tool_ids, _l2(self._tools))

    def search(self, queries: Sequence[str], k: int, query_ids: Sequence[str] | None = None) -> Ranking:
        ranking = self.encoder.search_embeddings(_l2(self.encoder.encode(queries)), k, query_ids)
        ranking.scores = 2.0 * ranking.scores  # both views of an isolated query are its semantic embedding
        return ranking

    # ------------------------------------------------------------------ persistence
    def save(self, path: str | Path) -> None:
        if self._tools is None:
            raise CatalogError("colt: nothing to save (not fitted)")
        with atomic_directory(path) as tmp:
            np.save(tmp / "tools.npy", self._tools)
            write_component_meta(tmp, self.name, config=self.config.to_dict(), encoder=self.encoder.config.to_dict(),
                                 tool_ids=self.encoder.tool_ids,
                                 artifact={k: self._meta.get(k) for k in ("encoder_fingerprint", "encoder_model",
                                                                          "docs_sha256", "data_sha256", "tool_ids",
                                                                          "settings")},
                                 stats=self.stats)

    @classmethod
    def load(cls, path: str | Path) -> ColtRetriever:
        path = Path(path)
        meta = json.loads((path / COMPONENT_FILE).read_text(encoding="utf-8"))
        r = cls(ColtConfig(**meta["config"]), DenseRetriever(DenseConfig(**meta["encoder"])))
        r._tools = np.load(path / "tools.npy")
        r._meta = meta["artifact"]
        r.stats = meta.get("stats", {})
        r.encoder.index_embeddings(meta["tool_ids"], _l2(r._tools))
        return r


def _l2(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    return np.ascontiguousarray(x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12))


__all__ = ["ColtRetriever", "docs_sha", "learning_data_sha"]
