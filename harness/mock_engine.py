"""Runs the real Pulumi program under the SDK's mocks and records what it registers.

No CLI, credentials or network: the mock monitor answers every registration, and this module
keeps each one (type, name, parent, inputs, options) for the offline render and the tests.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import json
import logging
import runpy
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pulumi
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import resource as sdk_resource
from pulumi.runtime import rpc, settings
from pulumi.runtime.proto import resource_pb2, source_pb2
from pulumi.runtime.stack import Stack
from pulumi.runtime.sync_await import _ensure_event_loop, _sync_await

from harness.gcp_model import (
    CLUSTER_RESOURCE,
    DASHBOARD_RESOURCE,
    HOLDINGS_READS,
    NOTIFICATION_CHANNEL_RESOURCE,
    SERVICE_IDENTITY_RESOURCE,
    SERVICE_RESOURCE,
    SUBNETWORK_RESOURCE,
    Block,
    Bucket,
    CloudProject,
    CryptoKey,
    GkeServerConfig,
    Holdings,
    NodeAddresses,
    ProviderError,
    Reservation,
    Secret,
    SubBlock,
    Subnetwork,
    api_of,
    claim_name,
    cluster_endpoints,
    dashboard_id,
    gke_dns_endpoint,
    notification_channel_name,
    permission_denied,
    refuse_invalid,
    service_identity,
)
from harness.gke_network import EXISTING_CLUSTER_SUBNET_RANGE, existing_cluster_network
from tools.stack_file import PROJECT_NAME

if TYPE_CHECKING:
    from components.stack import StackConfig

# The SDK takes a stack trace at every registration, for the engine to say where each resource was declared; the mock
# monitor keeps none of it, and taking it is a sixth of a run here (the dev stack, measured): the runs of this process
# take none (pulumi 3.272.0, sdk/python/lib/pulumi/runtime/resource.py: _get_stack_trace, called by prepare_resource
# and read_resource). A pulumi release without it fails here, loudly.
assert callable(sdk_resource._get_stack_trace), "pulumi.runtime.resource._get_stack_trace is gone: see above"
sdk_resource._get_stack_trace = source_pb2.StackTrace

PROJECT_ROOT = Path(__file__).resolve().parent.parent
PROGRAM = PROJECT_ROOT / "__main__.py"
SECRET = "[secret]"
UNKNOWN = "[unknown]"
PROJECT_NUMBER_PLACEHOLDER = "PROJECT_NUMBER"
EVERY_API_ON = CloudProject()  # the ordinary render's project: prepared by hand, every API enabled  # what getProject would return in a real preview


@dataclass
class Registration:
    type: str
    name: str
    parent: str | None
    custom: bool
    inputs: dict[str, Any]
    provider: str  # the explicit provider's reference ("<urn>::<id>"), empty for a default provider
    dependencies: list[str]  # names of what it waits for: depends_on and every resource its inputs come from
    protect: bool
    custom_timeouts: dict[str, str]
    options: dict[str, Any] = field(default_factory=dict)  # the lifecycle options that are set

    @property
    def provider_name(self) -> str | None:
        return self.provider.split("::")[-2] if self.provider else None

    def input(self, path: str) -> Any:
        """Input by dotted camelCase path, secrets unwrapped: ``nodeConfig.machineType``."""
        value: Any = unwrap_secrets(self.inputs)
        for part in path.split("."):
            value = value[int(part)] if isinstance(value, list) else value[part]
        return value


@dataclass
class Invocation:
    """One read of the cloud (an invoke) as the engine saw it."""

    token: str
    waited_for: list[str]  # names of the resources it waited for (its depends_on, expanded)
    api: str | None  # the Google Cloud API it goes through (harness/gcp_model.py), None for others
    answer: str = ""  # "answered", "unknown" (it waits for what a preview does not create) or "refused: ..."


@dataclass
class ProgramRun:
    registrations: list[Registration]
    outputs: dict[str, Any]  # export name -> sanitized value ("[secret]", "[unknown]")
    raw_outputs: dict[str, Any] = field(default_factory=dict)  # export name -> resolved value
    warnings: list[str] = field(default_factory=list)  # what the program logged as warnings
    infos: list[str] = field(default_factory=list)  # what it logged as information (the preview's reports)
    invocations: list[Invocation] = field(default_factory=list)  # every invoke, in the order it ran

    def of_type(self, type_token: str) -> list[Registration]:
        return [r for r in self.registrations if r.type == type_token]

    def one(self, type_token: str, name: str) -> Registration:
        matches = [r for r in self.registrations if r.type == type_token and r.name == name]
        assert len(matches) == 1, f"expected one {type_token} named {name}, found {len(matches)}"
        return matches[0]


class _Mocks(pulumi.runtime.Mocks):
    """Returns inputs as outputs; after a real `up` a few more outputs exist, which tests can ask for.

    What only a real engine could look up is absent unless a test stands it in: the versions GKE
    offers (``engine_versions``) and the outputs of the stack's previous update (``previous_outputs``).
    """

    def __init__(
        self,
        preview: bool,
        engine_versions: GkeServerConfig | None,
        previous_outputs: dict[str, Any] | None,
        holdings: Callable[[], Holdings],
        project: str,
        cloud: CloudProject,
    ):
        self.preview = preview
        self.cloud = cloud  # the project's cluster made elsewhere: missing, still being created, on a Shared VPC
        self.engine_versions = engine_versions
        self.previous_outputs = previous_outputs
        self.holdings = functools.cache(holdings)  # the reservations and buckets that exist (harness/gcp_model.py)
        self.project = project
        self.subnet_ranges: dict[str, str] = {}  # the id each subnetwork the run made was given -> its primary range
        self.node_addresses = NodeAddresses()  # what the nodes the `up` made take of those subnetworks

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        outputs = dict(args.inputs)
        resource_id = f"{args.name}-id"
        if args.typ == DASHBOARD_RESOURCE and not self.preview:
            resource_id = dashboard_id(PROJECT_NUMBER_PLACEHOLDER, args.name)  # the project's number, as getProject's
        if args.typ == NOTIFICATION_CHANNEL_RESOURCE and not self.preview:
            resource_id = outputs["name"] = notification_channel_name(args.inputs["project"], args.name)
        if args.typ == SUBNETWORK and "ipCidrRange" in args.inputs:
            self.subnet_ranges[resource_id] = args.inputs["ipCidrRange"]
        if args.typ == "pulumi:pulumi:StackReference":
            outputs["outputs"] = dict(self.previous_outputs or {})
            outputs["secretOutputNames"] = []
        if not self.preview:
            self.node_addresses.create(args.typ, resource_id, args.inputs)
            outputs.update(_applied_outputs(args, self.subnet_ranges))
        elif args.typ == CLUSTER:
            # What GKE computes is unknown until the cluster exists, as in a real preview.
            outputs["controlPlaneEndpointsConfig"] = _with_unknown_dns_endpoint(args.inputs)
        return resource_id, outputs

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]] | None]:
        if args.token == "gcp:organizations/getProject:getProject":
            # Only a real preview can look the number up; the render shows where it goes.
            return {"number": PROJECT_NUMBER_PLACEHOLDER, "projectId": args.args.get("projectId")}, []
        if args.token == "gcp:container/getCluster:getCluster":
            # A cluster made elsewhere: only a real preview can read its endpoint and CA. Its DNS-based endpoint
            # is always there (GKE), taking no outside traffic unless its owner turned that on. Its network is the
            # model's cluster made elsewhere (harness/gke_network.py).
            # One still being created: neither its IP endpoint nor its masterAuth yet (CloudProject's assumption).
            if self.cloud.existing_cluster_missing:
                cluster = f"projects/{args.args.get('project')}/locations/{args.args.get('location')}/clusters"
                raise ProviderError(args.token, f"{cluster}/{args.args['name']} not found")
            made = not self.cloud.existing_cluster_provisioning
            endpoint, ca = "EXISTING_CLUSTER_ENDPOINT", "EXISTING_CLUSTER_CA"
            dns = gke_dns_endpoint(args.args.get("project", ""), args.args.get("location", ""), args.args["name"])
            return {
                "name": args.args.get("name"),
                "endpoint": endpoint if made else "",
                "masterAuths": [{"clusterCaCertificate": ca}] if made else [],
                **existing_cluster_network(
                    args.args.get("project", ""),
                    args.args.get("location", ""),
                    self.cloud.existing_cluster_host_project,
                ),
                "controlPlaneEndpointsConfigs": [
                    {
                        "dnsEndpointConfigs": [{"endpoint": dns, "allowExternalTraffic": False}],
                        "ipEndpointsConfigs": [{"enabled": True}],
                    }
                ],
            }, []
        if args.token in HOLDINGS_READS:
            # What the project holds, as the provider answers it; a read it fails raises ProviderError.
            return self.holdings().answer(args.token, args.args, self.project), []
        if args.token == "gcp:container/getEngineVersions:getEngineVersions" and self.engine_versions is not None:
            return self.engine_versions.engine_versions(args.args.get("versionPrefix") or ""), []
        return {}, []


CLUSTER = CLUSTER_RESOURCE
SUBNETWORK = SUBNETWORK_RESOURCE
HELM_RELEASE = "kubernetes:helm.sh/v3:Release"


def _with_unknown_dns_endpoint(inputs: dict[str, Any]) -> dict[str, Any]:
    endpoints = {key: dict(value) for key, value in (inputs.get("controlPlaneEndpointsConfig") or {}).items()}
    endpoints.setdefault("dnsEndpointConfig", {})["endpoint"] = rpc.UNKNOWN
    return endpoints


def _applied_outputs(args: pulumi.runtime.MockResourceArgs, subnet_ranges: dict[str, str]) -> dict[str, Any]:
    if args.typ == CLUSTER:
        endpoints = cluster_endpoints(args.inputs, subnet_ranges)
        return {**endpoints, "masterAuth": {"clusterCaCertificate": "LS0tLS1CRUdJTi1DQS0tLS0t"}}
    if args.typ == "gcp:serviceaccount/account:Account":
        email = f"{args.inputs['accountId']}@{args.inputs['project']}.iam.gserviceaccount.com"
        return {"email": email, "name": f"projects/{args.inputs['project']}/serviceAccounts/{email}"}
    if args.typ == SERVICE_IDENTITY_RESOURCE:
        # the project's number as getProject answers it here
        return service_identity(args.inputs["service"], PROJECT_NUMBER_PLACEHOLDER)
    if args.typ == HELM_RELEASE:
        # Helm's record of a first install (pulumi-kubernetes' ReleaseStatus)
        inputs = args.inputs
        status = {"name": inputs.get("name"), "namespace": inputs.get("namespace"), "version": inputs.get("version")}
        return {"status": {**status, "revision": 1, "status": "deployed"}}
    return {}


class DuplicateUrn(Exception):
    """The engine's refusal of a second resource of one type and name under one parent."""


class _RecordingMonitor(pulumi_mocks.MockMonitor):
    """The SDK's mock monitor, recording every registration and invoke, and answering as the engine and
    the project (``cloud``) would: an invoke waits for its ``depends_on`` (the engine's invoke gate, which
    the SDK's own mock leaves out), and a Google Cloud call of an API the project has not enabled by
    then is refused (harness/gcp_model.py)."""

    def __init__(
        self,
        mocks: _Mocks,
        registrations: list[Registration],
        invocations: list[Invocation],
        cloud: CloudProject,
        project: str,
    ):
        super().__init__(mocks)
        self.preview = mocks.preview
        self.holdings = mocks.holdings  # what exists before the run: a bucket name it holds, what a grant is on
        self.registrations = registrations
        self.invocations = invocations
        self.cloud = cloud
        self.project = project
        self._registered: dict[str, tuple[str, dict[str, Any]]] = {}  # urn -> (type, inputs)
        self._urns: set[str] = set()  # every URN registered, as the registration begins
        self._urns_lock = threading.Lock()
        self._dependencies: dict[str, list[str]] = {}  # urn -> the urns it waits for
        self._names: set[tuple[Any, ...]] = set()  # the names the run's creates took (gcp_model.claim_name)

    def GetDeploymentInfo(self, request: Any) -> Any:
        info = super().GetDeploymentInfo(request)  # type: ignore[no-untyped-call]  # the SDK's mock is untyped
        # The CLI's engine gates invokes on their dependencies; so does this monitor (Invoke below).
        info.supportedFeatures.append(resource_pb2.RESOURCE_MONITOR_FEATURE_INVOKE_DEPENDS_ON)
        return info

    def RegisterResource(self, request: Any) -> Any:
        urn = self.make_urn(request.parent, request.type, request.name)
        with self._urns_lock:  # registrations run side by side: the second of one URN is refused whichever ends first
            if urn in self._urns:  # the engine's refusal, in a preview too (pulumi/pulumi sdk diag/errors.go 2001)
                raise DuplicateUrn(f"Duplicate resource URN '{urn}'; try giving it a unique name")
            self._urns.add(urn)
        inputs = rpc.deserialize_properties(request.object, keep_unknowns=True)
        if request.custom and not self.preview:  # a preview creates nothing, so calls no API
            self._refuse_if_disabled(request.type, list(request.dependencies), unwrap_secrets(inputs))
            if request.type == SERVICE_IDENTITY_RESOURCE:
                service_identity(unwrap_secrets(inputs)["service"], PROJECT_NUMBER_PLACEHOLDER)  # what Google refuses
            claim_name(request.type, unwrap_secrets(inputs), self._names)
            refuse_invalid(request.type, unwrap_secrets(inputs))
            waited_for = self._waited_for(list(request.dependencies))
            self.holdings().refuse_create(request.type, unwrap_secrets(inputs), self.project, waited_for)
        response = super().RegisterResource(request)  # type: ignore[no-untyped-call]  # the SDK's mock is untyped
        self._registered[urn] = (request.type, unwrap_secrets(inputs))
        self._dependencies[urn] = list(request.dependencies)
        if request.type != "pulumi:pulumi:Stack":
            parent = request.parent if request.parent and _urn_type(request.parent) != "pulumi:pulumi:Stack" else None
            timeouts = request.customTimeouts
            self.registrations.append(
                Registration(
                    type=request.type,
                    name=request.name,
                    parent=parent.split("::")[-1] if parent else None,
                    custom=bool(request.custom),
                    inputs=inputs,
                    provider=request.provider,
                    dependencies=sorted({urn.split("::")[-1] for urn in request.dependencies}),
                    protect=bool(request.protect),
                    custom_timeouts={
                        k: getattr(timeouts, k) for k in ("create", "update", "delete") if getattr(timeouts, k)
                    },
                    options=_options(request),
                )
            )
        return response

    def Invoke(self, request: Any) -> Any:
        if request.tok == "pulumi:pulumi:getResource":
            return super().Invoke(request)  # type: ignore[no-untyped-call]  # the SDK's mock is untyped
        waited_for = list(request.dependsOn)
        invocation = Invocation(
            token=request.tok, waited_for=sorted({urn.split("::")[-1] for urn in waited_for}), api=api_of(request.tok)
        )
        self.invocations.append(invocation)
        if self.preview and self.cloud.fresh and any(urn in self._registered for urn in waited_for):
            # The engine declines an invoke whose dependencies are pending creation: wholly unknown.
            invocation.answer = "unknown"
            return resource_pb2.ResourceInvokeResponse(unknown=True)
        try:
            self._refuse_if_disabled(request.tok, waited_for)
        except Exception as refusal:
            invocation.answer = f"refused: {refusal}"
            raise
        try:
            if self.cloud.grants is not None and (
                denied := permission_denied(
                    request.tok, rpc.deserialize_properties(request.args), self.project, self.cloud.grants
                )
            ):
                raise denied
            response = super().Invoke(request)  # type: ignore[no-untyped-call]  # the SDK's mock is untyped
        except ProviderError as failure:  # the provider failed the read: the engine hands its error to the program
            invocation.answer = f"failed: {failure}"
            raise
        invocation.answer = "answered"
        return response

    def _refuse_if_disabled(self, token: str, dependencies: list[str], inputs: dict[str, Any] | None = None) -> None:
        if refusal := self.cloud.refusal(token, self._enabled_by(dependencies), self.project, inputs):
            raise refusal

    def _enabled_by(self, dependencies: list[str]) -> set[str]:
        """The APIs enabled by the Services among ``dependencies`` and everything they wait for."""
        return {inputs["service"] for token, inputs in self._waited_for(dependencies) if token == SERVICE_RESOURCE}

    def _waited_for(self, dependencies: list[str]) -> list[tuple[str, dict[str, Any]]]:
        """The type and inputs of each resource among ``dependencies`` and everything they wait for."""
        made: list[tuple[str, dict[str, Any]]] = []
        seen: set[str] = set()
        pending = list(dependencies)
        while pending:
            urn = pending.pop()
            if urn in seen or urn not in self._registered:
                continue
            seen.add(urn)
            made.append(self._registered[urn])
            pending.extend(self._dependencies[urn])
        return made


def _options(request: Any) -> dict[str, Any]:
    """The lifecycle options a registration sets, as a reviewer reads them (unset ones left out, a false
    deleteBeforeReplace set explicitly kept)."""
    timeouts = request.customTimeouts
    aliases = [a.spec.name or a.urn.split("::")[-1] for a in request.aliases]
    options: dict[str, Any] = {
        "protect": bool(request.protect),
        "retainOnDelete": bool(request.retainOnDelete),
        "deleteBeforeReplace": bool(request.deleteBeforeReplace),
        "replaceOnChanges": sorted(request.replaceOnChanges),
        "ignoreChanges": sorted(request.ignoreChanges),
        "customTimeouts": {k: getattr(timeouts, k) for k in ("create", "update", "delete") if getattr(timeouts, k)},
        "aliases": sorted(aliases + [urn.split("::")[-1] for urn in request.aliasURNs]),
        "replaceWith": sorted(urn.split("::")[-1] for urn in request.replace_with),
    }
    kept = {key: value for key, value in options.items() if value}
    # An explicit delete_before_replace=False is kept too: it overrides the provider's own answer, which the engine
    # reads only when the request says it is defined (pulumi/pulumi v3.259.0 pkg/resource/deploy/source_eval.go,
    # DeleteBeforeReplaceDefined; step_generator.go, goal.DeleteBeforeReplace over diff.DeleteBeforeReplace).
    if request.deleteBeforeReplaceDefined and not request.deleteBeforeReplace:
        kept["deleteBeforeReplace"] = False
    return kept


def _urn_type(urn: str) -> str:
    return urn.split("::")[2].split("$")[-1]


class _AnsweredInPlace(ThreadPoolExecutor):
    """The SDK hands each call to its monitor to the event loop's default executor, a thread pool, because a real
    monitor answers over gRPC. The mock monitor answers at once, in Python: the hop to a thread and back cost about a
    tenth of every run (the loop waited in epoll for each answer). So the answer is made where it is asked; a loop
    iteration later, the SDK's await sees it as it would a thread's."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        answer: Future[Any] = Future()
        try:
            answer.set_result(fn(*args, **kwargs))
        except BaseException as error:  # handed to the awaiting SDK, as a thread pool hands it
            answer.set_exception(error)
        return answer


def run_program(
    config: dict[str, str],
    secret_keys: list[str] | None = None,
    stack: str = "dev",
    preview: bool = True,
    registrations: list[Registration] | None = None,
    engine_versions: GkeServerConfig | None = None,
    previous_outputs: dict[str, Any] | None = None,
    cloud: CloudProject = EVERY_API_ON,
    invocations: list[Invocation] | None = None,
    program_path: Path = PROGRAM,
) -> ProgramRun:
    """Run ``__main__.py`` (or ``program_path``) once under mocks; program errors propagate with their own type.

    ``registrations`` and ``invocations``, when given, receive every registration and invoke as it
    happens, so a caller can see what a failing run did before it failed. ``cloud`` is the project the
    run goes to (harness/gcp_model.py): by default one with every API on; ``CloudProject.empty()`` refuses
    each Google Cloud call made before the API it goes through is enabled.
    """
    settings.ROOT.set(None)  # a fresh root Stack, or exports leak between runs
    pulumi.runtime.set_all_config(dict(config), secret_keys=list(secret_keys or []))
    project = config.get(f"{PROJECT_NAME}:project", "PROJECT")
    declared = cloud.holdings
    holdings = (lambda: declared) if declared is not None else (lambda: stack_holdings(config, previous_outputs or {}))
    mocks = _Mocks(
        preview,
        engine_versions,
        previous_outputs,
        holdings,
        project,
        cloud,
    )
    monitor = _RecordingMonitor(
        mocks,
        registrations if registrations is not None else [],
        invocations if invocations is not None else [],
        cloud,
        project,
    )
    logger = logging.getLogger(f"{__name__}.program")
    logger.propagate = False
    logger.setLevel(logging.INFO)  # the program's information too: what the preview reports it read
    collected = _Collected()
    logger.handlers = [collected]
    pulumi.runtime.set_mocks(mocks, project=PROJECT_NAME, stack=stack, preview=preview, monitor=monitor, logger=logger)

    @pulumi.runtime.test  # type: ignore[untyped-decorator]  # the SDK's test decorator is untyped
    def program() -> None:
        runpy.run_path(str(program_path), run_name="__pulumi_main__")

    loop = _ensure_event_loop()  # type: ignore[no-untyped-call]  # the SDK's helper is untyped; its runs reuse this loop
    loop.set_default_executor(_AnsweredInPlace(max_workers=1))
    loop.set_exception_handler(_unretrieved_in_one_line)
    try:
        program()
    except BaseException:
        _collect_the_run(passed=False)
        raise
    root = settings.get_root_resource()
    assert isinstance(root, Stack), "the mocks ran no program"
    exports = root.outputs
    resolved = {name: _resolve(value) for name, value in exports.items()}
    run = ProgramRun(
        registrations=monitor.registrations,
        outputs={name: shown for name, (shown, _) in resolved.items()},
        raw_outputs={name: raw for name, (_, raw) in resolved.items()},
        warnings=[r.getMessage() for r in collected.records if r.levelno >= logging.WARNING],
        infos=[r.getMessage() for r in collected.records if r.levelno == logging.INFO],
        invocations=monitor.invocations,
    )
    del root, exports, resolved
    settings.ROOT.set(None)  # the run's resources are garbage from here: only the plain record above is kept
    _collect_the_run(passed=True)
    return run


def _unretrieved_in_one_line(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """asyncio reports each future left holding an error nobody retrieved when the collector frees it, with the
    error's whole traceback. A failed run leaves dozens, all holding the error run_program raises to its caller; pytest
    formatted each traceback, about 4 s of `make test`'s CPU for what no one reads. Each is reported in one line here
    instead (a passed run's too, where one would mean an error the program dropped); any other report goes to
    asyncio's own handler."""
    if "never retrieved" in context.get("message", "") and "exception" in context:
        logging.getLogger("asyncio").error("%s: %r", context["message"], context["exception"])
    else:
        loop.default_exception_handler(context)


def _collect_the_run(passed: bool) -> None:
    """Collect what the run left now. A failed run leaves futures whose exception nobody retrieved, and their
    finalizers log it: collected later, during a compile (pytest rewriting a module it imports), that logging made
    CPython 3.11.7 fail the compile ("AST constructor recursion depth mismatch"), seen here.

    After a run that ``passed``, what survives the collection (the modules it loaded, the records callers keep) is
    frozen out of every later one (gc.freeze): a collection then walks only what the newest run made, a few
    milliseconds, where walking everything earlier runs kept took 0.12 s a run, 70 s of a serial `make test`. A failed
    run's objects are not frozen (the exception still holds them; frozen, they would never be freed), unless modules
    were loaded since the last freeze: they stay for good, and each later collection walked them again, 60-90 ms a
    refused config (4.3 s for the 110 of test_saxml_config and test_gcp_config run first in a process); freezing them
    costs the one failure's objects, once for each time modules are loaded."""
    gc.collect()
    if passed or len(sys.modules) > _modules_at_freeze[0]:
        gc.freeze()
        _modules_at_freeze[0] = len(sys.modules)


_modules_at_freeze = [0]  # how many modules were loaded at the last gc.freeze


def stack_holdings(config: dict[str, str], previous_outputs: dict[str, Any]) -> Holdings:
    """What a project prepared for the stack holds: the reservation it names, ready and healthy, with a sub-block of
    each pool's hosts (a pool's own sub-block where it names one), in use by the pools the last `up` placed there
    (``previous_outputs``), free for the others; and the existing weights bucket it names, in its region with uniform
    bucket-level access; and the Cloud KMS keys and the image mirror it names. Nothing for a config that does not load
    (the program refuses it)."""
    from components import lifecycle as lifecycle_review
    from components import stack as stack_config
    from components.config_base import NAMESPACE
    from components.workloads.serving.config import weights_bucket_name

    raw: dict[str, Any] = {}
    for key, text in config.items():
        if key.startswith(f"{NAMESPACE}:"):
            try:
                raw[key.split(":", 1)[1]] = json.loads(text)
            except json.JSONDecodeError:
                raw[key.split(":", 1)[1]] = text
    # Parsed only: the program validates and builds it (once: tests count the builds).
    loaded = stack_config.parsed(raw)
    if loaded is None:
        return Holdings()
    tpu = loaded.tpu
    reservations: tuple[Reservation, ...] = ()
    buckets: tuple[Bucket, ...] = ()
    if tpu.reservation.name:
        placed = lifecycle_review.previous_pool_reservations(previous_outputs)
        sub_blocks = tuple(
            SubBlock(
                name=pool.sub_block or f"subblock-{i:04d}",
                hosts=pool.node_count,
                in_use=pool.node_count
                if placed.get(pool.name) == loaded.tpu.reservation_path(pool, loaded.project)
                else 0,
            )
            for i, pool in enumerate(tpu.pools)
        )
        block = Block(name=tpu.reservation.block or "block-0001", sub_blocks=sub_blocks)
        reservations = (
            Reservation(
                tpu.reservation.owner(loaded.project), tpu.zone, tpu.reservation.name, tpu.machine_type, (block,)
            ),
        )
    serving = loaded.serving
    if serving.enabled and not serving.weights_bucket.create:
        buckets = (Bucket(weights_bucket_name(serving, loaded.project), loaded.region.upper()),)
    # The secret versions it names, each enabled: a numbered one with as many versions, an alias naming version 1
    named = (serving.hf_token_secret_version, loaded.images.pull_through.docker_hub_password_secret_version)
    secrets = []
    for version in filter(None, named):
        secret, _, number = version.partition("/versions/")
        count = int(number) if number.isdigit() else 1
        aliases = () if number.isdigit() or number == "latest" else ((number, 1),)
        secrets.append(Secret(secret, states=("ENABLED",) * count, aliases=aliases))
    return Holdings(
        reservations=reservations,
        buckets=buckets,
        secrets=tuple(secrets),
        subnetworks=existing_cluster_subnetworks(loaded),
        keys=tuple(CryptoKey(name) for name in {grant.key.name: None for grant in loaded.key_grants()}),
        repositories=(mirror.name,) if (mirror := loaded.images.mirror_repository) else (),
    )


def existing_cluster_subnetworks(loaded: StackConfig) -> tuple[Subnetwork, ...]:
    """The subnetworks of the region of the model's cluster made elsewhere (cluster.existing.name), in its VPC
    (harness/gke_network.py): its own, and an active proxy-only subnet of the stack's network.proxyOnlyCidr."""
    existing = loaded.cluster.existing
    if not existing.name:
        return ()
    network = existing_cluster_network(loaded.project, existing.location)
    region = network["subnetwork"].split("/")[3]
    return (
        Subnetwork(network["network"], region, "default", EXISTING_CLUSTER_SUBNET_RANGE),
        Subnetwork(
            network["network"], region, "proxy-only", loaded.network.proxy_only_cidr, "REGIONAL_MANAGED_PROXY", "ACTIVE"
        ),
    )


class _Collected(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def _resolve(value: Any) -> tuple[Any, Any]:
    output = pulumi.Output.from_input(value)
    known = _sync_await(output.is_known())
    secret = _sync_await(output.is_secret())
    raw = _sync_await(output.future(with_unknowns=True)) if known else None
    if secret:
        return SECRET, raw
    if not known:
        return UNKNOWN, None
    return sanitize(raw), raw


def unwrap_secrets(value: Any) -> Any:
    if isinstance(value, dict):
        if value.get(rpc._special_sig_key) == rpc._special_secret_sig:
            return unwrap_secrets(value["value"])
        return {k: unwrap_secrets(v) for k, v in value.items()}
    if isinstance(value, list):
        return [unwrap_secrets(v) for v in value]
    return value


def sanitize(value: Any) -> Any:
    """JSON-ready form of a recorded value: secrets and unknowns masked, whole floats as ints."""
    if isinstance(value, dict):
        if value.get(rpc._special_sig_key) == rpc._special_secret_sig:
            inner = value["value"]
            # A secret map (a Secret's stringData) keeps its keys, which say what it holds.
            return dict.fromkeys(inner, SECRET) if isinstance(inner, dict) else SECRET
        return {k: sanitize(v) for k, v in value.items()}
    if isinstance(value, list):
        return [sanitize(v) for v in value]
    if isinstance(value, pulumi.output.Unknown) or value == rpc.UNKNOWN:
        return UNKNOWN
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value
