"""S3 access the core needs: the first bytes of an object version and a few ranges of it
(content sniffing), the outputs bucket where jobs write derived files, and links to read them."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from filejobs.adapters.aws_errors import error_code, is_missing_object
from filejobs.domain.ingest import BACKFILL_METADATA_KEY
from filejobs.domain.job import ProcessingJob
from filejobs.domain.keys import derived_key
from filejobs.domain.presets import METADATA_KEY as PRESET_METADATA_KEY
from filejobs.domain.retry import ObjectGoneError
from filejobs.domain.time import utcnow
from filejobs.domain.uploads import UploadGrant
from filejobs.ports import SignedUpload, UploadHead

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_s3.type_defs import CompletedPartTypeDef, GetObjectOutputTypeDef


class S3HeadReader:
    def __init__(self, client: S3Client) -> None:
        self._client = client

    def read_head(self, bucket: str, key: str, version_id: str | None, length: int) -> bytes:
        """At most `length` leading bytes of the object (a ranged GET: no full download)."""
        return self.read_upload_head(bucket, key, version_id, length).data

    def read_upload_head(
        self, bucket: str, key: str, version_id: str | None, length: int
    ) -> UploadHead:
        """The leading bytes and the preset the upload names in its metadata, one request."""
        response = _ranged_get(self._client, (bucket, key, version_id), 0, length)
        # An empty object has no byte 0 (and no metadata: an empty upload is stored with the
        # default jobs, of which its type has few).
        if response is None:
            return UploadHead(b"")
        body: bytes = response["Body"].read(length)
        metadata = response.get("Metadata") or {}
        preset = metadata.get(PRESET_METADATA_KEY)
        return UploadHead(body, preset or None, backfill=BACKFILL_METADATA_KEY in metadata)

    def byte_ranges(
        self, bucket: str, key: str, version_id: str | None, size: int
    ) -> S3ObjectRanges:
        return S3ObjectRanges(self._client, bucket, key, version_id, size)


class S3ObjectRanges:
    """ByteRanges of one object version: each read one ranged GET (the same s3:GetObject
    permission, and version, as its head's)."""

    def __init__(
        self, client: S3Client, bucket: str, key: str, version_id: str | None, size: int
    ) -> None:
        self._client = client
        self._object = (bucket, key, version_id)
        self._size = size
        self.reads = 0  # GETs made, for the ingest's request counts

    @property
    def size(self) -> int:
        return self._size

    def read(self, offset: int, length: int) -> bytes:
        self.reads += 1
        response = _ranged_get(self._client, self._object, offset, length)
        if response is None:
            return b""
        body: bytes = response["Body"].read(length)
        return body


def _ranged_get(
    client: S3Client, location: tuple[str, str, str | None], offset: int, length: int
) -> GetObjectOutputTypeDef | None:
    """One ranged GET of `length` bytes from `offset` of the object version at `location`
    (bucket, key, version id); None when it has no byte at `offset` (S3's 416 InvalidRange)."""
    bucket, key, version_id = location
    request: dict[str, Any] = {
        "Bucket": bucket,
        "Key": key,
        "Range": f"bytes={offset}-{offset + length - 1}",
    }
    if version_id:
        request["VersionId"] = version_id
    try:
        return client.get_object(**request)
    except client.exceptions.ClientError as error:
        if error.response.get("Error", {}).get("Code") == "InvalidRange":
            return None
        if is_missing_object(error):
            raise ObjectGoneError(f"s3://{bucket}/{key} is gone ({error_code(error)})") from error
        raise


class S3OutputLinks:
    """Presigned GET URLs of derived files: signed locally, no request is made."""

    def __init__(self, client: Callable[[], S3Client], bucket: str) -> None:
        self._client = client  # built on first use: most API calls link nothing
        self._bucket = bucket

    def link(self, key: str, lifetime: timedelta) -> str:
        return self._client().generate_presigned_url(
            "get_object",
            Params={"Bucket": self._bucket, "Key": key},
            ExpiresIn=int(lifetime.total_seconds()),
        )


class S3UploadSigner:
    """Presigned POSTs into the uploads bucket (`POST /uploads`): signed locally with the
    function's credentials, no request is made. S3 refuses a form whose fields break the policy,
    and a form field the policy does not name: so no `tagging` (the scan-status tag stays the
    virus scan's alone), no ACL, no other key, no other metadata."""

    def __init__(self, client: Callable[[], S3Client], bucket: str) -> None:
        self._client = client  # built on first use, as S3OutputLinks'
        self._bucket = bucket

    def sign(self, grant: UploadGrant) -> SignedUpload:
        fields, conditions = upload_policy(grant)
        lifetime = grant.expires_at - utcnow()
        signed = self._client().generate_presigned_post(
            Bucket=self._bucket,
            Key=grant.key,
            Fields=fields,
            Conditions=conditions,
            ExpiresIn=max(1, round(lifetime.total_seconds())),
        )
        return SignedUpload(url=signed["url"], fields=dict(signed["fields"]))


def upload_policy(grant: UploadGrant) -> tuple[dict[str, str], list[Any]]:
    """The form's fields beyond the key and the policy's conditions that bind them: the exact key
    (botocore adds `{"key": key}`), 1 byte to the grant's bound, the content type (exact, or any
    the browser sends when the grant names none) and each metadata entry, exactly."""
    fields: dict[str, str] = {f"x-amz-meta-{name}": value for name, value in grant.metadata.items()}
    conditions: list[Any] = [["content-length-range", 1, grant.max_bytes]]
    if grant.content_type is None:
        conditions.append(["starts-with", "$Content-Type", ""])
    else:
        fields["Content-Type"] = grant.content_type
    conditions.extend({name: value} for name, value in fields.items())
    return fields, conditions


# S3's smallest part but the last: parts of exactly this size keep one part in memory at a time.
# 10,000 parts of 5 MiB: a derived file of up to about 48 GiB.
MULTIPART_PART_SIZE = 5 * 1024 * 1024


class S3Outputs:
    """The outputs bucket, handing each job a writer for its own folder of derived files.

    The bucket has no event notification: nothing written here is ever ingested again.
    """

    def __init__(self, client: S3Client, bucket: str) -> None:
        self._client = client
        self._bucket = bucket

    def for_job(self, job: ProcessingJob) -> JobOutputs:
        return JobOutputs(self._client, self._bucket, job)


class JobOutputs:
    def __init__(self, client: S3Client, bucket: str, job: ProcessingJob) -> None:
        self._client = client
        self._bucket = bucket
        self._job = job

    def put_bytes(self, name: str, data: bytes, content_type: str) -> str:
        key = self._key(name)
        self._client.put_object(
            Bucket=self._bucket,
            Key=key,
            Body=data,
            ContentType=content_type,
            Metadata=self._metadata(),
        )
        return key

    def put_file(self, name: str, path: Path, content_type: str) -> str:
        """Uploads from disk, streaming (one PUT: up to 5 GB, far above any derived file)."""
        key = self._key(name)
        with path.open("rb") as body:
            self._client.put_object(
                Bucket=self._bucket,
                Key=key,
                Body=body,
                ContentType=content_type,
                Metadata=self._metadata(),
            )
        return key

    def put_stream(self, name: str, chunks: Iterable[bytes], content_type: str) -> str:
        """Uploads bytes as they come, holding at most one part in memory.

        One PUT when the whole stream is smaller than a part; a multipart upload otherwise
        (parts of MULTIPART_PART_SIZE, the last one shorter). Any failure while reading the
        stream or writing, StopRequested included, aborts the upload: no orphan parts are left.
        """
        key = self._key(name)
        buffer = bytearray()
        upload_id: str | None = None
        parts: list[CompletedPartTypeDef] = []
        try:
            for chunk in chunks:
                buffer += chunk
                while len(buffer) >= MULTIPART_PART_SIZE:
                    if upload_id is None:
                        upload_id = self._client.create_multipart_upload(
                            Bucket=self._bucket,
                            Key=key,
                            ContentType=content_type,
                            Metadata=self._metadata(),
                        )["UploadId"]
                    parts.append(
                        self._upload_part(
                            key, upload_id, len(parts) + 1, buffer, MULTIPART_PART_SIZE
                        )
                    )
                    del buffer[:MULTIPART_PART_SIZE]
            if upload_id is None:
                return self.put_bytes(name, bytes(buffer), content_type)
            if buffer:
                parts.append(self._upload_part(key, upload_id, len(parts) + 1, buffer, len(buffer)))
            self._client.complete_multipart_upload(
                Bucket=self._bucket,
                Key=key,
                UploadId=upload_id,
                MultipartUpload={"Parts": parts},
            )
        except BaseException as error:
            if upload_id is not None:
                try:
                    self._client.abort_multipart_upload(
                        Bucket=self._bucket, Key=key, UploadId=upload_id
                    )
                except Exception as abort_error:  # the original failure is what matters
                    error.add_note(f"aborting multipart upload {upload_id} failed: {abort_error}")
            raise
        return key

    def _upload_part(
        self, key: str, upload_id: str, number: int, buffer: bytearray, length: int
    ) -> CompletedPartTypeDef:
        response = self._client.upload_part(
            Bucket=self._bucket,
            Key=key,
            UploadId=upload_id,
            PartNumber=number,
            Body=bytes(buffer[:length]),
        )
        return {"ETag": response["ETag"], "PartNumber": number}

    def _key(self, name: str) -> str:
        job = self._job
        return derived_key(job.tenant, job.file_id, job.job_type, name)

    def _metadata(self) -> dict[str, str]:
        # Which job and attempt wrote the object, for whoever finds it without the table.
        return {"job-id": self._job.id, "attempt": str(self._job.attempt)}
