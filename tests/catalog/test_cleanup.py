"""MTRB-style cleanup: one test per transformation, then the catalog-level contract."""

from __future__ import annotations

import copy
import json

import pytest

from toolret.catalog.cleanup import (
    clean_catalog,
    clean_text,
    cut_to_tokens,
    dedupe_sentences,
    description_problem,
    doc_segments,
    fit_segments,
    fix_mojibake,
    humanize_name,
    normalize_unicode,
    normalize_whitespace,
    remove_boilerplate,
    remove_urls,
    render_segments,
    split_sentences,
    strip_markup,
    synthesize_description,
    token_counter,
    token_counter,
)
from toolret.catalog.loaders.beir import load_beir
from toolret.catalog.model import Catalog, Query, Tool
from toolret.catalog.tool_fields import ToolFields

WS = token_counter("whitespace")


@pytest.fixture(scope="module")
def minilm():
    return token_counter()  # the real all-MiniLM-L6-v2 tokenizer


# -- text steps --------------------------------------------------------------------------------------

def test_normalize_unicode_nfkc_controls_zero_width():
    assert normalize_unicode("ﬁle\u200b\u00a0name\x07①") == "file name 1"
    assert normalize_unicode("a\r\nb") == "a\nb"
    assert "\ufffd" not in normalize_unicode("bad \ufffd char")


def test_fix_mojibake():
    assert fix_mojibake("cafÃ© â€“ crÃ¨me") == "café – crème"
    assert fix_mojibake("café") == "café"  # correct text untouched


def test_strip_markup_html_and_markdown():
    assert strip_markup("<p>Get <b>weather</b> &amp; wind</p>").split() == ["Get", "weather", "&", "wind"]
    assert strip_markup("Use **bold** and `code` and [docs](https://x.io/a)").split() == \
        ["Use", "bold", "and", "code", "and", "docs"]
    assert "List<string>" in strip_markup("returns List<string> values")  # not an HTML tag
    out = strip_markup("## Title\n- first item\n* second item")
    assert "#" not in out and "-" not in out and "*" not in out and "first item" in out


def test_remove_urls_and_emails():
    out = remove_urls("Docs at https://api.example.com/v1?x=1. Mail help@example.com (www.example.com)")
    assert "http" not in out and "@" not in out and "www" not in out
    assert out.startswith("Docs at")


def test_split_sentences_keeps_abbreviations():
    assert split_sentences("Get rates, e.g. USD. Then convert. Washington D.C. is covered.") == \
        ["Get rates, e.g. USD.", "Then convert.", "Washington D.C. is covered."]


def test_remove_boilerplate_sentences_and_openers():
    text = "This API returns live scores. Subscribe on RapidAPI to get a key. Contact us for more info."
    assert remove_boilerplate(text) == "Returns live scores."
    assert remove_boilerplate("This endpoint allows you to get forecasts.") == "Get forecasts."
    assert remove_boilerplate("Get gifs. See for details.") == "Get gifs."  # a sentence emptied by URL removal
    assert remove_boilerplate("Weather now. You need an API key for this.") == "Weather now."
    assert remove_boilerplate("Search hotels by city.") == "Search hotels by city."


def test_remove_boilerplate_keeps_content():
    # clauses go, content stays (MetaTool: "GifApi: Search through ... gifs - Powered by Giphy.")
    assert remove_boilerplate("Search through a wide range of gifs - Powered by Giphy.") == \
        "Search through a wide range of gifs."
    assert remove_boilerplate("Create playlists and check out the latest music trends.") == \
        "Create playlists and check out the latest music trends."
    assert remove_boilerplate("Validate an API key format.") == "Validate an API key format."
    assert remove_boilerplate("Subscribe a user to a mailing list.") == "Subscribe a user to a mailing list."
    # if everything is boilerplate, nothing is removed (repair handles truly empty descriptions)
    assert remove_boilerplate("Subscribe on RapidAPI.") == "Subscribe on RapidAPI."


def test_normalize_whitespace_lines_become_sentences():
    assert normalize_whitespace("  Get   rates\n\nNote: in USD \n") == "Get rates. Note: in USD"
    assert normalize_whitespace("a ,b") == "a, b"
    assert normalize_whitespace("\n \n") == ""


def test_dedupe_sentences():
    assert dedupe_sentences("Get reviews. Get Reviews! Other.") == "Get reviews. Other."


def test_clean_text_counts_changed_steps():
    from collections import Counter

    changed = Counter()
    out = clean_text("**Get** news.\n\nGet news. See https://x.io for docs.", changed)
    assert out == "Get news."
    assert set(changed) == {"markup", "urls", "whitespace", "boilerplate", "duplicate_sentences"}


# -- fields (read by Tool.fields: tests/catalog/test_tool_fields.py) ------------------------------

def test_description_problem_and_synthesis():
    f = ToolFields(api_name="getUserInfo", description="", tool_name="Acme Users",
                   required=[{"name": "user_id"}, {"name": "fields"}])
    assert description_problem("", f) == "empty"
    assert description_problem("N/A", f) == "placeholder"
    assert description_problem("--!", f) == "no_words"
    assert description_problem("get_user_info", f) is None  # 3 words: allowed
    assert description_problem("Get user info for a user id.", f) is None
    assert humanize_name("getUserInfo") == "get user info" and humanize_name("/v1/user-info") == "user info"
    assert synthesize_description(f) == "Get user info with the Acme Users API given user id and fields."


# -- segments and budget ---------------------------------------------------------------------------

def _fields():
    return ToolFields(api_name="Stock Quote", description="Real-time price. Includes volume. Updated often.",
                      tool_name="MarketPulse", category="Finance",
                      required=[{"name": "symbol", "type": "STRING", "description": "Ticker like AAPL"}],
                      optional=[{"name": "exchange", "description": "Exchange code"}],
                      returns={"price": "float", "quote": {"bid": "float", "ask": "float"}})


def test_doc_segments_render_all_fields():
    from collections import Counter

    segs = doc_segments(_fields(), _fields().description, Counter())
    assert render_segments(segs) == (
        "Stock Quote (MarketPulse, Finance). Real-time price. Includes volume. Updated often. "
        "Required parameters: symbol (string): Ticker like AAPL. Optional parameters: exchange: Exchange code. "
        "Returns: price, quote (bid, ask).")


def test_fit_segments_priorities():
    from collections import Counter

    segs = doc_segments(_fields(), _fields().description, Counter())
    full, cut = fit_segments(segs, 1000, WS)
    assert not cut and full == render_segments(segs)
    text, cut = fit_segments(segs, 14, WS)
    assert cut and len(text.split()) <= 14
    # names and the first sentence survive; the return schema goes first
    assert text.startswith("Stock Quote (MarketPulse, Finance). Real-time price.")
    assert "symbol (string)" in text and "Returns" not in text
    # a budget below the header cuts at a word boundary
    text, cut = fit_segments(segs, 2, WS)
    assert cut and text == "Stock Quote"


def test_cut_to_tokens():
    assert cut_to_tokens("a b c d e", 3, WS) == "a b c"
    assert cut_to_tokens("a b", 5, WS) == "a b"


# -- catalog level ----------------------------------------------------------------------------

def test_clean_catalog_fixture(fixture_catalog_dir, minilm):
    catalog = load_beir(fixture_catalog_dir)
    before = copy.deepcopy(catalog)
    cleaned, report = clean_catalog(catalog, tokenizer=minilm)
    # the input is untouched; originals survive in the copy
    assert [t.docs for t in catalog.tools] == [t.docs for t in before.tools]
    assert [t.docs["original"] for t in cleaned.tools] == [t.docs["original"] for t in catalog.tools]
    assert cleaned.doc_variants() == ["original", "cleaned"]
    assert cleaned.queries == catalog.queries and cleaned.qrels == catalog.qrels
    docs = {t.id: t.docs["cleaned"] for t in cleaned.tools}
    # messy fixture docs are normalised
    assert "**" not in docs["t001"] and docs["t002"].split(". ")[1].startswith("Returns the air quality")
    assert "http" not in docs["t005"] and "RapidAPI" not in docs["t006"] and "<p>" not in docs["t018"]
    assert docs["t010"].count("Get user reviews and ratings of a movie.") == 1
    # the empty description is repaired from name and parameters, and reported
    assert report["repaired_ids"] == ["t013"] and report["repair_reasons"] == {"t013": "empty"}
    assert "Company profile with the MarketPulse API given symbol." in docs["t013"]
    # every cleaned doc fits the budget, measured with the same tokenizer
    budget = report["target_tokens"]["budget"]
    assert max(minilm(list(docs.values()))) <= budget
    assert report["tokens_cleaned"]["max"] <= budget
    assert report["tools"]["truncated"] == len(report["truncated_ids"])
    assert report["fields"]["api_description"]["changed_by_step"]["markup"] >= 2
    json.dumps(report)  # serialisable (MLflow / Dagster metadata)


def test_clean_catalog_is_deterministic(fixture_catalog_dir):
    catalog = load_beir(fixture_catalog_dir)
    a, ra = clean_catalog(catalog, tokenizer="whitespace")
    b, rb = clean_catalog(catalog, tokenizer="whitespace")
    assert a.docs("cleaned") == b.docs("cleaned") and ra == rb


def test_long_doc_truncated_at_boundary_and_short_doc_not_padded(minilm):
    long_desc = " ".join(f"Sentence number {i} about weather radar coverage." for i in range(200))
    tools = [Tool(id=f"t{i}", name=f"Tool {i}", docs={"original": f"Tool {i}: Get forecast number {i} for a city."})
             for i in range(5)]
    tools.append(Tool(id="long", name="Radar", docs={"original": f"Radar: {long_desc}"}))
    tools.append(Tool(id="short", name="Ping", docs={"original": "Ping: Ping."}))
    cat = Catalog("mini", tools, [Query("q", "forecast", "test")], {"q": {"t0": 1}})
    cleaned, report = clean_catalog(cat, tokenizer=minilm)
    docs = {t.id: t.docs["cleaned"] for t in cleaned.tools}
    assert report["truncated_ids"] == ["long"]
    assert docs["long"].endswith(".") and docs["long"].startswith("Radar. Sentence number 0")
    assert minilm([docs["long"]])[0] <= report["target_tokens"]["budget"]
    assert docs["short"] == "Ping. Ping."  # kept as is: no padding
    assert report["tools"]["below_target"] >= 1


def test_target_length_modes(fixture_catalog_dir):
    catalog = load_beir(fixture_catalog_dir)
    _, fixed = clean_catalog(catalog, tokenizer="whitespace", target_length=10, tolerance=0.0)
    assert fixed["target_tokens"]["budget"] == 10 and fixed["tokens_cleaned"]["max"] <= 10
    _, orig = clean_catalog(catalog, tokenizer="whitespace", target_length="median_original")
    assert orig["target_tokens"]["target"] == orig["tokens_original"]["median"]
    with pytest.raises(ValueError):
        clean_catalog(catalog, tokenizer="whitespace", target_length="mean")


def test_human_variant_untouched():
    t = Tool(id="a", name="GET /movie", docs={"original": "GET /movie: <b>Movie</b> details.", "human": "Movie details."})
    cleaned, _ = clean_catalog(Catalog("x", [t], [], {}), tokenizer="whitespace")
    assert cleaned.tools[0].docs["human"] == "Movie details."
    assert cleaned.tools[0].docs["cleaned"] == "GET /movie. Movie details."
