"""The cluster and its node pools as the CIS GKE Benchmark v1.9.0 asks, where no scanner's check can
read them (the table "Measured against the CIS GKE Benchmark" of docs/cis-benchmark.md says which control each holds).

checkov's Google Cloud checks hold most of the cluster's settings on a Terraform plan of the render
(tests/test_security_checkov.py); these are the ones it has no check for, or none that reads what the
program sends: the dataplane that enforces NetworkPolicy, Workload Identity, the security posture, the
node image, the nodes' service account and, on a production stack, the key of their boot disks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policy.resources import config_block, get, is_unknown, mapping_of

CLUSTER = "gcp:container/cluster:Cluster"
NODE_POOL = "gcp:container/nodePool:NodePool"
# In a cluster on GKE Dataplane V2, NetworkPolicy is always enforced (CIS GKE 4.3.1; GKE's concept page
# cloud.google.com/kubernetes-engine/docs/concepts/dataplane-v2, "GKE Dataplane V2 and NetworkPolicy").
DATAPLANE_V2 = "ADVANCED_DATAPATH"
NODE_IMAGE = "COS_CONTAINERD"
DEFAULT_COMPUTE_ACCOUNT_SUFFIX = "-compute@developer.gserviceaccount.com"
PROGRAM_CONFIG_TPU = "tpu-dynamic-slicing:tpu"  # the stack file's tpu block (JSON text)


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
    return problems + _node_problems(f"cluster {name} (its default node pool)", name, props)


def node_pool_problems(resource_type: str, name: str, props: Mapping[str, Any]) -> list[str]:
    if resource_type != NODE_POOL:
        return []
    return _node_problems(f"node pool {name}", name, props)


def _node_problems(label: str, name: str, props: Mapping[str, Any]) -> list[str]:
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


# --- Production: every node boots from a disk encrypted by the project's key ------------------------------------


def pools_kept_unhardened(program_config: Mapping[str, Any]) -> set[str]:
    """The TPU pools the stack file keeps booting as they were made before boot hardening (tpu.pools[].hardenedBoot
    false), while a running stack replaces its cubes one per `up`: the preview warns of each."""
    pools = config_block(program_config, PROGRAM_CONFIG_TPU).get("pools")
    return {
        str(pool.get("name"))
        for pool in pools or []
        if isinstance(pool, Mapping) and str(pool.get("hardenedBoot")).strip().lower() == "false"
    }


def boot_disk_problems(
    resource_type: str, name: str, props: Mapping[str, Any], production: bool, kept_unhardened: set[str]
) -> list[str]:
    """On a production stack, a node pool, or the cluster's first default pool, whose boot disks no Cloud KMS key of
    the project's encrypts (CIS GKE 5.9.2); checkov has no check of ``boot_disk_kms_key``."""
    if not production or resource_type not in (CLUSTER, NODE_POOL):
        return []
    if resource_type == NODE_POOL and str(get(props, "name", name, owner=name)) in kept_unhardened:
        return []
    if get(props, "nodeConfig.bootDiskKmsKey", None, owner=name):
        return []
    label = f"cluster {name} (its default node pool)" if resource_type == CLUSTER else f"node pool {name}"
    return [
        f"{label} boots from disks only Google's key encrypts on a production stack: set cluster.bootDiskEncryptionKey "
        "to a Cloud KMS key of the project's (CIS GKE 5.9.2)"
    ]
