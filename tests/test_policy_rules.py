"""The policy pack's policies (policy/pack.py, called as the SDK calls them: tests/policy_sdk.py) on the program as it
renders, and on broken copies of it.

Every committed stack runs once under the mocks (tests/conftest.run_stack), so the rules check the
resources the code registers today, not a saved copy, and the stack itself as a stack rule sees it (its outputs).
Each rule must pass on every stack, must have something to check in at least one of them (a rule that never sees its
target would pass for nothing), and must fire on a copy broken on purpose, naming the resource.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Callable
from typing import Any

import pulumi
import pytest

from components.gcp.config import UNHARDENED_BOOT
from components.stack import PRODUCTION_OUTPUT
from harness.mock_engine import ProgramRun, unwrap_secrets
from policy import (
    buckets,
    charts,
    endpoints,
    gke,
    iam,
    images,
    namespaces,
    network,
    rbac,
    service_accounts,
    tpu,
)
from policy.resources import ROOT_STACK, UNKNOWN, Resource, UnknownValue, Violation, get, kubernetes_objects
from tests.conftest import FIXTURE_STACK_NAMES, run_stack, stack_config, stack_values
from tests.policy_sdk import POLICIES, messages, reported
from tools.stack_file import PROJECT_NAME

STACKS = FIXTURE_STACK_NAMES
# The chips the tests' dev stack's TPU pools hold: what its ClusterQueue may promise, said from its config.
DEV_CHIPS = stack_config("dev").tpu.total_chips
SAXML_POOL = stack_config("saxml").tpu.pools[0].name
# The prod stack with its last TPU pool shrunk to 8 nodes: the chips its pools then hold.
PROD_TPU = stack_config("prod").tpu
PROD_FIRST_POOL = PROD_TPU.pools[0].name
PROD_SHRUNK_POOL = PROD_TPU.pools[-1]
PROD_SHRUNK_CHIPS = PROD_TPU.total_chips - (PROD_SHRUNK_POOL.node_count - 8) * PROD_TPU.machine.chips_per_host


def _engine_form(value: Any) -> Any:
    """Recorded inputs as an analyzer gets them: secrets as their values, unknowns as the sentinel."""
    if isinstance(value, dict):
        return {k: _engine_form(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_engine_form(v) for v in value]
    return UNKNOWN if isinstance(value, pulumi.output.Unknown) else value


def _as_resources(run: ProgramRun, stack: str) -> list[Resource]:
    """What the pack sees of a run: every resource's inputs, and the stack itself with its outputs."""
    root = Resource(ROOT_STACK, f"{PROJECT_NAME}-{stack}", _engine_form(run.raw_outputs), urn=f"urn:{ROOT_STACK}")
    return [root] + [
        Resource(r.type, r.name, _engine_form(unwrap_secrets(r.inputs)), r.protect, f"urn:{r.type}::{r.name}")
        for r in run.registrations
    ]


@functools.cache
def _rendered(stack: str) -> tuple[Resource, ...]:
    return tuple(_as_resources(run_stack(stack=stack), stack))


def rendered(stack: str) -> list[Resource]:
    """A fresh copy of the stack's resources, free to break."""
    return copy.deepcopy(list(_rendered(stack)))


@functools.cache
def production(stack: str) -> bool:
    """As the pack decides it: the production output of the stack's program (it only reads, so no copy)."""
    return gke.is_production(list(_rendered(stack)))


# What each rule looks at, so that a pass is not a pass over nothing.
TARGETS: dict[str, Callable[[Resource, str], bool]] = {
    "no-public-endpoints": lambda r, _s: r.type.endswith((":Service", ":Gateway")),
    "no-broad-project-roles": lambda r, _s: r.type == iam.PROJECT_IAM_MEMBER,
    "registry-access-read-only": lambda r, _s: (
        r.type in (iam.PROJECT_IAM_MEMBER, iam.REPOSITORY_IAM_MEMBER) and r.props.get("role") == iam.REGISTRY_READ_ROLE
    ),
    "container-images-pinned": lambda r, _s: "image" in json.dumps(r.props) and r.type.startswith("kubernetes:"),
    "buckets-uniform-and-not-public": lambda r, _s: r.type == buckets.BUCKET,
    "versioned-buckets-delete-old-versions": lambda r, _s: (
        r.type == buckets.BUCKET and bool((r.props.get("versioning") or {}).get("enabled"))
    ),
    "kueue-tpu-quota-within-pools": lambda r, _s: "ClusterQueue" in json.dumps(r.props),
    "helm-charts-pinned": lambda r, _s: r.type == "kubernetes:helm.sh/v3:Release",
    "pods-isolated-by-network-policy": lambda r, _s: bool(network.program_pod_templates([r])),
    "gke-cluster-hardened": lambda r, _s: r.type == gke.CLUSTER,
    "gke-nodes-hardened": lambda r, _s: r.type == gke.NODE_POOL,
    "boot-disks-encrypted-in-production": lambda r, s: production(s) and r.type in (gke.CLUSTER, gke.NODE_POOL),
    "objects-in-own-namespaces": lambda r, _s: (
        '"namespace"' in json.dumps(r.props) and r.type.startswith("kubernetes:")
    ),
    "rbac-no-privileged-bindings": lambda r, _s: "RoleBinding" in r.type or "RoleBinding" in json.dumps(r.props),
    "rbac-least-privilege-roles": lambda r, _s: r.type.endswith((":Role", ":ClusterRole")),
    "namespaces-enforce-pod-security": lambda r, _s: r.type.endswith((":Namespace", ":NamespacePatch", ":Release")),
    "pods-own-service-account": lambda r, _s: (
        r.type.startswith("kubernetes:")
        and not r.type.startswith("kubernetes:helm.sh/")
        and "containers" in json.dumps(r.props)
    ),
}


def test_the_table_covers_every_policy_of_the_pack() -> None:
    assert set(TARGETS) == set(POLICIES)


@pytest.mark.parametrize("stack", STACKS)
@pytest.mark.parametrize("rule", sorted(POLICIES))
def test_every_rule_passes_on_every_stack(rule: str, stack: str) -> None:
    assert messages(rule, rendered(stack)) == []


@pytest.mark.parametrize("rule", sorted(POLICIES))
def test_every_rule_has_something_to_check(rule: str) -> None:
    seen = {s: [r.name for r in rendered(s) if TARGETS[rule](r, s)] for s in STACKS}
    assert any(seen.values()), f"{rule} finds nothing to check in any stack: {seen}"


def test_the_stacks_are_the_ones_the_rules_were_written_for() -> None:
    """The broken copies below start from these stacks: dev serves (Gateway, quota), saxml has an
    internal LoadBalancer Service, prod is the production stack (its program exports production: true)."""
    assert {"dev", "prod", "saxml"} <= set(STACKS)
    assert [production(s) for s in ("dev", "prod", "saxml")] == [False, True, False]


# --- Broken copies: each must make its rule fire, naming the resource -------------------------


def one(resources: list[Resource], name: str, type_suffix: str = "") -> Resource:
    (found,) = [r for r in resources if r.name == name and r.type.endswith(type_suffix)]
    return found


def set_path(props: Any, path: str, value: Any) -> None:
    *parents, leaf = path.split(".")
    for part in parents:
        props = props[int(part)] if isinstance(props, list) else props[part]
    if isinstance(props, list):
        props[int(leaf)] = value
    else:
        props[leaf] = value


def setting(name: str, path: str, value: Any, type_suffix: str = "") -> Callable[[list[Resource]], None]:
    return lambda resources: set_path(one(resources, name, type_suffix).props, path, value)


def dropping(name: str, path: str) -> Callable[[list[Resource]], None]:
    def drop(resources: list[Resource]) -> None:
        *parents, leaf = path.split(".")
        target: Any = one(resources, name).props
        for part in parents:
            target = target[part]
        del target[leaf]

    return drop


def adding(resource: Resource) -> Callable[[list[Resource]], None]:
    return lambda resources: resources.append(resource)


def cluster_queue(resources: list[Resource]) -> dict[str, Any]:
    (queue,) = [o for o in one(resources, "kueue-objects").props["objs"] if o["kind"] == "ClusterQueue"]
    return queue


def tpu_quota_entry(queue: dict[str, Any]) -> dict[str, Any]:
    (entry,) = [
        r
        for f in queue["spec"]["resourceGroups"][0]["flavors"]
        for r in f["resources"]
        if r["name"] == "google.com/tpu"
    ]
    return entry


def quota_of(value: str) -> Callable[[list[Resource]], None]:
    return lambda resources: tpu_quota_entry(cluster_queue(resources)).update(nominalQuota=value)


def queue_as_own_resource(quota: str) -> Callable[[list[Resource]], None]:
    """The ClusterQueue as a real engine shows it: a child resource of the ConfigGroup."""

    def add(resources: list[Resource]) -> None:
        queue = copy.deepcopy(cluster_queue(resources))
        tpu_quota_entry(queue)["nominalQuota"] = quota
        resources.append(Resource("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue", "cq", queue, urn="urn:cq"))

    return add


def shrink_pool(name: str, nodes: int) -> Callable[[list[Resource]], None]:
    return setting(name, "nodeCount", nodes, ":NodePool")


def marked_production(resources: list[Resource]) -> None:
    """The stack's program says production (its output) of a stack made without the production settings."""
    (root,) = [r for r in resources if r.type == ROOT_STACK]
    root.props[PRODUCTION_OUTPUT] = True  # type: ignore[index]


POD_SPEC = "spec.template.spec.containers.0.image"
JOBSET_IMAGE = "spec.replicatedJobs.0.template.spec.template.spec.containers.0.image"
SIDECAR = "spec.leaderWorkerTemplate.leaderTemplate.spec.initContainers.0.image"
EXTRA_POLICY = Resource(
    iam.PROJECT_IAM_POLICY,
    "project-policy",
    {"project": "my-tpu-project", "policyData": json.dumps({"bindings": [{"role": "roles/editor", "members": ["x"]}]})},
)
EXTRA_BINDING = Resource(
    iam.PROJECT_IAM_BINDING, "admins", {"project": "my-tpu-project", "role": "roles/storage.admin", "members": ["x"]}
)
REPOSITORY_POLICY = Resource(
    iam.REPOSITORY_IAM_POLICY,
    "mirror-policy",
    {
        "repository": "tpu-gke-mirror",
        "policyData": json.dumps(
            {"bindings": [{"role": "roles/artifactregistry.createOnPushWriter", "members": ["x"]}]}
        ),
    },
)
ADMIN_BINDING = Resource(
    "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding",
    "ops-admin",
    {
        "metadata": {"name": "ops-admin"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "Group", "name": "ops@example.com"}],
    },
)


def binding_subject(subject: str) -> Callable[[list[Resource]], None]:
    """The Kueue metrics reader bound, besides its scraper, to a built-in group of every caller."""

    def add(resources: list[Resource]) -> None:
        binding = one(resources, "kueue-metrics-clusterrolebinding").props
        binding["subjects"].append({"kind": "Group", "name": subject, "apiGroup": "rbac.authorization.k8s.io"})

    return add


def role_rule(name: str, rule: dict[str, Any]) -> Callable[[list[Resource]], None]:
    """A rule added, last, to a Role or ClusterRole of the stack."""
    return lambda resources: one(resources, name).props["rules"].append(rule)


POD_SECURITY_ENFORCE = "pod-security.kubernetes.io/enforce"


def enforce_label(name: str, type_suffix: str, level: str | None) -> Callable[[list[Resource]], None]:
    """A namespace's enforce label set to ``level``, or removed (None)."""

    def change(resources: list[Resource]) -> None:
        labels = one(resources, name, type_suffix).props["metadata"]["labels"]
        if level is None:
            del labels[POD_SECURITY_ENFORCE]
        else:
            labels[POD_SECURITY_ENFORCE] = level

    return change


UNLABELLED_NAMESPACES = Resource(
    "kubernetes:yaml/v2:ConfigGroup",
    "team-namespaces",
    {"objs": [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-c"}}]},
)
JOBSET_POD = "spec.replicatedJobs.0.template.spec.template.spec"
LWS_WORKER_POD = "spec.leaderWorkerTemplate.workerTemplate.spec"


def without_service_account(name: str, pod_path: str) -> Callable[[list[Resource]], None]:
    def drop(resources: list[Resource]) -> None:
        pod: Any = one(resources, name).props
        for part in pod_path.split("."):
            pod = pod[int(part)] if isinstance(pod, list) else pod[part]
        del pod["serviceAccountName"]

    return drop


SECRET_READER = Resource(
    "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole",
    "secret-reader",
    {
        "metadata": {"name": "secret-reader"},
        "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["list"]}],
    },
)
NETWORK_POLICY = ":NetworkPolicy"


def without_network_policies(*names: str) -> Callable[[list[Resource]], None]:
    def drop(resources: list[Resource]) -> None:
        gone = [r for r in resources if r.type.endswith(NETWORK_POLICY) and r.name in names]
        assert len(gone) == len(names), gone
        for resource in gone:
            resources.remove(resource)

    return drop


def network_policies(change: Callable[[dict[str, Any]], None]) -> Callable[[list[Resource]], None]:
    """``change`` applied to every NetworkPolicy of the stack."""

    def apply(resources: list[Resource]) -> None:
        for resource in resources:
            if resource.type.endswith(NETWORK_POLICY):
                change(resource.props)  # type: ignore[arg-type]

    return apply


PUBLIC_INGRESS = Resource(
    "kubernetes:networking.k8s.io/v1:Ingress", "web", {"metadata": {"name": "web"}, "spec": {"rules": []}}
)

# (rule, stack, breakage, policy config, resource the message must name, fragment it must say)
BROKEN = [
    ("no-public-endpoints", "dev", setting("inference-gateway", "spec.gatewayClassName", "gke-l7-global-external-managed"), {}, "inference-gateway", "internet-facing"),
    ("no-public-endpoints", "dev", setting("inference-gateway", "spec.gatewayClassName", "gke-l7-regional-external-managed"), {}, "inference-gateway", "internet-facing"),
    ("no-public-endpoints", "dev", setting("inference-gateway", "spec.gatewayClassName", "my-own-class"), {}, "inference-gateway", "not one of the internal"),
    ("no-public-endpoints", "saxml", dropping("http-load-balancer", "metadata.annotations"), {}, "http-load-balancer", "external IP"),
    ("no-public-endpoints", "saxml", setting("http-load-balancer", "metadata.annotations", {"networking.gke.io/load-balancer-type": "External"}), {}, "http-load-balancer", "external IP"),
    ("no-public-endpoints", "dev", adding(PUBLIC_INGRESS), {}, "web", "external load balancer"),
    ("no-broad-project-roles", "dev", setting("node-sa-container-defaultnodeserviceaccount", "role", "roles/owner"), {}, "node-sa-container-defaultnodeserviceaccount", "roles/owner"),
    ("no-broad-project-roles", "saxml", setting("node-sa-container-defaultnodeserviceaccount", "role", "roles/editor"), {}, "node-sa-container-defaultnodeserviceaccount", "roles/editor"),
    ("no-broad-project-roles", "dev", adding(EXTRA_BINDING), {}, "admins", "roles/storage.admin"),
    ("no-broad-project-roles", "dev", adding(EXTRA_POLICY), {}, "project-policy", "roles/editor"),
    ("registry-access-read-only", "dev", setting("node-sa-container-defaultnodeserviceaccount", "role", "roles/artifactregistry.writer"), {}, "node-sa-container-defaultnodeserviceaccount", "5.1.3"),
    ("registry-access-read-only", "dev", setting("node-sa-reader-docker-io", "role", "roles/artifactregistry.writer"), {}, "node-sa-reader-docker-io", "5.1.3"),
    ("registry-access-read-only", "prod", setting("node-sa-mirror-reader", "role", "roles/artifactregistry.repoAdmin"), {}, "node-sa-mirror-reader", "roles/artifactregistry.repoAdmin"),
    ("registry-access-read-only", "dev", adding(REPOSITORY_POLICY), {}, "mirror-policy", "roles/artifactregistry.createOnPushWriter"),
    ("container-images-pinned", "dev", setting("stage-model-weights", POD_SPEC, "docker.io/library/python:latest"), {}, "stage-model-weights", "'latest'"),
    ("container-images-pinned", "dev", setting("vllm-decode", SIDECAR, "ghcr.io/llm-d/llm-d-router-disagg-sidecar"), {}, "vllm-decode", "no tag"),
    ("container-images-pinned", "dev", setting("vllm-prefill", "spec.leaderWorkerTemplate.workerTemplate.spec.containers.0.image", "docker.io/vllm/vllm-tpu:nightly"), {}, "vllm-prefill", "'nightly'"),
    ("container-images-pinned", "dev", setting("subslice-check", JOBSET_IMAGE, "us-docker.pkg.dev/cloud-tpu-images/jax-ai-image/tpu:jax0.9"), {}, "subslice-check", "can move"),
    ("container-images-pinned", "saxml", setting("admin-server", POD_SPEC, "us-docker.pkg.dev/cloud-tpu-images/inference/sax-admin-server:latest"), {}, "admin-server", "'latest'"),
    ("container-images-pinned", "dev", setting("slice-controller", "values.image.tag", "latest"), {}, "slice-controller", "'latest'"),
    ("container-images-pinned", "dev", setting("router", "values.router.epp.image.tag", "main"), {}, "router", "'main'"),
    ("container-images-pinned", "dev", setting("lws", "values.image.manager.tag", "main"), {}, "lws", "'main'"),
    ("container-images-pinned", "dev", lambda _: None, {"requireDigests": True}, "vllm-prefill", "no digest"),
    ("container-images-pinned", "dev", setting("stage-model-weights", POD_SPEC, "docker.io/library/python:3.12.14-slim-bookworm"), {"requireDigests": True}, "stage-model-weights", "no digest"),
    ("container-images-pinned", "prod", lambda _: None, {"requireDigests": True}, "vllm-decode", "no digest"),
    ("container-images-pinned", "prod", lambda _: None, {"requireDigests": True}, "kueue", "no digest"),
    ("container-images-pinned", "saxml", lambda _: None, {"requireDigests": True}, "admin-server", "no digest"),
    ("buckets-uniform-and-not-public", "dev", setting("weights", "publicAccessPrevention", "inherited"), {}, "weights", "not enforced"),
    ("buckets-uniform-and-not-public", "saxml", dropping("admin-state", "uniformBucketLevelAccess"), {}, "admin-state", "uniformBucketLevelAccess"),
    ("versioned-buckets-delete-old-versions", "saxml", dropping("admin-state", "lifecycleRules"), {}, "admin-state", "deletes the noncurrent"),
    ("versioned-buckets-delete-old-versions", "saxml", setting("admin-state", "lifecycleRules.0.condition.withState", "LIVE"), {}, "admin-state", "every overwrite is kept"),
    ("versioned-buckets-delete-old-versions", "saxml", setting("admin-state", "lifecycleRules.0.action.type", "SetStorageClass"), {}, "admin-state", "no lifecycle rule"),
    ("versioned-buckets-delete-old-versions", "dev", setting("weights", "versioning", {"enabled": True}), {}, "weights", "versioning.enabled"),
    ("kueue-tpu-quota-within-pools", "dev", quota_of(str(2 * DEV_CHIPS)), {}, "cq", f"promises {2 * DEV_CHIPS} google.com/tpu but the TPU pools hold {DEV_CHIPS}"),
    ("kueue-tpu-quota-within-pools", "prod", shrink_pool(PROD_SHRUNK_POOL.name, 8), {}, "cq", f"hold {PROD_SHRUNK_CHIPS} chips"),
    ("kueue-tpu-quota-within-pools", "dev", queue_as_own_resource(str(DEV_CHIPS + 1)), {}, "cq", f"promises {DEV_CHIPS + 1}"),
    ("helm-charts-pinned", "dev", setting("kueue", "version", "^0.17.4"), {}, "kueue", "a range"),
    ("helm-charts-pinned", "dev", dropping("jobset", "version"), {}, "jobset", "newest"),
    ("helm-charts-pinned", "saxml", setting("jobset", "version", "0.11.x"), {}, "jobset", "a range"),
    ("helm-charts-pinned", "dev", setting("lws", "chart", "oci://registry.k8s.io/lws/charts/lws:latest"), {}, "lws", "moving tag 'latest'"),
    ("gke-cluster-hardened", "dev", setting("gke-cluster", "datapathProvider", "LEGACY_DATAPATH"), {}, "gke-cluster", "4.3.1"),
    ("gke-cluster-hardened", "prod", dropping("gke-cluster", "workloadIdentityConfig"), {}, "gke-cluster", "5.2.2"),
    ("gke-cluster-hardened", "saxml", setting("gke-cluster", "securityPostureConfig", {"mode": "DISABLED"}), {}, "gke-cluster", "5.10.4"),
    ("gke-cluster-hardened", "dev", dropping("gke-cluster", "nodeConfig.serviceAccount"), {}, "gke-cluster", "5.2.1"),
    ("gke-nodes-hardened", "dev", dropping("system-pool", "nodeConfig.serviceAccount"), {}, "system-pool", "5.2.1"),
    ("gke-nodes-hardened", "prod", setting(PROD_FIRST_POOL, "nodeConfig.serviceAccount", "123456789-compute@developer.gserviceaccount.com"), {}, PROD_FIRST_POOL, "5.2.1"),
    ("gke-nodes-hardened", "saxml", setting(SAXML_POOL, "nodeConfig.imageType", "UBUNTU_CONTAINERD"), {}, SAXML_POOL, "5.5.1"),
    ("boot-disks-encrypted-in-production", "prod", dropping("system-pool", "nodeConfig.bootDiskKmsKey"), {}, "system-pool", "5.9.2"),
    ("boot-disks-encrypted-in-production", "prod", dropping(PROD_SHRUNK_POOL.name, "nodeConfig.bootDiskKmsKey"), {}, PROD_SHRUNK_POOL.name, "5.9.2"),
    ("boot-disks-encrypted-in-production", "prod", setting("gke-cluster", "nodeConfig.bootDiskKmsKey", ""), {}, "gke-cluster", "5.9.2"),
    ("boot-disks-encrypted-in-production", "dev", marked_production, {}, stack_values("dev")["tpu"]["pools"][0]["name"], "5.9.2"),
    ("boot-disks-encrypted-in-production", "saxml", marked_production, {}, "system-pool", "5.9.2"),
    ("boot-disks-encrypted-in-production", "dev", marked_production, {}, "gke-cluster", "5.9.2"),
    ("objects-in-own-namespaces", "dev", setting("kueue", "namespace", "kube-system"), {}, "kueue", "4.6.1"),
    ("objects-in-own-namespaces", "saxml", setting("sax-admin", "metadata.namespace", "default"), {}, "sax-admin", "'default'"),
    ("objects-in-own-namespaces", "dev", setting("kueue-metrics-rolebinding", "metadata.namespace", "gmp-system"), {}, "kueue-metrics-rolebinding", "'gmp-system'"),
    ("rbac-no-privileged-bindings", "dev", adding(ADMIN_BINDING), {}, "ops-admin", "4.1.1"),
    ("rbac-least-privilege-roles", "dev", adding(SECRET_READER), {}, "secret-reader", "4.1.2"),
    ("rbac-least-privilege-roles", "prod", role_rule("kueue-metrics-role", {"apiGroups": ["*"], "resources": ["pods"], "verbs": ["get"]}), {}, "kueue-metrics-role", "4.1.3"),
    ("rbac-least-privilege-roles", "prod", role_rule("kueue-metrics-role", {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles"], "verbs": ["escalate"]}), {}, "kueue-metrics-role", "4.1.7"),
    ("rbac-no-privileged-bindings", "prod", binding_subject("system:masters"), {}, "kueue-metrics-clusterrolebinding", "4.1.6"),
    ("rbac-no-privileged-bindings", "prod", binding_subject("system:anonymous"), {}, "kueue-metrics-clusterrolebinding", "4.1.8"),
    ("rbac-no-privileged-bindings", "prod", binding_subject("system:unauthenticated"), {}, "kueue-metrics-clusterrolebinding", "4.1.9"),
    ("rbac-no-privileged-bindings", "prod", binding_subject("system:authenticated"), {}, "kueue-metrics-clusterrolebinding", "4.1.10"),
    ("pods-isolated-by-network-policy", "dev", without_network_policies("llm-d-pd-disaggregation-default-deny-ingress", "model-servers-network-policy"), {}, "vllm-prefill spec.leaderWorkerTemplate.workerTemplate", "4.3.2"),
    ("pods-isolated-by-network-policy", "saxml", without_network_policies("sax-default-deny-ingress", "sax-admin-server-network-policy"), {}, "admin-server", "4.3.2"),
    ("pods-isolated-by-network-policy", "prod", network_policies(lambda p: p["metadata"].update(namespace="default")), {}, "subslice-check", "4.3.2"),
    ("pods-isolated-by-network-policy", "dev", network_policies(lambda p: p["spec"].update(policyTypes=["Egress"])), {}, "stage-model-weights", "4.3.2"),
    ("namespaces-enforce-pod-security", "dev", enforce_label("llm-d-pd-disaggregation", ":Namespace", None), {}, "llm-d-pd-disaggregation", "4.2.1"),
    ("namespaces-enforce-pod-security", "prod", enforce_label("lws-system", ":NamespacePatch", "privileged"), {}, "lws-system", "4.2.1"),
    ("namespaces-enforce-pod-security", "prod", enforce_label("node-audit-namespace", ":Namespace", "baseline"), {}, "node-audit", "4.2.1"),
    ("namespaces-enforce-pod-security", "saxml", enforce_label("sax", ":Namespace", "restricted-ish"), {}, "sax", "4.2.1"),
    ("namespaces-enforce-pod-security", "dev", setting("kueue", "createNamespace", True, ":Release"), {}, "kueue", "4.2.1"),
    ("namespaces-enforce-pod-security", "dev", adding(UNLABELLED_NAMESPACES), {}, "team-c in team-namespaces", "4.2.1"),
    ("pods-own-service-account", "dev", without_service_account("subslice-check", JOBSET_POD), {}, "subslice-check", "4.1.4"),
    ("pods-own-service-account", "dev", setting("stage-model-weights", "spec.template.spec.serviceAccountName", "default"), {}, "stage-model-weights", "4.1.4"),
    ("pods-own-service-account", "prod", setting("vllm-decode", f"{LWS_WORKER_POD}.serviceAccountName", "default"), {}, "vllm-decode", "4.1.4"),
    ("pods-own-service-account", "saxml", without_service_account("admin-server", "spec.template.spec"), {}, "admin-server", "4.1.4"),
]  # fmt: skip


@pytest.mark.parametrize(
    "rule, stack, breakage, config, name, fragment",
    BROKEN,
    ids=[f"{rule}-{stack}-{name}-{i}" for i, (rule, stack, _, _, name, _) in enumerate(BROKEN)],
)
def test_every_rule_fires_on_a_broken_copy(
    rule: str, stack: str, breakage: Callable[[list[Resource]], None], config: dict[str, Any], name: str, fragment: str
) -> None:
    resources = rendered(stack)
    breakage(resources)
    found = reported(rule, resources, config)
    assert found, f"{rule} let the broken {stack} copy through"
    assert any(name in m and fragment in m for m, _ in found), found
    # a stack policy points its violation at a resource of the stack
    assert all(urn is None or urn in {r.urn for r in resources} for _, urn in found), found


@pytest.mark.parametrize("rule", sorted(POLICIES))
def test_every_rule_is_broken_at_least_once(rule: str) -> None:
    assert any(case[0] == rule for case in BROKEN)


# --- Opt-ins and the edges of each rule -------------------------------------------------------


def test_a_stack_may_opt_in_to_public_endpoints() -> None:
    resources = rendered("dev")
    setting("inference-gateway", "spec.gatewayClassName", "gke-l7-global-external-managed")(resources)
    assert messages("no-public-endpoints", resources, {endpoints.OPT_IN: True}) == []
    assert messages("no-public-endpoints", resources, {endpoints.OPT_IN: "yes"}) != [], "only a real true opts in"


def test_a_tpu_pool_the_stack_file_keeps_unhardened_passes_and_no_other_node_pool_does() -> None:
    """While a running production stack replaces its cubes one per `up`, the pools it has not reached yet boot as
    made before (tpu.pools[].hardenedBoot false, warned at every preview): neither key nor secure boot. The rule lets
    exactly those through, by how they boot: a pool with secure boot but no key, or the system pool, is refused."""
    pools = [{**pool, "hardenedBoot": i == 0} for i, pool in enumerate(stack_values("prod")["tpu"]["pools"])]
    run = run_stack({"tpu.pools": pools}, stack="prod")
    resources = _as_resources(run, "prod")
    rule = gke.unencrypted_boot_disk_violations
    assert rule(resources) == []
    kept, hardened = pools[1]["name"], pools[0]["name"]
    assert gke.node_boot(kept, one(resources, kept).props) == UNHARDENED_BOOT
    for name in (hardened, "system-pool"):
        dropping(name, "nodeConfig.bootDiskKmsKey")(resources)
    assert sorted(v.message.split(" boots ")[0] for v in rule(resources)) == sorted(
        [f"node pool {hardened}", "node pool system-pool"]
    )
    setting(kept, "nodeConfig.shieldedInstanceConfig", {"enableSecureBoot": True})(resources)
    assert any(kept in v.message for v in rule(resources)), "a pool with secure boot is not one kept as made before"


@pytest.mark.parametrize(
    "body, public",
    [
        ({"spec": {"type": "ClusterIP"}}, False),
        ({"spec": {"type": "NodePort"}}, False),
        ({"spec": {"type": "LoadBalancer"}}, True),
        ({"metadata": {"annotations": {"cloud.google.com/load-balancer-type": "Internal"}}, "spec": {"type": "LoadBalancer"}}, False),
        ({"metadata": {"annotations": {"networking.gke.io/load-balancer-type": "internal"}}, "spec": {"type": "LoadBalancer"}}, False),
    ],
)  # fmt: skip
def test_which_services_face_the_internet(body: dict[str, Any], public: bool) -> None:
    problems = endpoints.public_endpoint_problems("kubernetes:core/v1:Service", "svc", body, False)
    assert bool(problems) is public


@pytest.mark.parametrize(
    "annotations, class_name, public",
    [({}, None, True), ({}, "gce", True), ({}, "gce-internal", False), ({"kubernetes.io/ingress.class": "gce-internal"}, None, False), ({}, "nginx", False)],
)  # fmt: skip
def test_which_ingresses_face_the_internet(annotations: dict[str, str], class_name: str | None, public: bool) -> None:
    body: dict[str, Any] = {"metadata": {"annotations": annotations}, "spec": {}}
    if class_name:
        body["spec"]["ingressClassName"] = class_name
    problems = endpoints.public_endpoint_problems("kubernetes:networking.k8s.io/v1:Ingress", "ing", body, False)
    assert bool(problems) is public


def test_a_public_object_inside_a_config_group_is_named_with_its_group() -> None:
    group = {"objs": [{"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "metadata": {"name": "gw"}, "spec": {"gatewayClassName": "gke-l7-gxlb"}}]}  # fmt: skip
    (problem,) = endpoints.public_endpoint_problems("kubernetes:yaml/v2:ConfigGroup", "extras", group, False)
    assert "Gateway gw in extras" in problem


@pytest.mark.parametrize("class_name", ["gke-l7-rilb", "gke-l7-rilb-mc", "gke-l7-cross-regional-internal-managed-mc"])
def test_a_gateway_of_an_internal_gke_class_faces_no_internet(class_name: str) -> None:
    """GKE's internal Gateway classes (docs.cloud.google.com/kubernetes-engine/docs/how-to/gatewayclass-capabilities),
    the cross-regional internal Application Load Balancer's among them: none is refused as public."""
    body = {"spec": {"gatewayClassName": class_name}}
    gateway = "kubernetes:gateway.networking.k8s.io/v1:Gateway"
    assert endpoints.public_endpoint_problems(gateway, "gw", body, False) == []


def test_images_in_any_pod_template_and_in_helm_values_are_found() -> None:
    cron = {
        "spec": {"jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}}
    }
    (problem,) = images.image_problems("kubernetes:batch/v1:CronJob", "nightly-job", cron)
    assert "nightly-job spec.jobTemplate.spec.template.spec.containers[0] (c)" in problem
    values = {
        "values": {"a": {"image": "x:latest"}, "b": {"image": {"repository": "y"}}, "c": {"image": {"tag": "dev"}}}
    }
    problems = images.image_problems("kubernetes:helm.sh/v3:Release", "rel", values)
    assert [p.split(" uses ")[0] for p in problems] == [
        "Helm release rel values.a.image",
        "Helm release rel values.c.image",
    ]


DIGEST = "sha256:" + "d" * 64


def with_digests(resources: list[Resource]) -> int:
    """Every image of the render pinned by a digest, as a stack whose settings hold them deploys it (in a tag for the
    charts that read `<repository>:<tag>`); returns how many images it pinned."""
    pinned = 0
    for resource in resources:
        for path, value in list(images.walk(resource.props)):
            if path and path[-1] == "image" and isinstance(value, str) and "@" not in value:
                set_path(resource.props, ".".join(map(str, path)), f"{value}@{DIGEST}")
                pinned += 1
            elif path and path[-1] == "image" and isinstance(value, dict):
                for mapping in [value, *(v for v in value.values() if isinstance(v, dict))]:
                    if mapping.get("tag") and "@" not in mapping["tag"]:
                        mapping["tag"] += f"@{DIGEST}"
                        pinned += 1
                    elif "digest" in mapping:
                        mapping["digest"] = DIGEST
                        pinned += 1
    return pinned


def test_the_policy_config_requires_digests_of_every_image_charts_included() -> None:
    """With requireDigests in its policy config the pack refuses each image pulled by its tag, a chart's own tag
    included; with every image pinned by digest the stack passes. Which of the program's stacks must pull by digest
    is held at preview (images.requireDigests; tests/test_operations_config.py), not read here."""
    resources = rendered("prod")
    rule = "container-images-pinned"
    assert messages(rule, resources) == []  # the pack does not read the stack file's images block or production
    found = messages(rule, resources, {images.REQUIRE_DIGESTS: True})
    for name in ("vllm-prefill", "vllm-decode", "slice-controller", "kueue", "lws"):
        assert any(name in m and "no digest" in m for m in found), name
    # JobSet's controller comes by digest in every stack (components/platform/config.py JOBSET_IMAGE).
    assert not [m for m in found if "jobset" in m], found
    assert any("router values.router.epp.image" in m for m in found)
    assert with_digests(resources) >= 10
    assert messages(rule, resources, {images.REQUIRE_DIGESTS: True}) == []


def test_chart_images_are_read_in_each_charts_own_shape() -> None:
    """A registry key (the router's endpoint picker), a nested mapping (LeaderWorkerSet's image.manager), a digest
    in a tag (charts that read `<repository>:<tag>`), and a chart's own tag, pinned by its version only."""
    values = {
        "values": {
            "epp": {"image": {"registry": "ghcr.io/llm-d", "repository": "picker", "tag": "main"}},
            "lws": {"image": {"manager": {"repository": "registry.k8s.io/lws/lws", "tag": "v0.10.0@" + DIGEST}}},
            "own": {"image": {"repository": "registry.k8s.io/jobset/jobset"}},
        }
    }
    problems = images.image_problems("kubernetes:helm.sh/v3:Release", "rel", values)
    assert problems == ["Helm release rel values.epp.image uses 'ghcr.io/llm-d/picker:main', which is not pinned: "
                        "it uses the floating tag 'main'"]  # fmt: skip
    required = images.image_problems("kubernetes:helm.sh/v3:Release", "rel", values, True)
    assert [p.split(" uses ")[0] for p in required] == [
        "Helm release rel values.epp.image",
        "Helm release rel values.own.image",
    ]
    assert "with the chart's own tag" in required[1]


def test_an_image_known_only_after_apply_is_not_judged() -> None:
    job = {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": UNKNOWN}]}}}}
    with pytest.raises(UnknownValue, match="job"):
        images.image_problems("kubernetes:batch/v1:Job", "job", job)


@pytest.mark.parametrize(
    "chart, version, pinned",
    [
        ("oci://registry.k8s.io/kueue/charts/kueue", "0.17.4", True),
        ("oci://ghcr.io/llm-d/charts/llm-d-router-gateway", "v0.10.0", True),
        ("oci://registry.k8s.io/kueue/charts/kueue", "0.17.4-rc.1", True),
        ("./manifests/charts/slice-controller", "", True),
        ("oci://registry.k8s.io/kueue/charts/kueue@sha256:" + "c" * 64, "", True),
        ("oci://registry.k8s.io/kueue/charts/kueue", "", False),
        ("oci://registry.k8s.io/kueue/charts/kueue", "~0.17.0", False),
        ("oci://registry.k8s.io/kueue/charts/kueue", ">=0.17.0", False),
        ("oci://registry.k8s.io/kueue/charts/kueue", "0.17", False),
        ("oci://registry.k8s.io/kueue/charts/kueue", "*", False),
        ("kueue/kueue", "latest", False),
        # a final newline: the config blocks' ExactVersion (pydantic) refuses it, and so does the pack
        ("oci://registry.k8s.io/kueue/charts/kueue", "0.17.4\n", False),
        ("oci://registry.k8s.io/kueue/charts/kueue:0.17.4\n", "0.17.4", False),
        ("oci://registry.k8s.io/kueue/charts/kueue@sha256:" + "c" * 64 + "\n", "", False),
    ],
)
def test_which_chart_versions_are_pinned(chart: str, version: str, pinned: bool) -> None:
    props = {"chart": chart, **({"version": version} if version else {})}
    assert (charts.chart_problems("kubernetes:helm.sh/v3:Release", "rel", props) == []) is pinned


@pytest.mark.parametrize(
    "outputs, expected",
    [
        ({PRODUCTION_OUTPUT: True}, True),
        ({PRODUCTION_OUTPUT: False}, False),
        ({}, False),  # a stack whose program exports no production output: the program's default
        ({PRODUCTION_OUTPUT: "true"}, False),  # the program exports the validated boolean, nothing else
        (None, False),  # no stack resource at all
    ],
)
def test_production_is_what_the_program_exports_never_the_stacks_name(
    outputs: dict[str, Any] | None, expected: bool
) -> None:
    secure = {"machineType": "tpu7x-standard-4t", "shieldedInstanceConfig": {"enableSecureBoot": True}}
    pool = Resource(tpu.NODE_POOL, "p", {"nodeConfig": secure})
    stack = [] if outputs is None else [Resource(ROOT_STACK, f"{PROJECT_NAME}-prod", outputs)]
    assert gke.is_production([*stack, pool]) is expected
    assert bool(gke.unencrypted_boot_disk_violations([*stack, pool])) is expected


def test_a_production_output_unknown_in_preview_is_not_judged() -> None:
    with pytest.raises(UnknownValue, match=PRODUCTION_OUTPUT):
        gke.is_production([Resource(ROOT_STACK, "s", {PRODUCTION_OUTPUT: UNKNOWN})])


def test_pools_are_counted_by_the_catalog_including_autoscaling_ones() -> None:
    def pool(name: str, **props: Any) -> Resource:
        return Resource(tpu.NODE_POOL, name, {"nodeConfig": {"machineType": "ct5lp-hightpu-4t"}, **props})

    assert tpu.pool_chips(pool("fixed", nodeCount=8)) == 32
    assert tpu.pool_chips(pool("initial", initialNodeCount=2)) == 8
    # every count but totalMaxNodeCount is per zone
    assert tpu.pool_chips(pool("two-zones", nodeCount=2, nodeLocations=["a", "b"])) == 16
    assert tpu.pool_chips(pool("scaling", autoscaling={"maxNodeCount": 3}, nodeLocations=["a", "b"])) == 24
    assert tpu.pool_chips(pool("total", autoscaling={"totalMaxNodeCount": 5})) == 20


def test_a_quota_over_several_queues_is_summed() -> None:
    def queue(name: str, quota: str) -> Resource:
        body = {"metadata": {"name": name}, "spec": {"resourceGroups": [{"flavors": [{"resources": [{"name": "google.com/tpu", "nominalQuota": quota}]}]}]}}  # fmt: skip
        return Resource("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue", name, body, urn=f"urn:{name}")

    pool = Resource(tpu.NODE_POOL, "p", {"nodeConfig": {"machineType": "tpu7x-standard-4t"}, "nodeCount": 16})
    assert tpu.quota_violations([pool, queue("a", "32"), queue("b", "32")]) == []
    (violation,) = tpu.quota_violations([pool, queue("a", "48"), queue("b", "32")])
    assert "ClusterQueues a, b together promise 80" in violation.message
    (violation,) = tpu.quota_violations([pool, queue("a", "65")])
    assert violation == Violation(violation.message, "urn:a") and "hold 64 chips (p 64)" in violation.message


def test_a_stack_on_an_existing_cluster_counts_the_pools_made_elsewhere_from_the_policy_config() -> None:
    from tests.test_gcp_existing_cluster import LAB

    resources = [
        Resource(r.type, r.name, _engine_form(unwrap_secrets(r.inputs)), r.protect, f"urn:{r.type}::{r.name}")
        for r in run_stack(LAB, secrets=("cluster",)).registrations
    ]
    assert not [r for r in resources if tpu.is_tpu_pool(r.type, r.name, r.props)], "the lab stack makes no pool"
    (violation,) = tpu.quota_violations(resources)
    assert "hold 0 chips" in violation.message and tpu.EXTERNAL_CHIPS in violation.message, violation.message
    assert tpu.quota_violations(resources, external_chips=DEV_CHIPS) == []
    (violation,) = tpu.quota_violations(resources, external_chips=DEV_CHIPS // 2)
    assert f"hold {DEV_CHIPS // 2} chips (externalTpuChips {DEV_CHIPS // 2})" in violation.message, violation.message


def test_a_tpu_pool_of_a_machine_outside_the_catalog_fails_closed() -> None:
    pool = Resource(tpu.NODE_POOL, "new", {"nodeConfig": {"machineType": "ct9-standard-4t"}, "nodeCount": 1})
    queue = copy.deepcopy(cluster_queue(rendered("dev")))
    (violation,) = tpu.quota_violations([pool, Resource("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue", "cq", queue)])
    assert "new" in violation.message and "cannot be checked" in violation.message


def test_a_project_role_grant_with_unreadable_policy_data_is_refused() -> None:
    (problem,) = iam.project_role_problems(iam.PROJECT_IAM_POLICY, "pol", {"policyData": "{not json"})
    assert "pol" in problem
    with pytest.raises(UnknownValue):
        iam.project_role_problems(iam.PROJECT_IAM_POLICY, "pol", {"policyData": UNKNOWN})


# --- Values the pack cannot read: it says so, or waits for apply, and never passes them unread --------------------
ENFORCE = namespaces.ENFORCE_LABEL


@pytest.mark.parametrize(
    "rule, resource_type, props, where, known",
    [
        (
            namespaces.pod_security_problems,
            "kubernetes:core/v1:Namespace",
            {"metadata": {"name": "serve", "labels": {ENFORCE: UNKNOWN}}},
            ENFORCE,
            "restricted",
        ),
        (
            service_accounts.service_account_problems,
            "kubernetes:batch/v1:Job",
            {"spec": {"template": {"spec": {"serviceAccountName": UNKNOWN, "containers": []}}}},
            "serviceAccountName",
            "serve-sa",
        ),
        (
            images.image_problems,
            "kubernetes:helm.sh/v3:Release",
            {"values": {"picker": {"image": {"repository": "ghcr.io/llm-d/picker", "tag": UNKNOWN}}}},
            "values.picker.image",
            "v0.10.0",
        ),
        (
            images.image_problems,
            "kubernetes:batch/v1:Job",
            {"spec": {"template": {"spec": {"initContainers": UNKNOWN, "containers": []}}}},
            "initContainers",
            [{"name": "stage", "image": "ghcr.io/llm-d/stage:v0.10.0"}],
        ),
    ],
    ids=["pod security level", "service account", "chart image tag", "a container list"],
)
def test_a_value_known_only_after_apply_waits_for_it(
    rule: Callable[[str, str, dict[str, Any]], list[str]],
    resource_type: str,
    props: dict[str, Any],
    where: str,
    known: Any,
) -> None:
    with pytest.raises(UnknownValue, match=where):
        rule(resource_type, "r", props)
    applied = json.loads(json.dumps(props).replace(json.dumps(UNKNOWN), json.dumps(known)))
    assert rule(resource_type, "r", applied) == [], "once known, a good value passes"


def test_a_registry_grant_whose_policy_data_cannot_be_read_is_refused_not_passed() -> None:
    (problem,) = iam.registry_role_problems(iam.REPOSITORY_IAM_POLICY, "pol", {"policyData": "{not json"})
    assert "pol" in problem
    readable = json.dumps({"bindings": [{"role": iam.REGISTRY_READ_ROLE, "members": ["serviceAccount:n@p"]}]})
    assert iam.registry_role_problems(iam.REPOSITORY_IAM_POLICY, "pol", {"policyData": readable}) == []


def test_a_cluster_queue_whose_tpu_quota_cannot_be_read_is_a_violation_of_its_own() -> None:
    body = {"metadata": {"name": "cq"}, "spec": {"resourceGroups": [{"flavors": [{"resources": [{"name": "google.com/tpu", "nominalQuota": "lots"}]}]}]}}  # fmt: skip
    queue = Resource("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue", "cq", body, urn="urn:cq")
    pool = Resource(tpu.NODE_POOL, "p", {"nodeConfig": {"machineType": "tpu7x-standard-4t"}, "nodeCount": 16})
    (violation,) = tpu.quota_violations([pool, queue])
    assert violation.urn == "urn:cq" and "lots" in violation.message, violation.message
    body["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "64"
    assert tpu.quota_violations([pool, queue]) == []


def test_an_image_pinned_by_a_digest_key_of_a_chart_value_passes() -> None:
    values = {"values": {"picker": {"image": {"repository": "ghcr.io/llm-d/picker", "digest": DIGEST}}}}
    assert images.image_problems("kubernetes:helm.sh/v3:Release", "rel", values, True) == []
    (found,) = images.deployed_images("kubernetes:helm.sh/v3:Release", "rel", values)
    assert found[1] == f"ghcr.io/llm-d/picker@{DIGEST}"


def test_reading_a_path_stops_at_what_is_not_there_and_waits_for_what_is_unknown() -> None:
    props = {"spec": {"ports": [{"port": 80}], "type": "ClusterIP"}}
    assert get(props, "spec.ports.0.port") == 80
    assert get(props, "spec.ports.3.port", "none") == "none", "past the end of a list"
    assert get(props, "spec.type.name", "none") == "none", "into a string"
    with pytest.raises(UnknownValue, match=r"spec\.ports"):
        get({"spec": {"ports": UNKNOWN}}, "spec.ports.0.port", owner="svc")


def test_a_config_group_item_that_is_not_an_object_is_skipped_and_a_rule_that_is_not_one_is_too() -> None:
    group = {"objs": ["not an object", {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "a"}}]}
    assert [o.kind for o in kubernetes_objects("kubernetes:yaml/v2:ConfigGroup", "g", group)] == ["ServiceAccount"]
    role = {"rules": ["not a rule", {"apiGroups": [""], "resources": ["*"], "verbs": ["get"]}]}
    (problem,) = rbac.role_object_problems("Role", "r", role)
    assert "rules[1]" in problem
