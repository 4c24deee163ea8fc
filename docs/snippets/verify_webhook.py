import hashlib
import hmac
import time


def verify_filejobs_signature(header: str, body: bytes, secret: str, tolerance: int = 300) -> bool:
    """True when some v1 of the Filejobs-Signature header signs `body` under `secret` and its
    timestamp is within `tolerance` seconds (5 minutes) of now."""
    timestamp, signatures = None, []
    for part in header.split(","):
        key, _, value = part.strip().partition("=")
        if key == "t" and value.isdigit():
            timestamp = int(value)
        elif key == "v1":
            signatures.append(value)
    if timestamp is None or abs(time.time() - timestamp) > tolerance:
        return False
    signed = f"{timestamp}.".encode() + body
    expected = hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()
    return any(hmac.compare_digest(expected, signature) for signature in signatures)
