"""What AWS's errors mean to the retry policy: which say "try again later", which say the object
is gone. Matched by error code and class name, so this needs no botocore import (and loading it
loads no AWS SDK)."""

from __future__ import annotations

from filejobs.domain.retry import RetryPolicy, is_transient_kind

# Transient is an allow-list: an error not known to pass (a ParamValidationError, an
# AccessDenied, any bug) fails its job at once with its reason.
_TRANSIENT_CODES = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "Throttling",
        "ThrottledException",
        "TooManyRequestsException",
        "RequestLimitExceeded",
        "RequestThrottled",
        "SlowDown",
        "InternalError",
        "InternalServerError",
        "InternalFailure",
        "ServiceUnavailable",
        "ServiceUnavailableException",
        "RequestTimeout",
        "RequestTimeoutException",
        "RequestTimeTooSkewed",
        "TransactionConflictException",
        "TransactionInProgressException",
        "LimitExceededException",
    }
)
# botocore's network failures (a connection refused, reset or timed out mid-request), by class
# name: any of them in an error's class hierarchy makes it transient.
_NETWORK_ERRORS = frozenset(
    {
        "HTTPClientError",
        "EndpointConnectionError",
        "ConnectTimeoutError",
        "ReadTimeoutError",
        "ConnectionClosedError",
        "ProxyConnectionError",
        "ResponseStreamingError",
        "IncompleteReadError",
    }
)
_SERVER_ERROR = 500
_TOO_MANY_REQUESTS = 429

# S3's answers for a key or version that is not there.
_MISSING_OBJECT_CODES = frozenset({"NoSuchKey", "NoSuchVersion", "404", "NotFound"})


def is_transient(error: BaseException) -> bool:
    """The domain's own transient errors, and AWS's throttling, server errors and network
    failures."""
    if is_transient_kind(error):
        return True
    if any(kind.__name__ in _NETWORK_ERRORS for kind in type(error).__mro__):
        return True
    if error_code(error) in _TRANSIENT_CODES:
        return True
    status = _http_status(error)
    return status is not None and (status >= _SERVER_ERROR or status == _TOO_MANY_REQUESTS)


def is_missing_object(error: BaseException) -> bool:
    return error_code(error) in _MISSING_OBJECT_CODES


AWS_RETRY_POLICY = RetryPolicy(transient=is_transient)
"""The default backoff, with AWS's transient errors retried: what the functions run with."""


def error_code(error: BaseException) -> str | None:
    """A botocore ClientError's code (`response["Error"]["Code"]`), or None."""
    response = getattr(error, "response", None)
    if not isinstance(response, dict):
        return None
    code = response.get("Error", {}).get("Code")
    return code if isinstance(code, str) else None


def _http_status(error: BaseException) -> int | None:
    response = getattr(error, "response", None)
    if not isinstance(response, dict):
        return None
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return status if isinstance(status, int) else None
