"""JobRepository: each job transition is exactly one conditional UpdateItem.

The transition's guard becomes the ConditionExpression, its changes the UpdateExpression, and
the derived index keys move with the status. On success DynamoDB returns the new item
(ALL_NEW), so a worker never needs a GetItem; on a failed condition it returns the old item
(ReturnValuesOnConditionCheckFailure=ALL_OLD), so the repository can say *why* the race was lost
without an extra read.
"""

from __future__ import annotations

import heapq
import itertools
import random
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError
from pynamodb.attributes import Attribute
from pynamodb.exceptions import DeleteError, PutError
from pynamodb.expressions.condition import Condition
from pynamodb.expressions.update import Action

from filejobs.data import index_keys
from filejobs.data.mapping import (
    attempt_to_map,
    job_from_model,
    job_to_model,
    progress_to_map,
)
from filejobs.data.models import JobModel
from filejobs.domain.attempt_notes import AttemptProgress
from filejobs.domain.file import StoredFile
from filejobs.domain.job import JobStatus, JobType, ProcessingJob
from filejobs.domain.quotas import names_another_job
from filejobs.domain.transition_result import Applied, Lost, TransitionResult
from filejobs.domain.transitions import Changes, Conflict, Guard, Transition
from filejobs.ports import InvalidCursorError, JobPage, PageCursor, UnreadableItem

_J = JobModel


@dataclass(frozen=True)
class _ShardRead:
    """One shard's entries past the cursor, and the point it was read to (None: to its end)."""

    models: list[JobModel]
    read_to: tuple[Any, str] | None


# Parallel shard queries: enough to hide per-request latency, few enough for a small Lambda.
_FAN_OUT = 16
# DynamoDB's limit on a sort key value.
_MAX_RANGE_KEY_BYTES = 1024


class JobRepository:
    def get(self, job_id: str, *, consistent: bool = True) -> ProcessingJob | None:
        try:
            return job_from_model(_J.get(job_id, consistent_read=consistent))
        except _J.DoesNotExist:
            return None

    def get_many(self, job_ids: Iterable[str], *, consistent: bool = True) -> list[ProcessingJob]:
        """The stored jobs among `job_ids`, in no order (BatchGetItem, 100 keys a request; PynamoDB
        asks again for any key DynamoDB left unprocessed)."""
        wanted = sorted(set(job_ids))
        return [job_from_model(m) for m in _J.batch_get(wanted, consistent_read=consistent)]

    def create(self, job: ProcessingJob) -> bool:
        """Put a new job in one conditional PutItem (`attribute_not_exists(id)`).

        False when a job with its id is stored already: ids derive from idempotency keys, so
        that is a repeated request, and the caller reads the stored job to tell which it was.
        """
        try:
            job_to_model(job).save(condition=_J.id.does_not_exist())
        except PutError as error:
            if error.cause_response_code != "ConditionalCheckFailedException":
                raise
            return False
        return True

    # --- transitions ----------------------------------------------------------------------

    def apply(self, job_id: str, job_type: JobType, transition: Transition) -> TransitionResult:
        """Make `transition` on the stored job in one conditional write.

        `job_type` derives the index keys written with the status, so the write is also
        conditioned on it: a caller with the wrong type loses, it cannot corrupt an index key.
        """
        actions = _actions(job_id, job_type, transition.changes)
        condition = _condition(transition.guard) & (_J.job_type == job_type.value)
        connection = _J._get_connection()
        request = connection.get_operation_kwargs(
            job_id,
            actions=actions,
            condition=condition,
            return_values="ALL_NEW",
            return_values_on_condition_failure="ALL_OLD",
        )
        try:
            # PynamoDB 6's Model.update() can neither ask for ALL_OLD on a failed condition nor
            # surface the returned item, so the request it builds is dispatched directly.
            response = connection.connection.dispatch("UpdateItem", request)
        except ClientError as error:
            if not _is_condition_failure(error):
                raise
            return _lost(transition.guard, _old_item(error), job_type)
        return Applied(job_from_model(_J.from_raw_data(response["Attributes"])))

    # --- queries (Query or GetItem only, never Scan) ---------------------------------------

    def jobs_of(
        self, stored: StoredFile, status: JobStatus | None = None, *, consistent: bool = True
    ) -> list[ProcessingJob]:
        """A file's jobs in creation order, deleted ones left out; with `status`, only those in it.

        The jobs its item names (`job_ids`, written in the same write as each job) in one
        BatchGetItem: no index. Only a file whose item cannot name them all (it names
        NAMED_JOBS_PER_FILE already, or it was recorded before files named their jobs) has its
        other jobs looked up in its tenant's index, from the file's creation on.
        """
        found = {job.id: job for job in self.get_many(stored.job_ids, consistent=consistent)}
        if not stored.job_ids or not names_another_job(stored):
            for job in self._tenant_jobs_of_file(stored):
                found.setdefault(job.id, job)
        jobs = [
            job
            for job in found.values()
            if job.metadata.deleted_at is None and (status is None or job.status is status)
        ]
        return sorted(jobs, key=lambda job: (job.metadata.created_at, job.id))

    def _tenant_jobs_of_file(self, stored: StoredFile) -> list[ProcessingJob]:
        """The file's jobs through `by_tenant` (every page of each shard from the file's
        creation, filtered on `file_id`): a read that grows with the tenant's jobs since, for
        the rare file that has more jobs than its item names."""
        since = stored.metadata.created_at

        def shard(partition: str) -> list[str]:
            query = _J.by_tenant.query(
                partition,
                range_key_condition=_J.created_at >= since,
                filter_condition=_J.file_id == stored.id,
            )
            return [entry.id for entry in query]

        ids = [job_id for ids in _parallel(shard, index_keys.tenant_partitions(stored.tenant))
               for job_id in ids]  # fmt: skip
        return self.get_many(ids) if ids else []

    def jobs_by_status(
        self, status: JobStatus, *, job_type: JobType | None = None, limit: int = 100
    ) -> list[ProcessingJob]:
        """Jobs in `status`, higher priority first, then oldest first: merged across shards
        (running jobs: soonest lease expiry first, from `by_sweep`)."""
        if not index_keys.listed_by_status(status):
            return self.status_page(status, job_type=job_type, limit=limit).jobs
        types = [job_type] if job_type else list(JobType)
        partitions = [p for t in types for p in index_keys.status_type_partitions(status, t)]
        streams: list[list[JobModel]] = _parallel(
            lambda p: list(_J.by_status_type.query(p, limit=limit, page_size=limit)),
            partitions,
        )
        merged = heapq.merge(*streams, key=lambda m: (m.queue_order, m.id))
        return self._full(itertools.islice(merged, limit))

    def recent_jobs(
        self, tenant: str, *, since: datetime | None = None, limit: int = 100
    ) -> list[ProcessingJob]:
        """A tenant's jobs, newest first."""
        range_condition = None if since is None else (_J.created_at >= since)

        def shard(partition: str) -> list[JobModel]:
            return list(
                _J.by_tenant.query(
                    partition,
                    range_key_condition=range_condition,
                    scan_index_forward=False,
                    limit=limit,
                    page_size=limit,
                )
            )

        streams: list[list[JobModel]] = _parallel(shard, index_keys.tenant_partitions(tenant))
        merged = heapq.merge(*streams, key=lambda m: (m.created_at, m.id), reverse=True)
        return self._full(itertools.islice(merged, limit))

    def tenant_page(
        self,
        tenant: str,
        *,
        status: JobStatus | None = None,
        job_type: JobType | None = None,
        after: PageCursor | None = None,
        limit: int = 50,
    ) -> JobPage:
        """One page of a tenant's jobs, newest first, optionally in one status or of one type.

        Keyset pagination over the 16 `by_tenant` shards: each shard is read from the cursor's
        `created_at` down (ties broken by id), and the shards are merged, so a page costs the
        same whichever page it is.
        """
        return self._keyset_page(
            _J.by_tenant,
            index_keys.tenant_partitions(tenant),
            _J.created_at,
            descending=True,
            after=after,
            limit=limit,
            filter_condition=_filters(status=status, job_type=job_type),
        )

    def status_page(
        self,
        status: JobStatus,
        *,
        job_type: JobType | None = None,
        after: PageCursor | None = None,
        limit: int = 50,
    ) -> JobPage:
        """One page of jobs in `status` across tenants, in queue order (priority, then oldest);
        running jobs, which `by_status_type` leaves out, from `by_sweep` in the order their
        leases expire."""
        if not index_keys.listed_by_status(status):
            return self._keyset_page(
                _J.by_sweep,
                index_keys.sweep_partitions(),
                _J.sweep_at,
                descending=False,
                after=after,
                limit=limit,
                filter_condition=_filters(status=status, job_type=job_type),
            )
        types = [job_type] if job_type else list(JobType)
        return self._keyset_page(
            _J.by_status_type,
            [p for t in types for p in index_keys.status_type_partitions(status, t)],
            _J.queue_order,
            descending=False,
            after=after,
            limit=limit,
            filter_condition=None,
        )

    def _keyset_page(
        self,
        index: Any,
        partitions: list[str],
        range_attribute: Attribute[Any],
        *,
        descending: bool,
        after: PageCursor | None,
        limit: int,
        filter_condition: Condition | None,
    ) -> JobPage:
        name = range_attribute.attr_name
        start: Any = None
        if after is not None:
            try:
                start = range_attribute.deserialize(after.range_value)
            except (TypeError, ValueError) as error:
                raise InvalidCursorError(f"not a {name} value: {after.range_value!r}") from error
            # A text range key (queue_order) deserializes from any string, but DynamoDB answers a
            # key value that is empty, not UTF-8 or over 1,024 bytes with a ValidationException
            # (an API caller's forged next_token got a 500). No index entry holds one.
            if not _is_range_key_value(after.range_value):
                raise InvalidCursorError(f"not a {name} value: {after.range_value[:80]!r}")

        def beyond_cursor(model: JobModel) -> bool:
            if after is None:
                return True
            position = (getattr(model, name), model.id)
            return position < (start, after.id) if descending else position > (start, after.id)

        def shard(partition: str) -> _ShardRead:
            condition = None
            if after is not None:
                condition = range_attribute <= start if descending else range_attribute >= start
            query = index.query(
                partition,
                range_key_condition=condition,
                filter_condition=filter_condition,
                scan_index_forward=not descending,
                page_size=limit + 1,
            )
            # One request per shard: with a filter, DynamoDB evaluates `limit + 1` entries and
            # may return none of them. Reading on until enough matched would read as much of
            # the shard as it takes (a tenant's every job, to find its 3 failed ones).
            pages = query.page_iter
            raw: dict[str, Any] = next(pages, {})
            models = [_J.from_raw_data(item) for item in raw.get("Items", [])]
            read_to = None
            if pages.last_evaluated_key is not None:
                last = pages.last_evaluated_key
                read_to = (range_attribute.deserialize(last[name]["S"]), last["id"]["S"])
            return _ShardRead([m for m in models if beyond_cursor(m)], read_to)

        reads: list[_ShardRead] = _parallel(shard, partitions)
        merged = heapq.merge(
            *(r.models for r in reads),
            key=lambda m: (getattr(m, name), m.id),
            reverse=descending,
        )
        # Nothing past the nearest point a shard was read to: that shard may hold entries before
        # anything beyond it. The next page starts there, even when this one is short.
        frontiers = [r.read_to for r in reads if r.read_to is not None]
        frontier = None
        if frontiers:
            frontier = max(frontiers) if descending else min(frontiers)
        known = [
            m
            for m in merged
            if frontier is None
            or (
                (getattr(m, name), m.id) >= frontier
                if descending
                else (getattr(m, name), m.id) <= frontier
            )
        ]
        entries = known[:limit]
        cursor = None
        if len(known) > limit:
            last = entries[-1]
            cursor = PageCursor(range_attribute.serialize(getattr(last, name)), last.id)
        elif frontier is not None:
            cursor = PageCursor(range_attribute.serialize(frontier[0]), frontier[1])
        return JobPage(self._full(entries), cursor)

    def due_for_sweep(
        self, now: datetime, *, per_shard: int = 100, on_unreadable: UnreadableItem | None = None
    ) -> Iterator[ProcessingJob]:
        """Active jobs whose sweep check is due: cost grows with them, not with the table.

        The shards are read 16 at a time as the caller takes their jobs, from a shard picked
        at random round to it: a run that stops early (its time is up) has read little more
        than it attended, and the next starts elsewhere, so under a backlog no shard waits
        behind the others.
        """

        def shard(partition: str) -> list[JobModel]:
            query = _J.by_sweep.query(
                partition, range_key_condition=_J.sweep_at <= now, limit=per_shard
            )
            return list(query)

        partitions = index_keys.sweep_partitions()
        start = random.randrange(len(partitions))  # noqa: S311 (where to start, not a secret)
        ordered = partitions[start:] + partitions[:start]
        for group in itertools.batched(ordered, _FAN_OUT, strict=False):
            for models in _parallel(shard, group):
                yield from _readable_jobs(models, on_unreadable)

    def erase(self, job_id: str) -> bool:
        """The job's item deleted for good (an erasure), whatever its status: a worker still
        running it loses its next write, as its condition finds no item."""
        try:
            _J(id=job_id).delete(condition=_J.id.exists())
        except DeleteError as error:
            if error.cause_response_code != "ConditionalCheckFailedException":
                raise
            return False
        return True

    def _full(self, projected: Iterable[JobModel]) -> list[ProcessingJob]:
        """The whole items behind INCLUDE-projected index entries, in the same order.

        One BatchGetItem per 100 entries (PynamoDB batches and retries unprocessed keys).
        """
        ids = [entry.id for entry in projected]
        found = {m.id: m for m in _J.batch_get(ids, consistent_read=False)}
        # An item deleted between the index read and this one is simply not listed.
        return [job_from_model(found[job_id]) for job_id in ids if job_id in found]


# --- rendering a transition ----------------------------------------------------------------------


def _condition(guard: Guard) -> Condition:
    condition: Condition = _J.id.exists() & _J.deleted_at.does_not_exist()
    condition &= _status_condition(guard)
    if guard.job_type is not None:
        condition &= _J.job_type == guard.job_type.value
    if guard.attempt is not None:
        condition &= _J.attempt == guard.attempt
    if guard.lease_expired_by is not None:
        condition &= _J.lease_expires_at <= guard.lease_expired_by
    if guard.attempts_below is not None:
        condition &= _J.attempt < guard.attempts_below
    if guard.completed_at_is is not None:
        condition &= _J.completed_at == guard.completed_at_is
    if guard.retry_budget:
        # Holds the spec's invariant in the database: retry_count never passes max_retries.
        condition &= _J.retry_count < _J.max_retries
    if guard.sweep_at_is is not None:
        condition &= _J.sweep_at == guard.sweep_at_is
    return condition


def _status_condition(guard: Guard) -> Condition:
    due_scheduled = guard.scheduled_due_by is not None and JobStatus.SCHEDULED in guard.statuses
    plain = sorted(
        s.value for s in guard.statuses if not (due_scheduled and s is JobStatus.SCHEDULED)
    )
    condition: Condition | None = _J.status.is_in(*plain) if plain else None
    if due_scheduled:
        due = (_J.status == JobStatus.SCHEDULED.value) & (_J.scheduled_at <= guard.scheduled_due_by)
        condition = due if condition is None else (condition | due)
    assert condition is not None, "a guard names at least one status"
    return condition


def _actions(job_id: str, job_type: JobType, changes: Changes) -> list[Action]:
    actions: list[Action] = [
        _J.updated_at.set(changes.updated_at),
        _J.updated_by.set(changes.updated_by),
    ]
    for name, value in changes.set.items():
        if isinstance(value, AttemptProgress):  # a map of plain values, as the model stores it
            actions.append(_attribute(name).set(progress_to_map(value)))
        else:
            actions.append(_attribute(name).set(value))
    for name in sorted(changes.remove):
        actions.append(_attribute(name).remove())
    for name, delta in changes.increment.items():
        actions.append(_attribute(name).add(delta))
    new_status = changes.set.get("status")
    if new_status is not None:
        # The status index key moves with the status, in the same write; a running job leaves
        # that index (index_keys.status_type_key).
        status_key = index_keys.status_type_key(new_status, job_type, job_id)
        actions.append(
            _J.status_type_shard.remove()
            if status_key is None
            else _J.status_type_shard.set(status_key)
        )
    actions.extend(_sweep_shard_actions(job_id, changes))
    if "deleted_at" in changes.set:
        # A deleted job leaves the listings: their indexes are sparse, so without its keys no
        # listing query reads it and none needs a filter for it.
        actions.extend((_J.status_type_shard.remove(), _J.tenant_shard.remove()))
    if changes.record_attempt is not None:
        entry = attempt_to_map(changes.record_attempt)
        actions.append(_J.attempts[str(changes.record_attempt.number)].set(entry))
    if changes.dropped_attempt is not None:
        actions.append(_J.attempts[str(changes.dropped_attempt)].remove())
    return actions


def _sweep_shard_actions(job_id: str, changes: Changes) -> list[Action]:
    """The sweep index's shard key lives and goes with `sweep_at`: a finished job's item does
    not carry it (a smaller item: the table and `by_sweep` count a write unit per started KB)."""
    if "sweep_at" in changes.set and changes.set["sweep_at"] is not None:
        return [_J.sweep_shard.set(index_keys.sweep_key(job_id))]
    if "sweep_at" in changes.remove:
        return [_J.sweep_shard.remove()]
    return []


def _attribute(name: str) -> Attribute[Any]:
    attribute = _J.get_attributes().get(name)
    if attribute is None:
        raise AttributeError(f"JobModel has no attribute {name!r}")
    return attribute


def _is_condition_failure(error: ClientError) -> bool:
    return error.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException"


def _old_item(error: ClientError) -> dict[str, Any] | None:
    """The item as it was (ALL_OLD), or None when there was no item."""
    # PynamoDB re-raises without the item; the botocore error it wraps still has it.
    original = error.__cause__ if isinstance(error.__cause__, ClientError) else error
    item: Any = original.response.get("Item")
    return item if isinstance(item, dict) else None


def _lost(guard: Guard, old_item: dict[str, Any] | None, job_type: JobType) -> Lost:
    if old_item is None:
        return Lost(Conflict.NOT_FOUND, None)
    current = job_from_model(_J.from_raw_data(old_item))
    if current.job_type is not job_type:
        return Lost(Conflict.WRONG_TYPE, current)
    # If the old item passes the guard in Python, it changed again between the write and now;
    # the write still lost, and "changed" is the honest reason.
    return Lost(guard.refusal(current) or Conflict.CHANGED, current)


def _is_range_key_value(text: str) -> bool:
    """Whether DynamoDB takes `text` as a sort key value: 1 to 1,024 bytes of UTF-8."""
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:  # a lone surrogate, from a JSON escape
        return False
    return 0 < size <= _MAX_RANGE_KEY_BYTES


def _filters(*, status: JobStatus | None, job_type: JobType | None) -> Condition | None:
    condition: Condition | None = None
    if status is not None:
        condition = _J.status == status.value
    if job_type is not None:
        by_type = _J.job_type == job_type.value
        condition = by_type if condition is None else condition & by_type
    return condition


def _readable_jobs(
    models: Iterable[JobModel], on_unreadable: UnreadableItem | None
) -> Iterator[ProcessingJob]:
    """The jobs read from the items; one no job can be read from is told to `on_unreadable` and
    skipped (the generator raising would end it, and the sweep run with it)."""
    for model in models:
        try:
            job = job_from_model(model)
        except Exception as error:
            if on_unreadable is None:
                raise
            on_unreadable(model.id, error)
            continue
        yield job


def _parallel[T, R](work: Callable[[T], R], items: Iterable[T]) -> list[R]:
    with ThreadPoolExecutor(max_workers=_FAN_OUT) as pool:
        return list(pool.map(work, items))
