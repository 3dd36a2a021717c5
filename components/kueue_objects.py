"""The Kueue objects of the dynamic-slicing queue, built from manifests/kueue/ and the config.

Pure: returns Kubernetes objects as dicts, so tests validate them against the CRD schemas.
"""

from __future__ import annotations

from typing import Any

from components import topology
from components.manifests import by_kind, load_documents
from components.stack_config import StackConfig

SLICE_ADMISSION_CONTROLLER = "accelerator.gke.io/slice"


def cluster_quota(config: StackConfig) -> dict[str, str]:
    """Nominal quota = what the TPU pools really hold (the reference used 999999)."""
    machine = config.machine
    nodes = sum(pool.node_count for pool in config.tpu.pools)
    return {
        "google.com/tpu": str(config.total_tpu_chips),
        "cpu": str(machine.vcpus_per_host * nodes),
        "memory": f"{machine.memory_bytes_per_host * nodes // topology.GB}G",
    }


def queue_objects(config: StackConfig) -> list[dict[str, Any]]:
    queues = config.queues
    documents = load_documents("kueue/dynamic-slicing-queue.yaml")

    topology_object = by_kind(documents, "Topology")
    topology_object["metadata"]["name"] = queues.topology_name
    topology_object["spec"]["levels"] = [
        {"nodeLabel": label} for label in topology.kueue_topology_levels(config.slice_shapes)
    ]

    flavor = by_kind(documents, "ResourceFlavor")
    flavor["metadata"]["name"] = queues.resource_flavor_name
    flavor["spec"]["nodeLabels"] = {"cloud.google.com/gke-tpu-accelerator": config.machine.accelerator_label}
    flavor["spec"]["topologyName"] = queues.topology_name

    check = by_kind(documents, "AdmissionCheck")
    check["metadata"]["name"] = queues.admission_check_name

    cluster_queue = by_kind(documents, "ClusterQueue")
    cluster_queue["metadata"]["name"] = queues.cluster_queue_name
    cluster_queue["spec"]["admissionChecksStrategy"]["admissionChecks"] = [{"name": queues.admission_check_name}]
    (group,) = cluster_queue["spec"]["resourceGroups"]
    quota = cluster_quota(config)
    group["flavors"] = [
        {
            "name": queues.resource_flavor_name,
            "resources": [{"name": resource, "nominalQuota": quota[resource]} for resource in group["coveredResources"]],
        }
    ]

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


def priority_class_objects(config: StackConfig) -> list[dict[str, Any]]:
    documents = load_documents("kueue/workload-priority-classes.yaml")
    classes = config.queues.priority_classes
    for document, level in zip(documents, (classes.low, classes.medium, classes.high)):
        document["metadata"]["name"] = level.name
        document["value"] = level.value
    return documents
