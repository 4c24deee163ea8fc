"""What the ClamAV programs (clamd, clamscan, freshclam) see of the worker's environment, and
how the ones that parse hostile bytes with no need of a network (clamd, clamscan) are started:
confined (`confined_command`)."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from filejobs.config import inherited
from filejobs.processors.sandbox import confinement

# A program that parses hostile bytes is started through this, in a fresh interpreter: it
# starts a session of its own (so that stopping the program can kill its whole process group,
# anything it forked included), asks the kernel (prctl(2) PR_SET_PDEATHSIG) to kill it when
# the thread that started it ends, installs confinement.py's seccomp filter (no socket but Unix
# ones: clamd's only socket is its LocalSocket, clamscan needs none), then becomes the program
# (all three survive execve). A worker killed outright (SIGKILL, an out-of-memory kill, the
# local stack's injected crashes) then takes its clamd, and the database it holds in memory,
# with it. Lambda tears the whole sandbox down anyway; a machine running the local stack does
# not. Not a preexec_fn: code run between fork and exec in a threaded process can deadlock on a
# lock another thread held at the fork.
_CONFINE_AND_EXEC = (
    "import ctypes, importlib.util, json, os, signal, sys\n"
    "parent = os.getppid()\n"
    "os.setsid()\n"
    "ctypes.CDLL(None).prctl(1, signal.SIGKILL)\n"
    "if os.getppid() != parent: sys.exit(70)\n"  # the parent died before the request
    "spec = importlib.util.spec_from_file_location('confinement', sys.argv[2])\n"
    "confinement = sys.modules['confinement'] = importlib.util.module_from_spec(spec)\n"
    "spec.loader.exec_module(confinement)\n"
    "if not confinement.no_network(): sys.exit(71)\n"  # confined, or not run at all
    "os.execve(sys.argv[3], sys.argv[3:], json.loads(sys.argv[1]))\n"
)
# Why the wrapper exited before becoming the program.
WRAPPER_EXITS = {70: "its worker died as it started", 71: "the socket filter could not be set"}


def isolated_environment(program: str, **extra: str) -> dict[str, str]:
    """The environment a ClamAV program gets: nothing secret, its own libraries first.

    No AWS credentials (Lambda passes them in the environment) reach a process that parses
    hostile files or talks to a mirror: only PATH, TMPDIR (unless `extra` says otherwise),
    `extra`, and, for a program shipped with its libraries (the ClamAV layer: /opt/clamav/bin
    and /opt/clamav/lib), LD_LIBRARY_PATH pointing at those libraries alone, so they never meet
    the Python runtime's.
    """
    path = inherited(["PATH"]).get("PATH", os.defpath)
    env = {"PATH": path, "TMPDIR": tempfile.gettempdir(), **extra}
    bundled = Path(program).parent.parent / "lib"
    if Path(program).is_absolute() and bundled.is_dir():
        env["LD_LIBRARY_PATH"] = str(bundled)
    return env


def confined_command(
    command: list[str], environment: dict[str, str]
) -> tuple[list[str], dict[str, str]]:
    """The argument list and environment that run `command` confined (see _CONFINE_AND_EXEC)
    with exactly `environment`; unchanged where there is no seccomp (not Linux). Raises
    FileNotFoundError when the program is not an executable on `environment`'s PATH."""
    found = command[0]
    if "/" not in found:
        found = shutil.which(found, path=environment.get("PATH", os.defpath)) or ""
    if not found or not os.access(found, os.X_OK):
        raise FileNotFoundError(f"no executable {command[0]}")
    if not (sys.platform.startswith("linux") and sys.executable):
        return [found, *command[1:]], environment
    # -I -S: the interpreter reads no PYTHON* variable and no site packages; it gets no
    # LD_LIBRARY_PATH (the layer's libraries are the program's alone) and passes the program
    # exactly `environment`. confinement.py is loaded by its path (no package under -I).
    wrapper = [
        sys.executable, "-I", "-S", "-c", _CONFINE_AND_EXEC, json.dumps(environment),
        str(Path(confinement.__file__).resolve()),
    ]  # fmt: skip
    return [*wrapper, found, *command[1:]], {"PATH": environment.get("PATH", os.defpath)}
