"""toolret: tool retrieval methods on one platform (catalogs, retrievers, metrics, reports)."""

from __future__ import annotations

__version__ = "0.1.0"
