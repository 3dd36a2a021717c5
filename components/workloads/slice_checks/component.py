"""The slice-check workloads: the JAX script ConfigMap and one JobSet per enabled check."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components.resources import REPLACE_ON_SPEC_CHANGE, kubernetes_object, waiting_for
from components.workloads.slice_checks.objects import SliceChecksObjects


@dataclass(frozen=True)
class SliceChecksArgs:
    provider: k8s.Provider
    objects: SliceChecksObjects
    namespace_ready: list[pulumi.Resource]  # the checks' namespace: all that their NetworkPolicies wait for
    # The slice controller's webhooks and the LocalQueue must exist before a JobSet is created,
    # or Kueue never sees it suspended and the slice controller never mutates its pods.
    after: list[pulumi.Resource]


class SliceChecks(pulumi.ComponentResource):
    def __init__(self, name: str, args: SliceChecksArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-gke:k8s:SliceChecks", name, None, opts)
        on_cluster = pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=args.after)
        script = kubernetes_object("check-script", args.objects.script_configmap, on_cluster)
        # The pods' own account (no token, no role): made before the JobSets, deleted after them.
        account = kubernetes_object("slice-check-account", args.objects.service_account, on_cluster)
        self.jobset_names = [jobset["metadata"]["name"] for jobset in args.objects.jobsets]
        self.network_policies: dict[str, list[pulumi.Resource]] = {}
        in_namespace = pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=args.namespace_ready)
        for jobset, policy in zip(args.objects.jobsets, args.objects.network_policies, strict=True):
            # Its pods start with their NetworkPolicy in place, and go before it.
            admitted = kubernetes_object(f"{policy['metadata']['name']}-network-policy", policy, in_namespace)
            self.network_policies.setdefault(policy["metadata"]["namespace"], []).append(admitted)
            after = waiting_for(on_cluster, script, account, admitted)
            kubernetes_object(
                jobset["metadata"]["name"], jobset, pulumi.ResourceOptions.merge(after, REPLACE_ON_SPEC_CHANGE)
            )
        self.register_outputs({"jobsetNames": self.jobset_names})
