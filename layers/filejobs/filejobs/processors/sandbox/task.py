"""What a decoder is, inside the sandbox: an open file in, a result and named outputs out."""

from __future__ import annotations

import base64
import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, BinaryIO


@dataclass(frozen=True)
class Decoded:
    """A decoder's answer: the job's result facts (JSON values) and its derived files' bytes,
    by name. The worker uploads the files under the job's own keys; the names are checked
    against the ones the job may write."""

    result: dict[str, Any]
    outputs: Mapping[str, bytes] = field(default_factory=dict)

    def to_message(self) -> dict[str, Any]:
        encoded = {name: base64.b64encode(data).decode() for name, data in self.outputs.items()}
        return {"result": self.result, "outputs": encoded}


# A decoder: the untrusted file (read-only, at offset 0) and the job's options (JSON values).
type Task = Callable[[BinaryIO, dict[str, Any]], Decoded]


def task_name(task: Task) -> str:
    """`module:function`, how the worker names a decoder to the zygote."""
    return f"{task.__module__}:{task.__qualname__}"


def resolve(name: str) -> Task:
    module_name, _, function = name.partition(":")
    task: Task = getattr(importlib.import_module(module_name), function)
    return task
