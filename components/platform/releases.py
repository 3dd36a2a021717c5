"""In-cluster controllers as Helm releases: JobSet, Kueue, LeaderWorkerSet and the slice controller."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import yaml

from components.config_base import ImageReference, PullPath, merged
from components.manifests import MANIFESTS, load_document, load_documents
from components.platform.config import (
    CHART_IMAGE_VALUES,
    CHART_RELEASE_NAMES,
    HelmChartConfig,
    KueueControllerConfig,
    PlatformConfig,
    SliceControllerConfig,
    chart_image,
    installed_charts,
    installed_slice_controller,
    slice_controller_image,
)
from components.resources import owned

# Relative to the project folder, where Pulumi runs the program (keeps renders machine-independent).
SLICE_CONTROLLER_CHART = "./manifests/charts/slice-controller"

# Helm waits for the release's workloads (and so its webhooks) to be ready, up to this long; a release Helm cannot
# judge is waited for as long by a ReadyGate (components/platform/gates.py).
RELEASE_TIMEOUT_SECONDS = 600


@dataclass(frozen=True)
class PlatformArgs:
    provider: k8s.Provider
    platform: PlatformConfig  # nothing installed with platform.install false (installed elsewhere)
    dynamic_slicing: bool  # Kueue, LeaderWorkerSet and the slice controller besides JobSet (installed_charts)
    webhook_namespaces: list[str]  # the only namespaces the slice controller's and Kueue's pod webhooks see
    pull_path: PullPath  # where the nodes pull each image from (images.mirror, or the pull-through repositories)
    # Namespace name -> its object (Pod Security labels): the namespace of every release above
    namespaces: dict[str, dict[str, Any]]
    # What admits the control plane to the releases' webhooks and aggregated APIs (the stack's firewall rule; none on
    # a cluster made elsewhere): every release waits for it, and `pulumi destroy` uninstalls them before it goes.
    control_plane_access: list[pulumi.Resource] = field(default_factory=list)


class ClusterPlatform(pulumi.ComponentResource):
    def __init__(self, name: str, args: PlatformArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-gke:k8s:ClusterPlatform", name, None, opts)
        self._provider = args.provider
        self._control_plane_access = args.control_plane_access
        # Each release's namespace with its Pod Security labels, before the release. A patch, applied by server-side
        # apply, rather than a Namespace resource: on a running stack Helm made these namespaces (create_namespace,
        # before they carried labels), and the provider creates a resource client-side since 4.29.0, so a Namespace
        # resource would fail there with AlreadyExists (pulumi/pulumi-kubernetes CHANGELOG.md 4.29.0, #2926;
        # provider/pkg/await/await.go at v4.32.0: only a Patch resource, or the provider-wide upsertExistingObjects,
        # goes through an apply on create). The apply labels an existing namespace in place and makes a missing one (a
        # new stack's). Deleting the patch gives its fields up and leaves the namespace (ssa.Relinquish in the same
        # file), as Helm always left the namespaces it made: `pulumi destroy` uninstalls the release first, then removes
        # the labels.
        self._namespaces = {
            name: k8s.core.v1.NamespacePatch(
                name,
                metadata=owned(namespace["metadata"]),
                opts=pulumi.ResourceOptions(parent=self, provider=self._provider),
            )
            for name, namespace in args.namespaces.items()
        }
        self.release_versions: dict[str, str] = {}  # release name -> chart version
        # Each registry chart's own settings, which chart_values lays its controller image over: LeaderWorkerSet's pod
        # security context is manifests/charts/lws-values.yaml.
        settings: dict[str, dict[str, Any]] = {
            "jobset": {},
            "kueue": kueue_values(args.platform.kueue_controller, args.webhook_namespaces),
            "leaderWorkerSet": load_document("charts/lws-values.yaml"),
        }
        releases = {
            key: self._release(CHART_RELEASE_NAMES[key], chart, chart_values(key, chart, args.pull_path, settings[key]))
            for key, chart in installed_charts(args.platform, args.dynamic_slicing).items()
        }
        self.jobset, self.kueue, self.leader_worker_set = (releases.get(key) for key in settings)
        self.slice_controller: k8s.helm.v3.Release | None = None
        if controller := installed_slice_controller(args.platform, args.dynamic_slicing):
            (chart,) = load_documents("charts/slice-controller/Chart.yaml")
            # Its webhooks mutate Jobs, JobSets and LWS for Kueue: those controllers come first.
            self.slice_controller = self._release(
                "slice-controller",
                HelmChartConfig(
                    chart=SLICE_CONTROLLER_CHART,
                    version=str(chart["version"]),
                    namespace=controller.namespace,
                ),
                slice_controller_values(controller, args.webhook_namespaces, args.pull_path),
                depends_on=list(releases.values()),
                # A Release of a local chart is diffed by its inputs only: the digest of the chart's
                # files makes a change to any template a change of the release, bumped or not.
                description=f"chart files sha256:{chart_digest(MANIFESTS.parent / SLICE_CONTROLLER_CHART)}",
            )
        self.register_outputs({"releaseVersions": self.release_versions})

    def _release(
        self,
        release_name: str,
        chart: HelmChartConfig,
        values: dict[str, Any],
        depends_on: list[pulumi.Resource] | None = None,
        description: str | None = None,
    ) -> k8s.helm.v3.Release:
        release = helm_release(
            release_name,
            release_name,
            chart,
            values,
            pulumi.ResourceOptions(
                parent=self,
                provider=self._provider,
                depends_on=[self._namespaces[chart.namespace], *self._control_plane_access, *(depends_on or [])],
            ),
            description=description,
        )
        self.release_versions[release_name] = chart.version
        return release


def helm_release(
    resource_name: str,
    release_name: str,
    chart: HelmChartConfig,
    values: dict[str, Any],
    opts: pulumi.ResourceOptions,
    description: str | None = None,
    helm_judges_readiness: bool = True,
) -> k8s.helm.v3.Release:
    """A pinned release that Helm rolls back on failure and waits for until its workloads are ready. Helm never
    makes its namespace (it would make it without the Pod Security labels): the program does.

    ``helm_judges_readiness=False``: a release whose workloads Helm would never call ready although they serve (the
    caller says why, and waits for what matters with a ReadyGate). Helm then neither waits nor rolls back, and its
    uninstall does not wait for the objects to go: the provider has Helm wait unless skipAwait, and wait on uninstall
    unless skipAwait and not atomic (pulumi/pulumi-kubernetes v4.32.0 provider/pkg/provider/helm_release.go), and
    Helm waits whenever atomic (helm/helm v3.18.6 pkg/action/install.go, upgrade.go)."""
    return k8s.helm.v3.Release(
        resource_name,
        name=release_name,
        chart=chart.chart,
        version=chart.version,
        namespace=chart.namespace,
        create_namespace=False,
        values=values,
        atomic=helm_judges_readiness,
        skip_await=None if helm_judges_readiness else True,
        cleanup_on_fail=True,
        timeout=RELEASE_TIMEOUT_SECONDS,
        description=description,
        opts=opts,
    )


def chart_values(key: str, chart: HelmChartConfig, pull_path: PullPath, values: dict[str, Any]) -> dict[str, Any]:
    """A registry chart's release values: ``values`` (the release's own settings) with its controller image laid over
    them where the chart reads it, written out even when it is the chart's own: the release's inputs then show the
    image (the policy pack and reviews read it), the pull path (a mirror or a pull-through repository) replaces its
    registry, and a digest rides in the tag (CHART_IMAGE_VALUES says why)."""
    image = ImageReference.parse(pull_path.image(chart_image(key, chart)))
    image_values: dict[str, Any] = {"repository": image.name, "tag": image.tag_and_digest.removeprefix(":")}
    for part in reversed(CHART_IMAGE_VALUES[key]):
        image_values = {part: image_values}
    return merged(values, image_values)


def kueue_values(controller: KueueControllerConfig, workload_namespaces: list[str]) -> dict[str, Any]:
    """The Kueue release's own settings (chart_values adds its image): its resources, and its Configuration
    (manifests/kueue/controller-config.yaml) managing the pods of the workload namespaces only.

    With the `pod` integration on (Kueue manages a LeaderWorkerSet's pods through it), Kueue's chart registers its pod
    webhook with failurePolicy Fail on every namespace but kube-system and its own, unless the Configuration names
    the managed namespaces (kubernetes-sigs/kueue v0.17.8 charts/kueue/templates/webhook/manifests.yaml, `mpod`).
    Without the selector, a Kueue outage (its node drained, the system pool replaced) refuses every pod create in
    the cluster: GKE's own namespaces, the other controllers', the node agents'. The selector also keeps Kueue from
    managing any pod outside them, labelled or not (Kueue's Configuration, managedJobsNamespaceSelector)."""
    (configuration,) = load_documents("kueue/controller-config.yaml")
    configuration["managedJobsNamespaceSelector"] = {
        "matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "In", "values": sorted(workload_namespaces)}
        ]
    }
    return {
        "controllerManager": {
            "replicas": controller.replicas,
            "manager": {"resources": controller.model_dump(include={"requests", "limits"})},
            "podDisruptionBudget": {"enabled": controller.replicas > 1, "minAvailable": 1},
        },
        "managerConfig": {"controllerManagerConfigYaml": yaml.safe_dump(configuration, sort_keys=False)},
    }


def chart_digest(root: Path) -> str:
    """sha256 of every file of a local chart directory, their names included."""
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def slice_controller_values(
    controller: SliceControllerConfig, webhook_namespaces: list[str], pull_path: PullPath
) -> dict[str, Any]:
    image = ImageReference.parse(pull_path.image(slice_controller_image(controller)))
    return {
        # The program makes the namespace, with its Pod Security labels; the chart must not own it as well.
        "createNamespace": False,
        "replicas": controller.replicas,
        "webhookNamespaces": list(webhook_namespaces),
        "image": {"repository": image.name, "tag": image.tag, "digest": image.digest},
    }
