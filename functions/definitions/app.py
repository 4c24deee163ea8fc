"""The definitions updater: freshclam on a schedule, once at deploy, and by hand.

Three kinds of event (services/definitions.py does the work):

- EventBridge Scheduler's (every DefinitionsUpdateSchedule): an update;
- CloudFormation's custom resource request (ScanDefinitionsOnDeploy): Create and Update run an
  update, Delete does nothing. The answer, PUT to the request's ResponseURL, is SUCCESS even when
  the mirror failed (a mirror's outage must not fail a deploy: the scan fails closed and the
  alarms fire), with {status, set_id, reason} as its Data; FAILED only for a bad setting or an
  error of this code, with a reason and never a traceback;
- a manual invoke `{"action": "update" | "rollback" | "status"}` (the CLI, operators).

Metrics: DefinitionsAgeHours (the current set's age, on every run that has one),
DefinitionsUpdateFailed, DefinitionsPublished and DefinitionsUpdateSkipped (1 or 0 per update).
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlsplit

from aws_lambda_powertools.metrics import MetricUnit

from filejobs import runtime
from filejobs.adapters.definitions import DefinitionsStore
from filejobs.config import ConfigurationError
from filejobs.domain.definitions import Backoff, format_time
from filejobs.domain.time import utcnow
from filejobs.instrumentation import instruments
from filejobs.ports import BACKOFF_STATE
from filejobs.processors.scan.freshclam import (
    Freshclam,
    MirrorSettings,
    SettingsError,
    SetVerifier,
)
from filejobs.services.definitions import DefinitionsUpdater, UpdateReport, UpdateStatus

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext
    from mypy_boto3_s3 import S3Client

observed = instruments()
logger, tracer, metrics = observed.logger, observed.tracer, observed.measured

# One resource per stack: the same id on every Update, so CloudFormation never replaces it
# (and never sends a Delete for an old one).
PHYSICAL_RESOURCE_ID = "filejobs-scan-definitions"
REASON_LIMIT = 1000  # CloudFormation keeps a response under 4 KB


class UnknownActionError(ValueError):
    """An invoke this function does not handle."""


@dataclass(frozen=True)
class UpdaterSettings:
    """The updater's environment (template.yaml's DefinitionsUpdater)."""

    bucket: str
    prefix: str
    freshclam: str
    clamscan: str
    mirror: MirrorSettings
    uses_clamav: bool  # ScanEngines clamav+yara; "yara": no ClamAV database is fetched
    max_age: timedelta
    keep: int
    endpoint_url: str | None

    @classmethod
    def from_env(cls) -> UpdaterSettings:
        """The function's (config.UpdaterVariables), the mirror's three parsed and checked."""
        variables = runtime.updater_variables()
        try:
            mirror = MirrorSettings.parse(
                variables.mirror,
                variables.official_databases,
                variables.custom_urls,
                loopback_http=local_mirror_allowed(variables.endpoint_url),
            )
        except SettingsError as error:
            raise ConfigurationError(str(error)) from None
        return cls(
            bucket=variables.bucket,
            prefix=variables.prefix,
            freshclam=variables.freshclam,
            clamscan=variables.clamscan,
            mirror=mirror,
            uses_clamav=variables.uses_clamav,
            max_age=variables.max_age,
            keep=variables.keep,
            endpoint_url=variables.endpoint_url,
        )


def local_mirror_allowed(endpoint_url: str | None) -> bool:
    """Whether definitions may come over plain http from 127.0.0.1: only when the updater runs
    against local emulators (the local stack and its mirror, an endpoint override); a deployed
    function has no endpoint override, and fetches over https alone."""
    return endpoint_url is not None


def store(settings: UpdaterSettings) -> DefinitionsStore:
    def client() -> S3Client:
        made = runtime.aws_session().create_client("s3", endpoint_url=settings.endpoint_url)
        return cast("S3Client", made)

    s3 = runtime.once(f"definitions-s3:{settings.endpoint_url}", client)
    return DefinitionsStore(s3, settings.bucket, settings.prefix)


def updater(settings: UpdaterSettings) -> DefinitionsUpdater:
    freshclam = Freshclam(settings.freshclam, settings.mirror) if settings.uses_clamav else None
    verifier = SetVerifier(settings.clamscan if settings.uses_clamav else None)
    return DefinitionsUpdater(
        store(settings), freshclam, verifier, keep=settings.keep, max_age=settings.max_age
    )


# --- the three actions -------------------------------------------------------------------------


def update(settings: UpdaterSettings) -> dict[str, Any]:
    try:
        report = updater(settings).run()
    except Exception:
        metrics.add_metric(name="DefinitionsUpdateFailed", unit=MetricUnit.Count, value=1)
        raise
    record(report)
    return report.to_dict()


def record(report: UpdateReport) -> None:
    """The report in the log and in the metrics the alarms watch."""
    summary = report.to_dict()
    if report.status is UpdateStatus.FAILED:
        logger.error("definitions update failed", extra=summary)
    else:
        logger.info(f"definitions update {report.status.value}", extra=summary)
    if report.stale:
        logger.warning("the current definitions are older than the scan accepts", extra=summary)
    if report.age is not None:
        record_age(report.age)
    for name, status in (
        ("DefinitionsUpdateFailed", UpdateStatus.FAILED),
        ("DefinitionsPublished", UpdateStatus.PUBLISHED),
        ("DefinitionsUpdateSkipped", UpdateStatus.SKIPPED),
    ):
        value = 1 if report.status is status else 0
        metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)


def record_age(age: timedelta) -> None:
    """DefinitionsAgeHours, which DefinitionsStaleAlarm compares with MaxDefinitionsAgeHours."""
    metrics.add_metric(name="DefinitionsAgeHours", unit=MetricUnit.NoUnit, value=hours(age))


def hours(age: timedelta) -> float:
    return round(age.total_seconds() / 3600, 3)


def rollback(settings: UpdaterSettings) -> dict[str, Any]:
    """The previous set made current again (RollbackError, said plainly, when there is none)."""
    restored = store(settings).rollback()
    age = restored.age(utcnow())
    logger.warning(
        "definitions rolled back",
        extra={"set_id": restored.set_id, "rolled_back_from": restored.rolled_back_from},
    )
    record_age(age)
    return {
        "status": "rolled_back",
        "set_id": restored.set_id,
        "rolled_back_from": restored.rolled_back_from,
        "age_hours": hours(age),
    }


def status(settings: UpdaterSettings) -> dict[str, Any]:
    """The current set and the updater's standing with the mirror."""
    definitions = store(settings)
    manifest = definitions.current().manifest
    stored = definitions.read_state(BACKOFF_STATE)
    backoff = Backoff() if stored is None else Backoff.from_json(stored)
    standing = {
        "refusals": backoff.refusals,
        "until": None if backoff.until is None else format_time(backoff.until),
        "reason": backoff.reason,
    }
    if manifest is None:
        return {"status": "none", "set_id": None, "backoff": standing}
    age = manifest.age(utcnow())
    record_age(age)
    return {
        "status": "current",
        **manifest.summary(),
        "checked_at": format_time(manifest.checked_at),
        "age_hours": hours(age),
        "stale": age > settings.max_age,
        "previous": list(manifest.previous),
        "rolled_back_from": manifest.rolled_back_from,
        "backoff": standing,
    }


ACTIONS: dict[str, Callable[[UpdaterSettings], dict[str, Any]]] = {
    "update": update,
    "rollback": rollback,
    "status": status,
}


def action_of(event: Any) -> str:
    """What an event asks for: a schedule's is an update; a manual one names its action."""
    if not isinstance(event, dict):
        raise UnknownActionError("expected an event object")
    if event.get("source") in ("aws.scheduler", "aws.events"):
        return "update"
    if "action" in event:
        action = event["action"]
        if not isinstance(action, str) or action not in ACTIONS:
            known = ", ".join(ACTIONS)
            raise UnknownActionError(f"unknown action {action!r}: one of {known}")
        return action
    raise UnknownActionError(
        'not an event this function handles: a schedule, a CloudFormation request, or {"action": '
        f"{' | '.join(repr(a) for a in ACTIONS)}}}"
    )


# --- CloudFormation ----------------------------------------------------------------------------


def is_custom_resource(event: Any) -> bool:
    return isinstance(event, dict) and "RequestType" in event and "ResponseURL" in event


def custom_resource(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Runs an update for Create and Update, and always answers CloudFormation.

    Its properties (Mirror, OfficialDatabases, CustomUrls) only make CloudFormation send an
    Update when they change; the settings come from the function's environment, as on every run.
    """
    request = str(event.get("RequestType"))
    data: dict[str, str] = {"status": "", "set_id": "", "reason": ""}
    answer, reason = "SUCCESS", ""
    try:
        if request in ("Create", "Update"):
            report = update(UpdaterSettings.from_env())
            data = {"status": report["status"], "set_id": report["set_id"] or ""}
            data["reason"] = str(report["reason"])[:REASON_LIMIT]
            reason = f"definitions {report['status']}" + (
                f": {data['reason']}" if data["reason"] else ""
            )
        elif request == "Delete":
            data["status"], reason = "skipped", "nothing to delete: the sets stay in the bucket"
        else:
            answer, reason = "FAILED", f"unknown RequestType {request!r}"
    except ConfigurationError as error:
        logger.error("bad definitions settings", extra={"reason": str(error)})
        answer, reason = "FAILED", f"bad configuration: {error}"
    except Exception as error:
        logger.exception("the definitions updater failed")
        answer = "FAILED"
        reason = (
            f"the definitions updater failed ({type(error).__name__}); "
            f"see its log stream {getattr(context, 'log_stream_name', '')}"
        )
    response = {
        "Status": answer,
        "Reason": reason[:REASON_LIMIT],
        "PhysicalResourceId": event.get("PhysicalResourceId") or PHYSICAL_RESOURCE_ID,
        "StackId": event.get("StackId", ""),
        "RequestId": event.get("RequestId", ""),
        "LogicalResourceId": event.get("LogicalResourceId", ""),
        "NoEcho": False,
        "Data": data,
    }
    respond(str(event["ResponseURL"]), response)
    return response


def respond(url: str, response: dict[str, Any], attempts: int = 4) -> None:
    """PUTs the answer to CloudFormation's pre-signed URL: retried, since without it the stack
    waits an hour for a timeout."""
    if urlsplit(url).scheme not in ("https", "http"):
        raise ValueError("ResponseURL must be an http(s) URL")
    body = json.dumps(response).encode()
    # An empty Content-Type: the URL is signed without one.
    headers = {"Content-Type": "", "Content-Length": str(len(body))}
    for attempt in range(1, attempts + 1):
        request = urllib.request.Request(url, data=body, method="PUT", headers=headers)  # noqa: S310
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:  # noqa: S310 (checked above)
                answer.read()
            return
        except (urllib.error.URLError, TimeoutError) as error:
            if attempt == attempts:
                raise
            logger.warning(
                "answering CloudFormation failed; trying again", extra={"error": str(error)}
            )
            time.sleep(2**attempt)


# --- the handler -------------------------------------------------------------------------------


@observed.entry_point()
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    if is_custom_resource(event):
        return custom_resource(event, context)
    action = action_of(event)
    return ACTIONS[action](UpdaterSettings.from_env())
