"""The cluster and its node pools as the CIS GKE Benchmark v1.9.0 asks, where no scanner's check can
read them (policy/cis.yaml says which control each holds).

checkov's Google Cloud checks hold most of the cluster's settings on a Terraform plan of the render
(tests/test_security_checkov.py); these are the ones it has no check for, or none that reads what the
program sends: the dataplane that enforces NetworkPolicy, Workload Identity, the security posture, the
node image, the nodes' service account and, on a production stack, the key of their boot disks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from components.gcp.config import UNHARDENED_BOOT, NodeBoot
from components.stack import PRODUCTION_OUTPUT
from policy.resources import ROOT_STACK, Resource, Violation, get, is_unknown, mapping_of
from policy.tpu import NODE_POOL, is_tpu_pool

CLUSTER = "gcp:container/cluster:Cluster"
# In a cluster on GKE Dataplane V2, NetworkPolicy is always enforced (CIS GKE 4.3.1; GKE's concept page
# cloud.google.com/kubernetes-engine/docs/concepts/dataplane-v2, "GKE Dataplane V2 and NetworkPolicy").
DATAPLANE_V2 = "ADVANCED_DATAPATH"
NODE_IMAGE = "COS_CONTAINERD"
DEFAULT_COMPUTE_ACCOUNT_SUFFIX = "-compute@developer.gserviceaccount.com"


def cluster_problems(resource_type: str, name: str, props: Mapping[str, Any]) -> list[str]:
    if resource_type != CLUSTER:
        return []
    problems = []
    datapath = get(props, "datapathProvider", None, owner=name)
    if datapath != DATAPLANE_V2:
        problems.append(
            f"cluster {name} has datapathProvider {datapath or 'unset'}, not {DATAPLANE_V2}: without GKE Dataplane V2 "
            "nothing enforces a NetworkPolicy (CIS GKE 4.3.1)"
        )
    if not get(props, "workloadIdentityConfig.workloadPool", None, owner=name):
        problems.append(
            f"cluster {name} has no Workload Identity pool: pods would reach Google Cloud as the node's service "
            "account (CIS GKE 5.2.2)"
        )
    if get(props, "securityPostureConfig.mode", None, owner=name) == "DISABLED":
        problems.append(f"cluster {name} turns the security posture off: keep GKE's scanning on (CIS GKE 5.10.4)")
    return problems + _node_problems(resource_type, name, props)


def node_pool_problems(resource_type: str, name: str, props: Mapping[str, Any]) -> list[str]:
    return _node_problems(resource_type, name, props) if resource_type == NODE_POOL else []


def _pool_label(resource_type: str, name: str) -> str:
    return f"cluster {name} (its default node pool)" if resource_type == CLUSTER else f"node pool {name}"


def _node_problems(resource_type: str, name: str, props: Mapping[str, Any]) -> list[str]:
    label = _pool_label(resource_type, name)
    node_config = mapping_of(props, "nodeConfig", owner=name)
    problems = []
    # An email known only after apply comes from an account the stack creates: the Compute Engine
    # default account exists already, so its email would be known at preview.
    account = node_config.get("serviceAccount")
    if not is_unknown(account) and (
        not account or account == "default" or str(account).endswith(DEFAULT_COMPUTE_ACCOUNT_SUFFIX)
    ):
        problems.append(
            f"{label} runs as the Compute Engine default service account ({account or 'serviceAccount unset'}): "
            "give it the cluster's own node account (CIS GKE 5.2.1)"
        )
    image = get(node_config, "imageType", None, owner=name)
    if image is not None and str(image).upper() != NODE_IMAGE:
        problems.append(f"{label} runs node image {image}, not {NODE_IMAGE} (CIS GKE 5.5.1)")
    return problems


# --- Production: every node boots from a disk encrypted by the project's key (CIS GKE 5.9.2) -------------------
# Held twice, written once: the preview refuses a production stack without cluster.bootDiskEncryptionKey, the key that
# fixes it; this rule holds every boot disk the stack registers, which no checkov check reads (boot_disk_kms_key).


def is_production(resources: Sequence[Resource]) -> bool:
    """Whether the stack is a production one, as its program decided: the ``production`` output it exports (the
    setting as validated, components/stack.py PRODUCTION_OUTPUT), never a guess from the stack's name. A stack that
    exports none is not one: the program's default."""
    return any(get(r.props, PRODUCTION_OUTPUT, False, owner=r.name) is True for r in resources if r.type == ROOT_STACK)


def node_boot(name: str, props: Mapping[str, Any]) -> NodeBoot:
    """How a node pool's (or the cluster's first default pool's) nodes boot, read from the resource."""
    key = get(props, "nodeConfig.bootDiskKmsKey", None, owner=name)
    secure = get(props, "nodeConfig.shieldedInstanceConfig.enableSecureBoot", False, owner=name)
    return NodeBoot(str(key or ""), secure is True)


def unencrypted_boot_disk_violations(resources: Sequence[Resource]) -> list[Violation]:
    """On a production stack, each node pool, or the cluster's first default pool, whose boot disks no Cloud KMS key
    of the project's encrypts; but a TPU pool that boots as every pool was made before boot hardening (neither key nor
    secure boot: tpu.pools[].hardenedBoot false, which the preview warns of while a running stack replaces its cubes
    one per `up`)."""
    if not is_production(resources):
        return []
    return [
        Violation(
            f"{_pool_label(resource.type, resource.name)} boots from disks only Google's key encrypts on a production stack: set "
            "cluster.bootDiskEncryptionKey to a Cloud KMS key of the project's (CIS GKE 5.9.2)",
            resource.urn,
        )
        for resource in resources
        if resource.type in (CLUSTER, NODE_POOL)
        and not (boot := node_boot(resource.name, resource.props)).boot_disk_key
        # but a TPU pool that boots as it was made before boot hardening
        and not (boot == UNHARDENED_BOOT and is_tpu_pool(resource.type, resource.name, resource.props))
    ]
