"""TPU capacity: Kueue never promises more chips than the pools hold. Machine facts come from the program's own
catalog (components/tpu/topology.py).

Held twice, written once: the program derives its ClusterQueue's quota from the pools it makes
(components/platform/config.py, cluster_quota); this rule holds any ClusterQueue a stack registers against the pools
it registers, and those made elsewhere that the policy config counts (a stack on an existing cluster).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from components.config_base import parse_quantity
from components.tpu.topology import MACHINE_CATALOG, TPU_RESOURCE
from policy.resources import Resource, Violation, get, kubernetes_objects, list_of, mapping_of

NODE_POOL = "gcp:container/nodePool:NodePool"
# Policy config: chips of TPU pools made outside the stack (a stack deployed onto an existing cluster).
EXTERNAL_CHIPS = "externalTpuChips"
# TPU VM families GKE names; a pool of one the catalog does not know is still a TPU pool.
TPU_MACHINE_PREFIXES = ("tpu", "ct")


def machine_type(name: str, props: Mapping[str, Any]) -> str:
    return str(get(props, "nodeConfig.machineType", "", owner=name))


def is_tpu_pool(resource_type: str, name: str, props: Mapping[str, Any]) -> bool:
    if resource_type != NODE_POOL:
        return False
    machine = machine_type(name, props)
    return machine in MACHINE_CATALOG or machine.startswith(TPU_MACHINE_PREFIXES)


def pool_chips(resource: Resource) -> int:
    """Chips a TPU pool holds at most: its nodes (the autoscaling maximum if it scales) x chips per host. Each count
    but totalMaxNodeCount is per zone of the pool's nodeLocations (pulumi-gcp container.NodePool: initialNodeCount "in
    regional or multi-zonal clusters, ... the number of nodes per zone"; nodeCount, per instance group: one a zone)."""
    name, props = resource.name, resource.props
    if (machine := MACHINE_CATALOG.get(machine_type(name, props))) is None:
        raise ValueError(f"TPU node pool {name} uses {machine_type(name, props)!r}, not in the catalog")
    zones = max(1, len(list_of(props, "nodeLocations", owner=name)))
    if autoscaling := mapping_of(props, "autoscaling", owner=name):
        total = get(autoscaling, "totalMaxNodeCount", None, owner=name)
        nodes = total if total is not None else get(autoscaling, "maxNodeCount", 0, owner=name) * zones
    else:
        count = get(props, "nodeCount", None, owner=name)
        nodes = (count if count is not None else get(props, "initialNodeCount", 0, owner=name)) * zones
    return int(nodes) * machine.chips_per_host


def queue_tpu_quota(body: Mapping[str, Any], owner: str) -> int:
    """google.com/tpu nominal quota of a ClusterQueue, summed over its resource groups and flavors."""
    total = 0.0
    for group in list_of(body, "spec.resourceGroups", owner=owner):
        for flavor in list_of(group, "flavors", owner=owner):
            for item in list_of(flavor, "resources", owner=owner):
                if get(item, "name", owner=owner) == TPU_RESOURCE:
                    total += parse_quantity(str(get(item, "nominalQuota", "0", owner=owner)))
    return int(total)


def quota_violations(resources: Sequence[Resource], external_chips: int = 0) -> list[Violation]:
    """Each ClusterQueue's TPU quota, and their sum, against the chips of every TPU pool of the stack,
    plus ``external_chips`` of pools the stack does not make (the policy config's externalTpuChips).

    A ClusterQueue may arrive twice, as its own resource (a real engine) and inside the ConfigGroup
    that declares it (its inputs, as the offline mocks record them); it counts once, by name, with
    the larger quota if the two differ.
    """
    pools = [r for r in resources if is_tpu_pool(r.type, r.name, r.props)]
    queues: dict[str, tuple[int, str, str]] = {}  # name -> (quota, label, urn)
    problems: list[Violation] = []
    for resource in resources:
        for obj in kubernetes_objects(resource.type, resource.name, resource.props):
            if obj.kind != "ClusterQueue" or obj.api_group != "kueue.x-k8s.io":
                continue
            queue_name = str(mapping_of(obj.body, "metadata", owner=resource.name).get("name", resource.name))
            try:
                quota = queue_tpu_quota(obj.body, resource.name)
            except ValueError as error:
                problems.append(Violation(f"ClusterQueue {obj.label}: {error}", resource.urn))
                continue
            if queue_name not in queues or quota > queues[queue_name][0]:  # two views of one queue: the larger counts
                queues[queue_name] = (quota, obj.label, resource.urn)
    claimed = {name: entry for name, entry in queues.items() if entry[0] > 0}
    if not claimed:
        return problems
    try:
        chips = sum(pool_chips(p) for p in pools) + external_chips
    except ValueError as error:
        return [*problems, Violation(f"{error}: the TPU quota of the ClusterQueues cannot be checked")]
    parts = [f"{p.name} {pool_chips(p)}" for p in pools]
    if external_chips:
        parts.append(f"{EXTERNAL_CHIPS} {external_chips}")
    summary = ", ".join(parts) or (
        f"no TPU node pool in the stack; if its pools are made elsewhere, give their chips as {EXTERNAL_CHIPS} "
        "in the policy config"
    )
    for quota, label, urn in claimed.values():
        if quota > chips:
            problems.append(
                Violation(
                    f"ClusterQueue {label} promises {quota} {TPU_RESOURCE} but the TPU pools hold {chips} chips "
                    f"({summary}): Kueue would admit workloads that can never be scheduled",
                    urn,
                )
            )
    total = sum(quota for quota, _, _ in claimed.values())
    if len(claimed) > 1 and total > chips and not any(q > chips for q, _, _ in claimed.values()):
        names = ", ".join(label for _, label, _ in claimed.values())
        problems.append(
            Violation(
                f"ClusterQueues {names} together promise {total} {TPU_RESOURCE} but the TPU pools hold {chips} chips"
            )
        )
    return problems
