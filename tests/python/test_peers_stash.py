"""Carrying the peer engines in several device calls (bench/gpu/peers_stash.py), without torch or a GPU: blobs cut
into byte ranges that fill carries in order, joined on the other side only once every part is there, checked
against their sha256, unpacked, and an engine reported ready only when all its package sets are."""
import io
import json
import os
import sys
import tarfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench" / "gpu"))
import peers_stash  # noqa: E402


def make_blob(path, files):
    """A .tar.xz of {name: bytes}."""
    with tarfile.open(path, "w:xz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_plan_fills_carries_in_order_and_covers_every_byte():
    plan = peers_stash.plan_parts([("a", 7), ("b", 20), ("c", 3)], capacity=10)
    assert [(name, carry, start, length) for name, carry, start, length in plan] == [
        ("a", 0, 0, 7), ("b", 0, 0, 3), ("b", 1, 3, 10), ("b", 2, 13, 7), ("c", 2, 0, 3)]
    with pytest.raises(ValueError):
        peers_stash.plan_parts([("a", 5)], capacity=0)


@pytest.fixture
def packed(tmp_path):
    blobs = tmp_path / "blobs"
    blobs.mkdir()
    common = make_blob(blobs / "common.tar.xz", {"shared/__init__.py": b"X = 1\n"})
    small = make_blob(blobs / "small.tar.xz", {"small/__init__.py": b"Y = 2\n"})
    # incompressible, so that the big set needs several carries
    big = make_blob(blobs / "big.tar.xz", {"big/data.bin": os.urandom(60000), "big/__init__.py": b"Z = 3\n"})
    capacity = 25000
    manifest = peers_stash.pack([("common", str(common)), ("small", str(small)), ("big", str(big))],
                                {"first": ["common", "small"], "second": ["common", "big"]}, capacity,
                                str(tmp_path / "carries"))
    return tmp_path, manifest, capacity


def test_pack_respects_the_capacity_and_every_carry_has_the_manifest(packed):
    tmp_path, manifest, capacity = packed
    carries = sorted(p for p in (tmp_path / "carries").iterdir())
    assert len(carries) == manifest["carries"] >= 3
    for carry in carries:
        parts = [p for p in carry.iterdir() if ".part" in p.name]
        assert sum(p.stat().st_size for p in parts) <= capacity
        assert json.loads((carry / peers_stash.MANIFEST).read_text())["this_carry"] == carry.name


def test_unpack_waits_for_every_part_then_checks_and_unpacks(packed):
    tmp_path, manifest, _ = packed
    root = tmp_path / "root"
    first = peers_stash.unpack(str(tmp_path / "carries" / "c1"), str(root))
    assert first["ready"] == ["first"]
    assert set(first["unpacked_now"]) == {"common", "small"}
    assert "big" in first["missing"]
    assert (root / "small" / "small" / "__init__.py").read_bytes() == b"Y = 2\n"
    for n in range(2, manifest["carries"]):
        middle = peers_stash.unpack(str(tmp_path / "carries" / f"c{n}"), str(root))
        assert middle["ready"] == ["first"] and middle["unpacked_now"] == []
    last = peers_stash.unpack(str(tmp_path / "carries" / f"c{manifest['carries']}"), str(root))
    assert last["ready"] == ["first", "second"] and last["unpacked_now"] == ["big"]
    assert (root / "big" / "big" / "__init__.py").read_bytes() == b"Z = 3\n"
    assert (root / "big" / "big" / "data.bin").stat().st_size == 60000
    assert last["paths"]["second"] == [str(root / "common"), str(root / "big")]
    # the stash keeps no second copy of what was unpacked
    assert not [p for p in (root / "stash").iterdir() if ".part" in p.name]


def test_a_corrupted_part_is_refused_and_nothing_is_unpacked(packed):
    tmp_path, manifest, _ = packed
    part = tmp_path / "carries" / "c1" / "small.part00"
    data = bytearray(part.read_bytes())
    data[len(data) // 2] ^= 0xFF
    part.write_bytes(bytes(data))
    result = peers_stash.unpack(str(tmp_path / "carries" / "c1"), str(tmp_path / "root"))
    assert "sha256" in result["errors"]["small"]
    assert result["ready"] == []
    assert not (tmp_path / "root" / "small").exists()


def test_an_archive_escaping_its_folder_is_refused(tmp_path):
    evil = tmp_path / "evil.tar.xz"
    with tarfile.open(evil, "w:xz") as tar:
        info = tarfile.TarInfo("../outside.py")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    peers_stash.pack([("evil", str(evil))], {"e": ["evil"]}, 10 ** 6, str(tmp_path / "carries"))
    result = peers_stash.unpack(str(tmp_path / "carries" / "c1"), str(tmp_path / "root"))
    assert "escapes" in result["errors"]["evil"]
    assert not (tmp_path / "outside.py").exists() and not (tmp_path / "root" / "outside.py").exists()
