"""The node audit logging: a DaemonSet that sets up each node's audit logging and ships its Linux audit records to
Cloud Logging (CIS GKE 5.7.2), with its namespace, service account and configuration."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.operations.node_audit_objects import NodeAuditObjects
from components.resources import kubernetes_object, owned, waiting_for


@dataclass(frozen=True)
class NodeAuditLoggingArgs:
    objects: NodeAuditObjects
    namespace_object: dict[str, Any]  # its Namespace, with its Pod Security labels (privileged)
    provider: k8s.Provider  # waits for the system pool (and the mirror's read grant): nothing else is needed


class NodeAuditLogging(pulumi.ComponentResource):
    """Pulumi waits for the DaemonSet's rollout: a pod ready on every node that matches (up to 10 minutes,
    pulumi-kubernetes' DaemonSet awaiter). A node whose setup fails (no cloud-audit-setup unit) or whose writes
    Cloud Logging refuses (Fluent Bit's health check) keeps its pod unready, and the `up` fails there."""

    def __init__(self, name: str, args: NodeAuditLoggingArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-gke:operations:NodeAuditLogging", name, None, opts)
        objects = args.objects
        on_cluster = pulumi.ResourceOptions(parent=self, provider=args.provider)
        # Labelled before anything is made in it, and deleted after.
        namespace = kubernetes_object("node-audit-namespace", args.namespace_object, on_cluster)
        in_namespace = waiting_for(on_cluster, namespace)
        account = kubernetes_object("node-audit-account", objects.service_account, in_namespace)
        config = kubernetes_object("node-audit-config", objects.config, in_namespace)
        daemonset = k8s.apps.v1.DaemonSet(
            "node-audit-logging",
            metadata=owned(objects.daemonset["metadata"]),
            spec=objects.daemonset["spec"],
            opts=waiting_for(in_namespace, account, config),
        )
        self.register_outputs({"daemonset": daemonset.metadata.name})
