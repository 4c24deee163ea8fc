"""What a key prefix a tenant names (a preset's binding, a schedule's scope) must be: inside the
tenant's own uploads, printable, and no longer than S3 lets a key be."""

from __future__ import annotations

# Every tenant's uploads are under uploads/{tenant}/.
UPLOAD_PREFIX = "uploads/"
# S3's longest key.
MAX_PREFIX_BYTES = 1024


class FieldError(ValueError):
    """Something a tenant or operator sent that cannot be accepted: `field` names what is wrong
    (`prefixes[1]`, `jobs[0].options.sizes`), the message why. The API answers it with a 422
    naming the field."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


def prefix_problem(tenant: str, prefix: str) -> str | None:
    """Why `prefix` cannot scope the tenant's uploads, or None when it can."""
    area = f"{UPLOAD_PREFIX}{tenant}/"
    if not prefix.startswith(area):
        return f"must start with the tenant's {area}"
    if len(prefix.encode("utf-8", errors="replace")) > MAX_PREFIX_BYTES or not prefix.isprintable():
        return f"printable text of at most {MAX_PREFIX_BYTES} bytes"
    return None
