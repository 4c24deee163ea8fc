"""The console's shell (it holds no data) takes a signed caller on FileJobsApi, like every route:
`filejobs console` signs its requests. ConsoleApi (ApiAuth=COGNITO) must serve it unsigned, as the
page loads before anyone signs in, so anyone who knows that URL invokes ApiFunction through it:
both stages give its two methods a small throttling bucket of their own, below the stage's
per-route one, which bounds what an anonymous caller can cost (docs/CONSOLE.md, "The shell and
the bill")."""

from __future__ import annotations

from typing import Any

import pytest

from filejobs_dev.infra.template import function_definitions, load_template

TEMPLATE = load_template()
RESOURCES: dict[str, dict[str, Any]] = TEMPLATE["Resources"]
SHELL_PATHS = {"/console": "/~1console", "/console/{asset}": "/~1console~1{asset}"}
# Requests a second (and at once) the shell's methods take, each, from every caller together.
MOST_RATE, MOST_BURST = 10, 20


def unsigned_routes() -> set[str]:
    """The paths of the template's API events API Gateway serves without a signature."""
    routes = set()
    for spec in function_definitions(TEMPLATE).values():
        for kind, properties in spec.events:
            if kind == "Api" and (properties.get("Auth") or {}).get("Authorizer") == "NONE":
                routes.add(str(properties["Path"]))
    return routes


@pytest.mark.parametrize(
    "settings",
    [
        RESOURCES["FileJobsApi"]["Properties"]["MethodSettings"],
        RESOURCES["ConsoleApiStage"]["Properties"]["MethodSettings"],
    ],
    ids=["FileJobsApi", "ConsoleApiStage"],
)
def test_the_shells_methods_have_a_small_bucket_of_their_own(settings: list[Any]) -> None:
    by_path = {(s["ResourcePath"], s["HttpMethod"]): s for s in settings}
    for escaped in SHELL_PATHS.values():
        bucket = by_path[(escaped, "GET")]
        assert bucket["ThrottlingRateLimit"] <= MOST_RATE
        assert bucket["ThrottlingBurstLimit"] <= MOST_BURST


def test_no_route_of_the_iam_api_invokes_the_function_for_an_anonymous_caller() -> None:
    # but the CORS preflight (OPTIONS /uploads), which a browser sends unsigned
    assert unsigned_routes() == {"/uploads"}


def test_the_cognito_apis_only_unsigned_methods_are_the_shells() -> None:
    methods = [r for r in RESOURCES.values() if r["Type"] == "AWS::ApiGateway::Method"]
    unsigned = {
        (r["Properties"]["ResourceId"]["Ref"], r["Properties"]["HttpMethod"])
        for r in methods
        if r["Properties"]["AuthorizationType"] == "NONE"
    }
    assert unsigned == {("ConsoleApiShell", "GET"), ("ConsoleApiShellAsset", "GET")}
