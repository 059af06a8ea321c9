"""The gateway interleaves the adapt champion and challenger on its ``interleave`` share of searches (receipts
name each shown tool's team and the two registry versions), ``promote`` reads the credit from those receipts,
and the running gateway swaps to the promoted champion while searches run, none failing. A real MLflow sqlite
registry, real BM25 indexes, the gateway's own ReceiptLog; no MCP server is started (tools are handed to the
gateway as a server's listing would)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from registered_models import register as _register

from toolret.adapt.champions import CHAMPION, alias_version
from toolret.adapt.promotion import promote
from toolret.errors import CatalogError
from toolret.gateway import Gateway, config_from_dict
from toolret.gateway.receipts import read_receipts
from toolret.tracking import get_client



def _mcp_tool(name: str, description: str):
    from mcp_types import Tool as McpTool

    return McpTool(name=name, description=description, input_schema={"type": "object", "properties": {}})


TOOLS = [_mcp_tool(f"t{i}", d) for i, d in enumerate(["weather forecast for a city", "currency exchange rates",
                                                       "send an email", "book a flight ticket"])]


@pytest.fixture(scope="module")
def uri(tmp_path_factory) -> str:
    """One sqlite store for the module (creating one runs MLflow's migrations: seconds, done once here)."""
    uri = f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'mlflow.db'}"
    get_client(uri).search_experiments()
    return uri


def test_interleave_then_promote_then_swap(tmp_path: Path, monkeypatch, uri: str) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    out = tmp_path / "adapt" / "gwcat"
    _register(out, "gwcat", 0, uri)
    _register(out, "gwcat", 0, uri)
    log = tmp_path / "receipts.jsonl"
    config = config_from_dict({"adapt": str(out), "interleave": 1.0, "interleave_seed": 3, "adapt_poll_s": 0,
                               "servers": []})  # no upstream: its tools are handed over below

    async def main() -> dict:
        gw = Gateway(config, receipts=log)
        await gw._on_tools("s", TOOLS)
        assert gw.teams == {"champion": "adapt-gwcat/1", "challenger": "adapt-gwcat/2"}
        for i in range(12):  # the agent calls the challenger's tool after each search
            answer = await gw.search("weather forecast or exchange rates", k=2, session=f"s{i}")
            entry = next(e for e in read_receipts(log)[-1]["shown"] if e["team"] == "challenger")
            assert [h["tool_id"] for h in answer["hits"]] == [e["id"] for e in read_receipts(log)[-1]["shown"]]
            gw.receipts.write("call", session=f"s{i}", tool=entry["id"], server="s", shown_before=True,
                              is_error=False, latency_ms=1.0)
        decision = promote("gwcat", receipts=[log], tracking_uri=uri)
        old = gw.index
        results: list = []

        async def searching() -> None:
            for _ in range(20):
                results.append(await gw.search("send an email", k=1, session="x"))
                await anyio.sleep(0)

        async with anyio.create_task_group() as tg:
            tg.start_soon(searching)
            changed = await gw.refresh_adapted()
        assert len(results) == 20 and all(r["hits"][0]["tool_id"] == "s__t2" for r in results)
        assert set(changed) == {"champion", "challenger"} and gw.index is not old and len(gw.index) == 4
        assert gw.challenger is None and gw.status()["swaps"] == 1 and gw.status()["interleave"] is None
        assert await gw.refresh_adapted() == {}  # nothing moved since
        after = await gw.search("book a flight", k=1)
        assert after["hits"][0]["tool_id"] == "s__t3" and "interleave" not in read_receipts(log)[-1]
        gw.receipts.close()
        return decision

    decision = anyio.run(main)
    searches = [r for r in read_receipts(log) if r.get("interleave") and r["session"].startswith("s")]
    assert len(searches) == 12 and all({e["team"] for e in r["shown"]} <= {"champion", "challenger"}
                                       for r in searches)
    assert all(r["interleave"]["champion"] == "adapt-gwcat/1" for r in searches)
    # 12 searches, every call on the challenger's tool: 12 wins of 12, p = 2 / 2**12
    i = decision["interleaving"]
    assert (i["n"], i["wins"], i["p"]) == (12, 12, pytest.approx(2 / 4096, abs=1e-6))
    assert decision["decision"] == "promote"
    assert alias_version(get_client(uri), "adapt-gwcat", CHAMPION).tags["promoted_from"] == "2"


def test_interleave_is_a_share() -> None:
    with pytest.raises(CatalogError, match="interleave 1.5 must be a share"):
        config_from_dict({"interleave": 1.5, "servers": []}, "gw.yaml")
    with pytest.raises(CatalogError, match="gw.yaml: interleave_seed: must be an integer, got 'x'"):
        config_from_dict({"interleave_seed": "x", "servers": []}, "gw.yaml")
    assert config_from_dict({"servers": []}).interleave == 0.0  # off unless configured
