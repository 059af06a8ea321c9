"""Screenshots of the Dagster and MLflow UIs as `make ui` serves them, taken with a headless Chromium.

Starts, each as a subprocess on a free port, an MLflow UI on the project's store
(``sqlite:///<project>/data/mlflow/mlflow.db``, as ``make ui``) and ``dagster dev -m dagster_project`` on
the project's Dagster home (``data/dagster_home``), waits until both answer, then, through Selenium
(``/usr/bin/chromium`` + ``/usr/bin/chromedriver`` unless told otherwise):

* ``mlflow_runs.png``: the runs table of the ``toolret`` experiment, at the URL
  ``python -m toolret.tracking.ui`` prints (classic runs table, headline-metric columns), once its metric
  columns and a current run have rendered;
* ``mlflow_comparisons.png``: the runs table of the ``toolret-comparisons`` experiment (one run per
  dataset), at the second URL it prints (its own view: reference / best / n_better per headline metric);
* ``mlflow_comparison_run.png``: a current comparison run's page, scrolled to its description (the headline
  table with the reference marked, the legend);
* ``mlflow_model_version.png``: a registered model version's page (its source run, source, model card);
* ``dagster_toolret_run.png``: the ``toolret_run`` job's Runs tab, once a run of it is listed;
* ``dagster_assets.png``: the asset graph of one asset group (``--group``), once its assets are drawn,
  zoomed out until all of them are in view;
* ``dagster_deferred_asset.png``: the page of an asset ``make run`` defers (definition metadata
  ``toolret/deferred``), once it says why and the command that builds it (skipped, with a note, when the
  code location defers nothing).

First-visit dialogs are dismissed as a user would (Dagster's "Join the Dagster community": *Skip*; MLflow's
assistant side panel: *Close*).

Both servers are stopped on the way out, error or not. What did not appear is named in the error (and
the exit status is 1): no data yet means ``make run`` has not been run with this checkout.

Usage: .venv/bin/python tools/ui_screenshots.py [--out docs/screenshots] [--group hyde]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
JOB = "toolret_run"
LOCATION = "dagster_project"  # the code location `dagster dev -m dagster_project` serves (named after the module)
REPOSITORY = "__repository__"
REPOSITORY_LABEL_TAG = ".dagster/repository"  # how the UI's job pages select a job's runs
MAX_PNG_BYTES = 400_000


class ScreenshotError(Exception):
    """Something the screenshots need did not appear (named in the message)."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, timeout: float = 10) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return resp.read()


def _gql(base: str, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
    body = json.dumps({"query": query, "variables": variables or {}}).encode()
    req = urllib.request.Request(f"{base}/graphql", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        out = json.loads(resp.read())
    if out.get("errors"):
        raise ScreenshotError(f"Dagster GraphQL error: {out['errors']}")
    return out["data"]


def _wait(what: str, predicate: Callable[[], Any], timeout: float, server: Server | None = None,
          hint: str = "") -> Any:
    """Poll ``predicate`` until it returns something truthy; raise naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        if server is not None:
            server.check_alive()
        try:
            value = predicate()
            if value:
                return value
        except (urllib.error.URLError, ConnectionError, OSError) as e:
            last = e
        time.sleep(1)
    detail = f" (last error: {last})" if last else ""
    tail = f"\n{server.log_tail()}" if server is not None else ""
    raise ScreenshotError(f"{what} did not appear within {timeout:.0f} s{detail}{hint}{tail}")


class Server:
    """A UI server subprocess in its own process group, its output in a log file."""

    def __init__(self, name: str, cmd: list[str], env: dict[str, str], log_dir: Path):
        self.name = name
        self.log = log_dir / f"{name}.log"
        self._fh = self.log.open("wb")
        self.proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=self._fh, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)

    def log_tail(self, n: int = 3000) -> str:
        text = self.log.read_text(encoding="utf-8", errors="replace") if self.log.exists() else ""
        return f"--- last output of {self.name} ({self.log}) ---\n{text[-n:]}"

    def check_alive(self) -> None:
        if self.proc.poll() is not None:
            raise ScreenshotError(f"{self.name} exited early (status {self.proc.returncode})\n{self.log_tail()}")

    def stop(self) -> None:
        """SIGINT to its process group (dagster dev stops its webserver, daemon and code server), then escalate."""
        try:
            for sig, wait in ((signal.SIGINT, 30), (signal.SIGTERM, 15), (signal.SIGKILL, 5)):
                if self.proc.poll() is not None:
                    break
                try:
                    os.killpg(self.proc.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    self.proc.wait(timeout=wait)
                except subprocess.TimeoutExpired:
                    continue
        finally:
            self._fh.close()


def _server_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env.update({"DAGSTER_HOME": str(ROOT / "data" / "dagster_home"), "MLFLOW_DISABLE_TELEMETRY": "true",
                "DAGSTER_DISABLE_TELEMETRY": "1", "DVC_NO_ANALYTICS": "1", "GX_ANALYTICS_ENABLED": "false",
                "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONUNBUFFERED": "1"})
    env.pop("TOOLRET_PROJECT_DIR", None)
    env.update(extra)
    return env


@contextmanager
def mlflow_server(log_dir: Path, port: int, timeout: float) -> Iterator[str]:
    db = ROOT / "data" / "mlflow" / "mlflow.db"
    if not db.is_file():
        raise ScreenshotError(f"no MLflow store at {db}: run `make run` first")
    artifacts = ROOT / "data" / "mlflow" / "artifacts"
    artifacts.mkdir(parents=True, exist_ok=True)
    server = Server("mlflow", [str(BIN / "mlflow"), "ui", "--backend-store-uri", f"sqlite:///{db}",
                               "--default-artifact-root", str(artifacts), "-h", "127.0.0.1", "-p", str(port)],
                    _server_env(), log_dir)
    try:
        url = f"http://127.0.0.1:{port}"
        _wait(f"the MLflow UI on {url}", lambda: _get(f"{url}/health").strip() == b"OK", timeout, server)
        yield url
    finally:
        server.stop()


@contextmanager
def dagster_server(log_dir: Path, port: int, mlflow_url: str, timeout: float) -> Iterator[str]:
    home = ROOT / "data" / "dagster_home"
    if not (home / "dagster.yaml").is_file():
        raise ScreenshotError(f"no Dagster home at {home}: run `make run` first")
    server = Server("dagster", [str(BIN / "dagster"), "dev", "-m", LOCATION, "-h", "127.0.0.1", "-p", str(port)],
                    _server_env(TOOLRET_MLFLOW_UI_URL=mlflow_url), log_dir)
    try:
        url = f"http://127.0.0.1:{port}"
        query = "query { workspaceOrError { ... on Workspace { locationEntries { name loadStatus " \
                "locationOrLoadError { __typename ... on PythonError { message } } } } } }"

        def loaded() -> bool:
            entries = _gql(url, query)["workspaceOrError"]["locationEntries"]
            for e in entries:
                if e["name"] == LOCATION and e["loadStatus"] == "LOADED":
                    err = e["locationOrLoadError"] or {}
                    if err.get("__typename") == "PythonError":
                        raise ScreenshotError(f"code location {LOCATION} failed to load: {err['message']}")
                    return True
            return False

        _wait(f"the Dagster UI on {url} with code location {LOCATION}", loaded, timeout, server)
        yield url
    finally:
        server.stop()


def make_driver(chromium: str, chromedriver: str, width: int, height: int) -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                f"--window-size={width},{height}", "--hide-scrollbars", "--force-device-scale-factor=1",
                "--no-first-run", "--disable-extensions", "--disable-background-networking"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=chromedriver), options=opts)
    driver.set_page_load_timeout(120)
    # the window size includes the (invisible) browser frame: grow it until the viewport is width x height
    inner_w, inner_h = driver.execute_script("return [window.innerWidth, window.innerHeight]")
    driver.set_window_size(2 * width - inner_w, 2 * height - inner_h)
    return driver


def _page_text(driver: Any) -> str:
    return driver.execute_script("return document.body ? document.body.innerText : ''") or ""


def _click_if_shown(driver: Any, xpath: str, wait: float) -> bool:
    """Click the first element matching ``xpath`` if one shows up within ``wait`` s (a first-visit dialog or
    panel: Dagster's "Join the Dagster community", MLflow's assistant side panel)."""
    deadline = time.monotonic() + wait
    while True:
        for el in driver.find_elements("xpath", xpath):
            if el.is_displayed():
                el.click()
                time.sleep(1)
                return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.5)


def save_png(driver: Any, path: Path) -> int:
    """Screenshot to ``path``; re-encoded with a 256-colour palette if over :data:`MAX_PNG_BYTES`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not driver.save_screenshot(str(path)):
        raise ScreenshotError(f"could not write {path}")
    if path.stat().st_size > MAX_PNG_BYTES:
        from PIL import Image

        with Image.open(path) as img:
            img.convert("RGB").quantize(colors=256).save(path, optimize=True)
    return path.stat().st_size


def mlflow_runs(driver: Any, mlflow_url: str, out: Path, timeout: float) -> Path:
    """The `toolret` runs table at the URL `python -m toolret.tracking.ui` prints, metric columns rendered."""
    from toolret.tracking.store import CURRENT_TAG, get_client
    from toolret.tracking.ui import headline_metric_keys, prepare

    urls = prepare(mlflow_url)
    client = get_client()
    exp = client.get_experiment_by_name("toolret")
    runs = client.search_runs([exp.experiment_id], filter_string=f"tags.`{CURRENT_TAG}` = 'true'", max_results=50)
    if not runs:
        raise ScreenshotError("no current MLflow run in experiment `toolret`: run `make run` first")
    metrics = headline_metric_keys(client, exp.experiment_id)
    names = {r.info.run_name for r in runs if r.info.run_name}
    driver.get(urls["runs"])

    def rendered() -> bool:
        text = _page_text(driver)
        return all(m in text for m in metrics) and any(n in text for n in names)

    _wait(f"the MLflow runs table of `toolret` with metric columns {', '.join(metrics)} and a current run "
          f"({urls['runs']})", rendered, timeout,
          hint=f"; page text starts: {_page_text(driver)[:300]!r}")
    # MLflow 3.17 opens its assistant beside the table on a first visit: close it, the columns need the room
    _click_if_shown(driver, ASSISTANT_CLOSE, 5)
    time.sleep(2)  # let the grid settle (column widths, fonts)
    path = out / "mlflow_runs.png"
    save_png(driver, path)
    return path


ASSISTANT_CLOSE = "//button[@aria-label='Close'][ancestor::*[position() <= 6][contains(., 'Assistant')]]"


def mlflow_comparisons(driver: Any, mlflow_url: str, out: Path, timeout: float) -> Path:
    """The `toolret-comparisons` runs table at the second URL `python -m toolret.tracking.ui` prints, its view's
    metric columns and a current comparison run rendered."""
    from toolret.tracking.comparison import COMPARISON_EXPERIMENT
    from toolret.tracking.store import CURRENT_TAG, get_client
    from toolret.tracking.ui import comparison_columns, prepare

    urls = prepare(mlflow_url)
    client = get_client()
    exp = client.get_experiment_by_name(COMPARISON_EXPERIMENT)
    runs = client.search_runs([exp.experiment_id], filter_string=f"tags.`{CURRENT_TAG}` = 'true'", max_results=50)
    if not runs:
        raise ScreenshotError(f"no current MLflow run in experiment `{COMPARISON_EXPERIMENT}`: run `make run` first")
    _, metrics = comparison_columns(client, exp.experiment_id)
    first = sorted(metrics)[:3]  # the runs table orders metric columns by name; the grid draws the ones in view
    names = {r.info.run_name for r in runs if r.info.run_name}
    driver.get(urls["comparisons"])

    def rendered() -> bool:
        text = _page_text(driver)
        return all(m in text for m in first) and any(n in text for n in names)

    _wait(f"the MLflow runs table of `{COMPARISON_EXPERIMENT}` with metric columns {', '.join(first)} and a "
          f"current comparison run ({urls['comparisons']})", rendered, timeout,
          hint=f"; page text starts: {_page_text(driver)[:300]!r}")
    _click_if_shown(driver, ASSISTANT_CLOSE, 5)
    time.sleep(2)
    path = out / "mlflow_comparisons.png"
    save_png(driver, path)
    return path


def mlflow_comparison_run(driver: Any, mlflow_url: str, out: Path, timeout: float) -> Path:
    """The page of the current comparison run with the most systems (classic workflow), scrolled to its
    description: the headline table with the reference marked, then the legend."""
    from toolret.tracking.comparison import COMPARISON_EXPERIMENT
    from toolret.tracking.store import CURRENT_TAG, get_client, run_url

    client = get_client()
    exp = client.get_experiment_by_name(COMPARISON_EXPERIMENT)
    runs = [] if exp is None else client.search_runs(
        [exp.experiment_id], filter_string=f"tags.`{CURRENT_TAG}` = 'true'", max_results=50)
    runs = [r for r in runs if r.data.tags.get("mlflow.note.content")]
    if not runs:
        raise ScreenshotError(f"no current comparison run with a description in `{COMPARISON_EXPERIMENT}`: "
                              "run `make run` first")
    run = max(runs, key=lambda r: (r.data.metrics.get("n_systems", 0), r.info.run_name or ""))
    dataset = run.data.params.get("dataset") or run.data.tags.get("toolret.dataset", "")
    page = run_url(mlflow_url, exp.experiment_id, run.info.run_id)
    driver.get(page)
    _wait(f"the description of comparison run {run.info.run_name} ({page}; its table with a (ref) marker)",
          lambda: all(t in _page_text(driver) for t in (dataset, "distinct systems", "(ref)")), timeout,
          hint=f"; page text starts: {_page_text(driver)[:300]!r}")
    _click_if_shown(driver, ASSISTANT_CLOSE, 5)
    heading = driver.find_elements("xpath", "//p[contains(., 'distinct systems')]")
    if heading:
        driver.execute_script("arguments[0].scrollIntoView({block: 'start'});", heading[0])
    time.sleep(2)
    path = out / "mlflow_comparison_run.png"
    save_png(driver, path)
    return path


def mlflow_model_version(driver: Any, mlflow_url: str, out: Path, timeout: float) -> Path:
    """A registered model version's page: preferably one of a DVC model output (tag ``dvc_md5``) that links a
    run, its "Source Run" shown."""
    from toolret.tracking.store import get_client, model_version_url

    client = get_client()
    versions = list(client.search_model_versions(max_results=1000))
    if not versions:
        raise ScreenshotError("no registered model version in the MLflow model registry: run `make run` first")
    mv = min(versions, key=lambda v: (not v.run_id, "dvc_md5" not in (v.tags or {}), v.name, -int(v.version)))
    page = model_version_url(mlflow_url, mv.name, mv.version)
    driver.get(page)
    wanted = [mv.name, f"Version {mv.version}", *(["Source Run"] if mv.run_id else [])]
    _wait(f"the page of model version {mv.name} {mv.version} ({page}; {', '.join(wanted)})",
          lambda: all(t in _page_text(driver) for t in wanted), timeout,
          hint=f"; page text starts: {_page_text(driver)[:300]!r}")
    _click_if_shown(driver, ASSISTANT_CLOSE, 5)
    time.sleep(2)
    path = out / "mlflow_model_version.png"
    save_png(driver, path)
    return path


RUNS_QUERY = """query Runs($filter: RunsFilter) { runsOrError(filter: $filter, limit: 20) {
  __typename ... on Runs { results { runId status } } ... on PythonError { message } } }"""


def dagster_job_runs(driver: Any, dagster_url: str, out: Path, timeout: float) -> Path:
    """The `toolret_run` job's Runs tab, a run of it listed."""
    runs_filter = {"pipelineName": JOB, "tags": [{"key": REPOSITORY_LABEL_TAG, "value": f"{REPOSITORY}@{LOCATION}"}]}
    result = _gql(dagster_url, RUNS_QUERY, {"filter": runs_filter})["runsOrError"]
    if result["__typename"] != "Runs":
        raise ScreenshotError(f"Dagster could not list the runs of {JOB}: {result}")
    if not result["results"]:
        raise ScreenshotError(f"no run of {JOB} in the Dagster UI (code location {LOCATION}): run `make run` first")
    short_ids = [r["runId"][:8] for r in result["results"]]
    page = f"{dagster_url}/locations/{LOCATION}/jobs/{JOB}/runs"
    driver.get(page)
    _wait(f"a run of {JOB} ({', '.join(short_ids[:3])}…) on its Runs tab ({page})",
          lambda: any(s in _page_text(driver) for s in short_ids), timeout,
          hint=f"; page text starts: {_page_text(driver)[:300]!r}")
    _click_if_shown(driver, "//button[normalize-space()='Skip']", 8)  # "Join the Dagster community" (first visit)
    time.sleep(2)
    path = out / "dagster_toolret_run.png"
    save_png(driver, path)
    return path


# the graph's pan/zoom surface; Dagster zooms on ctrl+wheel around the pointer (here: the surface's centre).
# Returns how many asset cards (found by their "Latest event" row) lie wholly inside it.
GRAPH_JS = """
const surface = [...document.querySelectorAll('div')].find(
    d => d.getBoundingClientRect().width > 600 && getComputedStyle(d).cursor.includes('grab'));
if (!surface) return null;
const r = surface.getBoundingClientRect();
const steps = arguments[0];
for (let i = 0; i < Math.abs(steps); i++) {
  surface.dispatchEvent(new WheelEvent('wheel', {deltaY: steps > 0 ? 100 : -100, ctrlKey: true, bubbles: true,
    cancelable: true, clientX: r.x + r.width / 2, clientY: r.y + r.height / 2}));
}
return [...document.querySelectorAll('div, span')].filter(e => e.childElementCount === 0
  && e.textContent.trim() === 'Latest event').filter(e => {
    const row = e.getBoundingClientRect().height;
    let card = e;  // the card: the first ancestor at least five rows tall
    while (card.parentElement && card.getBoundingClientRect().height < 5 * row) card = card.parentElement;
    const b = card.getBoundingClientRect();
    const x = (b.left + b.right) / 2;  // and not under the toolbar that overlays the surface's top
    const seen = y => card.contains(document.elementFromPoint(x, y));
    return b.top >= r.top && b.bottom <= r.bottom && b.left >= r.left && b.right <= r.right
      && seen(b.top + 3) && seen(b.bottom - 3);
  }).length;
"""


def _fit_graph(driver: Any, n_assets: int, max_steps: int) -> None:
    """Zoom out step by step until every asset card of the group is in view; back one step if the cards
    turned into Dagster's zoomed-out labels (no "Latest event" row any more)."""
    inside = driver.execute_script(GRAPH_JS, 0)
    for _ in range(max_steps):
        if inside is None or inside >= n_assets:
            return
        driver.execute_script(GRAPH_JS, 1)
        time.sleep(1.5)
        zoomed = driver.execute_script(GRAPH_JS, 0)
        if inside and not zoomed:
            driver.execute_script(GRAPH_JS, -1)
            time.sleep(1.5)
            return
        inside = zoomed


GROUP_QUERY = """query Group($sel: AssetGroupSelector!) { assetNodes(group: $sel) { assetKey { path } } }"""


def dagster_asset_group(driver: Any, dagster_url: str, group: str, out: Path, timeout: float) -> Path:
    """The asset graph of ``group``, its asset labels drawn."""
    sel = {"groupName": group, "repositoryName": REPOSITORY, "repositoryLocationName": LOCATION}
    nodes = _gql(dagster_url, GROUP_QUERY, {"sel": sel})["assetNodes"]
    if not nodes:
        raise ScreenshotError(f"no asset in group {group!r} of code location {LOCATION}")
    labels = [n["assetKey"]["path"][-1] for n in nodes]
    page = f"{dagster_url}/locations/{LOCATION}/asset-groups/{group}"
    driver.get(page)
    _wait(f"the asset graph of group {group} ({page}; assets {', '.join(labels[:3])}…)",
          lambda: sum(label in _page_text(driver) for label in labels) >= min(2, len(labels)), timeout,
          hint=f"; page text starts: {_page_text(driver)[:300]!r}")
    _click_if_shown(driver, "//button[normalize-space()='Skip']", 3)
    time.sleep(3)  # the graph animates into place
    _fit_graph(driver, len(labels), max_steps=6)
    path = out / "dagster_assets.png"
    save_png(driver, path)
    return path


DEFERRED_LABEL = "toolret/deferred"  # definition metadata of an asset `make run` leaves out (dagster_project)
BUILD_COMMAND_LABEL = "toolret/build_command"
ASSETS_QUERY = """query Assets { assetNodes { assetKey { path }
  metadataEntries { label ... on TextMetadataEntry { text } } } }"""


def dagster_deferred_asset(driver: Any, dagster_url: str, out: Path, timeout: float) -> Path | None:
    """The page of an asset `make run` defers, once it says why and the command that builds it; ``None`` (and a
    note) when the code location defers nothing (every costly stage's outputs on disk)."""
    deferred = []
    for node in _gql(dagster_url, ASSETS_QUERY)["assetNodes"]:
        entries = {e["label"]: e.get("text") for e in node["metadataEntries"]}
        if entries.get(DEFERRED_LABEL):
            deferred.append((node["assetKey"]["path"], entries.get(BUILD_COMMAND_LABEL) or ""))
    if not deferred:
        print(f"note: no asset of code location {LOCATION} is deferred (metadata {DEFERRED_LABEL}): "
              "dagster_deferred_asset.png not taken", file=sys.stderr)
        return None
    key, command = min(deferred, key=lambda d: (len(d[0]), d[0]))
    page = f"{dagster_url}/assets/" + "/".join(urllib.parse.quote(p, safe="") for p in key)
    driver.get(page)
    wanted = ["Deferred", *([command] if command else [])]
    _wait(f"the page of deferred asset {'/'.join(key)} ({page}; {', '.join(wanted)})",
          lambda: all(t in _page_text(driver) for t in wanted), timeout,
          hint=f"; page text starts: {_page_text(driver)[:300]!r}")
    _click_if_shown(driver, "//button[normalize-space()='Skip']", 3)
    time.sleep(2)
    path = out / "dagster_deferred_asset.png"
    save_png(driver, path)
    return path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Screenshots of the MLflow and Dagster UIs (headless Chromium).")
    p.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    p.add_argument("--group", default="hyde", help="asset group whose graph dagster_assets.png shows")
    p.add_argument("--chromium", default="/usr/bin/chromium")
    p.add_argument("--chromedriver", default="/usr/bin/chromedriver")
    p.add_argument("--width", type=int, default=1400)
    p.add_argument("--height", type=int, default=900)
    p.add_argument("--timeout", type=float, default=300, help="seconds to wait for a server or a page")
    args = p.parse_args(argv)
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    os.environ.pop("MLFLOW_TRACKING_URI", None)  # the project's store, as `make ui`
    for exe in (args.chromium, args.chromedriver):
        if not os.access(exe, os.X_OK):
            print(f"error: {exe} not found (install Debian's chromium and chromium-driver)", file=sys.stderr)
            return 1
    written: list[Path | None] = []
    try:
        with tempfile.TemporaryDirectory(prefix="ui-screenshots-") as logs, ExitStack() as stack:
            log_dir = Path(logs)
            mlflow_url = stack.enter_context(mlflow_server(log_dir, _free_port(), args.timeout))
            dagster_url = stack.enter_context(dagster_server(log_dir, _free_port(), mlflow_url, args.timeout))
            driver = make_driver(args.chromium, args.chromedriver, args.width, args.height)
            stack.callback(driver.quit)
            written.append(mlflow_runs(driver, mlflow_url, args.out, args.timeout))
            written.append(mlflow_comparisons(driver, mlflow_url, args.out, args.timeout))
            written.append(mlflow_comparison_run(driver, mlflow_url, args.out, args.timeout))
            written.append(mlflow_model_version(driver, mlflow_url, args.out, args.timeout))
            written.append(dagster_job_runs(driver, dagster_url, args.out, args.timeout))
            written.append(dagster_asset_group(driver, dagster_url, args.group, args.out, args.timeout))
            written.append(dagster_deferred_asset(driver, dagster_url, args.out, args.timeout))
    except ScreenshotError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    for path in filter(None, written):
        print(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}: {path.stat().st_size // 1024} KB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
