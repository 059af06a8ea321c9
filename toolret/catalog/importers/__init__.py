"""Catalogs imported from where agents' tools live: an OpenAPI 3 file (:mod:`.openapi`, one tool per
operation) or a running MCP server (:mod:`.mcp`, one tool per MCP tool).

An importer returns a :class:`~toolret.catalog.model.Catalog` (saved by ``toolret import-openapi`` /
``toolret import-mcp`` with :func:`toolret.catalog.io.save_catalog`) whose tools keep their JSON input
schema in ``metadata.input_schema``, which a served index hands to agents (:mod:`toolret.catalog.tool_records`).
Without queries the catalog's ``provenance.purpose`` is ``serving`` (indexable and servable, validated
without split checks); with a queries file (:mod:`.queries`) they are its test split and it is ``evaluation``.
"""

from toolret.catalog.importers.queries import imported_catalog, read_queries

__all__ = ["imported_catalog", "read_queries"]
