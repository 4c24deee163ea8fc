"""Specification: the definitions manifest (domain/definitions.py), the contract between the
updater and the scan workers, and the updater's backoff from a refusing mirror."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from filejobs.domain.definitions import (
    Backoff,
    BackoffPolicy,
    DatabaseFile,
    DefinitionsManifest,
    Engine,
    ManifestError,
    Source,
    engine_of,
    new_set_id,
)

NOW = datetime(2026, 12, 1, 8, 0, 0, tzinfo=UTC)
SHA = "a" * 64


def clamav(name: str, source: Source = Source.OFFICIAL, **header: Any) -> DatabaseFile:
    return DatabaseFile(name, Engine.CLAMAV, SHA, 100, source, **header)


def manifest(**changes: Any) -> DefinitionsManifest:
    fields: dict[str, Any] = {
        "set_id": "20261201T080000Z",
        "published_at": NOW,
        "checked_at": NOW + timedelta(hours=2),
        "engine": "ClamAV 1.4.6",
        "files": (
            clamav(
                "main.cvd", version=62, signatures=6_647_427, build_time=NOW - timedelta(days=30)
            ),
            clamav(
                "daily.cld",
                version=27460,
                signatures=2_070_000,
                build_time=NOW - timedelta(hours=3),
            ),
            clamav("filejobs.hdb", Source.CUSTOM_URL),
            DatabaseFile("house.yar", Engine.YARA, "b" * 64, 42, Source.CURATED),
        ),
        "previous": ("20261130T200000Z", "20261130T080000Z"),
        "verification": {"eicar": "Win.Test.EICAR_HDB-1 FOUND", "clean": "OK"},
    }
    return DefinitionsManifest(**{**fields, **changes})


def document(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(manifest().to_json())
    data.update(changes)
    return data


def test_a_manifest_survives_its_json_exactly() -> None:
    original = manifest(rolled_back_from="20261201T100000Z")
    text = original.to_json()
    assert DefinitionsManifest.from_json(text) == original
    assert DefinitionsManifest.from_json(text.encode()) == original
    # and the document is the published format, field by field
    data = json.loads(text)
    assert data["format"] == 1
    assert data["published_at"] == "2026-12-01T08:00:00Z"
    assert data["files"][1] == {
        "name": "daily.cld",
        "engine": "clamav",
        "sha256": SHA,
        "size": 100,
        "source": "official",
        "version": 27460,
        "signatures": 2070000,
        "build_time": "2026-12-01T05:00:00Z",
    }
    assert data["previous"] == ["20261130T200000Z", "20261130T080000Z"]
    assert data["rolled_back_from"] == "20261201T100000Z"


def _without(key: str) -> dict[str, Any]:
    data = document()
    del data[key]
    return data


def _file_with(**changes: Any) -> dict[str, Any]:
    data = document()
    data["files"][0].update(changes)
    return data


def _file_without(key: str) -> dict[str, Any]:
    data = document()
    del data["files"][0][key]
    return data


MALFORMED = [
    ("not JSON", "{", "is not JSON"),
    ("not an object", "[]", "must be a JSON object"),
    ("another format", document(format=2), "format 2: this code reads format 1"),
    ("a format that is a boolean", document(format=True), "format True"),
    ("no set id", _without("set_id"), "lacks set_id"),
    ("an unknown field", document(signed_by="someone"), "does not know: signed_by"),
    ("a set id of another shape", document(set_id="2026-12-01"), "not a YYYYMMDDTHHMMSSZ"),
    ("an impossible set id", document(set_id="20261301T080000Z"), "not a YYYYMMDDTHHMMSSZ"),
    ("a local time", document(published_at="2026-12-01T08:00:00+01:00"), "must be in UTC"),
    ("a naive time", document(checked_at="2026-12-01T08:00:00"), "must be in UTC"),
    ("a time that is no time", document(checked_at="yesterday"), "ISO 8601"),
    ("an empty engine", document(engine=""), "engine must be a non-empty string"),
    ("files not a list", document(files={}), "files must be a list"),
    ("a file not an object", document(files=["main.cvd"]), "files[0] must be a JSON object"),
    ("a file without a digest", _file_without("sha256"), "files[0] lacks sha256"),
    ("a digest of another shape", _file_with(sha256="ABC"), "sha256 must be 64 lowercase hex"),
    ("a size that is text", _file_with(size="100"), "size must be an integer"),
    ("a size that is a boolean", _file_with(size=True), "size must be an integer"),
    ("a negative size", _file_with(size=-1), "size must not be negative"),
    ("an unknown engine", _file_with(engine="sophos"), "engine must be one of clamav, yara"),
    ("an unknown source", _file_with(source="somewhere"), "source must be one of official"),
    ("a version that is text", _file_with(version="62"), "version must be an integer"),
    ("a build time not in UTC", _file_with(build_time="2026-11-01T08:00:00"), "must be in UTC"),
    ("a name with a folder", _file_with(name="../main.cvd"), "is not a plain file name"),
    ("a hidden name", _file_with(name=".main.cvd"), "is not a plain file name"),
    ("a rule among ClamAV's files", _file_with(name="rules.yar"), "not a file the clamav engine"),
    ("a file ClamAV does not load", _file_with(name="notes.txt"), "not a file the clamav engine"),
    ("previous not a list", document(previous="20261130T200000Z"), "previous must be a list"),
    ("a previous that is no set id", document(previous=["yesterday"]), "'yesterday' is not a set"),
    ("itself among its previous", document(previous=["20261201T080000Z"]), "lists itself"),
    ("a verification not an object", document(verification="OK"), "verification must be a JSON"),
    ("a verification not text", document(verification={"eicar": 1}), "verification must map"),
    ("a rolled-back-from not text", document(rolled_back_from=7), "rolled_back_from must be"),
]


@pytest.mark.parametrize(
    ("data", "complaint"), [(d, c) for _, d, c in MALFORMED], ids=[n for n, _, _ in MALFORMED]
)
def test_a_malformed_manifest_is_refused_naming_what_is_wrong(data: Any, complaint: str) -> None:
    text = data if isinstance(data, str) else json.dumps(data)
    with pytest.raises(ManifestError) as refused:
        DefinitionsManifest.from_json(text)
    assert complaint in str(refused.value)


def test_a_file_named_twice_is_refused() -> None:
    data = document()
    data["files"].append(dict(data["files"][0]))
    with pytest.raises(ManifestError, match=r"files named twice: clamav/main\.cvd"):
        DefinitionsManifest.from_json(json.dumps(data))


def test_files_are_told_apart_by_engine() -> None:
    assert [f.name for f in manifest().clamav_files()] == ["main.cvd", "daily.cld", "filejobs.hdb"]
    assert [f.name for f in manifest().yara_files()] == ["house.yar"]
    assert [f.path for f in manifest().files][-1] == "yara/house.yar"
    assert (engine_of("x.ndb"), engine_of("x.YARA"), engine_of("x.txt")) == (
        Engine.CLAMAV,
        Engine.YARA,
        None,
    )


def test_the_age_of_a_set_with_official_databases_is_that_of_its_newest_build() -> None:
    # daily.cld was built three hours before NOW, main.cvd a month before
    assert manifest().age(NOW + timedelta(hours=1)) == timedelta(hours=4)


def test_the_age_of_a_custom_only_set_is_since_the_mirror_last_confirmed_it() -> None:
    # a set whose only ClamAV database came from a custom URL has no build time to go by
    custom = manifest(files=(clamav("filejobs.hdb", Source.CUSTOM_URL),))
    assert custom.age(NOW + timedelta(hours=5)) == timedelta(hours=3)  # checked at NOW + 2 h


@pytest.mark.parametrize(
    "name", ["house.ign2", "house.ign", "house.fp", "house.sfp", "house.cfg", "house.ftm",
             "house.crb", "house.cat", "house.pwdb", "local.cud", "HOUSE.IGN2"],
)  # fmt: skip
@pytest.mark.parametrize("source", [Source.CUSTOM_URL, Source.CURATED, Source.OFFICIAL])
def test_no_set_carries_an_allow_list_or_engine_settings_but_the_official_databases(
    name: str, source: Source
) -> None:
    # an .ign2 naming EICAR's signature, a .fp listing its hash, a .cfg switching the PDF parser
    # off, a .cud holding any of those: each would turn a detection off on every worker (and
    # calling one official smuggles nothing in: official is a name, main/daily/bytecode)
    with pytest.raises(ManifestError, match="only the official databases may carry it"):
        clamav(name, source)


def test_detection_signatures_of_any_source_and_the_official_containers_are_welcome() -> None:
    assert clamav("house.ldb", Source.CURATED).name == "house.ldb"
    assert clamav("daily.cld").name == "daily.cld"


def test_an_age_is_never_negative() -> None:
    assert manifest().age(NOW - timedelta(days=1)) == timedelta(0)


def test_the_summary_is_what_a_verdict_records() -> None:
    summary = manifest().summary()
    assert summary == {
        "set_id": "20261201T080000Z",
        "published_at": "2026-12-01T08:00:00Z",
        "engine": "ClamAV 1.4.6",
        "files": {
            "main.cvd": {"version": 62, "sha256": SHA},
            "daily.cld": {"version": 27460, "sha256": SHA},
            "filejobs.hdb": {"version": None, "sha256": SHA},
            "house.yar": {"version": None, "sha256": "b" * 64},
        },
    }
    json.dumps(summary)  # storable as it is


def test_sets_are_the_same_when_their_bytes_are() -> None:
    same = [clamav(f.name) if f.engine is Engine.CLAMAV else f for f in manifest().files]
    assert manifest().same_files(same)  # sources and headers aside
    assert not manifest().same_files(same[:-1])
    changed = [*same[:-1], DatabaseFile("house.yar", Engine.YARA, "c" * 64, 42, Source.CURATED)]
    assert not manifest().same_files(changed)


def test_set_ids_are_publication_seconds_that_sort_as_published() -> None:
    assert new_set_id(NOW) == "20261201T080000Z"
    later = new_set_id(NOW + timedelta(hours=1, seconds=5), after="20261201T080000Z")
    assert later == "20261201T090005Z"
    # "older than version V" is a string comparison
    assert sorted(["20261201T090005Z", "20261130T235959Z", "20261201T080000Z"]) == [
        "20261130T235959Z",
        "20261201T080000Z",
        "20261201T090005Z",
    ]


def test_two_publications_within_a_second_never_share_an_id() -> None:
    ids = ["20261201T080000Z"]
    for _ in range(3):
        ids.append(new_set_id(NOW + timedelta(milliseconds=300), after=ids[-1]))
    assert ids == ["20261201T080000Z", "20261201T080001Z", "20261201T080002Z", "20261201T080003Z"]
    assert ids == sorted(set(ids))
    # nor with a clock that went back
    assert new_set_id(NOW - timedelta(hours=1), after="20261201T080000Z") == "20261201T080001Z"


def test_a_refusal_backs_off_exponentially_up_to_a_day() -> None:
    policy = BackoffPolicy()
    state, waits = Backoff(), []
    for _ in range(7):
        state = policy.after_refusal(state, NOW, status=429, reason="rate limited")
        assert state.until is not None
        waits.append(state.until - NOW)
    hours = [wait / timedelta(hours=1) for wait in waits]
    assert hours == [1, 2, 4, 8, 16, 24, 24]
    assert state.refusals == 7 and state.status == 429
    assert state.blocks(NOW + timedelta(hours=23)) and not state.blocks(NOW + timedelta(hours=24))


def test_freshclams_own_cool_down_is_honoured_when_longer() -> None:
    policy = BackoffPolicy()
    told = NOW + timedelta(hours=4)  # freshclam's cool-down after a 429 without Retry-After
    state = policy.after_refusal(Backoff(), NOW, status=429, cool_down_until=told)
    assert state.until == told
    # and a shorter one does not shorten ours
    state = policy.after_refusal(state, NOW, status=403, cool_down_until=NOW)
    assert state.until == NOW + timedelta(hours=2)


def test_a_success_resets_the_backoff() -> None:
    policy = BackoffPolicy()
    refused = policy.after_refusal(Backoff(), NOW, status=403)
    assert policy.after_success() == Backoff()
    assert not policy.after_success().blocks(NOW)
    assert refused.blocks(NOW)


def test_the_backoff_state_is_stored_as_json_and_a_broken_one_starts_clean() -> None:
    state = BackoffPolicy().after_refusal(Backoff(), NOW, status=429, reason="the mirror said so")
    assert Backoff.from_json(state.to_json()) == state
    assert Backoff.from_json("{not json") == Backoff()
    assert Backoff.from_json('{"refusals": 1}') == Backoff()
