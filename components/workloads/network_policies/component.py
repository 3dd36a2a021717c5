"""NamespaceDefaults: the default-deny-ingress NetworkPolicy of each workload namespace, applied after every
NetworkPolicy of the namespace that admits a sender, and deleted before them."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components.resources import kubernetes_object
from components.workloads.network_policies.objects import NamespaceDefaultsObjects


@dataclass(frozen=True)
class NamespaceDefaultsArgs:
    provider: k8s.Provider
    objects: NamespaceDefaultsObjects
    # Namespace -> what its default deny waits for: the Namespace, and every NetworkPolicy there that admits a
    # sender. A deny applied before them would cut the running pods off their senders until they came.
    after: dict[str, list[pulumi.Resource]]


class NamespaceDefaults(pulumi.ComponentResource):
    def __init__(self, name: str, args: NamespaceDefaultsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-gke:workloads:NamespaceDefaults", name, None, opts)
        for namespace, policy in args.objects.default_deny.items():
            kubernetes_object(
                f"{namespace}-{policy['metadata']['name']}",
                policy,
                pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=args.after[namespace]),
            )
        self.register_outputs({"namespaces": list(args.objects.default_deny)})
