"""The single-tool / multi-tool query classifier (paper Sec. 3.3), trained on the reranker's training data.

A logistic regression (scikit-learn, balanced class weights) on the bi-encoder's L2-normalised query
embedding; label 1 = multi-tool (the query's gold APIs belong to more than one tool). Saved as JSON
(weights, bias, the encoder's ``DenseConfig``), so loading needs no pickle.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from toolret.errors import CatalogError
from toolret.retrieval.dense import DenseConfig, DenseRetriever

FILE = "classifier.json"


class QueryTypeClassifier:
    def __init__(self, dense_config, coef: np.ndarray | None = None, intercept: float = 0.0) -> None:
        self.dense_config = dense_config
        self.coef = None if coef is None else np.asarray(coef, dtype=np.float64)
        self.intercept = float(intercept)
        self._encoder = None

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        if self._encoder is None:

            self._encoder = DenseRetriever(self.dense_config)
        return self._encoder.encode(list(texts)).astype(np.float64)

    def fit(self, texts: Sequence[str], multi: Sequence[bool], seed: int = 13) -> dict[str, Any]:
        from sklearn.linear_model import LogisticRegression

        y = np.asarray(multi, dtype=np.int64)
        if len(set(y.tolist())) < 2:  # one class only: a constant classifier
            self.coef = np.zeros(self._encode(texts[:1]).shape[1])
            self.intercept = 10.0 if y.size and y[0] else -10.0
            return {"n": int(y.size), "multi_fraction": float(y.mean()) if y.size else 0.0, "constant": True}
        clf = LogisticRegression(class_weight="balanced", max_iter=2000, random_state=seed)
        clf.fit(self._encode(texts), y)
        self.coef, self.intercept = clf.coef_[0].astype(np.float64), float(clf.intercept_[0])
        return {"n": int(y.size), "multi_fraction": float(y.mean())}

    def predict_multi(self, texts: Sequence[str]) -> np.ndarray:
        if self.coef is None:
            raise ValueError("query-type classifier used before fit/load")
        if not len(texts):
            return np.zeros(0, dtype=bool)
        return (self._encode(texts) @ self.coef + self.intercept) > 0

    def save(self, folder: str | Path) -> None:
        (Path(folder) / FILE).write_text(json.dumps({"dense": self.dense_config.to_dict(),
                                                     "coef": self.coef.tolist(), "intercept": self.intercept}),
                                         encoding="utf-8")

    @classmethod
    def load(cls, folder: str | Path) -> QueryTypeClassifier:
        path = Path(folder) / FILE
        try:
            meta = json.loads(path.read_text(encoding="utf-8"))
            return cls(DenseConfig.model_validate(meta["dense"]), np.asarray(meta["coef"]), meta["intercept"])
        except (OSError, ValueError, KeyError) as e:
            raise CatalogError(f"{path}: not a ToolRerank query-type classifier ({e})") from None


__all__ = ["QueryTypeClassifier"]
