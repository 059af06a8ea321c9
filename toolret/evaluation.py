"""Evaluate one retriever on one catalog: rankings -> per-query metrics -> the evaluation JSON.

The scoring is :func:`toolret.evaluate_api.evaluate` (a :class:`~toolret.evaluate_api.Run` of the ranking
against :func:`qrels_from_catalog`); this module adds the catalog's side (query texts, tool names),
latency, provenance and the files.

The JSON (written by ``toolret evaluate`` and the ``evaluate`` DVC stages) holds ``dataset``,
``method``, ``docs``, ``n_queries``, ``n_tools`` (the corpus size searched), ``metrics`` (fractions),
``ci95`` (bootstrap, same keys), ``latency_ms`` (p50/p95 of single-query searches) and ``provenance``.
The per-query table goes to a JSONL beside it (query id, every metric, top-10 ranked ids, gold ids), the
whole ranking (top ``k_max`` with scores) to a TREC run file beside it (:func:`run_path_for`).

A result *record* (``toolret evaluate --record``, under ``results/records``) is the same JSON plus
``condition`` (:func:`record_condition`: the spec, the sha256 of the params sections its components read,
the models with their revisions) and ``produced_by`` (:func:`produced_by`: git commit, toolret version, wall
time, device), its run file committed as ``<stem>.run.trec.gz`` (:func:`commit_record_run`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from toolret import __version__
from toolret.atomic import atomic_path, write_json
from toolret.catalog.model import Catalog
from toolret.config import apply_overrides
from toolret.errors import CatalogError
from toolret.evaluate_api import Qrels, Run, evaluate
from toolret.metrics import paired_test
from toolret.paths import project_dir
from toolret.paths import project_dir as default_project_dir
from toolret.provenance import canonical_sha256, dvc_out, git_state, package_revision, read_dvc_lock, sha256_tree
from toolret.roles import Ranking, Retriever

LATENCY_SAMPLE = 100  # queries timed one at a time for p50/p95 latency


def rank_split(retriever: Retriever, catalog: Catalog, split: str, k: int) -> Ranking:
    queries = catalog.split(split)
    if not queries:
        raise CatalogError(f"dataset {catalog.name!r} has no judged queries in split {split!r}")
    return retriever.search([q.text for q in queries], k, [q.id for q in queries])


def single_query_latency_ms(retriever: Retriever, texts: Sequence[str], k: int, sample: int = LATENCY_SAMPLE) -> dict[str, float]:
    """p50/p95 wall time (ms) of searching one query at a time, on the first ``sample`` queries."""
    times = []
    for text in list(texts)[:sample]:
        t0 = time.perf_counter()
        retriever.search([text], k)
        times.append((time.perf_counter() - t0) * 1000)
    return {"p50": float(np.percentile(times, 50)), "p95": float(np.percentile(times, 95)), "n": len(times)}


def qrels_from_catalog(catalog: Catalog, query_ids: Sequence[str] | None = None) -> Qrels:
    """The catalog's gold as :class:`~toolret.evaluate_api.Qrels` (relevance 1 per gold tool).

    ``query_ids`` (default: every query with judgements) are the queries, in that order; one without
    gold gets an empty judgement (``evaluate`` skips it). The adapter lives here, not in
    :mod:`toolret.evaluate_api`, so that the evaluation API imports no catalog code.
    """

    qids = list(catalog.qrels) if query_ids is None else list(query_ids)
    return Qrels.from_gold({q: catalog.gold(q) for q in qids})


def score_ranking(ranking: Ranking, catalog: Catalog, ks: Sequence[int], bootstrap_samples: int = 1000,
                  seed: int = 13) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Metrics, CIs and per-query rows of a ranking against the catalog's qrels
    (:func:`toolret.evaluate_api.evaluate` of the ranking's run and the catalog's gold)."""

    run = Run.from_ranking(ranking)
    qrels = qrels_from_catalog(catalog, ranking.query_ids)
    res = evaluate(run, qrels, ks=ks, bootstrap_samples=bootstrap_samples, seed=seed)
    text = {q.id: q.text for q in catalog.queries}

    def name(tool_id: str) -> str:
        tool = catalog.tools[catalog.tool_position(tool_id)]
        return f"{tool.tool}/{tool.name}" if tool.tool and tool.tool != tool.name else tool.name

    rows = []
    for i, q in enumerate(res.query_ids):
        gold, ranked = sorted(qrels.gold(q)), list(run[q])
        rows.append({"query_id": q, "query": text.get(q, ""), **{m: float(v[i]) for m, v in res.per_query.items()},
                     "ranked": ranked[:10], "gold": gold, "gold_names": [name(t) for t in gold],
                     "top5_names": [name(t) for t in ranked[:5]]})
    return {"n_queries": len(res.query_ids), "metrics": res.means,
            "ci95": {m: list(map(float, ci)) for m, ci in res.ci.items()}}, rows


def evaluate_retriever(retriever: Retriever, catalog: Catalog, *, method: str, docs: str, ks: Sequence[int],
                       k_max: int = 100, split: str = "test", bootstrap_samples: int = 1000, seed: int = 13,
                       provenance: dict[str, Any] | None = None, measure_latency: bool = True,
                       run_path: str | Path | None = None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Search the split with an already indexed retriever and score it; with ``run_path``, the ranking is
    also written there as a TREC run file tagged ``method``."""
    k = max(k_max, max(ks))
    t0 = time.perf_counter()
    ranking = rank_split(retriever, catalog, split, k)
    search_s = time.perf_counter() - t0
    if run_path is not None:

        Run.from_ranking(ranking).to_trec(run_path, tag=method)
    scores, rows = score_ranking(ranking, catalog, ks, bootstrap_samples, seed)
    texts = [q.text for q in catalog.split(split)]
    result = {
        "dataset": catalog.name, "method": method, "docs": docs, "split": split, **scores,
        "n_tools": len(catalog.tools),
        "latency_ms": single_query_latency_ms(retriever, texts, k) if measure_latency else None,
        "batch_search_s": search_s,
        "provenance": provenance or {},
    }
    return result, rows


# Fields of a result that change from one run of the same inputs to the next (timings, the git sha,
# the full params dump). DVC-tracked results keep them out of the JSON, in the run-info sidecar.
VOLATILE_KEYS = ("latency_ms", "batch_search_s", "index_build_s")
VOLATILE_PROVENANCE_KEYS = ("git_sha", "params", "params_file")


def run_info_path(artifact: str | Path) -> Path:
    """The untracked run-info sidecar of an artifact (timings, git sha, params, cache hits).

    ``<project>/data/<rest>`` -> ``<project>/data/run_info/<rest>`` (outside every DVC output, so it never
    changes an output's md5), e.g. ``data/runs/<ds>/<method>/<docs>.json`` ->
    ``data/run_info/runs/<ds>/<method>/<docs>.json``; a file outside a ``data/`` folder ->
    ``<stem>.run_info.json`` beside it.
    """
    p = Path(artifact).resolve()
    parts = p.parts
    for i in range(len(parts) - 2, 0, -1):
        if parts[i] == "data":
            if len(parts) > i + 1 and parts[i + 1] == "run_info":
                return p
            name = parts[-1] if parts[-1].endswith(".json") else parts[-1] + ".json"
            return Path(*parts[:i + 1], "run_info", *parts[i + 1:-1], name)
    return p.with_name(p.name.removesuffix(".json") + ".run_info.json")


def split_volatile(result: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(deterministic result, run info)``: timings, git sha and params move to the run info."""
    stable = {k: v for k, v in result.items() if k not in VOLATILE_KEYS}
    info = {k: result[k] for k in VOLATILE_KEYS if k in result}
    prov = dict(result.get("provenance") or {})
    info["provenance"] = {k: prov.pop(k) for k in VOLATILE_PROVENANCE_KEYS if k in prov}
    stable["provenance"] = prov
    return stable, info


def load_run_info(result_json: str | Path) -> dict[str, Any]:
    """The sidecar of a result (``{}`` when absent, e.g. after ``dvc pull`` on a fresh clone)."""
    path = run_info_path(result_json)
    if not path.is_file():
        return {}
    return json.loads(path.read_text(encoding="utf-8"))


def run_path_for(result_json: str | Path) -> Path:
    """The TREC run file beside a result JSON: ``<stem>.run.trec``."""
    result_json = Path(result_json)
    return result_json.with_name(result_json.name.removesuffix(".json") + ".run.trec")


def write_result(result: dict[str, Any], rows: list[dict[str, Any]], output: str | Path, *,
                 run_info_to: str | Path | None = None) -> tuple[Path, Path]:
    """Write ``output`` (JSON) and ``<output stem>.per_query.jsonl`` atomically.

    With ``run_info_to`` (the result's final path, for outputs first written into a temporary
    directory) the volatile fields go to :func:`run_info_path` of it instead of into the JSON, so the
    JSON depends only on the inputs (a DVC output re-run gives the same md5).
    """
    output = Path(output)
    per_query = output.with_name(output.name.removesuffix(".json") + ".per_query.jsonl")
    if run_info_to is not None:
        result, info = split_volatile(result)
        write_json(run_info_path(run_info_to), info)
    with atomic_path(per_query) as tmp:
        tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    write_json(output, result)
    return output, per_query


def provenance(catalog: Catalog, params: dict[str, Any], artifacts: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "git_sha": git_state(project_dir()).label,
        "params": params,
        "dataset_checksums": catalog.provenance.get("checksums", {}),
        "dataset_source": catalog.provenance.get("source"),
        "artifact_versions": artifacts or {},
    }


# ------------------------------------------------------------------------------------ result records
# ``toolret evaluate --record`` writes one record per (dataset, condition) under results/records/<dataset>/:
# <method>.json (the result as the DVC path writes it, plus ``condition`` and ``produced_by``),
# <method>.per_query.jsonl and <method>.run.trec.gz (the TREC run, gzip with mtime 0: the same run gives the
# same bytes). The DVC stages' results (data/runs/...) never get these fields (their md5 must not change).
RECORD_RUN_SUFFIX = ".run.trec.gz"
_CONTAINER_LIMIT = 64  # larger lists / dicts of a component are data (tool ids, outputs), not its settings


def record_run_path(record_json: str | Path) -> Path:
    """The committed TREC run file of a record: ``<stem>.run.trec.gz``."""
    record_json = Path(record_json)
    return record_json.with_name(record_json.name.removesuffix(".json") + RECORD_RUN_SUFFIX)


def gzip_deterministic(data: bytes, dest: str | Path) -> Path:
    """Atomically write ``data`` gzipped to ``dest`` with no file name and mtime 0 in the header, so that the
    same content always gives the same bytes."""
    import gzip

    dest = Path(dest)
    with atomic_path(dest) as tmp, open(tmp, "wb") as raw, \
            gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as gz:
        gz.write(data)
    return dest


def strictly_ranked(trec_text: str) -> str:
    """A TREC run's lines (rank order within each query, as :meth:`Run.to_trec` writes them) with every
    score strictly below the one ranked above it *as a float32* (trec_eval compares single-precision
    scores): a tie (or a rise) becomes the next float32 below the previous score, written as its shortest
    repr; every other line is kept as written.

    trec_eval breaks ties by tool id and ranx by an unstable sort, so a tie could be read back in another
    order than the one evaluated; with strictly decreasing scores both read the ranked order (and so the
    record's metrics). A tied score moves by a few float32 ulps; no rank moves."""
    out, query, previous = [], None, np.float32(np.inf)
    for line in trec_text.splitlines():
        fields = line.split(" ")
        if fields[0] != query:
            query, previous = fields[0], np.float32(np.inf)
        score = np.float32(float(fields[4]))
        if not score < previous:
            score = np.nextafter(previous, np.float32(-np.inf))
            fields[4] = np.format_float_positional(score, unique=True, trim="-") if abs(score) >= 1e-4 \
                else np.format_float_scientific(score, unique=True, trim="-")
        previous = score
        out.append(" ".join(fields) + "\n")
    return "".join(out)


def commit_record_run(record_json: str | Path) -> Path:
    """Replace the plain run file the evaluation wrote beside a record (:func:`run_path_for`) by its
    :func:`record_run_path`: :func:`strictly_ranked`, gzipped deterministically."""
    plain = run_path_for(record_json)
    text = strictly_ranked(plain.read_text(encoding="utf-8"))
    out = gzip_deterministic(text.encode("utf-8"), record_run_path(record_json))
    plain.unlink()
    return out


class _ModelFinder:
    """The models and artifacts a built pipeline reads, found by walking its components' attributes: what an
    attribute's ``record_models()`` names (``{role: encoder | generator, name, ...}``: an encoder's settings
    name the encoder with its ``package`` or ``folder`` and a LoRA adapter's ``base``; an LLM names its
    generator, ``engine`` and, once built, ``revision``; either may give the ``device`` it runs on) and
    project folders / files under ``data/`` (``Path`` attributes: fine-tune and COLT artifacts, committed
    generations). No component is imported here: components name their own models."""

    def __init__(self, project_dir: Path) -> None:
        self.root = project_dir.resolve()
        self.data = self.root / "data"
        self.lock = read_dvc_lock(self.root)
        self.encoders: dict[str, dict[str, Any]] = {}
        self.artifacts: dict[str, dict[str, Any]] = {}
        self.generators: dict[str, dict[str, Any]] = {}
        self.devices: set[str] = set()
        self._seen: set[int] = set()

    # -------------------------------------------------------------- walking
    def walk(self, obj: Any, depth: int = 0) -> None:
        if depth > 8 or obj is None or isinstance(obj, (str, bytes, int, float, bool)) or id(obj) in self._seen:
            return
        self._seen.add(id(obj))
        named = getattr(obj, "record_models", None)
        if callable(named) and not isinstance(obj, type):  # a component's settings naming what they read
            for ref in named():
                self.add(dict(ref))
            return
        if isinstance(obj, Path):
            self.artifact(obj)
            return
        if isinstance(obj, dict):
            if len(obj) <= _CONTAINER_LIMIT:
                for v in obj.values():
                    self.walk(v, depth + 1)
            return
        if isinstance(obj, (list, tuple, set, frozenset)):
            if len(obj) <= _CONTAINER_LIMIT:
                for v in obj:
                    self.walk(v, depth + 1)
            return
        if type(obj).__module__.split(".")[0] == "toolret" and hasattr(obj, "__dict__"):
            for v in list(vars(obj).values()):
                self.walk(v, depth + 1)

    # -------------------------------------------------------------- entries
    def portable(self, path: str | Path) -> str:
        """``path`` project-relative (POSIX) where it is inside the project, else as given."""
        resolved = Path(path).resolve()
        return resolved.relative_to(self.root).as_posix() if resolved.is_relative_to(self.root) else str(path)

    def _located(self, path: Path) -> dict[str, Any]:
        """``name`` (project-relative where inside the project), ``revision`` (content sha256) and, where
        ``dvc.lock`` records the path or a folder above it, ``dvc`` ``{path, md5}``."""

        entry: dict[str, Any] = {"name": self.portable(path), "revision": f"sha256:{sha256_tree(path)}"}
        found = dvc_out(path, self.root, self.lock)
        if found is not None:
            entry["dvc"] = {"path": found[0], "md5": found[1]}
        return entry

    def add(self, ref: dict[str, Any]) -> None:
        """One model an object's ``record_models()`` names (the ``device`` it runs on goes to the devices)."""
        device = ref.pop("device", None)
        if device:
            self.devices.add(str(device))
        if ref.get("role") == "encoder":
            self.encoder(ref)
        elif ref.get("role") == "generator":
            self.generators.setdefault(ref["name"], ref)
        else:
            raise ValueError(f"record_models(): unknown model role in {ref!r} (encoder or generator)")

    def encoder(self, ref: dict[str, Any]) -> None:
        package, folder = ref.pop("package", None), Path(ref.pop("folder"))
        if package is not None:  # a packaged encoder: the installed package's name==version
            revision = package_revision(package) or f"sha256:{sha256_tree(folder)}"
            self.encoders.setdefault(ref["name"], {"role": "encoder", "name": ref["name"], "revision": revision})
            return
        key = self.portable(folder)
        if key not in self.encoders:
            entry = {"role": "encoder", **self._located(folder)}
            if ref.get("base"):  # a LoRA adapter over a base encoder (named by its own ref)
                entry["base"] = ref["base"]
            self.encoders[key] = entry

    def artifact(self, path: Path) -> None:
        import os

        path = Path(os.path.abspath(path)).resolve()  # a relative path is read from the working directory
        if not path.is_relative_to(self.data) or path.is_relative_to(self.data / "run_info") or not path.exists():
            return
        entry = {"role": "artifact", **self._located(path)}
        meta = path.with_name(path.name.removesuffix(".jsonl") + ".meta.json") if path.suffix == ".jsonl" else None
        if meta is not None and meta.is_file():
            llm = (json.loads(meta.read_text(encoding="utf-8")) or {}).get("llm")
            if isinstance(llm, dict) and llm.get("model_id"):  # generations: the generator that wrote them
                entry["generator"] = {k: llm[k] for k in ("model_id", "revision") if k in llm}
        self.artifacts[entry["name"]] = entry

    def models(self) -> list[dict[str, Any]]:
        """Encoders, generators, then artifacts (each sorted by name); an artifact holding an encoder (the
        dense-ft folder around its model: the same path or DVC entry) is not repeated; a generator without a
        revision of its own takes the one its read generations record."""
        covered = {e["dvc"]["path"] for e in self.encoders.values() if "dvc" in e}
        inside = [e["name"] for e in self.encoders.values()]
        artifacts = [a for a in self.artifacts.values() if a.get("dvc", {}).get("path") not in covered
                     and not any(n == a["name"] or n.startswith(a["name"] + "/") for n in inside)]
        written = {a["generator"]["model_id"]: a["generator"].get("revision") for a in artifacts if "generator" in a}
        for g in self.generators.values():
            if "revision" not in g and written.get(g["name"]):
                g["revision"] = written[g["name"]]
        by_name = lambda e: e["name"]  # noqa: E731
        return [*sorted(self.encoders.values(), key=by_name), *sorted(self.generators.values(), key=by_name),
                *sorted(artifacts, key=by_name)]


def pipeline_models(components: Sequence[Any], project_dir: str | Path | None = None
                    ) -> tuple[list[dict[str, Any]], set[str]]:
    """``(models, devices)`` of a built (and fitted) pipeline's components: see :class:`_ModelFinder`.

    Each model is ``{role, name, revision, ...}``: ``role`` ``encoder`` (``revision`` the installed package
    ``name==version`` for a packaged encoder, else ``sha256:`` of the folder's content; a LoRA adapter names
    its ``base``), ``generator`` (an LLM: ``engine``, ``revision`` where known) or ``artifact`` (a project
    file / folder under ``data/`` the pipeline reads); ``dvc`` ``{path, md5}`` where ``dvc.lock`` records it."""

    finder = _ModelFinder(Path(project_dir) if project_dir is not None else default_project_dir())
    for c in components:
        finder.walk(c)
    return finder.models(), finder.devices


def record_condition(spec_text: str, spec: Any, params: Any, components: Sequence[Any],
                     project_dir: str | Path | None = None) -> tuple[dict[str, Any], set[str]]:
    """``(condition, devices)``: the pipeline spec as given, its components, the params sections they read
    (``Component.sections``) with the sha256 of their canonical JSON (after a named pipeline's own settings),
    and the models (:func:`pipeline_models`)."""

    if getattr(spec, "settings", None):

        params = apply_overrides(params, dict(spec.settings))
    dumped = params.model_dump(mode="json")
    sections = [s for s in spec.sections() if s in dumped]
    models, devices = pipeline_models(components, project_dir)
    condition: dict[str, Any] = {"spec": spec_text, "components": list(spec.components), "params_sections": sections,
                                 "params_sha256": canonical_sha256({s: dumped[s] for s in sections})}
    if getattr(spec, "settings", None):
        condition["settings"] = dict(spec.settings)
    condition["models"] = models
    return condition, devices


def _device_label(devices: set[str]) -> str:
    """``cpu``, ``cuda`` (with the GPU's name where torch has it) or both joined by ``+``."""
    import sys

    kinds = sorted({d.split(":")[0] for d in devices if d} or {"cpu"})
    label = "+".join(kinds)
    torch = sys.modules.get("torch")
    if "cuda" in kinds and torch is not None:
        try:
            label += f" ({torch.cuda.get_device_name(0)})"
        except Exception:  # noqa: BLE001 -- a label only
            pass
    return label


def produced_by(seconds: float, devices: set[str], project_dir: str | Path | None = None) -> dict[str, Any]:
    """What produced a record: ``git_commit`` (HEAD; ``git_dirty`` when tracked files had local changes),
    ``toolret_version``, ``seconds`` (wall time, 0.1 s), ``device`` (what the models ran on) and ``cpus``."""
    import os

    # the records under results/ a re-recording run has already rewritten are its outputs, not changed inputs
    state = git_state(project_dir if project_dir is not None else default_project_dir(), ignore=("results/",))
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"git_commit": state.sha or "unknown", "git_dirty": state.dirty, "toolret_version": __version__,
            "seconds": round(float(seconds), 1), "device": _device_label(devices), "cpus": cpus}


def record_fields(spec_text: str, spec: Any, params: Any, components: Sequence[Any], seconds: float,
                  project_dir: str | Path | None = None) -> dict[str, Any]:
    """``{"condition": ..., "produced_by": ...}`` of a result record (``toolret evaluate --record``)."""
    condition, devices = record_condition(spec_text, spec, params, components, project_dir)
    return {"condition": condition, "produced_by": produced_by(seconds, devices, project_dir)}


GRID_TEST_METRICS = ("ndcg@5", "recall@5", "comp@5")


def grid_summary(dataset: str, grid_key: str, grid: dict[str, Any],
                 results: dict[str, tuple[dict[str, Any], list[dict[str, Any]]]]) -> dict[str, Any]:
    """Metrics, CIs and component stats of every grid row, each paired-tested (randomization test,
    seeded) against its ``baseline`` row on the same queries."""

    per_query = {name: {m: np.array([r[m] for r in rows]) for m in GRID_TEST_METRICS if rows and m in rows[0]}
                 for name, (_, rows) in results.items()}
    out: dict[str, Any] = {"dataset": dataset, "grid": grid_key, "variants": {}}
    for name, (result, _) in results.items():
        variant = grid[name]
        row = {"method": variant.method, "set": dict(variant.set), "baseline": variant.baseline,
               "metrics": result["metrics"], "ci95": result["ci95"], "components": result.get("components", {})}
        base = variant.baseline
        if base and base != name and base in per_query:
            row["vs_baseline"] = {m: {**paired_test(per_query[name][m], per_query[base][m], method="randomization",
                                                    seed=13), "baseline": base} for m in per_query[name]}
        out["variants"][name] = row
    return out
