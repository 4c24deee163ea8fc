"""The local stack's contract with its clients: where `filejobs dev` writes what it serves
(`.filejobs/local.json`: endpoints, region, API URL and token, resources) and the credentials the
emulator takes. The CLI reads it to target the local stack; the dev tools write it."""

from __future__ import annotations

from pathlib import Path

CONFIG_PATH = Path(".filejobs") / "local.json"
# Credentials for the emulator only: moto accepts any; real ones must never be sent to it.
LOCAL_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local"}
