"""The whole system on one machine: moto server, the template's resources, its functions.

`filejobs dev` starts moto server on 127.0.0.1 (S3, SQS and EventBridge in the stack's process,
DynamoDB and its streams in one of their own: emulator.py), creates every resource of
template.yaml on them (resources.py), serves a ClamAV definitions mirror on 127.0.0.1
(mirror.py; the template's definitions parameters point at it), writes `.filejobs/local.json`
(what it serves, for the CLI and any S3 client), runs each custom resource's function once (as
CloudFormation does during a deploy, before the resources that depend on it), and starts a host
process (host.py) per event source of every function: `workers` pollers per SQS-triggered
function, one per schedule, stream and API. An HTTP router on 127.0.0.1 turns requests into API
Gateway proxy events for the function whose `Api` event matches, after checking the bearer
token; a scheduler thread (scheduler.py) fires the schedules the API arms in EventBridge
Scheduler. Nothing is wired by hand: a function, event or custom resource added to the template runs
here as it is.

Ctrl-C (or SIGTERM) stops the router, asks every host to stop after the batch in hand, waits up
to `grace` seconds for them, kills the rest (their jobs' leases expire, as when Lambda times a
function out) and stops the emulator.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import boto3
from moto.server import ThreadedMotoServer

from filejobs.access import LOCAL_CALLERS_BY_HEADER, LOCAL_CALLERS_VARIABLE, SAM_LOCAL_VARIABLE
from filejobs_cli.local_stack_file import CONFIG_PATH, LOCAL_CREDENTIALS
from filejobs_dev.infra.stack_names import stack_name_problem
from filejobs_dev.infra.template import (
    FunctionSpec,
    function_definitions,
    load_template,
    resources_of_type,
)
from filejobs_dev.local import emulator, moto_fixes, tokens
from filejobs_dev.local.faults import (
    CRASH_EXIT_CODE,
    FAULT_LOG_VARIABLE,
    FAULTS_VARIABLE,
    parse_faults,
)
from filejobs_dev.local.front import Front, moto_front, refuse_cross_origin_requests
from filejobs_dev.local.host import (
    INVOKE_SECRET_HEADER,
    INVOKE_SECRET_VARIABLE,
    SHORT_POLL_VARIABLE,
    STREAM_BATCHING_VARIABLE,
    VISIBILITY_VARIABLE,
    ready_folder,
    ready_marker,
)
from filejobs_dev.local.issuer import CognitoAuthorizer, LocalDirectory, StandInIssuer
from filejobs_dev.local.metering import METER_LOG_VARIABLE
from filejobs_dev.local.mirror import DefinitionsMirror, build_local_databases
from filejobs_dev.local.payloads import api_event, custom_resource_event
from filejobs_dev.local.resources import ACCOUNT, Resources, provision
from filejobs_dev.local.scheduler import LocalScheduler

# filejobs/config.py reads it: webhooks may reach http://127.0.0.1 (set here and in tests only).
WEBHOOKS_LOCAL_MODE_VARIABLE = "FILEJOBS_WEBHOOKS_LOCAL_MODE"

log = logging.getLogger("filejobs_dev.local")
RESTART_LIMIT = 5  # host restarts within a minute before the stack gives up
# `sam local invoke --env-vars` for those with Docker: each function's variables, on this stack.
SAM_ENV_PATH = Path(".filejobs") / "sam-env.json"
# How long the stack waits for its function hosts to import their handlers and serve.
HOSTS_READY_SECONDS = 120
# The definitions mirror's folder when `--definitions-mirror` names none (created on first use).
MIRROR_PATH = Path(".filejobs") / "mirror"
# The template parameters that say where the definitions come from: set to the local mirror
# unless the user set any of them.
MIRROR_PARAMETERS = ("DefinitionsMirror", "OfficialDatabases", "DefinitionsCustomUrls")
# What the template's layers provide under /opt, and what stands in for it on this machine: the
# ClamAV layer's programs are this machine's ClamAV (Debian installs clamd in /usr/sbin).
LAYER_PROGRAMS = "/opt/clamav/bin/"
PROGRAM_FOLDERS = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")


class StackConfigError(ValueError):
    """Options the stack cannot start with."""


class StackStartError(RuntimeError):
    """The stack could not come up (a custom resource failed, or never answered)."""


def on_this_machine(value: str) -> str:
    """A path a layer provides (`/opt/clamav/bin/freshclam`) as this machine's program of that
    name; left as it is when there is none, so the function fails as it would without its
    layer, naming the path it looked for."""
    program = value.removeprefix(LAYER_PROGRAMS)
    if program == value or not program or "/" in program:
        return value
    folders = os.pathsep.join([os.environ.get("PATH", os.defpath), *PROGRAM_FOLDERS])
    return shutil.which(program, path=folders) or value


def _write_private(path: Path, document: object) -> None:
    """`document` as JSON at `path`, readable by this user alone, whole or not at all."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(document, indent=2) + "\n")
    temporary.chmod(0o600)
    temporary.replace(path)


def service_function(resource: dict[str, Any]) -> str | None:
    """F of a custom resource's `ServiceToken: !GetAtt F.Arn`, else None."""
    token = resource.get("Properties", {}).get("ServiceToken")
    if not isinstance(token, dict) or set(token) != {"Fn::GetAtt"}:
        return None
    target = token["Fn::GetAtt"]
    logical_id, _, attribute = (
        target.partition(".") if isinstance(target, str) else (target[0], ".", target[1])
    )
    return str(logical_id) if attribute == "Arn" else None


@dataclass(frozen=True)
class StackOptions:
    project_root: Path
    emulator_port: int = 4566
    api_port: int = 3000
    workers: int = 1
    workers_per_function: dict[str, int] = field(default_factory=dict)
    stack_name: str = "filejobs-local"
    region: str = "us-east-1"
    schedule_seconds: float | None = None  # None: the template's rate
    grace_seconds: float = 30.0
    # Injected faults (faults.py), as the JSON text of their rules; "" for none.
    faults: str = ""
    # Hide received messages this long instead of the queues' visibility timeouts (minutes in
    # the template): lets a failed record come back, and reach its DLQ, within a demo.
    visibility_seconds: int | None = None
    # Stream event sources gather records for their MaximumBatchingWindowInSeconds, as Lambda
    # does (the cost bench measures the batching the template asks for); off, they invoke at
    # once, so a test sees a stream's effect within a second.
    stream_batching_windows: bool = False
    # Template parameters' values instead of their defaults (sam deploy --parameter-overrides).
    parameters: dict[str, str] = field(default_factory=dict)
    # Values of the template's function environment variables instead of its own, in every
    # function that sets the variable (a chaos run's shorter OUTPUTS_PURGE_DELAY_SECONDS).
    environment: dict[str, str] = field(default_factory=dict)
    fault_log: Path | None = None  # where hosts append a line per injected fault
    meter_log: Path | None = None  # where hosts append a line per AWS request and invocation
    # The folder the definitions mirror serves; None: .filejobs/mirror, made with the local
    # databases (mirror.build_local_databases) when missing.
    definitions_mirror: Path | None = None
    # The stack as it was before its throughput work, for bench/local_stack.py's baseline:
    # every service in the stack's one moto server, moto's own request routing, hosts that
    # short-poll. Otherwise DynamoDB and its streams run in a process of their own (emulator.py).
    baseline: bool = False
    # Another running local stack's `.filejobs/local.json`: this stack is made on that stack's
    # emulator instead of one of its own, as a second stack is deployed into the same account
    # (every name it makes is its own, by its stack name). That stack must outlive this one.
    shared_emulator: Path | None = None


@dataclass(frozen=True)
class Route:
    method: str
    resource: str  # "/jobs/{job_id}"
    pattern: re.Pattern[str]
    function: str
    # The template's `Auth: {Authorizer: NONE}`: API Gateway calls the function unsigned (the
    # console's shell, a CORS preflight).
    unsigned: bool = False


def routes_of(functions: dict[str, FunctionSpec]) -> list[Route]:
    """Every `Api` event of every function, as a method and a path pattern."""
    routes = []
    for name, spec in functions.items():
        for kind, properties in spec.events:
            if kind != "Api":
                continue
            resource = str(properties["Path"])
            regex = re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(resource))
            method = str(properties["Method"]).upper()
            unsigned = (properties.get("Auth") or {}).get("Authorizer") == "NONE"
            routes.append(Route(method, resource, re.compile(f"^{regex}$"), name, unsigned))
    # Literal paths before parameterised ones, as API Gateway matches them.
    return sorted(routes, key=lambda r: (r.resource.count("{"), r.resource))


def shared_endpoints(config_path: Path) -> tuple[str, dict[str, str]]:
    """The emulator endpoints another running local stack serves (its local.json)."""
    try:
        config = json.loads(config_path.read_text())
        return str(config["endpoint_url"]), {
            str(service): str(url) for service, url in (config.get("endpoints") or {}).items()
        }
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        raise StackConfigError(
            f"--shared-emulator {config_path}: not a running local stack's local.json ({error})"
        ) from None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class LocalStack:
    def __init__(self, options: StackOptions) -> None:
        parse_faults(options.faults or "[]")  # a bad rule stops the start, not a host later
        self.options = options
        self.template = load_template(options.project_root / "template.yaml")
        self.functions = function_definitions(self.template)
        unknown = sorted(set(options.workers_per_function) - set(self.functions))
        if unknown:
            raise StackConfigError(f"no such function in template.yaml: {', '.join(unknown)}")
        unknown = sorted(set(options.parameters) - set(self.template.get("Parameters", {})))
        if unknown:
            raise StackConfigError(f"no such parameter in template.yaml: {', '.join(unknown)}")
        variables = {key for spec in self.functions.values() for key in spec.environment}
        unknown = sorted(set(options.environment) - variables)
        if unknown:
            raise StackConfigError(f"no function of template.yaml sets {', '.join(unknown)}")
        if options.definitions_mirror is not None and not options.definitions_mirror.is_dir():
            raise StackConfigError(f"--definitions-mirror {options.definitions_mirror}: no folder")
        problem = stack_name_problem(options.stack_name)
        if problem is not None:
            raise StackConfigError(problem)
        self.endpoint_url = f"http://127.0.0.1:{options.emulator_port}"
        self.api_url = f"http://127.0.0.1:{options.api_port}"
        self.api_token = secrets.token_urlsafe(24)
        self.token_secret = secrets.token_urlsafe(32)  # signs tenant tokens (tokens.py)
        # Proves an API host's invocation comes from the router (host.invocation_server).
        self._invoke_secret = secrets.token_urlsafe(32)
        self.config_path = options.project_root / CONFIG_PATH
        self.sam_env_path = options.project_root / SAM_ENV_PATH
        self._moto: ThreadedMotoServer | Front | None = None
        self._emulator: subprocess.Popen[bytes] | None = None
        # Services served apart from `endpoint_url` (the DynamoDB emulator's), by botocore name.
        self.endpoints: dict[str, str] = {}
        self._router: ThreadingHTTPServer | None = None
        self._scheduler: LocalScheduler | None = None
        # Each host process with the arguments that started it (to start it again).
        self._hosts: list[subprocess.Popen[bytes]] = []
        self._host_args: dict[int, tuple[str, str, tuple[str, ...]]] = {}
        self._restarts: list[float] = []
        self._api_ports: dict[str, int] = {}
        self._mirror: DefinitionsMirror | None = None
        # ApiAuth=COGNITO: the stand-in user pool, and the router's check of its tokens.
        self._issuer: StandInIssuer | None = None
        self._cognito: CognitoAuthorizer | None = None
        self.resources: Resources | None = None

    # --- start -------------------------------------------------------------------------------

    def start(self) -> None:
        moto_fixes.apply(speedups=not self.options.baseline)
        if self.options.shared_emulator is not None:
            self.endpoint_url, self.endpoints = shared_endpoints(self.options.shared_emulator)
        elif self.options.baseline:
            refuse_cross_origin_requests()
            self._moto = ThreadedMotoServer(ip_address="127.0.0.1", port=self.options.emulator_port)
            self._moto.start()
        else:
            self._moto = moto_front("127.0.0.1", self.options.emulator_port)
            port = free_port()
            try:
                self._emulator = emulator.start(port)
            except emulator.EmulatorError as error:
                raise StackStartError(str(error)) from None
            self.endpoints = dict.fromkeys(emulator.SERVICES, f"http://127.0.0.1:{port}")
        session = boto3.Session(
            aws_access_key_id=LOCAL_CREDENTIALS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=LOCAL_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            region_name=self.options.region,
        )
        mirrored = self._start_mirror()
        self.resources = provision(
            session,
            self.endpoint_url,
            self.template,
            self.options.stack_name,
            parameters={**mirrored, **self.options.parameters},
            endpoints=self.endpoints,
            visibility_seconds=self.options.visibility_seconds,
        )
        self._start_issuer()
        self._write_config()
        self._create_custom_resources()
        shutil.rmtree(ready_folder(self.config_path), ignore_errors=True)
        for name, spec in sorted(self.functions.items()):
            self._start_hosts(name, spec)
        self._wait_for_hosts()
        self._start_router()
        self._start_scheduler(session)

    def _start_scheduler(self, session: boto3.Session) -> None:
        """EventBridge Scheduler's part (local/scheduler.py): the schedules the API arms in the
        template's schedule groups, fired at their times into the stack's queues."""
        assert self.resources is not None
        resources = self.resources
        groups = [
            resources.refs[lid]
            for lid in resources_of_type(self.template, "AWS::Scheduler::ScheduleGroup")
        ]
        queues = {
            attributes["Arn"]: attributes["QueueUrl"]
            for attributes in resources.attributes.values()
            if "QueueUrl" in attributes
        }

        def client(service: str) -> Any:
            url = self.endpoints.get(service, self.endpoint_url)
            return session.client(service, endpoint_url=url)  # type: ignore[call-overload]

        self._scheduler = LocalScheduler(client("scheduler"), client("sqs"), groups, queues)
        self._scheduler.start()

    def _write_config(self) -> None:
        assert self.resources is not None
        refs = self.resources.refs
        config = {
            "endpoint_url": self.endpoint_url,
            "endpoints": self.endpoints,
            "region": self.options.region,
            "api_url": self.api_url,
            "api_token": self.api_token,
            "token_secret": self.token_secret,
            "uploads_bucket": refs.get("UploadsBucket"),
            "outputs_bucket": refs.get("OutputsBucket"),
            "quarantine_bucket": refs.get("QuarantineBucket"),
            "table_name": refs.get("JobsTable"),
            "files_table": refs.get("FilesTable"),
            "stack_name": self.options.stack_name,
            "pid": os.getpid(),
            "project_root": str(self.options.project_root),
            "definitions_mirror_url": None if self._mirror is None else self._mirror.url,
            "definitions_mirror_dir": None if self._mirror is None else str(self._mirror.directory),
            "resources": self.resources.to_json(),
            "cognito": None if self._issuer is None else self._issuer.describe(),
        }
        _write_private(self.config_path, config)  # it holds the API token
        _write_private(self.sam_env_path, self.sam_environment())

    def sam_environment(self) -> dict[str, dict[str, str]]:
        """`sam local`'s `--env-vars` document: per function, every variable the template
        declares for it (SAM overrides no other), resolved on this stack. Layer paths stay as
        they are: in SAM's container the layers are in /opt, as on Lambda."""
        assert self.resources is not None
        return {
            name: {
                **{
                    key: str(self.resources.resolve(value))
                    for key, value in spec.environment.items()
                },
                **self._endpoint_variables(),
                **self._local_callers(name),
            }
            for name, spec in sorted(self.functions.items())
        }

    def _local_callers(self, name: str) -> dict[str, str]:
        """The local-caller header turned on (access.py) for a function that declares the switch:
        on this stack only, and only together with SAM's own AWS_SAM_LOCAL."""
        if LOCAL_CALLERS_VARIABLE not in self.functions[name].environment:
            return {}
        return {LOCAL_CALLERS_VARIABLE: LOCAL_CALLERS_BY_HEADER}

    def sam_local_environment(self, name: str) -> dict[str, str]:
        """What `filejobs invoke` runs a function with: the stack's hosts' environment, and what
        `sam local invoke` adds on top (SAM's AWS_SAM_LOCAL, the env file's local callers), so an
        event written for `sam local` is answered alike."""
        return {
            **self.function_environment(name),
            SAM_LOCAL_VARIABLE: "true",
            **self._local_callers(name),
        }

    def _endpoint_variables(self) -> dict[str, str]:
        """The template's endpoint variables (config.endpoint_from), on this stack."""
        return {
            "FILEJOBS_ENDPOINT_URL": self.endpoint_url,
            "FILEJOBS_ENDPOINT_URL_DYNAMODB": self.endpoints.get("dynamodb", self.endpoint_url),
        }

    def function_environment(self, name: str) -> dict[str, str]:
        """What the function's process sees: its template environment, resolved, on the emulator."""
        assert self.resources is not None
        spec = self.functions[name]
        resolved = {
            key: on_this_machine(str(self.resources.resolve(value)))
            for key, value in spec.environment.items()
        }
        return {
            "PATH": os.environ.get("PATH", os.defpath),
            "HOME": os.environ.get("HOME", str(self.options.project_root)),
            "PYTHONUNBUFFERED": "1",
            **LOCAL_CREDENTIALS,
            "AWS_DEFAULT_REGION": self.options.region,
            "AWS_REGION": self.options.region,
            "AWS_ENDPOINT_URL": self.endpoint_url,
            **{emulator.ENDPOINT_VARIABLES[name]: url for name, url in self.endpoints.items()},
            "AWS_LAMBDA_FUNCTION_NAME": f"{self.options.stack_name}-{name}",
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(spec.memory),
            # X-Ray has no daemon here: Powertools' Tracer stays off, as in `sam local`.
            "POWERTOOLS_TRACE_DISABLED": "true",
            **self._local_knobs(),
            **resolved,
            **{k: v for k, v in self.options.environment.items() if k in spec.environment},
            **self._endpoint_variables(),
        }

    def _local_knobs(self) -> dict[str, str]:
        # Webhooks may reach receivers on http://127.0.0.1 here (domain/webhooks.py), and only here.
        knobs = {INVOKE_SECRET_VARIABLE: self._invoke_secret, WEBHOOKS_LOCAL_MODE_VARIABLE: "1"}
        if self.options.faults:
            knobs[FAULTS_VARIABLE] = self.options.faults
        if self.options.visibility_seconds is not None:
            knobs[VISIBILITY_VARIABLE] = str(self.options.visibility_seconds)
        if self.options.stream_batching_windows:
            knobs[STREAM_BATCHING_VARIABLE] = "1"
        if self.options.baseline:
            knobs[SHORT_POLL_VARIABLE] = "1"
        if self.options.fault_log is not None:
            knobs[FAULT_LOG_VARIABLE] = str(self.options.fault_log.resolve())
        if self.options.meter_log is not None:
            knobs[METER_LOG_VARIABLE] = str(self.options.meter_log.resolve())
        return knobs

    def _start_mirror(self) -> dict[str, str]:
        """Serves the definitions mirror; the parameters that point the updater at it (none if
        the user set any of them: the user chose where definitions come from)."""
        directory = self.options.definitions_mirror
        if directory is None:
            directory = self.options.project_root / MIRROR_PATH
            if not directory.is_dir():
                build_local_databases(directory)
        self._mirror = DefinitionsMirror(directory).start()
        declared = self.template.get("Parameters", {})
        if any(name in self.options.parameters for name in MIRROR_PARAMETERS):
            return {}
        settings = {
            "DefinitionsMirror": self._mirror.url,
            "OfficialDatabases": "",
            "DefinitionsCustomUrls": ",".join(self._mirror.database_urls()),
        }
        return {name: value for name, value in settings.items() if name in declared}

    # --- custom resources --------------------------------------------------------------------

    def _create_custom_resources(self) -> None:
        """Each `Custom::*` resource whose ServiceToken is a function of the template: that
        function invoked once with CloudFormation's Create request, as a deploy would, before
        the function hosts start. A FAILED answer, or none within the function's timeout, stops
        the start with the reason."""
        for logical_id, resource in sorted(self.template.get("Resources", {}).items()):
            kind = str(resource.get("Type", ""))
            function = service_function(resource)
            if kind.startswith("Custom::") and function in self.functions:
                assert function is not None
                self._create_custom_resource(logical_id, kind, resource, function)

    def _create_custom_resource(
        self, logical_id: str, kind: str, resource: dict[str, Any], function: str
    ) -> None:
        assert self.resources is not None
        started = time.monotonic()
        spec = self.functions[function]
        arn = f"arn:aws:lambda:{self.options.region}:{ACCOUNT}:function:"
        arn += f"{self.options.stack_name}-{function}"
        properties = {
            key: self.resources.resolve(value)
            for key, value in resource.get("Properties", {}).items()
            if key != "ServiceToken"
        }
        with ResponseReceiver() as receiver:
            event = custom_resource_event(
                "Create",
                response_url=receiver.url,
                stack_id=f"arn:aws:cloudformation:{self.options.region}:{ACCOUNT}:stack/"
                f"{self.options.stack_name}/{uuid.uuid4()}",
                logical_id=logical_id,
                resource_type=kind,
                service_token=arn,
                properties=properties,
            )
            event_path = self.config_path.parent / f"{logical_id}.create.json"
            event_path.write_text(json.dumps(event, indent=2) + "\n")
            process = subprocess.Popen(  # noqa: S603 (our own module, fixed arguments)
                self.invoke_command(function, event_path),
                env=self.function_environment(function),
                start_new_session=True,
            )
            answer = None
            try:
                answer = receiver.wait(process, timeout=spec.timeout)
            finally:
                # One that answered is let finish; one that did not (or Ctrl-C) is stopped.
                _end(process, grace=10.0 if answer is not None else 0.0)
                event_path.unlink(missing_ok=True)
        seconds = time.monotonic() - started
        if answer is None:
            raise StackStartError(
                f"{logical_id} ({kind}): {function} gave CloudFormation no answer "
                f"(exit status {process.returncode}, {seconds:.0f} s of its {spec.timeout} s)"
            )
        if answer.get("Status") != "SUCCESS":
            raise StackStartError(f"{logical_id} ({kind}) failed: {answer.get('Reason')}")
        print(
            f"{logical_id} ({kind}) created by {function} in {seconds:.1f} s: "
            f"{answer.get('Reason') or answer.get('Data')}",
            flush=True,
        )

    def invoke_command(self, function: str, event_path: Path) -> list[str]:
        """One invocation of `function` on the event in `event_path`, in a process set up as
        the hosts are (`filejobs invoke`)."""
        return [
            sys.executable, "-m", "filejobs_dev.local.host", "--config", str(self.config_path),
            "--function", function, "--source", "invoke", "--event", str(event_path),
        ]  # fmt: skip

    def _start_hosts(self, name: str, spec: FunctionSpec) -> None:
        kinds = {kind for kind, _ in spec.events}
        if "SQS" in kinds:
            count = self.options.workers_per_function.get(name, self.options.workers)
            for slot in range(count):  # each source polled by at most its MaximumConcurrency
                self._spawn(name, "sqs", "--slot", str(slot))
        if kinds & {"Schedule", "ScheduleV2"}:
            extra = (
                []
                if self.options.schedule_seconds is None
                else ["--every", str(self.options.schedule_seconds)]
            )
            # More than one runner: overlapping runs, as when a run outlasts its rate.
            for _ in range(self.options.workers_per_function.get(name, 1)):
                self._spawn(name, "schedule", *extra)
        if "DynamoDB" in kinds:
            self._spawn(name, "stream")
        if "Api" in kinds:
            port = free_port()
            self._api_ports[name] = port
            self._spawn(name, "api", "--port", str(port))

    def _wait_for_hosts(self) -> None:
        """Until every host has imported its handler and serves (its ready marker), so that
        the stack is up when its functions are, not while they still import (seconds each on
        a small machine): what is uploaded then is handled at once. A host still not ready
        after HOSTS_READY_SECONDS is named and the stack starts without it; one that exited is
        started again by `wait`, as any host that exits."""
        deadline = time.monotonic() + HOSTS_READY_SECONDS
        waiting = list(self._hosts)
        while waiting and time.monotonic() < deadline:
            waiting = [
                p
                for p in waiting
                if p.poll() is None and not ready_marker(self.config_path, p.pid).exists()
            ]
            time.sleep(0.1)
        for process in waiting:
            name, source, _ = self._host_args.get(process.pid, ("?", "?", ()))
            log.warning("%s (%s) was not ready in %d s", name, source, HOSTS_READY_SECONDS)

    def _spawn(self, name: str, source: str, *extra: str) -> None:
        command = [
            sys.executable, "-m", "filejobs_dev.local.host",
            "--config", str(self.config_path), "--function", name, "--source", source, *extra,
        ]  # fmt: skip
        # A session of its own: the terminal's Ctrl-C reaches the stack, which stops hosts.
        process = subprocess.Popen(  # noqa: S603 (our own module, fixed arguments)
            command, env=self.function_environment(name), start_new_session=True
        )
        self._hosts.append(process)
        self._host_args[process.pid] = (name, source, extra)

    # --- api router --------------------------------------------------------------------------

    def _start_router(self) -> None:
        routes = routes_of(self.functions)
        stack = self

        class Router(BaseHTTPRequestHandler):
            def __getattr__(self, name: str) -> Any:
                # http.server calls do_<METHOD>: every method goes through the routes, so one
                # no route uses gets API Gateway's JSON 405 (or 404), not http.server's HTML 501.
                if name.startswith("do_"):
                    return self._route
                raise AttributeError(name)

            def _route(self) -> None:
                path, _, query = self.path.partition("?")
                status, headers, body = stack.route(
                    self.command, path, query, dict(self.headers.items()), self._body(), routes
                )
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":  # a HEAD answer has headers only
                    self.wfile.write(body)

            def _body(self) -> bytes:
                length = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(length) if length else b""

            def log_message(self, format: str, *args: Any) -> None:
                log.info("api %s", format % args)

        self._router = ThreadingHTTPServer(("127.0.0.1", self.options.api_port), Router)
        threading.Thread(target=self._router.serve_forever, name="api-router", daemon=True).start()

    def route(  # noqa: PLR0917 (the parts of one HTTP request)
        self,
        method: str,
        path: str,
        query: str,
        headers: dict[str, str],
        body: bytes,
        routes: list[Route],
    ) -> tuple[int, dict[str, str], bytes]:
        """One HTTP request through auth and the template's routes to a function. The
        console's shell (/console, /console/...) holds no data: it is served without a token,
        as ConsoleApi (ApiAuth=COGNITO) serves it, the page loading before anyone signs in
        (FileJobsApi takes a signed caller for it: `filejobs console` signs); so is a CORS
        preflight (OPTIONS /uploads), which has no authorizer in the template."""
        authorizer: dict[str, Any] = {}
        unsigned = any(r.unsigned and r.method == method and r.pattern.match(path) for r in routes)
        if path != "/console" and not path.startswith("/console/") and not unsigned:
            found = self.authorize(headers.get("Authorization", ""))
            if found is None:
                return _error(401, "unauthorized", "a valid bearer token is required")
            authorizer = found
        matched = [(r, m) for r in routes if (m := r.pattern.match(path))]
        if not matched:
            return _error(404, "not_found", f"no route for {path}")
        allowed = [(r, m) for r, m in matched if r.method == method]
        if not allowed:
            status, headers, body = _error(
                405, "method_not_allowed", f"{method} is not allowed on {path}"
            )
            headers["Allow"] = ", ".join(sorted({r.method for r, _ in matched}))
            return status, headers, body
        route, match = allowed[0]
        event = api_event(
            method=method,
            resource=route.resource,
            path=path,
            path_parameters=match.groupdict(),
            query=query,
            headers=headers,
            body=body,
            authorizer=authorizer,
            stage_variables=None if self._issuer is None else self._issuer.stage_variables(),
        )
        return self._invoke_api(route.function, event)

    def _start_issuer(self) -> None:
        """ApiAuth=COGNITO: the stand-in user pool the console signs in with (issuer.py), and
        the Cognito authorizer's check of its ID tokens. One router serves both of the template's
        APIs: an ID token is checked as ConsoleApi's authorizer does, a bearer token as before
        (standing in for FileJobsApi's SigV4); events carry ConsoleApi's stage variables."""
        assert self.resources is not None
        parameters = self.resources.parameters
        if parameters.get("ApiAuth") != "COGNITO":
            return
        directory = LocalDirectory(
            self.api_token, self.token_secret, parameters.get("ApiOperatorGroup", "operators")
        )
        self._issuer = StandInIssuer(directory, f"{self.api_url}/console").start()
        self._cognito = CognitoAuthorizer(self._issuer.url)

    def authorize(self, header: str) -> dict[str, Any] | None:
        """The authorizer context of a bearer token, as an API Gateway authorizer would put it:
        the stack's `api_token` is an operator's, a minted token (tokens.py) its tenant's; with
        ApiAuth=COGNITO, a valid ID token of the stand-in user pool gives its claims."""
        if self._cognito is not None and (claims := self._cognito.authorize(header)) is not None:
            return claims
        scheme, _, token = header.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return None
        if secrets.compare_digest(token, self.api_token):
            return {"principalId": "local-operator", "role": "operator"}
        tenant = tokens.tenant_of(self.token_secret, token)
        if tenant is not None:
            return {"principalId": f"local-tenant:{tenant}", "role": "tenant", "tenant": tenant}
        return None

    def _invoke_api(
        self, function: str, event: dict[str, Any]
    ) -> tuple[int, dict[str, str], bytes]:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self._api_ports[function]}/",
            data=json.dumps(event).encode(),
            headers={"Content-Type": "application/json", INVOKE_SECRET_HEADER: self._invoke_secret},
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as answer:  # noqa: S310 (loopback)
                result = json.loads(answer.read())
        except (urllib.error.URLError, TimeoutError) as error:
            log.warning("api function %s did not answer: %s", function, error)
            return _error(502, "bad_gateway", "the function did not answer")
        body = result.get("body") or ""
        data = base64.b64decode(body) if result.get("isBase64Encoded") else body.encode()
        headers = {str(k): str(v) for k, v in (result.get("headers") or {}).items()}
        for key, values in (result.get("multiValueHeaders") or {}).items():
            headers[str(key)] = ", ".join(str(v) for v in values)
        return int(result.get("statusCode", 502)), headers, data

    # --- stop --------------------------------------------------------------------------------

    def wait(self) -> bool:
        """Until Ctrl-C or SIGTERM (True), or hosts keep dying (False).

        A host that exits is started again, as Lambda replaces a crashed execution environment;
        more than RESTART_LIMIT restarts within a minute is a crash loop, and stops the stack.
        A crash injected on purpose (CRASH_EXIT_CODE) is restarted without counting.
        """
        stop = threading.Event()
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: stop.set())
        while not stop.wait(0.5):
            if self._emulator is not None and self._emulator.poll() is not None:
                code = self._emulator.returncode
                log.error("the DynamoDB emulator exited with %s; stopping", code)
                return False
            for process in [p for p in self._hosts if p.poll() is not None]:
                if not self._restart(process):
                    return False
        return True

    def _restart(self, process: subprocess.Popen[bytes]) -> bool:
        name, source, extra = self._host_args.pop(process.pid)
        self._hosts.remove(process)
        if process.returncode == CRASH_EXIT_CODE and self.options.faults:
            log.info("%s (%s) crashed as injected; starting it again", name, source)
            self._spawn(name, source, *extra)
            return True
        now = time.monotonic()
        self._restarts = [t for t in self._restarts if now - t < 60] + [now]
        if len(self._restarts) > RESTART_LIMIT:
            log.error("function hosts keep exiting (last: %s %s); stopping", name, source)
            return False
        log.warning("%s (%s) exited with %s; starting it again", name, source, process.returncode)
        self._spawn(name, source, *extra)
        return True

    def stop(self) -> None:
        if self._scheduler is not None:
            self._scheduler.stop()
        if self._router is not None:
            self._router.shutdown()
        for process in self._hosts:
            if process.poll() is None:
                process.terminate()
        deadline = time.monotonic() + self.options.grace_seconds
        for process in self._hosts:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._moto is not None:
            self._moto.stop()
        if self._emulator is not None:
            self._emulator.terminate()
            try:
                self._emulator.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._emulator.kill()
                self._emulator.wait()
        if self._mirror is not None:
            self._mirror.stop()
        if self._issuer is not None:
            self._issuer.stop()
        self.config_path.unlink(missing_ok=True)
        self.sam_env_path.unlink(missing_ok=True)
        shutil.rmtree(ready_folder(self.config_path), ignore_errors=True)


class ResponseReceiver:
    """A one-shot stand-in for CloudFormation's pre-signed response URL, on 127.0.0.1: keeps
    the first JSON body PUT to its secret path."""

    def __init__(self) -> None:
        self._path = f"/{secrets.token_urlsafe(16)}"
        self._answer: dict[str, Any] | None = None
        self._received = threading.Event()
        receiver = self

        class Answer(BaseHTTPRequestHandler):
            def do_PUT(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path != receiver._path or receiver._received.is_set():
                    self.send_response(403)
                else:
                    try:
                        receiver._answer = json.loads(body)
                    except ValueError:
                        receiver._answer = {"Status": "FAILED", "Reason": "not JSON: " + repr(body)}
                    receiver._received.set()
                    self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Answer)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}{self._path}"

    def __enter__(self) -> ResponseReceiver:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def wait(self, process: subprocess.Popen[bytes], timeout: float) -> dict[str, Any] | None:
        """The answer, once PUT; None if the process ends without one, or `timeout` passes."""
        deadline = time.monotonic() + timeout
        while not self._received.wait(0.1):
            if process.poll() is not None or time.monotonic() > deadline:
                # An answer PUT just before the handler returned is in already, or never comes.
                self._received.wait(0.5)
                break
        return self._answer


def _end(process: subprocess.Popen[bytes], grace: float) -> None:
    """Lets a process exit within `grace` seconds; terminates it after that (killed if it does
    not stop within 5 more)."""
    try:
        process.wait(timeout=grace)
        return
    except subprocess.TimeoutExpired:
        process.terminate()
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _error(status: int, code: str, message: str) -> tuple[int, dict[str, str], bytes]:
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    return status, {"Content-Type": "application/json"}, body


def run(options: StackOptions) -> int:
    # moto's server logs every request at INFO: the functions' own logs are what matter here.
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    stack = LocalStack(options)
    asked_to_stop = False
    try:
        stack.start()
        print(
            f"filejobs local stack up: emulator {stack.endpoint_url}, API {stack.api_url}, "
            f"config {stack.config_path}",
            flush=True,
        )
        asked_to_stop = stack.wait()
    finally:
        print("stopping: letting running batches finish", flush=True)
        stack.stop()
    return 0 if asked_to_stop else 1
