"""The `platform` and `queues` blocks of the stack config and their rules.

`platform`: the controllers installed by Helm (JobSet, Kueue, LeaderWorkerSet, the slice
controller). `queues`: the Kueue objects of dynamic slicing and the priority levels workloads
name (`low`, `medium`, `high`).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Annotated, Literal, get_args

from pydantic import Field

from components.config_base import (
    IMAGE_DIGEST,
    QUANTITY,
    Block,
    ExactVersion,
    ImageReference,
    K8sName,
    Problems,
    form,
    kind,
    written_release_image,
)
from components.gcp.config import ClusterConfig, GkeVersion, TpuConfig
from components.tpu import topology

_LEVELS = Literal["low", "medium", "high"]  # the keys of queues.priorityClasses, lowest first
PRIORITY_LEVELS: tuple[str, ...] = get_args(_LEVELS)
# A workload's priority level, as a setting declares it.
PriorityLevel = Annotated[_LEVELS, Field(json_schema_extra=kind("priority level"))]
WORKLOAD_NAMESPACE = "llm-d-pd-disaggregation"  # the reference's one workload namespace (serving and checks)
# Hard-coded in the controller's certificate code (AI-Hypercomputer/xpk slice/internal/util/cert/cert.go): the one
# namespace its setting takes.
SliceControllerNamespace = Literal["slice-controller-system"]
(SLICE_CONTROLLER_NAMESPACE,) = get_args(SliceControllerNamespace)


class HelmChartConfig(Block):
    chart: str = Field(description="Chart reference (oci://... or https://...).")
    version: ExactVersion = Field(description="Exact chart version (no ranges, no floating tags).")
    namespace: K8sName = Field(description="Namespace of the release.")
    image: str = Field(
        "",
        description="Controller image pinned by digest; empty means the chart's own, `<its repository>:v<version>`, by digest where "
        "the program records that release's digest (docs/supply-chain.md). Set `<that image>@sha256:<digest>`; "
        "the tag stays the chart's release.",
    )

    @property
    def release(self) -> str:
        """The release the version names, without the v its tag may carry: ``v0.10.0`` and ``0.10.0`` are one."""
        return self.version.removeprefix("v")


# A Kubernetes quantity, as a setting writes it.
Quantity = Annotated[
    str, Field(pattern=QUANTITY.pattern, json_schema_extra=form("Kubernetes quantity", "write e.g. 2, 500m or 4Gi"))
]


class ResourceListConfig(Block):
    cpu: Quantity = Field(description="CPU quantity.", examples=["2"])
    memory: Quantity = Field(description="Memory quantity.", examples=["4Gi"])


class KueueControllerConfig(Block):
    replicas: int = Field(2, description="Kueue controller replicas (leader election keeps one active).", ge=1)
    requests: ResourceListConfig = Field(
        ResourceListConfig(cpu="2", memory="4Gi"), description="Kueue controller requests."
    )
    limits: ResourceListConfig = Field(
        ResourceListConfig(cpu="4", memory="8Gi"), description="Kueue controller limits."
    )


class SliceControllerConfig(Block):
    namespace: SliceControllerNamespace = Field(
        SLICE_CONTROLLER_NAMESPACE,
        description="Namespace of the Kueue slice controller release (the controller hard-codes slice-controller-system).",
        json_schema_extra=kind("namespace the controller signs its webhook certificate for"),
    )
    image: str = Field("tpuongke/kueue-slice-controller", description="Slice controller image repository.")
    tag: str = Field("v0.8.0-200", description="Image tag.")
    digest: str = Field(
        "",
        description="Optional sha256 digest; when set the image is pulled by digest. Upstream publishes none: "
        "take it from the registry.",
        pattern=f"^({IMAGE_DIGEST.pattern.strip('^$')})?$",  # IMAGE_DIGEST, or empty
        json_schema_extra=form(
            "sha256 digest (sha256:<64 hex digits>)", "copy it from the registry, or leave it empty"
        ),
        examples=[""],
    )
    replicas: int = Field(
        2,
        description="Controller replicas: two, so one restart never blocks workload creates (its webhooks fail closed).",
        ge=1,
    )


# Where each registry chart's values set its controller image ({repository, tag}). Its packaging sets the image to the
# release's own tag in registry.k8s.io, where release images are promoted (kubernetes-sigs/jobset v0.12.0
# hack/helm-chart-package.sh: .image.repository registry.k8s.io/jobset/jobset, .image.tag the git tag;
# kubernetes-sigs/kueue v0.17.8 hack/helm-chart-package.sh: .controllerManager.manager.image,
# registry.k8s.io/kueue/kueue; kubernetes-sigs/lws v0.10.0 hack/push-chart.sh: .image.manager, registry.k8s.io/lws/lws).
# Each template reads `<repository>:<tag>` (charts/jobset/templates/controller/deployment.yaml,
# charts/kueue/templates/manager/manager.yaml, charts/lws/templates/manager/deployment.yaml at those tags): no digest
# key, so a digest travels in the tag, `v0.17.8@sha256:...`, which Kubernetes pulls by the digest. Kueue's other images
# (KueueViz) are off by default (enableKueueViz: false).
CHART_IMAGE_VALUES = {
    "jobset": ("image",),
    "kueue": ("controllerManager", "manager", "image"),
    "leaderWorkerSet": ("image", "manager"),
}


# The controller image of each pinned release, written in full so that Renovate pins it by digest (renovate.json: the
# pin rule of components/**.py) and moves it with its chart (the JobSet, Kueue and LeaderWorkerSet groups). A chart at
# that version runs the image as written here, by its digest once it has one; a chart moved to another version runs
# the new release's tag until this table follows (Renovate's group PR moves both) or the stack's platform.<chart>.image
# pins it. Where JobSet's digest comes from, and why Kueue's and LeaderWorkerSet's have none yet: docs/supply-chain.md.
RELEASE_IMAGES = {
    "jobset": "registry.k8s.io/jobset/jobset:v0.12.0@sha256:e75536f1135b7bb2f19f8c3b620782fbdd9091d73398e3a272f9a5fed322980d",
    "kueue": "registry.k8s.io/kueue/kueue:v0.17.8",
    "leaderWorkerSet": "registry.k8s.io/lws/lws:v0.10.0",
}


# What the control plane calls on each release's controller pods, as the TCP ports the calls land on: GKE's API
# server dials a webhook Service's endpoint, the pod, on the Service's targetPort (it routes to endpoints, not to
# Service IPs: kubernetes/kubernetes#79739, liggitt, 2019-07-03). Read at the pinned release of each chart (the
# defaults of platform.<key> below), from its admission webhooks, its CRDs' conversion webhooks and its aggregated
# APIs (APIService), each Service's targetPort resolved against the pod's container ports:
# - JobSet 0.12.0: 9443, the `webhook` container port of charts/jobset/templates/controller/deployment.yaml, the
#   targetPort of templates/webhook/service.yaml (kubernetes-sigs/jobset v0.12.0).
# - Kueue 0.17.8: 9443 (templates/webhook/service.yaml, its admission and conversion webhooks; the manager binds it
#   as manifests/kueue/controller-config.yaml `webhook.port` says) and 8082 (templates/visibility/service.yaml, the
#   visibility API's two APIServices) (kubernetes-sigs/kueue v0.17.8 charts/kueue).
# - LeaderWorkerSet 0.10.0: 9443 (templates/webhook/service.yaml, its admission webhooks and the conversion webhook
#   of crds/leaderworkerset.x-k8s.io_leaderworkersets.yaml) (kubernetes-sigs/lws v0.10.0 charts/lws).
# - The slice controller: 9443 (manifests/charts/slice-controller templates/services.yaml targetPort, the container
#   port of templates/deployment.yaml; controller-runtime's default webhook port, which its flags leave).
# tests/test_webhook_reach.py renders each chart (charts.lock) with the values the program gives it and holds these
# against what it derives, so they cannot drift from a chart the program pins.
RELEASE_CONTROL_PLANE_PORTS: dict[str, tuple[int, ...]] = {
    "jobset": (9443,),
    "kueue": (8082, 9443),
    "leaderWorkerSet": (9443,),
    "sliceController": (9443,),
}


def chart_own_image(key: str, chart: HelmChartConfig) -> ImageReference:
    """The controller image the chart under ``platform.<key>`` runs by itself: its repository (RELEASE_IMAGES') at the
    release's tag."""
    repository = ImageReference.parse(RELEASE_IMAGES[key]).name
    return ImageReference(repository, f"v{chart.release}")


def chart_image(key: str, chart: HelmChartConfig) -> str:
    """The controller image of the chart under ``platform.<key>``: the override, or the chart's own (as RELEASE_IMAGES
    writes it, digest included, when that is its release)."""
    if chart.image:
        return chart.image
    own = chart_own_image(key, chart)
    return written_release_image(RELEASE_IMAGES.values(), own.name, own.tag) or str(own)


def slice_controller_image(controller: SliceControllerConfig) -> str:
    """The slice controller's image as the chart pulls it: by digest when one is set (the tag is then ignored)."""
    return f"{controller.image}:{controller.tag}" + (f"@{controller.digest}" if controller.digest else "")


# The pinned releases (docs/operations.md, "What a change does", says what moving them does to a running stack):
# - Kueue 0.17.8 (kubernetes-sigs/kueue tag v0.17.8, 818686e): the newest patch of the 0.17 line this platform
#   and the slice controller were built on, with the TAS fixes #13097, #13266 (CHANGELOG/CHANGELOG-0.17.md,
#   v0.17.8) and #12752 (v0.17.7); its notes since v0.17.4 ask nothing of an upgrade. 0.19 would turn
#   waitForPodsReady on by default and change the LWS webhook (CHANGELOG-0.19.md v0.19.0, v0.19.1, v0.19.2).
# - JobSet 0.12.0 (kubernetes-sigs/jobset tag v0.12.0, f22e565), the newest release: jobset.x-k8s.io/v1alpha2 only
#   gains fields against 0.11.1 (a condition type, status restart counters, two failure-policy actions;
#   api/jobset/v1alpha2/jobset_types.go), so Kueue 0.17.8 (built on sigs.k8s.io/jobset v0.11.1, go.mod) and the
#   slice controller read it as before; Kueue 0.18 and 0.19 build on v0.12.0.
# - LeaderWorkerSet 0.10.0 (kubernetes-sigs/lws tag v0.10.0, 2161f38), the newest release; llm-d's guides ask
#   for 0.7.0 or newer, later 0.9.0 (llm-d/llm-d guides/prereq/infrastructure/README.md). leaderworkerset.x-k8s.io/v1
#   only gains against 0.8.0 (restart policy RecreateGroupAfterStart, status.observedGeneration;
#   api/leaderworkerset/v1/leaderworkerset_types.go); the labels Kueue's integration reads are unchanged. Its
#   controller compares revisions semantically since 0.9.0 (lws#798), so taking over the groups a 0.8.0 controller
#   made should roll none (upstream's upgrade e2e, test/e2e/upgrade at v0.10.0, starts from v0.9.0).
class PlatformConfig(Block):
    install: bool = Field(
        True,
        description="Install JobSet, Kueue, LeaderWorkerSet and the slice controller with Helm; false when the cluster "
        "has them already (installed elsewhere, of the versions below): the stack then only uses them.",
    )
    jobset: HelmChartConfig = Field(
        HelmChartConfig(
            chart="oci://registry.k8s.io/jobset/charts/jobset", version="0.12.0", namespace="jobset-system"
        ),
        description="JobSet chart.",
    )
    kueue: HelmChartConfig = Field(
        HelmChartConfig(chart="oci://registry.k8s.io/kueue/charts/kueue", version="0.17.8", namespace="kueue-system"),
        description="Kueue chart.",
    )
    kueue_controller: KueueControllerConfig = Field(KueueControllerConfig(), description="Kueue controller sizing.")
    leader_worker_set: HelmChartConfig = Field(
        HelmChartConfig(chart="oci://registry.k8s.io/lws/charts/lws", version="0.10.0", namespace="lws-system"),
        description="LeaderWorkerSet chart (its webhook service is hard-coded to lws-system).",
    )
    slice_controller: SliceControllerConfig = Field(
        SliceControllerConfig(),
        description="Kueue slice controller, from the local chart manifests/charts/slice-controller.",
    )
    drain_timeout_minutes: int = Field(
        30,
        description="How long `pulumi destroy` waits for the Slices, admitted Workloads and load-balancer endpoint groups "
        "of the stack to be gone before it deletes the TPU pools and the subnets.",
        ge=1,
    )

    def registry_charts(self) -> dict[str, HelmChartConfig]:
        """The charts installed from their registries, by their key under ``platform``."""
        return {"jobset": self.jobset, "kueue": self.kueue, "leaderWorkerSet": self.leader_worker_set}


class PriorityClassConfig(Block):
    name: K8sName = Field(description="WorkloadPriorityClass name.")
    # Kueue's WorkloadPriorityClass CRD types value as int32 (kueue v0.17.8 config/components/crd/bases/
    # kueue.x-k8s.io_workloadpriorityclasses.yaml, format int32): a larger value passed the preview and failed at up
    # (found by the TPU7x twin).
    value: int = Field(description="Priority value; higher preempts lower.", ge=-(2**31), le=2**31 - 1)


class PriorityClassesConfig(Block):
    low: PriorityClassConfig = Field(
        PriorityClassConfig(name="low-priority-1000", value=1000), description="Low priority (checks)."
    )
    medium: PriorityClassConfig = Field(
        PriorityClassConfig(name="medium-priority-2000", value=2000), description="Medium priority."
    )
    high: PriorityClassConfig = Field(
        PriorityClassConfig(name="high-priority-3000", value=3000), description="High priority (serving)."
    )

    def levels(self) -> list[tuple[str, PriorityClassConfig]]:
        """(level, class) from the lowest to the highest priority."""
        return [(level, getattr(self, level)) for level in PRIORITY_LEVELS]


class QueuesConfig(Block):
    topology_name: K8sName = Field("slice-topology", description="Kueue Topology name.")
    resource_flavor_name: K8sName = Field("slice-rf", description="Kueue ResourceFlavor name.")
    admission_check_name: K8sName = Field(
        "ac", description="Kueue AdmissionCheck name (controller accelerator.gke.io/slice)."
    )
    cluster_queue_name: K8sName = Field("cq", description="Kueue ClusterQueue name.")
    local_queue_name: K8sName = Field("lq", description="LocalQueue name in each workload namespace.")
    namespaces: list[K8sName] = Field([WORKLOAD_NAMESPACE], description="Workload namespaces, each with a LocalQueue.")
    priority_classes: PriorityClassesConfig = Field(PriorityClassesConfig(), description="WorkloadPriorityClasses.")

    def priority_class(self, level: PriorityLevel) -> PriorityClassConfig:
        return dict(self.priority_classes.levels())[level]

    @property
    def priority_class_names(self) -> list[str]:
        return [priority.name for _, priority in self.priority_classes.levels()]


# --- Rules -----------------------------------------------------------------------------

# The charts that ship their CRDs in the chart's crds/ folder (charts/jobset/crds at JobSet v0.12.0: jobsets;
# charts/lws/crds at LWS v0.10.0: leaderworkersets, disaggregatedsets since v0.9.0 and
# disaggregatedsetrolescalers since v0.10.0; Kueue v0.17.8 has its CRDs in charts/kueue/templates/crd): Helm
# installs the crds/ folder on the first install only, and on an upgrade neither updates those CRDs nor adds
# new ones (LWS v0.10.0 site/content/en/docs/installation/_index.md, "Upgrade by Helm"; kubernetes-sigs/lws#1006).
# The LWS v0.10.0 manager runs its DisaggregatedSet controller whatever the values (cmd/main.go), and that
# controller watches both DisaggregatedSet kinds (pkg/controllers/disaggregatedset SetupWithManager).
CHARTS_WITH_CRDS_HELM_KEEPS = ("jobset", "leaderWorkerSet")

# The registry charts published under their version without the v of the release tag, and under no other tag: their
# packaging strips it (kubernetes-sigs/jobset v0.12.0 and kubernetes-sigs/kueue v0.17.8 hack/helm-chart-package.sh,
# chart_version="${GIT_TAG/#v/}"), and registry.k8s.io promotes that tag alone (kubernetes/k8s.io
# registry.k8s.io/images/k8s-staging-jobset/images.yaml charts/jobset since 0.9.0, k8s-staging-kueue/images.yaml
# charts/kueue). Helm 3.16 and later pulls a version that parses as semver as that exact OCI tag, listing no tags
# (helm/helm v3.20.2 pkg/registry/client.go ValidateReference; pulumi/pulumi-kubernetes v4.32.0 provider/go.mod builds
# on v3.20.2), so v0.12.0 finds no chart: the Release's check fails.
# LeaderWorkerSet's chart is promoted under both (k8s-staging-lws/images.yaml: ["v0.8.0", "0.8.0"], one digest).
CHARTS_TAGGED_WITHOUT_V = ("jobset", "kueue")

# The Helm release name of each registry chart, by its key under ``platform`` (helmReleases is keyed by these names).
CHART_RELEASE_NAMES = {"jobset": "jobset", "kueue": "kueue", "leaderWorkerSet": "lws"}


def installed_charts(platform: PlatformConfig, dynamic_slicing: bool) -> dict[str, HelmChartConfig]:
    """The registry charts this stack installs, by their key under ``platform``: JobSet whenever it installs
    the platform; Kueue and LeaderWorkerSet only for dynamic slicing."""
    if not platform.install:
        return {}
    return {key: chart for key, chart in platform.registry_charts().items() if dynamic_slicing or key == "jobset"}


def installed_slice_controller(platform: PlatformConfig, dynamic_slicing: bool) -> SliceControllerConfig | None:
    """The slice controller, when this stack installs it: with dynamic slicing, where it installs the platform."""
    return platform.slice_controller if dynamic_slicing and platform.install else None


def control_plane_ports(platform: PlatformConfig, dynamic_slicing: bool) -> tuple[int, ...]:
    """Every TCP port the control plane calls on the pods of the releases this stack installs, sorted, each once: none
    when it installs none (platform.install false: whoever installed them opened their ports)."""
    releases = release_namespaces(platform, dynamic_slicing)
    return tuple(sorted({port for key in releases for port in RELEASE_CONTROL_PLANE_PORTS[key]}))


def control_plane_port_warnings(platform: PlatformConfig, dynamic_slicing: bool) -> list[str]:
    """A chart moved off its pinned release: the ports the stack opens to the control plane were read at the pinned
    one, and nothing has checked them against the new release."""
    pinned = PlatformConfig().registry_charts()
    return [
        f"platform.{key}.version: {chart.version} is not the release whose webhook ports the stack records "
        f"({pinned[key].version}): the control plane is admitted to "
        f"{', '.join(f'tcp:{port}' for port in RELEASE_CONTROL_PLANE_PORTS[key])} only; read the new release's "
        f"webhook and APIService Services (their targetPorts) before the up, and record them in "
        f"RELEASE_CONTROL_PLANE_PORTS (components/platform/config.py)"
        for key, chart in installed_charts(platform, dynamic_slicing).items()
        if chart.release != pinned[key].release  # LWS takes v0.10.0 too
    ]


def validate_chart_reference(key: str, chart: str, problems: Problems) -> None:
    """A registry chart (the llm-d router's too) is named by its published URL."""
    if not chart.startswith(("oci://", "https://")):
        problems.add(key, f"{chart!r} is not an oci:// or https:// chart reference", "use the chart's published URL")


def validate_release_image(key: str, image: str, repository: str, tag: str, release: str, problems: Problems) -> None:
    """An override ``image`` of ``repository``:``tag``, the image the release ``release`` runs (a chart's controller,
    the llm-d router's endpoint picker): the image of that name (the last path component; a copy in another registry
    keeps it) at that tag, with the digest that is the point of an override. ``release`` names it in messages."""
    own = f"{repository}:{tag}"
    fix = f"write {own}@sha256:<digest> (`crane digest {own}`), or leave it empty for {own}"
    if not problems.require_pinned(key, image, fix):
        return
    reference = ImageReference.parse(image)
    name = repository.rsplit("/", 1)[-1]
    if reference.name.rsplit("/", 1)[-1] != name:
        problems.add(key, f"{image!r} is not {name}, the image {release} runs", fix)
    if not reference.tag:
        problems.add(key, f"{image!r} has a digest but no tag, so nothing shows which release it is", fix)
    elif reference.tag != tag:
        problems.add(key, f"{image!r} is tagged {reference.tag}, but {release} runs {tag}", fix)
    if not reference.digest:
        problems.add(key, f"{image!r} has no digest, and a digest is all an override adds", fix)


def validate_platform(platform: PlatformConfig, problems: Problems) -> None:
    for key, chart in platform.registry_charts().items():
        prefix = f"platform.{key}"
        # Not a pattern on the field: the program's own local chart (the slice controller's) is described by it too.
        validate_chart_reference(f"{prefix}.chart", chart.chart, problems)
        if key in CHARTS_TAGGED_WITHOUT_V and chart.version != chart.release:
            problems.add(
                f"{prefix}.version",
                f"{chart.version} has a leading v, but the {key} chart is published as {chart.release} only, and Helm "
                "pulls the version as that exact tag",
                f"write {chart.release}",
            )
        if chart.image:
            own = chart_own_image(key, chart)
            release = f"{key} {chart.version}"
            validate_release_image(f"{prefix}.image", chart.image, own.name, own.tag, release, problems)
    if platform.leader_worker_set.namespace != "lws-system":
        problems.add(
            "platform.leaderWorkerSet.namespace",
            "the LWS chart hard-codes its webhook service in lws-system",
            "set lws-system",
        )


def validate_queues(queues: QueuesConfig, problems: Problems) -> None:
    if not queues.namespaces:
        problems.add("queues.namespaces", "is empty", "list at least one workload namespace")
    if len(set(queues.namespaces)) != len(queues.namespaces):
        problems.add("queues.namespaces", "lists a namespace twice", "list each namespace once")
    # One WorkloadPriorityClass per name (cluster-scoped: a name is unique for its kind, kubernetes.io/docs/concepts/
    # overview/working-with-objects/names): two levels of one name would be two objects of one name, each of its value.
    named: dict[str, str] = {}
    for level, priority in queues.priority_classes.levels():
        if (other := named.setdefault(priority.name, level)) != level:
            problems.add(
                f"queues.priorityClasses.{level}.name",
                f"{priority.name!r} is also the {other} level's WorkloadPriorityClass, whose value differs",
                "give each level a WorkloadPriorityClass of its own name",
            )
    for (lower, low), (higher, high) in itertools.pairwise(queues.priority_classes.levels()):
        if low.value >= high.value:
            problems.add(
                f"queues.priorityClasses.{higher}.value",
                f"{high.value} is not above {lower} ({low.value}), so it could not preempt it",
                f"set a value above {low.value}",
            )


# --- What the Kueue objects derive from the TPU pools ------------------------------------


def cluster_quota(tpu: TpuConfig) -> dict[str, str]:
    """Nominal quota = what the TPU pools really hold (the reference used 999999). Held twice: derived here, so the
    program's queue holds it by construction; policy/tpu.py holds any ClusterQueue against the pools a stack has."""
    machine = tpu.machine
    return {
        topology.TPU_RESOURCE: str(tpu.total_chips),
        "cpu": str(machine.vcpus_per_host * tpu.total_nodes),
        "memory": f"{machine.memory_bytes_per_host * tpu.total_nodes // topology.GB}G",
    }


# --- Pod Security of the namespaces the stack makes (CIS GKE 4.2.1) -----------------------

# What each namespace the stack makes enforces: the strictest level of the Pod Security Standards
# (https://kubernetes.io/docs/concepts/security/pod-security-standards/) every pod created in it meets
# (tests/test_pod_security.py holds both halves: every pod meets it, and a baseline namespace holds a pod that
# restricted would refuse). The benchmark asks for baseline or stricter (POD_SECURITY_LEVELS, the weaker first):
# - The controllers' (JobSet, Kueue, LeaderWorkerSet, the slice controller): restricted. Each chart runs its
#   manager as non-root, under the RuntimeDefault seccomp profile, with every capability dropped and no privilege
#   escalation, on configMap, secret and emptyDir volumes (kubernetes-sigs/jobset v0.12.0 charts/jobset/values.yaml
#   controller.podSecurityContext and .securityContext; kubernetes-sigs/kueue v0.17.8 charts/kueue/values.yaml
#   controllerManager.manager.podSecurityContext and .containerSecurityContext; manifests/charts/slice-controller
#   templates/deployment.yaml). LeaderWorkerSet v0.10.0 sets no seccomp profile (charts/lws/values.yaml
#   podSecurityContext: runAsNonRoot only), so its release's values add RuntimeDefault
#   (manifests/charts/lws-values.yaml).
# - The workloads' (queues.namespaces: serving, the slice checks, `make bench`; saxml.namespace): baseline. The
#   vLLM, JAX and Sax images run as root and keep the runtime's default capabilities less NET_RAW (the checkov
#   skips CKV_K8S_23 and CKV_K8S_37 on them say why), and the llm-d router's endpoint picker sets no security
#   context at all (llm-d/llm-d-router v0.10.0 config/charts/routerlib/templates/_deployment.yaml).
# - The one exception: the namespace of a node agent whose pods must act on their node, the node audit logging's
#   (CIS GKE 5.7.2, manifests/operations/node-audit-logging.yaml), enforces privileged, the level that admits its
#   privileged setup container and the node's PID namespace, network and host paths its pods use (baseline refuses
#   each). Nothing else runs there, and the stack makes no other privileged namespace (policy/namespaces.py).
POD_SECURITY_LEVELS = ("baseline", "restricted")
WORKLOADS_POD_SECURITY, CONTROLLERS_POD_SECURITY = POD_SECURITY_LEVELS
NODE_AGENTS_POD_SECURITY = "privileged"


def pod_security_version(cluster: ClusterConfig) -> str:
    """The Pod Security version the namespaces enforce: the minor of ``cluster.version`` (``v1.36``).

    Pinned rather than ``latest``: the control plane upgrades itself on its release channel, and with ``latest``
    an upgrade that tightened a level would refuse a running workload's next pod with no change to the stack. A
    pinned version moves only with ``cluster.version``, a reviewed change whose preview shows the labels change.
    An API server older than the pin evaluates its own newest rules instead (kubernetes/pod-security-admission
    v0.36.2 policy/registry.go, EvaluatePod), so a cluster made elsewhere that runs below the floor still enforces.
    """
    return f"v{GkeVersion.parse(cluster.version).minor_alias}"


def release_namespaces(platform: PlatformConfig, dynamic_slicing: bool) -> dict[str, str]:
    """The namespace of each Helm release of the platform this stack installs, by the release's key under
    ``platform``: the registry charts and, with dynamic slicing, the slice controller."""
    namespaces = {key: chart.namespace for key, chart in installed_charts(platform, dynamic_slicing).items()}
    if controller := installed_slice_controller(platform, dynamic_slicing):
        namespaces["sliceController"] = controller.namespace
    return namespaces


def validate_namespace_levels(claims: Sequence[tuple[str, str, str, str]], problems: Problems) -> None:
    """Each namespace enforces one Pod Security level: of ``claims`` (each namespace the stack makes, with the setting
    that names it, who makes it and the level it enforces there: StackConfig.namespace_claims), a release's or a
    workload's namespace that a node agent or a release of another level holds already is refused, under the setting
    that names it."""
    held: dict[str, tuple[str, str]] = {}
    for key, namespace, maker, level in claims:
        held_by, held_at = held.setdefault(namespace, (maker, level))
        if held_at != level:
            problems.add(
                key,
                f"{namespace!r} is also the namespace of {held_by}, which enforces Pod Security's {held_at} level: a "
                f"namespace enforces one level, {CONTROLLERS_POD_SECURITY} for the controllers, "
                f"{WORKLOADS_POD_SECURITY} for the workloads and {NODE_AGENTS_POD_SECURITY} for a node agent alone",
                "give it a namespace of its own",
            )
