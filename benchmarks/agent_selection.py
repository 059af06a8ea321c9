"""What a tool retriever is worth to a small local agent: tool-selection accuracy with every tool in the prompt
vs toolret's top 5 / top 10.

A local LLM (default: Qwen2.5-Coder-0.5B-Instruct, greedy; ``--llm-model qwen2.5-coder-1.5b-instruct`` for
the 1.5B) picks one tool for each query of a catalog's test split, shown

- (a) every tool of the catalog (MTRB-MetaTool: 199 tools, ~4,000 prompt tokens at ``--desc-chars 120``),
- (b) the retriever's top 5, (c) its top 10 (best first),

each tool as a ``- name: description`` line (the description cut at ``--desc-chars``), then the request. The
tool list comes first, so in (a) every prompt starts with the same tokens (system prompt + the whole list):
the transformers engine prefills that shared prefix once per batch (``toolret.llm.transformers_backend``:
prefix sharing is per batch, not across batches), so (a) costs ``ceil(N / --all-batch-size)`` prefills of
the list instead of N. Prompts are never cut: the engine is built with ``--max-prompt-tokens`` (its default
2048 would cut (a)'s list from the left) and the run stops if any prompt is longer.

The retriever of (b) / (c) (``--pipeline``): ``auto`` (default) is the catalog's ``toolret adapt`` champion
(``data/adapt/<dataset>/champion``, chosen on synthetic dev data only: no test query was used) where it
exists, else ``dense``; or a saved pipeline folder (a champion, an adapt out-dir, ``models:/<name>@<alias>``),
or a pipeline spec (``bm25``, ``hybrid`` ...), fitted and indexed here. A saved pipeline must index exactly
the catalog's tools.

The answer is matched to a shown tool's name (exact, case-insensitive, the same letters and digits, then the
longest shown name it contains as a whole word); a pick is correct when it is a gold tool. Reported per
condition: accuracy with a 95% bootstrap CI, unmatched answers, prompt tokens per query (and, for (a), the
shared prefix and the tokens actually prefilled), generation wall time; for (b) and (c) the retriever's
recall@k (their ceiling) and the paired tests against (a): the sign-flip randomization test of the accuracy
difference and McNemar's exact test (the discordant queries). Per-query picks are kept (query ids, not texts). The JSON
(``--out``, default ``benchmarks/results/agent_selection.json``) is rewritten after each condition
(``"complete": false`` until the last).

    .venv/bin/python benchmarks/agent_selection.py                # MTRB-MetaTool test, 0.5B, adapt champion
    .venv/bin/python benchmarks/agent_selection.py --limit 3 --out /tmp/agent_smoke.json   # smoke run
    .venv/bin/python benchmarks/agent_selection.py --render      # docs/GATEWAY.md's table from the stored JSON
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import platform
import re
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SYSTEM = ("You choose the one tool that serves the user's request. Answer with the tool's name only, exactly as "
          "it is written in the list.")
CONDITIONS = ("top 5", "top 10", "all tools")  # the cheap ones first: their rows are written before (a) runs


def describe(tool) -> str:
    """The tool's document without its leading name (MetaTool's documents read ``Name: description``)."""
    doc = " ".join(tool.text.split())
    return doc[len(tool.name):].lstrip(" :-") if doc.startswith(tool.name) else doc


def tool_lines(tools, desc_chars: int) -> str:
    return "\n".join(f"- {t.name}: {describe(t)[:desc_chars]}" for t in tools)


def prompt(tools_text: str, query: str) -> list[dict]:
    """The tool list first, the request last: prompts over the same list share everything up to the request."""
    return [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"Tools:\n{tools_text}\n\nRequest: {query}\nWhich tool?"}]


def _letters(text: str) -> str:
    return re.sub(r"[^0-9a-z]+", "", text.lower())


def match(answer: str, shown: list) -> str | None:
    """The id of the shown tool the answer names, else None: its first line equal to a name (exactly, then
    case-insensitively, then letters and digits only), else the longest name the answer contains as a word."""
    first = answer.strip().splitlines()[0] if answer.strip() else ""
    text = re.sub(r"^(?:[-*•]\s*|tool\s*(?:name)?\s*:\s*)", "", first.strip(), flags=re.I).strip(" `'\".:,;*")
    for same in (lambda t: text == t.name, lambda t: text.lower() == t.name.lower(),
                 lambda t: bool(_letters(text)) and _letters(text) == _letters(t.name)):
        for t in shown:
            if same(t):
                return t.id
    for t in sorted(shown, key=lambda t: -len(t.name)):
        if re.search(rf"(?<![0-9A-Za-z_]){re.escape(t.name)}(?![0-9A-Za-z_])", answer, flags=re.I):
            return t.id
    return None


def load_retriever(ref: str, catalog, dataset: str):
    """``(pipeline, description)``: ``auto``, a saved pipeline (folder, adapt out-dir, registry URI) or a spec."""
    import toolret
    from toolret.adapt import catalog_fingerprint, resolve_index
    from toolret.pipeline import PIPELINE_FILE, Pipeline

    if ref == "auto":
        champion = ROOT / "data" / "adapt" / dataset / "champion"
        ref = str(champion) if (champion / PIPELINE_FILE).is_file() else "dense"
    folder = None
    if ref.startswith("models:/"):
        folder = Path(resolve_index(ref))
    elif Path(ref).is_dir():
        folder = Path(ref) if (Path(ref) / PIPELINE_FILE).is_file() else Path(ref) / "champion"
    if folder is None:
        return toolret.build(ref, catalog), {"ref": ref, "kind": "spec", "name": ref}
    pipeline = Pipeline.load(folder)
    ids, catalog_ids = set(pipeline.retriever.tool_ids), {t.id for t in catalog.tools}
    if ids != catalog_ids:
        raise SystemExit(f"--pipeline {ref}: indexes {len(ids)} tools, {len(ids - catalog_ids)} not in "
                         f"{dataset}, {len(catalog_ids - ids)} of {dataset} missing: not this catalog's index")
    info = pipeline.catalog_info or {}
    same = info.get("fingerprint") == catalog_fingerprint(catalog) if info.get("fingerprint") else None
    if same is False:
        print(f"warning: {folder} was built on other documents of these tools (catalog fingerprint differs)",
              file=sys.stderr)
    from toolret.paths import portable_path  # the result names project paths, not this machine's

    return pipeline, {"ref": portable_path(ref), "kind": "saved", "folder": portable_path(str(folder)),
                      "name": pipeline.name, "catalog": info.get("name"), "same_catalog_fingerprint": same}


def common_prefix(seqs: list[list[int]]) -> int:
    n, first = 0, seqs[0]
    limit = min(len(s) for s in seqs) - 1
    while n < limit and all(s[n] == first[n] for s in seqs):
        n += 1
    return n


RESULT = Path(__file__).resolve().parent / "results" / "agent_selection.json"
PAGE = Path(__file__).resolve().parents[1] / "docs" / "GATEWAY.md"
BEGIN, END = "<!-- agent-selection table: benchmarks/agent_selection.py --render -->", "<!-- end agent-selection table -->"
LABELS = {"all tools": "(a) every tool in the prompt", "top 5": "(b) toolret's top 5", "top 10": "(c) toolret's top 10"}


def table(result: dict) -> str:
    """The agent table: accuracy [95% CI], prompt tokens per query and p against (a) per condition."""
    llm, ret = result["llm"], result["retriever"]
    lines = [f"{result['dataset']} test ({result['n_queries']} queries, {result['n_tools']} tools); agent "
             f"`{llm['model']}` ({llm['engine']}, {llm['decoding']}); retriever `{ret['name']}` "
             f"(`{ret['ref']}`). `{result['command'].strip()}`", "",
             "| condition | selection accuracy [95% CI] | prompt tokens per query | retriever recall@k | p vs (a) |",
             "|---|---|---|---|---|"]
    for name in ("all tools", "top 5", "top 10"):
        c = result["conditions"][name]
        vs = c.get("vs_all_tools")
        lines.append(f"| {LABELS[name]} | {c['accuracy']:.3f} [{c['ci95'][0]:.3f}, {c['ci95'][1]:.3f}] | "
                     f"{c['prompt_tokens_per_query']:.0f} | "
                     + (f"{c['retriever_recall']:.3f}" if "retriever_recall" in c else "-") + " | "
                     + (f"{vs['p_value']:.2g} (McNemar {vs['mcnemar_exact_p']:.2g})" if vs else "-") + " |")
    return "\n".join(lines)


def render(result_path: Path = RESULT, page: Path = PAGE) -> str:
    """``page`` with the table between its markers replaced by the one of ``result_path``'s JSON."""
    text = page.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{page}: no agent-selection table markers ({BEGIN} ... {END})")
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    result = json.loads(result_path.read_text(encoding="utf-8"))
    if not result.get("complete"):
        raise SystemExit(f"{result_path}: an incomplete run (complete: false)")
    return f"{head}{BEGIN}\n{table(result)}\n{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="mtrb-metatool")
    parser.add_argument("--pipeline", default="auto", help="the retriever of (b) / (c): auto (the adapt champion "
                        "where one exists, else dense), a saved pipeline folder / adapt out-dir / models:/ URI, or "
                        "a spec")
    parser.add_argument("--llm-model", default="qwen2.5-coder-0.5b-instruct", help="the agent (default: the 0.5B)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--desc-chars", type=int, default=120)
    parser.add_argument("--batch-size", type=int, default=8, help="rows per forward pass for (b) / (c)")
    parser.add_argument("--all-batch-size", type=int, default=16,
                        help="rows per forward pass for (a): one prefill of the shared tool list per batch; memory "
                             "grows with it (fp32 0.5B: ~0.13 GB of KV cache per row at ~5k tokens)")
    parser.add_argument("--max-prompt-tokens", type=int, default=16384,
                        help="the engine's prompt limit; a longer prompt stops the run (never cut)")
    parser.add_argument("--max-new-tokens", type=int, default=24)
    parser.add_argument("--limit", type=int, default=0, help="first N test queries only (smoke runs)")
    parser.add_argument("--out", default="benchmarks/results/agent_selection.json")
    parser.add_argument("--render", action="store_true", help="only write docs/GATEWAY.md's table from the stored JSON")
    args = parser.parse_args(argv)
    if args.render:
        PAGE.write_text(render(), encoding="utf-8")
        print(f"wrote the agent-selection table into {PAGE}")
        return 0
    start = time.perf_counter()

    import toolret
    from toolret.llm.base import SamplingParams
    from toolret.llm.engines import build_generator
    from toolret.metrics.bootstrap import bootstrap_ci
    from toolret.metrics.significance import paired_test

    catalog = toolret.load_catalog(args.dataset)
    queries = catalog.split("test")[: args.limit or None]
    gold = [catalog.gold(q.id) for q in queries]
    by_id = {t.id: t for t in catalog.tools}

    t0 = time.perf_counter()
    retriever, retriever_info = load_retriever(args.pipeline, catalog, args.dataset)
    load_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    ranking = retriever.search([q.text for q in queries], 10)
    retriever_info.update(load_seconds=round(load_s, 1), search_seconds=round(time.perf_counter() - t0, 2))
    top = [ranking.ranked_ids(i) for i in range(len(queries))]

    t0 = time.perf_counter()
    llm = build_generator("transformers", args.llm_model, device=args.device, batch_size=args.batch_size,
                          max_prompt_tokens=args.max_prompt_tokens, progress=True)
    llm_load_s = time.perf_counter() - t0
    context = getattr(llm.model.config, "max_position_embeddings", None)
    params = SamplingParams(max_new_tokens=args.max_new_tokens, temperature=0.0)

    everything = tool_lines(catalog.tools, args.desc_chars)
    shown = {"all tools": [list(catalog.tools)] * len(queries),
             "top 5": [[by_id[t] for t in ids[:5]] for ids in top],
             "top 10": [[by_id[t] for t in ids[:10]] for ids in top]}
    texts = {"all tools": [everything] * len(queries),
             "top 5": [tool_lines(s, args.desc_chars) for s in shown["top 5"]],
             "top 10": [tool_lines(s, args.desc_chars) for s in shown["top 10"]]}

    out: dict = {
        "complete": False, "dataset": args.dataset, "split": "test", "n_queries": len(queries),
        "n_tools": len(catalog.tools), "retriever": retriever_info,
        "llm": {"model": llm.model_id, "revision": llm.revision, "engine": "transformers", "device": args.device,
                "dtype": str(llm.dtype).replace("torch.", ""), "decoding": "greedy",
                "max_new_tokens": args.max_new_tokens, "max_prompt_tokens": args.max_prompt_tokens,
                "context": context, "load_seconds": round(llm_load_s, 1)},
        "desc_chars": args.desc_chars, "batch_size": {"all tools": args.all_batch_size, "top k": args.batch_size},
        "machine": {"cpus": len(os.sched_getaffinity(0)), "platform": platform.platform(),
                    "threads": os.environ.get("TOOLRET_LLM_THREADS")},
        "command": "python benchmarks/agent_selection.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "conditions": {}, "per_query": [{"id": q.id, "gold": sorted(g), "picks": {}}
                                        for q, g in zip(queries, gold)]}
    out_path = Path(args.out)
    out_path.parent.mkdir(parents=True, exist_ok=True)

    def write() -> None:
        out["seconds"] = round(time.perf_counter() - start, 1)
        out_path.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")

    correct: dict[str, np.ndarray] = {}
    for name in CONDITIONS:
        prompts = [prompt(text, q.text) for text, q in zip(texts[name], queries)]
        rendered = [llm.render(p) for p in prompts]
        full = [llm.tokenizer(r, add_special_tokens=False)["input_ids"] for r in rendered]
        longest = max(len(f) for f in full)
        if longest > args.max_prompt_tokens or (context and longest + args.max_new_tokens > context):
            raise SystemExit(f"{name}: a prompt of {longest} tokens does not fit (--max-prompt-tokens "
                             f"{args.max_prompt_tokens}, model context {context}): it would be cut")
        assert all(len(llm.tokenize(r)) == len(f) for r, f in zip(rendered, full)), "the engine cut a prompt"
        batch = args.all_batch_size if name == "all tools" else args.batch_size
        llm.config = dataclasses.replace(llm.config, batch_size=batch)
        t0 = time.perf_counter()
        answers = llm.generate(prompts, params)
        seconds = time.perf_counter() - t0
        picks = [match(a, tools) for a, tools in zip(answers, shown[name])]
        correct[name] = np.array([p is not None and p in g for p, g in zip(picks, gold)], float)
        lo, hi = bootstrap_ci(correct[name], n_samples=10000, seed=13)
        tokens = [len(f) for f in full]
        row = {"accuracy": float(correct[name].mean()), "ci95": [float(lo), float(hi)],
               "correct": int(correct[name].sum()), "unmatched_answers": sum(p is None for p in picks),
               "prompt_tokens_per_query": round(float(np.mean(tokens)), 1), "prompt_tokens_max": max(tokens),
               "seconds": round(seconds, 1), "seconds_per_query": round(seconds / len(queries), 2)}
        if name == "all tools":
            prefix = common_prefix(full) if len(full) > 1 else 0
            batches = math.ceil(len(full) / batch)
            prefilled = (batches * prefix + sum(len(f) - prefix for f in full)) if prefix else sum(tokens)
            row.update(shared_prefix_tokens=prefix, prefix_prefills=batches if prefix else len(full),
                       prefilled_tokens_per_query=round(prefilled / len(full), 1))
        else:
            k = int(name.split()[1])
            row["retriever_recall"] = float(np.mean([bool(set(ids[:k]) & g) for ids, g in zip(top, gold)]))
        out["conditions"][name] = row
        for pq, a, p in zip(out["per_query"], answers, picks):
            pq["picks"][name] = {"answer": a, "pick": p}
        print(json.dumps({name: row}), flush=True)
        write()

    from scipy.stats import binomtest

    for name in ("top 5", "top 10"):
        test = paired_test(correct[name], correct["all tools"], method="randomization", n_samples=100000, seed=13)
        only_k = int(((correct[name] == 1) & (correct["all tools"] == 0)).sum())
        only_all = int(((correct[name] == 0) & (correct["all tools"] == 1)).sum())
        mcnemar = binomtest(only_k, only_k + only_all, 0.5).pvalue if only_k + only_all else 1.0
        out["conditions"][name]["vs_all_tools"] = {
            "mean_diff": float(test["mean_diff"]), "p_value": float(test["p_value"]), "test": "paired sign-flip "
            "randomization, two-sided", "only_this_correct": only_k, "only_all_tools_correct": only_all,
            "mcnemar_exact_p": float(mcnemar)}
    out["complete"] = True
    write()
    print(json.dumps({n: {k: c[k] for k in ("accuracy", "ci95", "prompt_tokens_per_query")} |
                      ({"p_vs_all": c["vs_all_tools"]["p_value"]} if "vs_all_tools" in c else {})
                      for n, c in out["conditions"].items()}, indent=1))
    print(f"wrote {out_path} ({out['seconds']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
