"""Writes docs/IAM_PERMISSIONS.md: every role of template.yaml, what it may do and on what.

    .venv/bin/python tools/iam_permissions.py           # writes it
    .venv/bin/python tools/iam_permissions.py --check   # exits 1 when the committed one differs

The committed list is the review surface of least privilege: a new permission in the template
is a diff of this file in the same change, which tests/unit/test_iam_permissions.py enforces.
Each statement is one line: its effect, its actions, its resources with the template's
intrinsics written as the template writes them (`!GetAtt JobsTable.Arn`), and its conditions.
The managed policies a role attaches are listed under it by name, and each policy resource
(managed or inline) is written out once, with the roles it is attached to.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from filejobs_dev.generated_files import write_or_check
from filejobs_dev.infra.template import load_template, resources_of_type

ROOT = Path(__file__).resolve().parents[1]
DOCUMENT = ROOT / "docs" / "IAM_PERMISSIONS.md"

_HEADER = """# IAM permissions, role by role

Written by `tools/iam_permissions.py` from `template.yaml`; do not edit by hand. A change to any
role's permissions changes this file in the same commit (`tests/unit/test_iam_permissions.py`
fails otherwise), so a new permission is a visible diff. Whether each role has everything its
function calls is proven by `tests/integration/test_iam_sufficiency.py`.
"""


def render(template: dict[str, Any]) -> str:
    """The document for `template`."""
    sections = [_HEADER]
    for name, resource in sorted(resources_of_type(template, "AWS::IAM::Role").items()):
        sections.append(_role(name, resource["Properties"]))
    for kind, label in (("ManagedPolicy", "managed policy"), ("Policy", "policy")):
        for name, resource in sorted(resources_of_type(template, f"AWS::IAM::{kind}").items()):
            properties = resource["Properties"]
            lines = [f"## {name} ({label})", ""]
            roles = [_written(role) for role in properties.get("Roles", [])]
            if roles:
                lines += [f"Attached to: {', '.join(roles)}", ""]
            lines.append(_statements(properties["PolicyDocument"]["Statement"]))
            sections.append("\n".join(lines))
    return "\n".join(sections)


def _role(name: str, properties: dict[str, Any]) -> str:
    lines = [f"## {name}", ""]
    trusted = [_statement(s) for s in properties["AssumeRolePolicyDocument"]["Statement"]]
    lines += [f"Assumed by: {', '.join(trusted)}", ""]
    attached = [_written(arn) for arn in properties.get("ManagedPolicyArns", [])]
    if attached:
        lines += [f"Managed policies: {', '.join(attached)}", ""]
    for policy in properties.get("Policies", []):
        lines.append(f"Policy `{policy['PolicyName']}`:")
        lines.append("")
        lines.append(_statements(policy["PolicyDocument"]["Statement"]))
    return "\n".join(lines)


def _statements(statements: list[dict[str, Any]]) -> str:
    return "\n".join(f"- {_statement(s)}" for s in statements) + "\n"


def _statement(statement: dict[str, Any]) -> str:
    parts = [str(statement.get("Effect", "Allow"))]
    if "Sid" in statement:
        parts.append(f"({statement['Sid']})")
    if "Principal" in statement:
        principal = statement["Principal"]
        who = principal.items() if isinstance(principal, dict) else [("", principal)]
        parts += [f"{kind} `{_written(value)}`".strip() for kind, value in who]
    parts.append(", ".join(f"`{a}`" for a in _listed(statement.get("Action", []))))
    resources = _listed(statement.get("Resource", []))
    if resources:
        parts.append("on " + ", ".join(f"`{_written(r)}`" for r in resources))
    if "Condition" in statement:
        parts.append(f"if `{_written(statement['Condition'])}`")
    return " ".join(parts)


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _written(value: Any) -> str:
    """A value as the template writes it: `!GetAtt X.Arn`, `!Sub ...`, `!Ref X`, or JSON."""
    if isinstance(value, dict) and len(value) == 1:
        ((key, inner),) = value.items()
        if key == "Ref":
            return f"!Ref {inner}"
        if key.startswith("Fn::"):
            shown = inner if isinstance(inner, str) else json.dumps(inner, sort_keys=True)
            return f"!{key[4:]} {shown}"
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed one differs")
    return write_or_check(
        {DOCUMENT: render(load_template())},
        check=parser.parse_args().check,
        remedy="run .venv/bin/python tools/iam_permissions.py",
    )


if __name__ == "__main__":
    sys.exit(main())
