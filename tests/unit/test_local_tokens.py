"""Tenant tokens of the local stack's API (filejobs_dev/local/tokens.py)."""

from __future__ import annotations

import pytest

from filejobs_dev.local.tokens import TokenError, mint, tenant_of


def test_a_minted_token_names_its_tenant_under_the_same_secret_only() -> None:
    token = mint("secret-1", "acme")
    assert tenant_of("secret-1", token) == "acme"
    # another stack (a new secret) does not honour it
    assert tenant_of("secret-2", token) is None


@pytest.mark.parametrize(
    "forged",
    [
        lambda t: t.replace(".acme.", ".globex."),  # another tenant, same signature
        lambda t: t[:-1] + ("A" if t[-1] != "A" else "B"),  # a changed signature
        lambda t: t.replace("ft1.", "ft2."),  # another scheme
        lambda t: "acme",  # no signature at all
        lambda t: "",
    ],
)
def test_a_forged_or_altered_token_names_no_tenant(forged: object) -> None:
    token = mint("secret", "acme")
    assert tenant_of("secret", forged(token)) is None  # type: ignore[operator]


def test_no_token_is_made_for_a_name_that_is_not_a_tenant() -> None:
    with pytest.raises(TokenError, match="not a tenant name"):
        mint("secret", "../acme")
