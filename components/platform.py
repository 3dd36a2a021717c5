"""In-cluster controllers as Helm releases: JobSet, Kueue and LeaderWorkerSet."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s
import yaml

from components.manifests import load_documents
from components.stack_config import HelmChartConfig, KueueControllerConfig

# Helm waits for the release's workloads (and so its webhooks) to be ready, up to this long.
RELEASE_TIMEOUT_SECONDS = 600


@dataclass(frozen=True)
class PlatformArgs:
    provider: k8s.Provider
    jobset: HelmChartConfig
    kueue: HelmChartConfig | None  # None: this stack queues nothing (no dynamic slicing)
    kueue_controller: KueueControllerConfig
    leader_worker_set: HelmChartConfig | None


class ClusterPlatform(pulumi.ComponentResource):
    def __init__(self, name: str, args: PlatformArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-gke:k8s:ClusterPlatform", name, None, opts)
        self._provider = args.provider
        self.jobset = self._release("jobset", args.jobset, {})
        self.kueue = self._release("kueue", args.kueue, kueue_values(args.kueue_controller)) if args.kueue else None
        self.leader_worker_set = self._release("lws", args.leader_worker_set, {}) if args.leader_worker_set else None
        self.releases = [r for r in (self.jobset, self.kueue, self.leader_worker_set) if r is not None]
        self.release_versions = {
            release: chart.version
            for release, chart in (("jobset", args.jobset), ("kueue", args.kueue), ("lws", args.leader_worker_set))
            if chart is not None
        }
        self.register_outputs({"releaseVersions": self.release_versions})

    def _release(self, release_name: str, chart: HelmChartConfig, values: dict) -> k8s.helm.v3.Release:
        return k8s.helm.v3.Release(
            release_name,
            name=release_name,
            chart=chart.chart,
            version=chart.version,
            namespace=chart.namespace,
            create_namespace=True,
            values=values,
            atomic=True,
            cleanup_on_fail=True,
            timeout=RELEASE_TIMEOUT_SECONDS,
            opts=pulumi.ResourceOptions(parent=self, provider=self._provider),
        )


def kueue_values(controller: KueueControllerConfig) -> dict:
    (configuration,) = load_documents("kueue/controller-config.yaml")
    return {
        "controllerManager": {
            "replicas": controller.replicas,
            "manager": {
                "resources": {
                    "requests": {"cpu": controller.requests.cpu, "memory": controller.requests.memory},
                    "limits": {"cpu": controller.limits.cpu, "memory": controller.limits.memory},
                }
            },
            "podDisruptionBudget": {"enabled": controller.replicas > 1, "minAvailable": 1},
        },
        "managerConfig": {"controllerManagerConfigYaml": yaml.safe_dump(configuration, sort_keys=False)},
    }
