"""COLT settings (``params.yaml: colt``): the authors' defaults (their ``config.yaml`` for ToolLens and
``models/COLT.py``) are the single source; choices the paper and code leave open are ours, written here:

- the semantic stage is the project's ``dense-ft`` (MiniLM fine-tuned with in-batch negatives) instead of
  the authors' BEIR-fine-tuned Contriever; ``encoder`` switches it (``dense`` = the frozen zero-shot
  encoder, i.e. COLT without semantic learning; or any encoder / dense-ft artifact folder);
- graphs are built from the TRAIN split only (the authors build them from their train file too); dev and
  test queries are isolated nodes whose representation is their semantic embedding, in both views;
- a scene's layer-0 feature is the mean of its tools' current (trainable) features (paper Eq. 5); the
  authors' code computes it once from the initial features;
- edge dropout drops each undirected edge once (the authors' code drops the two directions of the
  bipartite block matrix independently), resampled every epoch on Q-T, Q-S and S-T, then renormalised;
- model selection on the dev split carved from train (the authors select on ``query_tool_tune.txt``, which
  is byte-identical to their test file): a state is kept when dev Recall@3 AND COMP@3 both improve on the
  best so far (their rule), the initial state (epoch 0) included; early stop after ``patience`` epochs
  without a new best; at most ``max_epochs``;
- one training example per train query (the authors: one per query-scene pair, i.e. the same); its list
  holds the gold tools plus uniformly sampled non-gold tools up to ``list_size`` (sampled every epoch);
- ``views``: ``both`` (the method), ``tool`` (tool-centric view only, score 2·cos(q_T, t_T), no
  contrastive term) or ``scene`` (scene-centric view only: tools keep their layer-0 features, score
  2·cos(q_S, t), no contrastive term) -- the "one view only" ablations.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from toolret.config import ComponentSection, GridVariant, StrictModel


class ColtConfig(StrictModel):
    """What determines a learned COLT model (plus where it lives: ``model_name``).

    Attributes:
        encoder: the semantic stage: ``dense-ft`` (the catalog's fine-tuned encoder, trained when absent),
            ``dense`` (the frozen ``params.dense`` encoder) or a folder (an encoder or a dense-ft artifact).
        docs: the document variant COLT learns on and indexes (tool features come from these texts).
        model_name: the artifact folder under ``data/models/<dataset>/`` (ablation rows use their own).
        views: ``both`` | ``tool`` | ``scene`` (see the module docstring).
        num_layers: LightGCN layers (authors: 1 is best; their search grid 1-3).
        list_size: candidate-list length of the list-wise loss (gold tools + sampled negatives).
        c_lambda, c_temp: weight and temperature of the cross-view contrastive term (ToolLens: 0.04, 0.1;
            ToolBench: 0.04, 0.05).
        edge_dropout: edge-dropout ratio on the three graphs during training (0 = off).
        lr, weight_decay, batch_size: Adam settings (authors: 1e-3, 1e-7, 2048).
        max_epochs, patience: training length and early stopping (authors: 200, 20).
        select_k: the cutoff of the dev selection rule (Recall@k and COMP@k).
        seed: negative sampling, edge dropout and torch initialisation order.
    """

    encoder: str = "dense-ft"
    docs: str = "original"
    model_name: str = "colt"
    views: Literal["both", "tool", "scene"] = "both"
    num_layers: int = Field(1, ge=0, le=4)
    list_size: int = Field(10, ge=2)
    c_lambda: float = Field(0.04, ge=0)
    c_temp: float = Field(0.1, gt=0)
    edge_dropout: float = Field(0.2, ge=0, lt=1)
    lr: float = Field(1e-3, gt=0)
    weight_decay: float = Field(1e-7, ge=0)
    batch_size: int = Field(2048, ge=1)
    max_epochs: int = Field(200, ge=0)
    patience: int = Field(20, ge=1)
    select_k: int = Field(3, ge=1)
    seed: int = 13

    def learned_settings(self) -> dict:
        """The settings a trained model depends on (``model_name`` is only where it is stored)."""
        return {k: v for k, v in self.to_dict().items() if k != "model_name"}


class ColtSection(ColtConfig, ComponentSection):
    """``params.yaml: colt``: the component settings plus the ablation grid (``toolret evaluate-grid --grid
    colt.ablations``) and the paper's numbers each dataset is reported against."""

    ablations: dict[str, GridVariant] = Field(default_factory=dict)


__all__ = ["ColtConfig", "ColtSection"]
