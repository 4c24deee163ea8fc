"""The content index: per tenant, which file first had a given SHA-256 (it owns the content).

One item per (tenant, hash) in FilesTable, id `sha256#{tenant}#{hex}`, claimed by one
UpdateItem that sets its `file_id` only where the item has none (`if_not_exists`) and returns
the item as it is afterwards: DynamoDB applies the updates of one item one at a time, so of any
number of concurrent claims exactly one finds its own id there, and every other claimant learns
the winner from the same request (a conditional put answered a later claimant with a refusal,
and the winner cost it a strongly consistent GetItem more). Tenants never share an item, so
identical content in two tenants is never a duplicate.
"""

from __future__ import annotations

import re
from datetime import datetime

from pynamodb.exceptions import DeleteError

from filejobs.data.models import ContentIndexModel

_SHA256_HEX = re.compile(r"[0-9a-f]{64}")


def content_id(tenant: str, sha256: str) -> str:
    if not _SHA256_HEX.fullmatch(sha256):
        raise ValueError(f"not a lowercase hex SHA-256: {sha256!r}")
    return f"sha256#{tenant}#{sha256}"


class ContentIndex:
    def claim(self, tenant: str, sha256: str, file_id: str, *, at: datetime) -> str:
        """The id of the file that owns this content: `file_id` if it is the first, else the
        first one's (also when `file_id` claimed it before: a re-run is idempotent)."""
        item = ContentIndexModel(content_id(tenant, sha256))
        item.update(
            actions=[
                ContentIndexModel.file_id.set(ContentIndexModel.file_id | file_id),
                ContentIndexModel.created_at.set(ContentIndexModel.created_at | at),
            ]
        )  # ReturnValues ALL_NEW: `item` is the stored one afterwards
        return str(item.file_id)

    def release(self, tenant: str, sha256: str, file_id: str) -> bool:
        """The entry deleted if `file_id` owns it (an erased file's hash must not stay behind);
        False when another file owns it, or none does."""
        try:
            ContentIndexModel(content_id(tenant, sha256)).delete(
                condition=ContentIndexModel.file_id == file_id
            )
        except DeleteError as error:
            if error.cause_response_code != "ConditionalCheckFailedException":
                raise
            return False
        return True

    def owner(self, tenant: str, sha256: str) -> str | None:
        try:
            found = ContentIndexModel.get(content_id(tenant, sha256), consistent_read=True)
        except ContentIndexModel.DoesNotExist:
            return None
        return str(found.file_id)
