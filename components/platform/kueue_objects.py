"""The Kueue objects of the dynamic-slicing queue, built from manifests/kueue/ and a KueueInput.

Pure: returns Kubernetes objects as dicts, so tests validate them against the CRD schemas.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from components.manifests import by_kind, load_documents
from components.platform.config import KueueInput
from components.tpu.topology import ACCELERATOR_NODE_LABEL

# What a workload carries so Kueue queues and orders it.
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"

QUEUE_FILE = "kueue/dynamic-slicing-queue.yaml"
PRIORITY_CLASSES_FILE = "kueue/workload-priority-classes.yaml"


@dataclass(frozen=True)
class KueueObjects:
    queue_objects: list[dict[str, Any]]  # Topology, ResourceFlavor, AdmissionCheck, ClusterQueue, LocalQueues
    priority_classes: list[dict[str, Any]]  # WorkloadPriorityClasses, lowest first

    @property
    def all(self) -> list[dict[str, Any]]:
        return [*self.queue_objects, *self.priority_classes]


def kueue_objects(spec: KueueInput) -> KueueObjects:
    return KueueObjects(queue_objects(spec), priority_class_objects(spec))


def queue_objects(spec: KueueInput) -> list[dict[str, Any]]:
    documents = load_documents(QUEUE_FILE)

    topology_object = by_kind(documents, "Topology")
    topology_object["metadata"]["name"] = spec.topology_name
    topology_object["spec"]["levels"] = [{"nodeLabel": label} for label in spec.levels]

    flavor = by_kind(documents, "ResourceFlavor")
    flavor["metadata"]["name"] = spec.resource_flavor_name
    flavor["spec"]["nodeLabels"] = {ACCELERATOR_NODE_LABEL: spec.accelerator_label}
    flavor["spec"]["topologyName"] = spec.topology_name

    check = by_kind(documents, "AdmissionCheck")
    check["metadata"]["name"] = spec.admission_check_name

    cluster_queue = by_kind(documents, "ClusterQueue")
    cluster_queue["metadata"]["name"] = spec.cluster_queue_name
    cluster_queue["spec"]["admissionChecksStrategy"]["admissionChecks"] = [{"name": spec.admission_check_name}]
    (group,) = cluster_queue["spec"]["resourceGroups"]
    quota = dict(spec.quota)
    group["flavors"] = [
        {
            "name": spec.resource_flavor_name,
            "resources": [
                {"name": resource, "nominalQuota": quota[resource]} for resource in group["coveredResources"]
            ],
        }
    ]

    local_queue_base = by_kind(documents, "LocalQueue")
    local_queues = [
        {
            **local_queue_base,
            "metadata": {"name": spec.local_queue_name, "namespace": namespace},
            "spec": {"clusterQueue": spec.cluster_queue_name},
        }
        for namespace in spec.namespaces
    ]

    return [topology_object, flavor, check, cluster_queue, *local_queues]


def priority_class_objects(spec: KueueInput) -> list[dict[str, Any]]:
    documents = load_documents(PRIORITY_CLASSES_FILE)
    for document, (name, value) in zip(documents, spec.priority_classes, strict=True):
        document["metadata"]["name"] = name
        document["value"] = value
    return documents
