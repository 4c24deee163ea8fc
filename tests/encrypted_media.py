"""Password-protected files for the scan's tests, made here: no such sample ships with a package.

- `encrypted_pdf`: a real PDF under the standard security handler (RC4, 40-bit key, revision 2;
  PDF 1.7 section 7.6.3), which PDF readers open with the password and only with it (PDFium
  says "Incorrect password" without). Written from the algorithms, as qpdf is not installed.
- `encrypted_zip`: a ZipCrypto archive from Info-ZIP's `zip -P` (Python's zipfile can read, not
  write, encrypted members); None when `zip` is not installed.
"""

from __future__ import annotations

import hashlib
import shutil
import struct
import subprocess
from pathlib import Path

# The padding string of the standard security handler (PDF 1.7, 7.6.3.3, algorithm 2).
_PAD = bytes.fromhex("28BF4E5E4E758A4164004E56FFFA01082E2E00B6D0683E802F0CA9FE6453697A")
_PERMISSIONS = -44  # print and copy refused: any value works, readers honour it or not
_FILE_ID = b"filejobs-test-id"


def _rc4(key: bytes, data: bytes) -> bytes:
    state = list(range(256))
    j = 0
    for i in range(256):
        j = (j + state[i] + key[i % len(key)]) % 256
        state[i], state[j] = state[j], state[i]
    out = bytearray()
    i = j = 0
    for byte in data:
        i = (i + 1) % 256
        j = (j + state[i]) % 256
        state[i], state[j] = state[j], state[i]
        out.append(byte ^ state[(state[i] + state[j]) % 256])
    return bytes(out)


def _padded(password: bytes) -> bytes:
    return (password + _PAD)[:32]


def encrypted_pdf(text: bytes, user_password: bytes, owner_password: bytes = b"owner") -> bytes:
    """A one-page PDF showing `text`, encrypted. An empty `user_password` gives a file anyone
    may open (encrypted against editing only), which a scanner reads like any other."""
    drawing = b"BT /F1 12 Tf 72 720 Td (" + text + b") Tj ET"
    return encrypted_page(drawing, (612, 792), user_password, owner_password)


def encrypted_page(
    drawing: bytes, size: tuple[int, int], user_password: bytes, owner_password: bytes = b"owner"
) -> bytes:
    """A one-page PDF of `size` points whose content stream is `drawing`, encrypted."""
    owner_key = hashlib.md5(_padded(owner_password), usedforsecurity=False).digest()[:5]
    o_entry = _rc4(owner_key, _padded(user_password))
    key_material = _padded(user_password) + o_entry + struct.pack("<i", _PERMISSIONS) + _FILE_ID
    key = hashlib.md5(key_material, usedforsecurity=False).digest()[:5]
    u_entry = _rc4(key, _PAD)
    object_key = hashlib.md5(key + (4).to_bytes(3, "little") + b"\0\0", usedforsecurity=False)
    content = _rc4(object_key.digest()[:10], drawing)
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %d %d] /Contents 4 0 R >>" % size,
        b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream",
        b"<< /Filter /Standard /V 1 /R 2 /O <%s> /U <%s> /P %d >>"
        % (o_entry.hex().encode(), u_entry.hex().encode(), _PERMISSIONS),
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    file_id = _FILE_ID.hex().encode()
    out += b"trailer\n<< /Size %d /Root 1 0 R /Encrypt 5 0 R /ID [<%s> <%s>] >>\n" % (
        len(objects) + 1,
        file_id,
        file_id,
    )
    out += b"startxref\n%d\n%%%%EOF\n" % xref
    return bytes(out)


def encrypted_zip(folder: Path, name: str, data: bytes, password: str = "secret") -> bytes | None:
    """A zip holding `name` with `data`, encrypted with `password` by `zip -P`."""
    program = shutil.which("zip")
    if program is None:
        return None
    work = folder / "zip-work"
    work.mkdir(parents=True, exist_ok=True)
    (work / name).write_bytes(data)
    subprocess.run(
        [program, "-q", "-P", password, "out.zip", name], cwd=work, check=True, timeout=30
    )
    return (work / "out.zip").read_bytes()
