"""Kueue queueing for TPU7x dynamic slicing: workload namespaces and the Kueue objects."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.resources import kubernetes_object, owned


@dataclass(frozen=True)
class QueuesArgs:
    provider: k8s.Provider
    kueue_release: pulumi.Resource | None  # serves the Kueue CRDs and webhooks; None: installed elsewhere
    namespaces: dict[str, dict[str, Any]]  # the workload namespaces by name, each with its Pod Security labels
    objects: list[dict[str, Any]]  # the Kueue objects of the queue (kueue_objects)


class KueueQueues(pulumi.ComponentResource):
    def __init__(self, name: str, args: QueuesArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-gke:k8s:KueueQueues", name, None, opts)
        on_cluster = pulumi.ResourceOptions(parent=self, provider=args.provider)
        # A change of a label updates the namespace in place: Pod Security admission evicts nothing, and holds
        # each pod to the new level when it is next created.
        self.namespaces = {
            name: kubernetes_object(name, namespace, on_cluster) for name, namespace in args.namespaces.items()
        }
        # Created only once the Kueue release is ready: its CRDs exist and its webhooks serve.
        after = [*([args.kueue_release] if args.kueue_release else []), *self.namespaces.values()]
        self.objects = k8s.yaml.v2.ConfigGroup(
            "kueue-objects",
            objs=[{**manifest, "metadata": owned(manifest["metadata"])} for manifest in args.objects],
            opts=pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=after),
        )
        self.register_outputs({"namespaces": list(self.namespaces)})
