"""Specification: the upload as the scan engines read it (processors/scan/sealed.py): written
once, then sealed, with no path another process could rename over or rewrite."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from filejobs.processors.scan.sealed import is_sealed, sealed_copy, sealed_upload

BODY = b"an upload, in three pieces"


def test_an_upload_in_memory_is_sealed_against_every_change(tmp_path: Path) -> None:
    with sealed_upload([b"an upload, ", b"in three ", b"pieces"], "a.txt", tmp_path) as upload:
        assert upload.sealed and is_sealed(upload.fd) and upload.size == len(BODY)
        assert upload.path.read_bytes() == BODY
        # Not by its own descriptor (read-only), nor by one reopened for writing through /proc
        # as any process of the same user could: the seals refuse writing and truncating
        with pytest.raises(OSError, match="Bad file descriptor") as through_own:
            os.write(upload.fd, b"x")
        assert through_own.value.errno == errno.EBADF
        writer = os.open(upload.path, os.O_WRONLY)
        try:
            for change in (
                lambda: os.write(writer, b"harmless"),
                lambda: os.pwrite(writer, b"x", len(BODY)),  # growing
                lambda: os.ftruncate(writer, 0),  # shrinking
            ):
                with pytest.raises(PermissionError):
                    change()
        finally:
            os.close(writer)
        assert upload.path.read_bytes() == BODY
        # And nothing of it is in the workspace: there is no path to swap
        assert list(tmp_path.iterdir()) == []
    with pytest.raises(OSError, match="Bad file descriptor"):  # closed with the block
        os.fstat(upload.fd)


def test_an_upload_too_large_for_memory_has_no_name_and_no_writer(tmp_path: Path) -> None:
    with sealed_upload(
        [BODY], "big.bin", tmp_path, expected_size=len(BODY), in_memory_max_bytes=4
    ) as upload:
        # an O_TMPFILE: never linked into the workspace, read-only, its writer closed
        assert not upload.sealed and not is_sealed(upload.fd)
        info = os.fstat(upload.fd)
        assert info.st_nlink == 0 and list(tmp_path.iterdir()) == []
        assert os.readlink(upload.path).endswith("(deleted)")
        with pytest.raises(OSError, match="Bad file descriptor") as written:
            os.write(upload.fd, b"x")
        assert written.value.errno == errno.EBADF
        assert upload.path.read_bytes() == BODY


def test_a_file_swapped_after_it_was_sealed_does_not_change_what_is_scanned(
    tmp_path: Path,
) -> None:
    # Given a downloaded file sealed for the engines (a test's or the bench's path)
    path = tmp_path / "upload.bin"
    path.write_bytes(b"X5O!P%@AP malicious bytes")
    with sealed_copy(path) as upload:
        # When another process renames something else over it, or rewrites it in place
        decoy = tmp_path / "decoy"
        decoy.write_bytes(b"a harmless decoy")
        decoy.replace(path)
        path.write_bytes(b"rewritten")
        # Then the engines still read the bytes that were sealed
        assert upload.path.read_bytes() == b"X5O!P%@AP malicious bytes"
        assert upload.name == "upload.bin" and upload.scratch == tmp_path
