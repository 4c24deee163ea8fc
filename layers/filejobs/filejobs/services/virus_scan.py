"""The virus scan, as a use case: scan, record the verdict, then act on it.

The virus_scan worker's processor. One attempt:

1. scans (processors/scan/processor.py). Without usable definitions the scan fails closed: a
   TransientError, retried later; never a CLEAN from fewer engines than configured;
2. records the verdict and its evidence on the file, in one conditional write, *before* anything
   is done about it: whatever happens next, the verdict is known and no decoder is let in;
3. acts: CLEAN tags the version and sends the file's waiting jobs (the result's `released`: how
   many messages; the gate reads nothing more than the verdict's write returned in the common
   case, services/scan_gate.py); INFECTED first marks the file
   quarantined (its `File Quarantined` event comes from that write; from then on the API gives
   no link to its outputs), cancels its other jobs and withdraws every derived output made from
   it (a rescan can find what the first scan did not), and only then moves the version to the
   quarantine bucket (tag, copy, delete: adapters/quarantine.py), so nothing made from it stays
   served however the move fares; UNSCANNABLE tags the version and holds or sends the waiting
   jobs as the policy says. A verdict tag that finds the version at S3's 10 tags keeps the
   uploader's tag it displaces on the file's record.

Each step is idempotent, so a crash anywhere is finished by the job's next attempt: one that
finds the version already moved (an earlier attempt recorded the infection and moved it) goes
straight to finishing the quarantine.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from filejobs.domain.file import ScanRecord, ScanStatus, StoredFile
from filejobs.domain.job import ProcessingJob
from filejobs.domain.objects import ObjectLocation
from filejobs.domain.retry import ObjectGoneError, PermanentError
from filejobs.domain.scanning import SCANNER
from filejobs.domain.time import utcnow
from filejobs.ports import FileStore, VerdictMarks
from filejobs.processors.base import Processor, Work
from filejobs.processors.scan.processor import ScanVerdict
from filejobs.services.scan_gate import ScanGate

_STATUS = {
    ScanVerdict.CLEAN: ScanStatus.CLEAN,
    ScanVerdict.INFECTED: ScanStatus.INFECTED,
    ScanVerdict.UNSCANNABLE: ScanStatus.UNSCANNABLE,
}


# The verdicts a version keeps a tag of where it is (an infected one leaves the bucket).
_TAGS = {ScanStatus.CLEAN: ScanVerdict.CLEAN, ScanStatus.UNSCANNABLE: ScanVerdict.UNSCANNABLE}


class VirusScan:
    def __init__(
        self,
        scanner: Processor,
        files: FileStore,
        marks: VerdictMarks,
        gate: ScanGate,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self._scanner, self._files, self._marks, self._gate = scanner, files, marks, gate
        self._clock = clock

    def __call__(self, work: Work) -> dict[str, Any]:
        job = work.job
        try:
            result = {**self._scanner(work), "rescan": _is_rescan(job)}
        except Exception as error:
            resumed = self._resumed(job, error)
            if resumed is None:
                raise
            return resumed
        record = self._record(job, result)
        after = self._files.record_scan(job.file_id, record, by=SCANNER)
        if after is None:
            raise PermanentError(f"file {job.file_id} of the scan is not recorded")
        recorded = after.scan_status
        if recorded is not record.verdict:
            # The file already had a verdict this one may not replace (infected is final; an
            # unscannable rescan leaves a clean verdict standing): that one is acted on.
            result["recorded_verdict"] = None if recorded is None else recorded.value
            work.log(f"the file keeps its verdict {result['recorded_verdict']}: acted on that")
        acted = self._act(job, after, result)
        if acted.get("quarantine_key"):
            work.log(f"quarantined as {acted['quarantine_key']}; derived outputs withdrawn")
        else:
            work.log(f"verdict {record.verdict.value} recorded on the file")
        return acted

    def _resumed(self, job: ProcessingJob, error: Exception) -> dict[str, Any] | None:
        """An attempt that finds its version gone because an earlier one recorded the infection
        and moved it, then died before the end: the quarantine is finished, not failed. (An
        earlier attempt that died before the move is simply run again: its scan records the
        same verdict, and the move finds any copy it made.)"""
        if not isinstance(error, ObjectGoneError):
            return None
        stored = self._files.get(job.file_id)
        if stored is None or stored.scan_status is not ScanStatus.INFECTED:
            return None
        recorded = {**_recorded_result(stored), "rescan": _is_rescan(job)}
        return self._quarantine(job, stored, recorded, resumed=True)

    def _record(self, job: ProcessingJob, result: dict[str, Any]) -> ScanRecord:
        """The verdict's record, from the scan's result (processors/scan ScanReport)."""
        try:
            verdict = _STATUS[ScanVerdict(result["verdict"])]
        except (KeyError, ValueError):
            raise PermanentError(f"the scan gave no verdict: {str(result)[:200]}") from None
        engines = result.get("engines") or {}
        return ScanRecord(
            verdict=verdict,
            scanned_at=self._clock(),
            job_id=job.id,
            engines={str(n): str(e.get("version") or "") for n, e in engines.items()},
            definitions_version=result.get("definitions_version"),
            signatures=tuple(str(s) for s in result.get("signatures") or ()),
            reason=result.get("unscannable_reason"),
        )

    def _act(
        self, job: ProcessingJob, stored: StoredFile, result: dict[str, Any]
    ) -> dict[str, Any]:
        if stored.scan_status is ScanStatus.INFECTED:
            return self._quarantine(job, stored, result, resumed=False)
        tag = _TAGS.get(stored.scan_status) if stored.scan_status else None
        if tag is not None:
            self._marks.tag(
                _location(stored), tag.value, keep_displaced=self._keeper_of_displaced(stored)
            )
        # The file as the verdict's write returned it: the gate reads no more (scan_gate.py).
        released = self._gate.settle(stored.id, stored, job)
        return {**result, "quarantine_key": None, "released": released}

    def _keeper_of_displaced(self, stored: StoredFile) -> Callable[[dict[str, str]], None]:
        def keep(tags: dict[str, str]) -> None:
            self._files.keep_displaced_tags(stored.id, tags, at=self._clock(), by=SCANNER)

        return keep

    def _quarantine(
        self, job: ProcessingJob, stored: StoredFile, result: dict[str, Any], *, resumed: bool
    ) -> dict[str, Any]:
        # Refused before a byte moves: the file marked (no job runs on it, no link is given to
        # its outputs), its other jobs cancelled and its outputs deleted. The move can fail
        # (S3 down, a crash) and be retried; nothing made from the infected bytes waits on it.
        reason = ", ".join(stored.scan.signatures) if stored.scan else ""
        after = self._files.quarantine(
            stored.id, reason=reason or "infected", at=self._clock(), by=SCANNER
        )
        self._gate.settle(stored.id, after or stored, job)
        withdrawn = self._marks.withdraw_outputs(stored.tenant, stored.id)
        moved = self._marks.quarantine(
            _location(stored),
            tenant=stored.tenant,
            file_id=stored.id,
            etag=stored.etag,
            size=stored.size,
        )
        return {
            **result,
            "released": 0,
            "quarantine_key": moved.key,
            "quarantine": {
                "copied": moved.copied,
                "deleted_versions": list(moved.deleted_versions),
                "outputs_withdrawn": withdrawn,
                "resumed": resumed,
            },
        }


def _location(stored: StoredFile) -> ObjectLocation:
    return ObjectLocation(stored.bucket, stored.key, stored.version_id)


def _is_rescan(job: ProcessingJob) -> bool:
    return bool((job.input_data or {}).get("rescan"))


def _recorded_result(stored: StoredFile) -> dict[str, Any]:
    """The result of the attempt that recorded the infection, rebuilt from the file's record."""
    record = stored.scan
    return {
        "verdict": ScanVerdict.INFECTED.value,
        "engines": {} if record is None else {n: {"version": v} for n, v in record.engines.items()},
        "definitions": None,
        "definitions_version": None if record is None else record.definitions_version,
        "signatures": [] if record is None else list(record.signatures),
        "scanned_files": 0,
        "unscannable_reason": None,
        "recorded_at": None if record is None else record.scanned_at.isoformat(),
    }
