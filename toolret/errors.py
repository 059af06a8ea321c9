"""Every error toolret raises on purpose, in one hierarchy: catch :class:`ToolretError` for all of them.

The CLI prints a :class:`ToolretError` as ``toolret: error: <message>`` (exit 2) instead of a traceback; each
message names the offending file, record, key or request. The built-in bases (``ValueError``,
``RuntimeError``) are kept where callers caught those.
"""

from __future__ import annotations

from typing import Any


class ToolretError(Exception):
    """Base of every error below."""


class CatalogError(ToolretError, ValueError):
    """Malformed input: a catalog, a params file, a request file; the message names the file and record."""


class ConfigError(CatalogError):
    """A parameter file (or override) that does not validate; the message names the key and the file."""


class StaleArtifactError(CatalogError):
    """A trained artifact whose recorded inputs differ from the current ones."""


class AdaptInputError(CatalogError):
    """A catalog ``adapt`` cannot learn from; the message names the file and the offending records."""


class OutputExistsError(ToolretError, FileExistsError):
    """An ``--out`` folder holds what the command did not write (or another command's output) and
    ``--force`` was not given; the message names the folder and what it holds."""


class EvaluationError(ToolretError, ValueError):
    """Invalid evaluation input (qrels, run, metric names); the message names the query / file line."""


class MatrixError(ToolretError, ValueError):
    """A matrix file or a record it names is malformed; the message names the file and the cell."""


class LLMServerError(ToolretError, RuntimeError):
    """The generation server is unreachable, keeps failing, or rejected a request."""


class CrossEncoderCollapsed(ToolretError, RuntimeError):
    """Training ended with one score for every pair: the model ranks nothing (nothing is saved)."""


class GatewayError(ToolretError):
    """A request the gateway refuses or cannot forward (the message is for the agent)."""


class ServerDown(ToolretError):
    """An upstream MCP server is not connected (or its connection just closed)."""


class RequestError(ToolretError):
    """A request the service refuses: HTTP ``status``, the offending ``field`` (or ``None``), a message."""

    def __init__(self, status: int, field: str | None, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.field, self.message, self.headers = status, field, message, headers or {}

    def body(self) -> dict[str, Any]:
        return {"detail": f"{self.field}: {self.message}" if self.field else self.message, "field": self.field}


__all__ = ["AdaptInputError", "CatalogError", "ConfigError", "CrossEncoderCollapsed", "EvaluationError",
           "GatewayError", "LLMServerError", "MatrixError", "OutputExistsError", "RequestError", "ServerDown",
           "StaleArtifactError", "ToolretError"]
