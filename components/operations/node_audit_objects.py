"""The node audit logging as plain data (no Pulumi imports): its service account, the agent's configuration and the
DaemonSet, from manifests/operations/node-audit-logging.yaml (which says what each does, and where every fact of it
comes from), overlaid with what varies by stack. Its namespace, labelled for Pod Security (privileged), is one of the
stack's namespaces (components/platform/namespace_objects.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from components import manifests
from components.config_base import PullPath
from components.gcp.config import ClusterConfig
from components.operations.config import NODE_AUDIT_NAMESPACE, NodeAuditLoggingConfig

NODE_AUDIT_FILE = "operations/node-audit-logging.yaml"
SETUP_CONTAINER = "audit-setup"
AGENT_CONTAINER = "fluent-bit"
CONFIG_DIGEST_ANNOTATION = "node-audit-logging/config-sha256"


@dataclass(frozen=True)
class NodeAuditObjects:
    service_account: dict[str, Any]
    config: dict[str, Any]  # the ConfigMap of the agent's configuration
    daemonset: dict[str, Any]


def node_audit_objects(
    node_audit: NodeAuditLoggingConfig, cluster: ClusterConfig, location: str, pull_path: PullPath
) -> NodeAuditObjects:
    """The block's objects for the cluster in ``location`` (the k8s_node resource's labels), each image as the nodes
    pull it."""
    documents = manifests.load_documents(NODE_AUDIT_FILE, NODE_AUDIT_NAMESPACE)
    config = manifests.by_kind(documents, "ConfigMap")
    daemonset = manifests.by_kind(documents, "DaemonSet")
    template = daemonset["spec"]["template"]
    # A new configuration rolls the pods: Fluent Bit reads it at start only.
    manifests.mark_mounted_files(template, config["data"], CONFIG_DIGEST_ANNOTATION)
    pod = template["spec"]
    manifests.container(pod, SETUP_CONTAINER, key="initContainers")["image"] = pull_path.image(node_audit.setup_image)
    agent = manifests.container(pod, AGENT_CONTAINER)
    agent["image"] = pull_path.image(node_audit.image)
    manifests.set_env(agent, "CLUSTER_NAME", cluster.name)
    manifests.set_env(agent, "CLUSTER_LOCATION", location)
    return NodeAuditObjects(
        service_account=manifests.by_kind(documents, "ServiceAccount"),
        config=config,
        daemonset=daemonset,
    )
