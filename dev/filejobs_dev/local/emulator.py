"""moto server in a process of its own, for the services the local stack gives it.

One moto server answers every call of every function host with one interpreter, so one core at
most: under load it was the stack's bottleneck (about 90% of a core at 15 jobs/s, the hosts
waiting on it). DynamoDB and its streams, the busiest pair and the one its own lock serialises
(moto_fixes.py), get this process; S3, SQS and EventBridge stay in the stack's, where S3's
notifications reach SQS in-process as moto delivers them. Each service keeps its own state in
exactly one process, so nothing AWS promises of one service changes; the functions reach each
through the endpoint environment variables botocore reads (`AWS_ENDPOINT_URL_DYNAMODB`, ...).

    python -m filejobs_dev.local.emulator --port PORT
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import threading
import time

# The services this process serves; their clients' endpoint variables.
SERVICES = ("dynamodb", "dynamodbstreams")
ENDPOINT_VARIABLES = {
    "dynamodb": "AWS_ENDPOINT_URL_DYNAMODB",
    "dynamodbstreams": "AWS_ENDPOINT_URL_DYNAMODB_STREAMS",
}
READY_SECONDS = 30.0


class EmulatorError(RuntimeError):
    """The emulator process did not come up."""


def start(port: int) -> subprocess.Popen[bytes]:
    """The emulator on 127.0.0.1:`port`, answering once this returns."""
    process = subprocess.Popen(  # noqa: S603 (our own module, fixed arguments)
        [sys.executable, "-m", "filejobs_dev.local.emulator", "--port", str(port)],
        start_new_session=True,
    )
    deadline = time.monotonic() + READY_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise EmulatorError(f"the emulator on port {port} exited with {process.returncode}")
        if _answers(port):
            return process
        time.sleep(0.05)
    process.kill()
    raise EmulatorError(f"the emulator on port {port} did not answer in {READY_SECONDS:.0f} s")


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def main() -> int:
    parser = argparse.ArgumentParser(description="moto server with the local stack's fixes.")
    parser.add_argument("--port", type=int, required=True)
    arguments = parser.parse_args()
    from filejobs_dev.local import moto_fixes  # noqa: PLC0415 (the local stack's alone)
    from filejobs_dev.local.front import moto_front  # noqa: PLC0415

    moto_fixes.apply()
    server = moto_front("127.0.0.1", arguments.port)
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    parent = os.getppid()
    # A stack that died without stopping it (SIGKILL) leaves nothing to serve.
    while not stop.wait(1.0):
        if os.getppid() != parent:
            break
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
