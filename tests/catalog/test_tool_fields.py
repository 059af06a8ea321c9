"""A tool's typed fields: the ToolBench-style renderer and its inverse, and ``Tool.fields`` for every kind of
source (a ToolBench-style document, ToolBench metadata, plain text, an imported OpenAPI / MCP tool)."""

from __future__ import annotations

import pytest

from toolret.catalog.loaders.toolbench import api_document
from toolret.catalog.model import Tool
from toolret.catalog.tool_fields import (
    ToolFields,
    param_list,
    parse_toolbench_document,
    render_toolbench_document,
    tool_fields,
)

TOOLBENCH = ('category_name:Movies, tool_name:Movie, TV, music search, api_name:Get Top 100, '
             'api_description:Monthly top 100, with commas, required_params: [{"name": "q", "type": "STRING", '
             '"description": "query"}], optional_params: [], return_schema: {"code": "str", "result": '
             '[{"title": "str", "_list_length": 100}]}')


def test_parse_a_toolbench_document():
    p = parse_toolbench_document("Get Top 100: " + TOOLBENCH)  # a BEIR title prefix is ignored
    assert (p.category, p.tool_name, p.api_name) == ("Movies", "Movie, TV, music search", "Get Top 100")
    assert p.description == "Monthly top 100, with commas" and p.source == "document" and p.structured
    assert p.required == [{"name": "q", "type": "STRING", "description": "query"}] and p.optional == []
    assert p.returns["result"][0]["title"] == "str"
    assert p.input_schema == {"type": "object", "properties": {"q": {"type": "string", "description": "query"}},
                              "required": ["q"]}
    assert parse_toolbench_document("just a plain description") is None


@pytest.mark.parametrize("description", ["Weather now, by city", "", "Has: colons, required params words"])
def test_the_parser_inverts_the_renderer(description):
    required = [{"name": "city", "type": "STRING", "description": "e.g. Paris, France"}]
    optional = [{"name": "units", "type": "ENUM", "description": "", "default": "metric"}]
    returns = {"temp": "float", "list": [{"t": "str"}]}
    doc = render_toolbench_document("Weather", "SkyCast", "Current Weather", description, required, optional, returns)
    f = parse_toolbench_document(doc)
    assert (f.category, f.tool_name, f.api_name, f.description) == ("Weather", "SkyCast", "Current Weather",
                                                                      description)
    assert (f.required, f.optional, f.returns) == (required, optional, returns)
    assert f.input_schema["required"] == ["city"] and f.input_schema["properties"]["units"] == {
        "type": "string", "default": "metric"}


def test_the_toolbench_loader_renders_with_the_one_renderer():
    api = {"category_name": "Data", "tool_name": "Colis", "api_name": "Latest", "api_description": None,
           "required_parameters": [{"name": "colisId", "type": "STRING", "description": ""}],
           "template_response": {"status": "str"}}
    doc = api_document(api)
    assert doc == ('category_name:Data, tool_name:Colis, api_name:Latest, api_description:, required_params: '
                   '[{"name": "colisId", "type": "STRING", "description": ""}], optional_params: [], '
                   'return_schema: {"status": "str"}')
    assert parse_toolbench_document(doc).description == ""


def test_tool_fields_from_metadata_and_plain_text():
    t = Tool(id="1", name="x", docs={"original": "ignored"}, metadata={
        "api_name": "Latest", "api_description": "Latest state.", "tool_name": "colis", "category_name": "Logistics",
        "required_parameters": [{"name": "colisId", "type": "string"}], "method": "GET",
        "template_response": {"status": "str"}})
    f = tool_fields(t)
    assert (f.api_name, f.tool_name, f.category, f.method, f.source) == ("Latest", "colis", "Logistics", "GET",
                                                                         "metadata")
    assert f.input_schema == {"type": "object", "properties": {"colisId": {"type": "string"}}, "required": ["colisId"]}
    plain = Tool(id="2", name="PDFTool", docs={"original": "PDFTool: Summarise PDF files."})
    assert plain.fields.api_name == "PDFTool" and plain.description == " Summarise PDF files."
    assert not plain.fields.structured and plain.input_schema is None and plain.returns is None


def test_a_tool_exposes_its_fields_and_its_extra_metadata():
    doc = render_toolbench_document("Finance", "MarketPulse", "Stock Quote", "Price, change, volume.",
                                    [{"name": "symbol", "type": "STRING", "description": "Ticker"}], [],
                                    {"price": "float"})
    t = Tool(id="MarketPulse::Stock Quote", name="Stock Quote", docs={"original": doc}, tool="MarketPulse",
             metadata={"method": "GET", "origin": "api_list"})
    assert isinstance(t.fields, ToolFields) and t.fields.method == "GET"
    assert t.description == "Price, change, volume." and t.returns == {"price": "float"}
    assert t.input_schema == {"type": "object", "properties": {"symbol": {"type": "string", "description": "Ticker"}},
                              "required": ["symbol"]}
    assert t.extra == {"method": "GET", "origin": "api_list"}


def test_an_input_schema_in_metadata_wins_over_the_document():
    schema = {"type": "object", "properties": {"q": {"type": "string"}}}
    t = Tool(id="s", name="search", docs={"original": TOOLBENCH}, metadata={"inputSchema": schema})
    assert t.input_schema == schema and t.fields.required == [{"name": "q", "type": "STRING", "description": "query"}]


def test_a_document_cut_inside_its_parameters_is_plain_text():
    """The ToolBench environment cuts documents longer than its limit: no parameter lists to read."""
    cut = TOOLBENCH[: TOOLBENCH.index("optional_params")]
    t = Tool(id="Movie::Get Top 100", name="Get Top 100", docs={"original": cut})
    assert parse_toolbench_document(cut) is None and t.fields.source == "text" and t.description == cut


def test_param_list_reads_every_shape():
    assert param_list('[{"name": "a"}, "b", {"type": "x"}, ""]') == [{"name": "a"}, {"name": "b"}]
    assert param_list({"properties": {"q": {"type": "string"}}}) == [{"name": "q", "type": "string"}]
    assert param_list({"limit": "how many"}) == [{"name": "limit", "description": "how many"}]
    assert param_list(7) == []
