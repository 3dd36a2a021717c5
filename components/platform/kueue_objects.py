"""The Kueue objects of the dynamic-slicing queue, built from manifests/kueue/, the queues block and the TPU pools.

Pure: returns Kubernetes objects as dicts, so tests validate them against the CRD schemas.
"""

from __future__ import annotations

from typing import Any

from components.gcp.config import TpuConfig
from components.manifests import by_kind, load_documents
from components.platform.config import PriorityLevel, QueuesConfig, cluster_quota
from components.tpu.topology import ACCELERATOR_NODE_LABEL, kueue_topology_levels

# What a workload carries so Kueue queues and orders it.
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"


def queue_labels(queues: QueuesConfig, priority: PriorityLevel) -> dict[str, str]:
    """The labels that queue a workload in its namespace's LocalQueue at the priority level ``priority``."""
    return {QUEUE_LABEL: queues.local_queue_name, PRIORITY_LABEL: queues.priority_class(priority).name}


def kueue_objects(queues: QueuesConfig, tpu: TpuConfig) -> list[dict[str, Any]]:
    """The queue's objects (``queue_objects``), then its WorkloadPriorityClasses, lowest first."""
    priority_classes = load_documents("kueue/workload-priority-classes.yaml")
    for document, (_, priority) in zip(priority_classes, queues.priority_classes.levels(), strict=True):
        document["metadata"]["name"] = priority.name
        document["value"] = priority.value
    return [*queue_objects(queues, tpu), *priority_classes]


def queue_objects(queues: QueuesConfig, tpu: TpuConfig) -> list[dict[str, Any]]:
    """The queue's objects; the flavor selects the pools' accelerator, the quota is what the pools hold."""
    documents = load_documents("kueue/dynamic-slicing-queue.yaml")

    topology_object = by_kind(documents, "Topology")
    topology_object["metadata"]["name"] = queues.topology_name
    topology_object["spec"]["levels"] = [{"nodeLabel": label} for label in kueue_topology_levels()]

    flavor = by_kind(documents, "ResourceFlavor")
    flavor["metadata"]["name"] = queues.resource_flavor_name
    flavor["spec"]["nodeLabels"] = {ACCELERATOR_NODE_LABEL: tpu.machine.accelerator_label}
    flavor["spec"]["topologyName"] = queues.topology_name

    check = by_kind(documents, "AdmissionCheck")
    check["metadata"]["name"] = queues.admission_check_name

    cluster_queue = by_kind(documents, "ClusterQueue")
    cluster_queue["metadata"]["name"] = queues.cluster_queue_name
    cluster_queue["spec"]["admissionChecksStrategy"]["admissionChecks"] = [{"name": queues.admission_check_name}]
    (group,) = cluster_queue["spec"]["resourceGroups"]
    quota = cluster_quota(tpu)
    resources = [{"name": resource, "nominalQuota": quota[resource]} for resource in group["coveredResources"]]
    group["flavors"] = [{"name": queues.resource_flavor_name, "resources": resources}]

    local_queue_base = by_kind(documents, "LocalQueue")
    local_queues = [
        {
            **local_queue_base,
            "metadata": {"name": queues.local_queue_name, "namespace": namespace},
            "spec": {"clusterQueue": queues.cluster_queue_name},
        }
        for namespace in queues.namespaces
    ]

    return [topology_object, flavor, check, cluster_queue, *local_queues]
