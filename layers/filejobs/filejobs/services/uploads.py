"""Signed uploads from a browser (`POST /uploads`): an app's backend asks for one, its page posts
the file straight to the uploads bucket, and the ingest takes it from there as any upload.

A tenant gets grants for its own uploads; an operator names the tenant. The size bound is the
tenant's file-size limit in force (services/quotas.py): S3 refuses a larger file before a byte is
stored, instead of the ingest recording it rejected after. A named preset must exist when the
grant is made (the ingest would otherwise give the upload the default jobs, silently).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from filejobs.access import Caller
from filejobs.domain.quotas import TenantQuotas
from filejobs.domain.time import utcnow
from filejobs.domain.uploads import UploadGrant, UploadRequest, UploadRequestError, checked, grant
from filejobs.ports import PresetStore, SignedUpload, UploadSigner
from filejobs.services.errors import InvalidRequestError, NotFoundError
from filejobs.services.tenancy import tenant_acted_for


@dataclass(frozen=True)
class MintedUpload:
    grant: UploadGrant
    signed: SignedUpload


@dataclass
class Uploads:
    signer: UploadSigner
    limits: Callable[[str], TenantQuotas]  # the tenant's limits in force (TenantLimits.limits)
    presets: PresetStore
    clock: Callable[[], datetime] = utcnow

    def mint(self, caller: Caller, tenant: str | None, request: UploadRequest) -> MintedUpload:
        """One signed upload into the tenant's uploads, as `request` asks."""
        owner = tenant_acted_for(caller, tenant, what="the upload")
        try:
            wanted = checked(request)
        except UploadRequestError as error:
            raise InvalidRequestError(str(error)) from None
        if wanted.preset is not None and not self._has_preset(owner, wanted.preset):
            raise NotFoundError(
                f"preset: tenant {owner!r} has no preset {wanted.preset!r}",
                log="upload naming no such preset",
            )
        limit = self.limits(owner).max_file_bytes
        made = grant(owner, wanted, max_file_bytes=limit, now=self.clock())
        return MintedUpload(made, self.signer.sign(made))

    def _has_preset(self, tenant: str, name: str) -> bool:
        return self.presets.current(tenant).tenant_presets().named(name) is not None
