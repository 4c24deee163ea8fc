"""The virus_scan job: every engine over the uploaded version, then tag it or quarantine it.

Verdicts combine strictly: any engine that found something makes the file INFECTED (a detection
is conclusive even if another engine failed); otherwise an engine that could not finish makes it
ERROR. An ERROR is never reported as a result:

- a refusal (a limit: zip bomb, nesting, size) fails the job for good (PermanentError): the same
  bytes will be refused again;
- an engine failure (crash, timeout, broken definitions) is retried (TransientError).

CLEAN and INFECTED are written on the uploads version as the tag `scan-status`. An INFECTED
version is tagged first, then copied to the quarantine bucket under
`quarantine/{tenant}/{file_id}/{original name}` (tagged too, with where it came from in its
metadata), then that version is deleted from the uploads bucket. Each step is idempotent, and a
retry that finds the version gone but its quarantined copy present reports the quarantine again.

Marking the StoredFile quarantined and cancelling the file's other jobs is the caller's part.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from filejobs.domain.retry import PermanentError, TransientError
from filejobs.processors.base import StopRequested, Work
from filejobs.processors.scan.engines import (
    ClamAvScanner,
    Scanner,
    ScanResult,
    Verdict,
    YaraScanner,
)
from filejobs.processors.source import ObjectLocation, ObjectSource

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

SCAN_STATUS_TAG = "scan-status"
_GONE = frozenset({"NoSuchKey", "NoSuchVersion", "404"})


def quarantine_key(tenant: str, file_id: str, key: str) -> str:
    return f"quarantine/{tenant}/{file_id}/{PurePosixPath(key).name}"


def combine(results: Sequence[ScanResult]) -> Verdict:
    if any(r.infected for r in results):
        return Verdict.INFECTED
    if any(r.errors or r.refusals for r in results):
        return Verdict.ERROR
    return Verdict.CLEAN


def default_engines(signature_dir: Path, clamscan: str | None = "clamscan") -> list[Scanner]:
    """YARA (shipped rules plus the synced `.yar` files), and ClamAV over the synced databases."""
    engines: list[Scanner] = [YaraScanner.with_rules_in(signature_dir)]
    if clamscan:
        engines.append(ClamAvScanner(signature_dir, clamscan))
    return engines


class VirusScanProcessor:
    def __init__(
        self,
        s3: S3Client,
        engines: Sequence[Scanner],
        quarantine_bucket: str,
        *,
        max_bytes: int | None = None,
    ) -> None:
        if not engines:
            raise ValueError("a virus scan needs at least one engine")
        self._s3 = s3
        self._engines = list(engines)
        self._quarantine_bucket = quarantine_bucket
        self._max_bytes = max_bytes

    def __call__(self, work: Work) -> dict[str, Any]:
        job = work.job
        location = ObjectLocation.of(job)
        target = quarantine_key(job.tenant, job.file_id, location.key)
        path = work.workspace / _local_name(location.key)
        try:
            ObjectSource(self._s3).download(job, path, work.should_stop, max_bytes=self._max_bytes)
        except ClientError as error:
            if _code(error) in _GONE and (earlier := self._quarantined(location, target)):
                return earlier  # an earlier attempt quarantined it, then died
            raise
        results: list[ScanResult] = []
        for engine in self._engines:
            if work.should_stop():
                raise StopRequested
            results.append(engine.scan(path))
        verdict = combine(results)
        if verdict is Verdict.ERROR:
            raise _failure(results)
        self._tag(location, verdict)
        quarantined = (
            self._quarantine(location, target, results) if verdict is Verdict.INFECTED else None
        )
        return _result(verdict, results, quarantined)

    def _tag(self, location: ObjectLocation, verdict: Verdict) -> None:
        """Sets scan-status on exactly this version, keeping the tags it already has."""
        current = self._s3.get_object_tagging(**location.request())["TagSet"]
        tags = [t for t in current if t["Key"] != SCAN_STATUS_TAG]
        tags.append({"Key": SCAN_STATUS_TAG, "Value": verdict.value})
        self._s3.put_object_tagging(**location.request(), Tagging={"TagSet": tags})

    def _quarantine(self, location: ObjectLocation, target: str, results: list[ScanResult]) -> str:
        source: dict[str, str] = {"Bucket": location.bucket, "Key": location.key}
        if location.version_id:
            source["VersionId"] = location.version_id
        self._s3.copy_object(
            Bucket=self._quarantine_bucket,
            Key=target,
            CopySource=source,  # type: ignore[arg-type]  # the stubs' CopySourceTypeDef
            MetadataDirective="REPLACE",
            Metadata={
                "source-bucket": location.bucket,
                "source-key": location.key,
                "source-version": location.version_id or "",
                # S3 metadata is ASCII and small: the full list is in the job's result.
                "signatures": ",".join(_signatures(results))[:1024],
            },
            TaggingDirective="REPLACE",
            Tagging=f"{SCAN_STATUS_TAG}={Verdict.INFECTED.value}",
        )
        self._s3.delete_object(**location.request())
        return target

    def _quarantined(self, location: ObjectLocation, target: str) -> dict[str, Any] | None:
        """The result of an earlier attempt that quarantined this very version, if any."""
        try:
            head = self._s3.head_object(Bucket=self._quarantine_bucket, Key=target)
        except ClientError as error:
            if _code(error) in _GONE:
                return None
            raise
        metadata = head.get("Metadata", {})
        if metadata.get("source-version", "") != (location.version_id or ""):
            return None
        signatures = [s for s in metadata.get("signatures", "").split(",") if s]
        return {
            "verdict": Verdict.INFECTED.value,
            "engines": {},
            "signatures": signatures,
            "scanned_files": 0,
            "quarantine_key": target,
            "recovered": True,
        }


def _local_name(key: str) -> str:
    """The upload's name made safe as a file name: engines' messages then name what they saw."""
    name = re.sub(r"[^A-Za-z0-9._-]", "_", PurePosixPath(key).name)[-100:].lstrip(".")
    return name or "object"


def _code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def _signatures(results: Sequence[ScanResult]) -> list[str]:
    return sorted({s for r in results for s in r.signatures})


def _failure(results: Sequence[ScanResult]) -> Exception:
    refusals = [f"{r.engine}: {m}" for r in results for m in r.refusals]
    errors = [f"{r.engine}: {m}" for r in results for m in r.errors]
    if refusals:
        return PermanentError("the file could not be scanned in full: " + "; ".join(refusals))
    return TransientError("a scan engine failed: " + "; ".join(errors))


def _result(
    verdict: Verdict, results: Sequence[ScanResult], quarantined: str | None
) -> dict[str, Any]:
    return {
        "verdict": verdict.value,
        "engines": {
            r.engine: {
                "verdict": r.verdict.value,
                "infected": r.infected,
                "signatures": r.signatures,
                "scanned_files": r.scanned_files,
                "errors": r.errors,
                "refusals": r.refusals,
            }
            for r in results
        },
        "signatures": _signatures(results),
        "scanned_files": max((r.scanned_files for r in results), default=0),
        "quarantine_key": quarantined,
    }
