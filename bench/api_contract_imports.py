"""What a typed API contract would add to the API function's cold start: pydantic or msgspec.

Issue 47 asks for one typed contract (request and response models) from which Powertools derives
validation and OpenAPI. The API handler ships no pydantic today (api/parsing.py validates by
hand "because the layer does not ship pydantic", never measured). This measures the price.

Each sample is a fresh interpreter (`python -S`, the project's packages on PYTHONPATH, the API
handler's folder as working directory), interleaved so machine noise hits every contender alike;
medians are compared. The contenders:

- today: `import app` (functions/api/app.py), the API's cold import as deployed;
- + pydantic models: then `import pydantic` and one model per object schema of the committed
  OpenAPI document (api_docs/openapi.json: 56 of them, 300 fields), built as pydantic builds a
  class (its core schema and validator), and a validation of one instance of each;
- + Powertools validation: then a REST resolver with `enable_validation=True` (which imports
  Powertools' OpenAPI machinery and pydantic) and one route per operation of the document,
  each with its model as body and response, and the first event resolved (Powertools builds a
  route's validation on its first call);
- + msgspec structs: then `import msgspec` and one Struct per object schema, with a JSON decoder
  each (msgspec is installed in a scratch folder: the project does not depend on it), and a
  decode of one instance of each.

Fields are typed from their JSON schema (strings, numbers, booleans, enums as Literal, lists);
a nested object or a $ref is typed `dict[str, Any]`: the figures slightly understate a contract
whose models nest (the validators nest too).

    .venv/bin/python bench/api_contract_imports.py [--runs 9] [--msgspec 0.19.0]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OPENAPI = ROOT / "layers/filejobs/filejobs/api_docs/openapi.json"
API_FOLDER = ROOT / "functions/api"

# Shared by every contender: the document's object schemas as (name, {field: annotation}).
_SCHEMAS = f"""
import json, time
from typing import Any, Literal
_started = time.perf_counter()
import app
_imported = time.perf_counter()
_document = json.load(open({str(OPENAPI)!r}))

def _annotation(schema):
    kind = schema.get("type")
    if "enum" in schema:
        return Literal[tuple(schema["enum"])]
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind == "array":
        return list[_annotation(schema.get("items", {{}}))]
    scalars = {{"string": str, "integer": int, "number": float, "boolean": bool}}
    return scalars.get(kind, dict[str, Any])

def _sample(schema):
    kind = schema.get("type")
    if "enum" in schema:
        return schema["enum"][0]
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    samples = {{"string": "x", "integer": 1, "number": 1.5, "boolean": True, "array": []}}
    return samples.get(kind, {{}})

SCHEMAS = [
    (name, {{field: _annotation(spec) for field, spec in schema["properties"].items()}},
     {{field: _sample(spec) for field, spec in schema["properties"].items()}})
    for name, schema in _document["components"]["schemas"].items()
    if schema.get("type") == "object" and schema.get("properties")
]
"""

_REPORT = """
_built = time.perf_counter()
print(json.dumps({"import_ms": (_imported - _started) * 1000,
                  "contract_ms": (_built - _imported) * 1000, "schemas": len(SCHEMAS)}))
"""

CONTENDERS = {
    "today": "SCHEMAS = []\n",
    "+ pydantic models": """
import pydantic
for name, fields, sample in SCHEMAS:
    model = pydantic.create_model(name, **{field: (kind, ...) for field, kind in fields.items()})
    model.model_validate(sample)
""",
    "+ Powertools validation": """
import pydantic
from aws_lambda_powertools.event_handler import APIGatewayRestResolver
resolver = APIGatewayRestResolver(enable_validation=True)
models = []
for index, (name, fields, sample) in enumerate(SCHEMAS):
    model = pydantic.create_model(name, **{field: (kind, ...) for field, kind in fields.items()})
    models.append((model, sample))
    def route(body: model) -> model:  # noqa: B023 (each route its own model, bound now)
        return body
    route.__annotations__ = {"body": model, "return": model}
    resolver.post(f"/route{index}")(route)
first, sample = models[0]
event = {"httpMethod": "POST", "path": "/route0", "resource": "/route0",
         "headers": {"content-type": "application/json"}, "body": json.dumps(sample),
         "requestContext": {"requestId": "r", "stage": "prod"}, "isBase64Encoded": False}
answer = resolver.resolve(event, None)
assert answer["statusCode"] == 200, answer
""",
    "+ msgspec structs": """
import msgspec
for name, fields, sample in SCHEMAS:
    struct = msgspec.defstruct(name, list(fields.items()))
    msgspec.json.Decoder(struct).decode(msgspec.json.encode(sample))
""",
}


def install_msgspec(version: str, into: Path) -> None:
    uv = Path(sys.executable).parent / "uv"
    subprocess.run(  # noqa: S603 (our venv's uv, fixed arguments)
        [str(uv), "pip", "install", "--quiet", "--python", sys.executable,
         "--target", str(into), f"msgspec=={version}"],
        check=True,
    )  # fmt: skip


def sample(code: str, python_path: str) -> dict[str, float]:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": python_path,
        "PYTHONDONTWRITEBYTECODE": "1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "JOBS_TABLE_NAME": "bench-jobs",
        "FILES_TABLE_NAME": "bench-files",
        "OUTPUTS_BUCKET": "bench-outputs",
    }
    done = subprocess.run(  # noqa: S603 (our own interpreter, our own code)
        [sys.executable, "-S", "-c", code],
        cwd=API_FOLDER,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"a contender failed:\n{done.stderr[-3000:]}")
    figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--msgspec", default="0.19.0", help="the msgspec release to measure")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="msgspec-") as scratch:
        install_msgspec(arguments.msgspec, Path(scratch))
        python_path = os.pathsep.join(
            [str(API_FOLDER), str(ROOT / "layers/filejobs"), sysconfig.get_paths()["purelib"],
             scratch]
        )  # fmt: skip
        runs: dict[str, list[dict[str, float]]] = {name: [] for name in CONTENDERS}
        for _ in range(arguments.runs):
            for name, contender in CONTENDERS.items():
                runs[name].append(sample(_SCHEMAS + contender + _REPORT, python_path))
    report(runs)


def report(runs: dict[str, list[dict[str, float]]]) -> None:
    def median(name: str, figure: str) -> float:
        return statistics.median(run[figure] for run in runs[name])

    today = median("today", "import_ms") + median("today", "contract_ms")
    schemas = int(runs["+ pydantic models"][0]["schemas"])
    count = len(runs["today"])
    print(f"the API's cold import, then a contract of {schemas} models built and used "
          f"(medians of {count} fresh interpreters each, interleaved):")  # fmt: skip
    print(f"  {'':26} {'import ms':>10} {'contract ms':>12} {'total':>8}  / today")
    for name in runs:
        imported, contract = median(name, "import_ms"), median(name, "contract_ms")
        total = imported + contract
        print(f"  {name:26} {imported:10.1f} {contract:12.1f} {total:8.1f}  {total / today:5.2f}x")


if __name__ == "__main__":
    main()
