"""``toolret adapt``: your tools, your retriever (see :mod:`toolret.adapt.run`).

    >>> from toolret.adapt import adapt                                   # doctest: +SKIP
    >>> report = adapt("my-catalog/", "adapted/", budget="fast")        # doctest: +SKIP
    >>> report["selection"]["champion"]                                   # doctest: +SKIP
    'hybrid-ft'
"""

from __future__ import annotations

from toolret.adapt.user_catalog import catalog_fingerprint, load_tools
from toolret.errors import AdaptInputError
from toolret.adapt.run import adapt, choose_champion, resolve_index
from toolret.adapt.synthetic import GeneratorSpec

__all__ = ["AdaptInputError", "GeneratorSpec", "adapt", "catalog_fingerprint", "choose_champion", "load_tools",
           "resolve_index"]
