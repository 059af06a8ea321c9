"""``dense-ft``: the dense retriever over an encoder fine-tuned on the catalog's train split.

The fine-tune artifact is a folder holding ``model/`` (sentence-transformers weights) and
``finetune.json`` (the training report) and ``artifact_key.json`` (its inputs). ``fit`` trains it when
absent (resumable, dev-selected: see :mod:`toolret.retrieval.finetune`), never modifies it when present,
and refuses it when its recorded inputs differ from the current params and data (:mod:`toolret.artifact_key`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from toolret.artifact_key import require_current
from toolret.catalog.model import Catalog
from toolret.errors import CatalogError
from toolret.retrieval.dense import DenseConfig, DenseRetriever
from toolret.retrieval.finetune import FinetuneConfig, artifact_key, finetune


class FinetunedDenseRetriever(DenseRetriever):
    """A :class:`DenseRetriever` whose encoder is ``<artifact>/model`` (queries cut at the fine-tuning
    ``max_seq_length``)."""

    name = "dense-ft"

    def __init__(self, artifact: str | Path, finetune: FinetuneConfig | None = None,
                 dense: DenseConfig | None = None, training_catalog: Callable[[], Catalog] | None = None) -> None:
        self.artifact = Path(artifact)
        # where fit learns (a loader: called only when fitting): None = the catalog fit is given
        self._training_catalog = training_catalog
        self.finetune_config = finetune or FinetuneConfig()
        dense = dense or DenseConfig()
        super().__init__(dense.replace(model=str(self.artifact / "model"),
                                       max_seq_length=self.finetune_config.max_seq_length))

    @property
    def trained(self) -> bool:
        return (self.artifact / "model").is_dir()

    def fit(self, catalog: Catalog) -> None:
        """Train on ``catalog``'s train split (or the training catalog's, where one was given) unless the
        artifact exists (and was made from these inputs)."""
        if self._training_catalog is not None:
            catalog = self._training_catalog()
        if not catalog.split("train"):
            raise CatalogError(f"dense-ft: dataset {catalog.name!r} has no training split to fine-tune on")

        if self.trained:

            require_current(self.artifact, artifact_key(catalog, self.finetune_config),
                            f"remove {self.artifact} and run `toolret fit --component dense-ft --dataset {catalog.name} "
                            f"--out {self.artifact}` (or `dvc repro finetune@{catalog.name}`)")
            return

        finetune(catalog, self.artifact, self.finetune_config)

    @property
    def encoder(self):
        if not self.trained:
            raise CatalogError(f"dense-ft: {self.artifact} is not a fine-tune artifact (no model/ inside); "
                               "fit it first (`toolret fit --component dense-ft ...`)")
        return super().encoder

    def training_report(self) -> dict:
        path = self.artifact / "finetune.json"
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
