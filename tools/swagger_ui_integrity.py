"""Prints the Subresource Integrity hashes of the Swagger UI files the API's /docs page loads.

    .venv/bin/python tools/swagger_ui_integrity.py 5.17.14

The page loads `swagger-ui.css` and `swagger-ui-bundle.js` of one swagger-ui-dist release from
unpkg, which serves the files of the package npm publishes, byte for byte. This fetches that
package from the npm registry, checks it against the registry's own published sha512 (so a
tampered download is refused, not hashed), and prints each file's sha384 in SRI form: paste
them into SWAGGER_UI_INTEGRITY in layers/filejobs/filejobs/api/openapi.py with the version.
A browser then refuses any file the CDN serves that is not exactly the released one.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import json
import sys
import tarfile
import urllib.request

REGISTRY = "https://registry.npmjs.org/swagger-ui-dist"
FILES = ("swagger-ui.css", "swagger-ui-bundle.js")


def _fetch(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=60) as answer:  # noqa: S310 (the npm registry)
        body: bytes = answer.read()
        return body


def integrity(version: str) -> dict[str, str]:
    """Each file's SRI hash, from the release's package once its published sha512 matched."""
    dist = json.loads(_fetch(f"{REGISTRY}/{version}"))["dist"]
    package = _fetch(dist["tarball"])
    digest = "sha512-" + base64.b64encode(hashlib.sha512(package).digest()).decode()
    if digest != dist["integrity"]:
        raise SystemExit(f"the package's sha512 is not the registry's: {digest}")
    with tarfile.open(fileobj=io.BytesIO(package), mode="r:gz") as archive:
        hashes = {}
        for name in FILES:
            member = archive.extractfile(f"package/{name}")
            if member is None:
                raise SystemExit(f"swagger-ui-dist {version} has no {name}")
            hashes[name] = (
                "sha384-" + base64.b64encode(hashlib.sha384(member.read()).digest()).decode()
            )
    return hashes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("version", help="a swagger-ui-dist release, such as 5.17.14")
    for name, value in integrity(parser.parse_args().version).items():
        print(f'    "{name}": "{value}",')
    return 0


if __name__ == "__main__":
    sys.exit(main())
