"""Serve a saved pipeline to agents over HTTP (FastAPI + uvicorn).

``toolret serve --index data/indexes/<ds>/<method>/<docs>`` loads the pipeline once and answers::

    GET  /health   -> {"pipeline": name, "n_tools": N}
    POST /search   {"queries": ["..."], "k": 5} -> {"pipeline": name, "results": [[{"tool_id", "score"}, ...], ...]}

Requests are validated (at least one non-empty query, 1 <= k <= n_tools); searches run one at a time
(components are not assumed thread-safe).
"""

# no `from __future__ import annotations`: FastAPI reads the endpoint annotations at runtime
import threading
from pathlib import Path
from typing import Any


def create_app(pipeline_dir: "str | Path") -> Any:
    from fastapi import FastAPI, HTTPException
    from pydantic import BaseModel, Field

    from toolret.pipeline import Pipeline

    pipeline = Pipeline.load(pipeline_dir)
    n_tools = len(pipeline.retriever.tool_ids)
    lock = threading.Lock()

    class SearchRequest(BaseModel):
        queries: list[str] = Field(min_length=1)
        k: int = Field(5, ge=1)

    app = FastAPI(title="toolret", description=f"tool retrieval with the pipeline {pipeline.name!r}")

    @app.get("/health")
    def health() -> dict[str, Any]:
        return {"pipeline": pipeline.name, "n_tools": n_tools}

    @app.post("/search")
    def search(req: SearchRequest) -> dict[str, Any]:
        empty = [i for i, q in enumerate(req.queries) if not q.strip()]
        if empty:
            raise HTTPException(422, f"queries {empty} are empty")
        if req.k > n_tools:
            raise HTTPException(422, f"k={req.k} exceeds the {n_tools} indexed tools")
        with lock:
            ranking = pipeline.search(req.queries, req.k)
        results = [[{"tool_id": ranking.tool_ids[i], "score": float(s)}
                     for i, s in zip(ranking.indices[r], ranking.scores[r]) if i >= 0]
                   for r in range(len(req.queries))]
        return {"pipeline": pipeline.name, "results": results}

    return app


def serve(pipeline_dir: "str | Path", host: str = "127.0.0.1", port: int = 8000) -> None:
    import uvicorn

    uvicorn.run(create_app(pipeline_dir), host=host, port=port, log_level="info")
