"""Debian packages built in memory, for the tests of the ClamAV layer's build (layers/clamav)."""

from __future__ import annotations

import io
import tarfile


def debian_package(files: dict[str, bytes]) -> bytes:
    """A Debian package: an `ar` archive of debian-binary, control.tar.xz and data.tar.xz."""

    def tar(members: dict[str, bytes]) -> bytes:
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:xz") as archive:
            for name, data in members.items():
                info = tarfile.TarInfo(f"./{name}")
                info.size, info.mode = len(data), 0o755
                archive.addfile(info, io.BytesIO(data))
        return buffer.getvalue()

    members = {
        "debian-binary": b"2.0\n",
        "control.tar.xz": tar({"control": b"Package: hello\n"}),
        "data.tar.xz": tar(files),
    }
    out = bytearray(b"!<arch>\n")
    for name, data in members.items():
        out += f"{name:<16}{0:<12}{0:<6}{0:<6}{'100644':<8}{len(data):<10}`\n".encode()
        out += data + (b"\n" if len(data) % 2 else b"")
    return bytes(out)
