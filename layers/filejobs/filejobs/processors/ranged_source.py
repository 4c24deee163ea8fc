"""A source the sandboxed decoder reads by ranges: for a file larger than the function's disk.

A video larger than the workspace can hold is never downloaded. The worker serves ranges of the
object to the decoder over a Unix socket pair (`RangeServer`, a thread of the worker, reading
S3 with the worker's own credentials), and the decoder reads it through `RangedFile`, a seekable
read-only file over its end of the socket: FFmpeg reads the container's index wherever it is (an
MP4's `moov` at either end of the file) and the packets it needs, nothing more. The decoder
keeps no network, no credentials and no path: one more descriptor, a socket that answers only
"these bytes of this one object version".

The wire: the decoder sends an offset and a length (`>QI`); the worker answers a length (`>I`)
then that many bytes (fewer at the end of the object, none past it), or FAILED when it could not
read them (its error is raised in the worker once the decode ends, as the job's error: a
transient S3 error stays transient). Reads are clipped to the object and to MAX_REQUEST; S3 is
read in whole blocks of BLOCK, the last few kept, and at most `max_reads` GETs a job (a
compromised decoder cannot make the worker read without end).
"""

from __future__ import annotations

import contextlib
import io
import socket
import struct
import threading
from collections import OrderedDict
from collections.abc import Buffer, Callable
from types import TracebackType

from filejobs.domain.retry import PermanentError

MiB = 1024 * 1024
_REQUEST = struct.Struct(">QI")
_REPLY = struct.Struct(">I")
FAILED = 0xFFFFFFFF
MAX_REQUEST = 4 * MiB  # one answer at most
BLOCK = 4 * MiB  # one S3 GET
CACHED_BLOCKS = 8
MAX_READS = 20_000  # GETs a job may make: 80 GB of blocks, far past any decode's need
READ_BUFFER = 1 * MiB  # what the decoder's side buffers: FFmpeg asks for 32 KB at a time

type ReadRange = Callable[[int, int], bytes]
"""`(offset, length)` -> the object's bytes there (an S3 ranged GET, in the worker)."""


class RangeServer:
    """Serves one object's bytes to one decoder, from a thread of the worker, until the decoder
    closes its end (it ended, or was killed) or the server is closed.

        with RangeServer(read, size) as server:
            sandbox.decode(task, placeholder, attachments=(server.decoder_end,), ...)
        server.raise_failure()
    """

    def __init__(self, read: ReadRange, size: int, *, max_reads: int = MAX_READS) -> None:
        self._read = read
        self._size = size
        self._reads_left = max_reads
        self._blocks: OrderedDict[int, bytes] = OrderedDict()
        self._ours, self._theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self._thread = threading.Thread(target=self._serve, name="range-server", daemon=True)
        self.failure: BaseException | None = None
        self.reads = 0  # GETs made
        self.served = 0  # bytes answered

    @property
    def decoder_end(self) -> int:
        """The descriptor to hand the decoder (the sandbox passes it on; ours stays here)."""
        return self._theirs.fileno()

    def __enter__(self) -> RangeServer:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._theirs.close()
        with contextlib.suppress(OSError):
            self._ours.shutdown(socket.SHUT_RDWR)  # wakes the thread if it waits on a request
        self._thread.join(timeout=30)
        self._ours.close()

    def raise_failure(self) -> None:
        """The error that stopped a read of the object, if one did: the job's real error."""
        if self.failure is not None:
            raise self.failure

    def _serve(self) -> None:
        with contextlib.suppress(OSError):
            while (request := _exactly(self._ours, _REQUEST.size)) is not None:
                offset, length = _REQUEST.unpack(request)
                try:
                    data = self._bytes(offset, min(length, MAX_REQUEST))
                except Exception as error:  # kept, and raised in the worker once the decode ends
                    self.failure = error
                    self._ours.sendall(_REPLY.pack(FAILED))
                    return
                self._ours.sendall(_REPLY.pack(len(data)) + data)
                self.served += len(data)

    def _bytes(self, offset: int, length: int) -> bytes:
        end = min(offset + length, self._size)
        parts = []
        position = offset
        while position < end:
            start = position - position % BLOCK
            block = self._block(start)
            parts.append(block[position - start : end - start])
            position = start + BLOCK
        return b"".join(parts)

    def _block(self, start: int) -> bytes:
        block = self._blocks.get(start)
        if block is not None:
            self._blocks.move_to_end(start)
            return block
        if self._reads_left <= 0:
            raise PermanentError("the decoder asked for more of the object than a job may read")
        self._reads_left -= 1
        self.reads += 1
        block = self._read(start, min(BLOCK, self._size - start))
        self._blocks[start] = block
        if len(self._blocks) > CACHED_BLOCKS:
            self._blocks.popitem(last=False)
        return block


def _exactly(channel: socket.socket, count: int) -> bytes | None:
    """`count` bytes, or None at end of stream (the other end closed)."""
    data = b""
    while len(data) < count:
        part = channel.recv(count - len(data))
        if not part:
            return None
        data += part
    return data


class RangedFile(io.RawIOBase):
    """The decoder's side: the object as a read-only, seekable file over the socket `fd`."""

    def __init__(self, fd: int, size: int) -> None:
        super().__init__()
        self._channel = socket.socket(fileno=fd)
        self._size = size
        self._position = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: self._size}[whence]
        if base + offset < 0:
            raise OSError("seek before the start of the object")
        self._position = base + offset
        return self._position

    def readinto(self, buffer: Buffer, /) -> int:
        view = memoryview(buffer).cast("B")
        wanted = min(len(view), MAX_REQUEST, self._size - self._position)
        if wanted <= 0:
            return 0
        self._channel.sendall(_REQUEST.pack(self._position, wanted))
        header = _exactly(self._channel, _REPLY.size)
        (length,) = _REPLY.unpack(header) if header is not None else (FAILED,)
        if length == FAILED or length > wanted:
            raise OSError("the object could not be read (the worker's read failed)")
        data = _exactly(self._channel, length) if length else b""
        if data is None:
            raise OSError("the worker closed the object mid-read")
        view[: len(data)] = data
        self._position += len(data)
        return len(data)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._channel.close()
        super().close()


def ranged_file(fd: int, size: int) -> io.BufferedReader:
    """The object, buffered: FFmpeg's small reads cost one request per READ_BUFFER."""
    return io.BufferedReader(RangedFile(fd, size), buffer_size=READ_BUFFER)
