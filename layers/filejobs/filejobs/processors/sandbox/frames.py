"""The wire between the worker and the zygote: length-prefixed JSON frames on a Unix socket.

JSON, never pickle: the zygote relays what a decoder wrote, and a decoder may be hostile, so
nothing it sends may be able to run code in the worker when read.
"""

from __future__ import annotations

import json
import socket
import struct
from typing import Any

_LENGTH = struct.Struct(">I")
MAX_FRAME = 128 * 1024 * 1024


class ChannelClosedError(EOFError):
    """The other end is gone (it exited, or was killed) before a whole frame arrived."""


def encode(message: dict[str, Any]) -> bytes:
    body = json.dumps(message, separators=(",", ":")).encode()
    return _LENGTH.pack(len(body)) + body


def send(channel: socket.socket, message: dict[str, Any], fds: tuple[int, ...] = ()) -> None:
    """One frame; `fds` ride along (SCM_RIGHTS) with its first bytes."""
    data = encode(message)
    if fds:
        sent = socket.send_fds(channel, [data], list(fds))
        data = data[sent:]
    channel.sendall(data)


def receive(channel: socket.socket, max_fds: int = 0) -> tuple[dict[str, Any], list[int]]:
    """One frame and the descriptors that came with it."""
    fds: list[int] = []
    header = b""
    if max_fds:
        header, fds, _, _ = socket.recv_fds(channel, _LENGTH.size, max_fds)
        if not header:
            raise ChannelClosedError("channel closed")
    header += _exactly(channel, _LENGTH.size - len(header))
    (length,) = _LENGTH.unpack(header)
    if length > MAX_FRAME:
        raise ValueError(f"a frame of {length} bytes is over the {MAX_FRAME} allowed")
    message = json.loads(_exactly(channel, length))
    if not isinstance(message, dict):
        raise ValueError("a frame must hold a JSON object")
    return message, fds


def _exactly(channel: socket.socket, count: int) -> bytes:
    parts: list[bytes] = []
    while count:
        part = channel.recv(min(count, 1024 * 1024))
        if not part:
            raise ChannelClosedError("channel closed mid-frame")
        parts.append(part)
        count -= len(part)
    return b"".join(parts)
