"""`make demo`: the whole system on this machine, on a sample set, start to finish.

Starts the local stack (`filejobs dev`: moto server plus every function of template.yaml) in a
scratch copy of the project, generates the sample set (tools/samples.py: a photo, an
EXIF-rotated photo, a short video, a PDF, a text file, the EICAR test virus, a second copy of
the photo, a corrupt image), uploads it with `filejobs upload` (live progress), prints the final
table of files and jobs with their key results, downloads every derived output to ./out/ with
`filejobs get`. Then the definitions change: a signature for one sample the first scan passed
is added to the local mirror, the definitions updater publishes it (`filejobs definitions
update`), and `filejobs rescan` scans that file again: it is quarantined, its derived outputs
withdrawn, and no version of it is left in the uploads bucket. Last, the stack is stopped with
Ctrl-C's path (SIGINT: running batches finish).

Exits 0 only when every job reached the terminal state its sample expects, and the rescan
quarantined the file it should.

It prints the operator console's URL (the operator's token in its fragment) when the stack is up
and again at its end; run from a terminal with a display, it opens it in a browser at the end
and keeps the stack running until Enter. Without a display (or a terminal) it never tries.

    .venv/bin/python tools/demo.py [--out out] [--workers 1]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import tempfile
import webbrowser
from pathlib import Path
from typing import IO, Any

from filejobs_cli import commands, scanning
from filejobs_cli.client import ApiClient, CliError, Target, local_target
from filejobs_cli.progress import result_summary, shorten
from filejobs_dev.local.commands import invoke_local
from filejobs_dev.local.launch import launched, project_copy
from filejobs_dev.local.mirror import add_hash_signature

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))  # run as a script or through runpy alike
from samples import Sample, write_samples  # noqa: E402

TENANT = "demo"


def check(sample: Sample, stored: dict[str, Any]) -> list[str]:
    """What about this sample's file and jobs is not as expected (empty: all is)."""
    problems = []
    for job in stored["jobs"]:
        wanted = sample.expected_statuses(job["job_type"])
        if job["status"] not in wanted:
            problems.append(
                f"{sample.name}: {job['job_type']} is {job['status']}, not {' or '.join(wanted)}"
            )
    for job_type in sample.expected:
        if job_type not in {
            j["job_type"] for j in stored["jobs"]
        } and "cancelled" not in sample.expected_statuses(job_type):
            problems.append(f"{sample.name}: no {job_type} job")
    have = sorted(job["job_type"] for job in stored["jobs"])
    if sample.jobs is not None and have != sorted(sample.jobs):
        problems.append(f"{sample.name}: jobs {have}, not the preset's {sorted(sample.jobs)}")
    quarantined = sample.quarantined or sample.rescan_finds is not None
    if quarantined != (stored["status"] == "quarantined"):
        problems.append(f"{sample.name}: file is {stored['status']}")
    return problems


def duplicates_agree(files: dict[str, dict[str, Any]]) -> list[str]:
    """The photo and its copy: exactly one of them is a duplicate of the other."""
    photo, copy = files["photo.jpg"], files["photo-copy.jpg"]
    links = {photo.get("duplicate_of"), copy.get("duplicate_of")} - {None}
    if links == {photo["id"]} or links == {copy["id"]}:
        return []
    return [f"photo.jpg / photo-copy.jpg: duplicate links are {sorted(map(str, links))}"]


def final_table(samples: list[Sample], files: dict[str, dict[str, Any]]) -> None:
    print()
    print(f"{'file':<15} {'file status':<12} {'scan':<9} {'job':<21} {'status':<10} result / error")
    for sample in samples:
        stored = files[sample.name]
        head = f"{sample.name:<15} {stored['status']:<12} {stored.get('scan_status') or '-':<9}"
        for job in sorted(stored["jobs"], key=lambda j: j["job_type"]):
            detail = job.get("error_message") or job.get("cancel_reason") or ""
            if job["status"] == "completed":
                detail = result_summary(job.get("result") or {})
            print(f"{head} {job['job_type']:<21} {job['status']:<10} {shorten(detail, 60)}")
            head = " " * len(head)


def console_url(config: dict[str, Any]) -> str:
    """The operator console on the stack, signed in by the token in the fragment (which the
    browser never sends; the page moves it to the tab's session storage)."""
    return f"{config['api_url']}/console#token={config['api_token']}"


def has_display() -> bool:
    if sys.platform in {"darwin", "win32"}:
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def show_console(url: str) -> None:
    """The console in a browser, when someone is there to see it (a display, and the demo run
    from a terminal: not from a test or a pipe); the terminal's Enter then stops the stack,
    which the page needs running. Never fails the demo."""
    print(f"\noperator console: {url}", flush=True)
    if not (has_display() and sys.stdin.isatty()):
        return
    try:
        opened = webbrowser.open(url)
    except webbrowser.Error:
        opened = False
    if opened:
        with contextlib.suppress(EOFError, KeyboardInterrupt):
            input("opened in your browser; press Enter to stop the local stack ")


def run(out: Path, workers: int) -> int:
    with tempfile.TemporaryDirectory(prefix="filejobs-demo-") as scratch:
        root = project_copy(ROOT, Path(scratch))
        written = write_samples(Path(scratch) / "samples")
        print(f"samples: {', '.join(f'{s.name} ({s.what})' for s, _ in written)}")
        log_path = Path(scratch) / "stack.log"
        with (
            log_path.open("wb") as log,
            launched(
                root, "--workers", str(workers), "--schedule-seconds", "5", output=log
            ) as stack,
        ):
            config = stack.config
            print(f"local stack up: emulator {config['endpoint_url']}, API {config['api_url']}")
            print(f"watch it in the operator console: {console_url(config)}", flush=True)
            target = local_target(root)
            api = ApiClient(target)
            save_preset(api)
            followed = upload_by_folder(written, target)
            bucket = target.require_uploads_bucket()
            files = {
                sample.name: _file(api, bucket, f"uploads/{TENANT}/{sample.folder}{sample.name}")
                for sample, _ in written
            }
            samples = [sample for sample, _ in written]
            final_table(samples, files)
            print(f"\nderived outputs -> {out}/")
            for sample in samples:
                print(f"{sample.name} (file {files[sample.name]['id']}):")
                commands.get(
                    argparse.Namespace(file_id=files[sample.name]["id"], out=str(out)), target
                )
            samples_by_name = {sample.name: sample for sample in samples}
            problems = rescan_phase(root, target, config, samples_by_name, files, log=log)
            # Quarantined means gone from the uploads bucket: no version left, current or not.
            problems += [
                p
                for sample in samples
                if sample.quarantined
                for p in _quarantined_for_good(target, sample, files[sample.name])
            ]
            show_console(console_url(config))
            stack.process.send_signal(signal.SIGINT)
            stopped = stack.process.wait(timeout=60)
            print(f"local stack stopped (exit {stopped})")
        problems += [p for sample in samples for p in check(sample, files[sample.name])]
        problems += duplicates_agree(files)
        if followed != 0:
            problems.append("not every job finished in time")
        if problems:
            print("\nNOT as expected:\n  " + "\n  ".join(problems))
            print(
                f"(the stack's log: {log_path}, kept until this exits)\n"
                + log_path.read_text()[-4000:]
            )
            return 1
        print("\nevery job reached its expected state")
        return 0


# The demo tenant's upload preset: a scan and one 512 px WebP for what lands in avatars/.
AVATARS_PRESET = {
    "jobs": [
        {"job_type": "virus_scan"},
        {"job_type": "thumbnail_generation", "options": {"sizes": [512], "format": "webp"}},
    ],
    "prefixes": [f"uploads/{TENANT}/avatars/"],
    "description": "profile pictures: a scan and one 512 px WebP",
}


def save_preset(api: ApiClient) -> None:
    saved = api.request("PUT", f"/presets/avatars?tenant={TENANT}", body=AVATARS_PRESET)
    print(f"preset avatars v{saved['version']}: {', '.join(saved['prefixes'])} get "
          f"{', '.join(job['job_type'] for job in saved['jobs'])}")  # fmt: skip


def upload_by_folder(written: list[tuple[Sample, Path]], target: Target) -> int:
    """Every sample uploaded and followed, each folder's in one `filejobs upload`."""
    folders = sorted({sample.folder for sample, _ in written})
    worst = 0
    for folder in folders:
        upload = argparse.Namespace(
            paths=[str(path) for sample, path in written if sample.folder == folder],
            tenant=TENANT,
            folder=folder,
            preset=None,
            no_follow=False,
            wait=False,
            timeout=300,
        )
        worst = max(worst, commands.upload(upload, target))
    return worst


def rescan_phase(
    root: Path,
    target: Target,
    config: dict[str, Any],
    samples: dict[str, Sample],
    files: dict[str, dict[str, Any]],
    *,
    log: IO[bytes],
) -> list[str]:
    """New definitions, then a rescan of the file they know: it must end quarantined, its
    outputs withdrawn and no version of it left in the uploads bucket."""
    found = [s for s in samples.values() if s.rescan_finds]
    problems: list[str] = []
    for sample in found:
        stored = files[sample.name]
        print(f"\nnew definitions: {sample.rescan_finds} knows {sample.name}", flush=True)
        add_hash_signature(
            Path(config["definitions_mirror_dir"]), sample.body, str(sample.rescan_finds)
        )
        update = invoke_local(root, "DefinitionsUpdater", {"action": "update"}, log)
        print(f"definitions updater: {update.get('status')}, set {update.get('set_id')}")
        print(f"filejobs rescan {stored['id']}", flush=True)
        rescan = argparse.Namespace(
            file_ids=[stored["id"]],
            tenant=None,
            prefix=None,
            reason=f"definitions {update.get('set_id')}",
            dry_run=False,
            key=None,
            no_follow=False,
            timeout=120.0,
        )
        if scanning.rescan(rescan, target) != 0:
            problems.append(f"{sample.name}: its rescan did not finish in time")
        after = ApiClient(target).get(f"/files/{stored['id']}")
        files[sample.name] = after
        problems += _quarantined_for_good(target, sample, after)
        scan = after.get("scan") or {}
        print(
            f"{sample.name}: {after['status']} ({after.get('status_reason')}); verdict "
            f"{scan.get('verdict')} with definitions {scan.get('definitions_version')}"
        )
    return problems


def _quarantined_for_good(target: Target, sample: Sample, stored: dict[str, Any]) -> list[str]:
    if stored["status"] != "quarantined":
        return [f"{sample.name}: the rescan left it {stored['status']}"]
    s3 = target.s3()
    listing = s3.list_object_versions(Bucket=stored["bucket"], Prefix=stored["key"])
    left = [
        v
        for v in listing.get("Versions", []) + listing.get("DeleteMarkers", [])
        if v["Key"] == stored["key"]
    ]
    derived = s3.list_objects_v2(
        Bucket=target.require_outputs_bucket(), Prefix=f"derived/{stored['tenant']}/{stored['id']}/"
    )
    problems = []
    if left:
        problems.append(f"{sample.name}: {len(left)} version(s) left in the uploads bucket")
    if derived.get("KeyCount", 0):
        problems.append(f"{sample.name}: {derived['KeyCount']} derived output(s) not withdrawn")
    return problems


def _file(api: ApiClient, bucket: str, key: str) -> dict[str, Any]:
    found = api.get("/files", {"key": key, "bucket": bucket})
    stored: dict[str, Any] = api.get(f"/files/{found['files'][0]['id']}")
    return stored


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "out")
    parser.add_argument("--workers", type=int, default=1)
    arguments = parser.parse_args(argv)
    try:
        return run(arguments.out, arguments.workers)
    except CliError as error:
        print(f"demo: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
