"""The pulumi_policy wrappers: each turns what the SDK hands over into plain data, calls its rule,
and reports what the rule finds. No rule logic lives here (see the modules it imports), and nothing
here reads the stack's config: the rules judge the resources the stack registers.

Each policy's description ends with the CIS GKE controls the registry (policy/cis.yaml) says it holds."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from pulumi_policy import (
    EnforcementLevel,
    Policy,
    PolicyConfigSchema,
    PolicyResource,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.proxy import UnknownValueError

from policy.boundaries import namespace_problems
from policy.buckets import bucket_problems, old_version_problems
from policy.charts import chart_problems
from policy.cis import POLICY, controls_held_by
from policy.endpoints import OPT_IN, public_endpoint_problems
from policy.gke import cluster_problems, node_pool_problems, unencrypted_boot_disk_violations
from policy.iam import project_role_problems, registry_role_problems
from policy.images import REQUIRE_DIGESTS, image_problems
from policy.namespaces import pod_security_problems
from policy.network import unisolated_pod_violations
from policy.rbac import binding_problems, role_problems
from policy.resources import UNKNOWN, Resource, UnknownValue, Violation
from policy.service_accounts import service_account_problems
from policy.tpu import EXTERNAL_CHIPS, quota_violations

MANDATORY = EnforcementLevel.MANDATORY

ResourceRule = Callable[[Resource, Mapping[str, Any]], list[str]]  # (resource, policy config) -> problems
StackRule = Callable[[list[Resource], Mapping[str, Any]], list[Violation]]  # (every resource, policy config)
P = TypeVar("P", ResourceValidationPolicy, StackValidationPolicy)


def plain(value: Any) -> Any:
    """The SDK's property proxies as dicts and lists, every unknown value as the engine's sentinel
    (the proxies raise on reading one; the rules decide whether they need it)."""
    if isinstance(value, Mapping):
        return {key: plain(_read(value, key)) for key in value}
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return [plain(_read(value, index)) for index in range(len(value))]
    return value


def _read(container: Any, key: Any) -> Any:
    try:
        return container[key]
    except UnknownValueError:
        return UNKNOWN


def as_resource(given: ResourceValidationArgs | PolicyResource) -> Resource:
    """What the SDK hands over (one resource, or one of a stack's) as the rules read it."""
    return Resource(given.resource_type, given.name, plain(given.props), bool(given.opts.protect), given.urn)


def _policy(kind: type[P], name: str, text: str, violations: Callable[[Any], list[Violation]], **extra: Any) -> P:
    """A policy reporting what ``violations`` finds in the SDK's arguments. A value unknown in preview becomes the
    SDK's own signal for one: it reports an advisory diagnostic, which the engine shows on the resource analyzed."""

    def validate(args: Any, report_violation: ReportViolation) -> None:
        try:
            found = violations(args)
        except UnknownValue as error:
            raise UnknownValueError(UNKNOWN, error.path.split(".")) from None
        for violation in found:
            report_violation(violation.message, violation.urn or None)

    controls = controls_held_by(f"{POLICY}{name}")
    described = f"{text} (CIS GKE {', '.join(controls)})." if controls else f"{text}."
    return kind(name=name, description=described, validate=validate, enforcement_level=MANDATORY, **extra)


def resource_policy(name: str, text: str, rule: ResourceRule, **extra: Any) -> ResourceValidationPolicy:
    def violations(args: ResourceValidationArgs) -> list[Violation]:
        return [Violation(problem) for problem in rule(as_resource(args), args.get_config() or {})]

    return _policy(ResourceValidationPolicy, name, text, violations, **extra)


def stack_policy(name: str, text: str, rule: StackRule, **extra: Any) -> StackValidationPolicy:
    """A rule over every resource of the stack, as their outputs (the stack's own among them: its outputs)."""

    def violations(args: StackValidationArgs) -> list[Violation]:
        return rule([as_resource(r) for r in args.resources], args.get_config() or {})

    return _policy(StackValidationPolicy, name, text, violations, **extra)


def build_policies() -> list[Policy]:
    return [
        resource_policy(
            "no-public-endpoints",
            "No load balancer reachable from the internet (LoadBalancer Service, Gateway class, GKE Ingress) "
            f"unless the stack opts in with {OPT_IN}: true",
            lambda r, config: public_endpoint_problems(r.type, r.name, r.props, config.get(OPT_IN) is True),
            config_schema=PolicyConfigSchema(properties={OPT_IN: {"type": "boolean", "default": False}}),
        ),
        resource_policy(
            "no-broad-project-roles",
            "No project-level roles/owner, roles/editor or roles/storage.admin grant",
            lambda r, _config: project_role_problems(r.type, r.name, r.props),
        ),
        resource_policy(
            "registry-access-read-only",
            "Every Artifact Registry role granted, on the project or on a repository, is roles/artifactregistry.reader",
            lambda r, _config: registry_role_problems(r.type, r.name, r.props),
        ),
        resource_policy(
            "container-images-pinned",
            "Every container image, in Kubernetes objects and Helm values, pinned by digest or by a tag with a "
            "full version or a date; never latest, nightly, another floating tag, or no tag. By digest with "
            f"{REQUIRE_DIGESTS}: true in the policy config",
            lambda r, config: image_problems(r.type, r.name, r.props, config.get(REQUIRE_DIGESTS) is True),
            config_schema=PolicyConfigSchema(properties={REQUIRE_DIGESTS: {"type": "boolean"}}),
        ),
        resource_policy(
            "buckets-uniform-and-not-public",
            "Every bucket has uniform bucket-level access and public access prevention enforced",
            lambda r, _config: bucket_problems(r.type, r.name, r.props),
        ),
        resource_policy(
            "versioned-buckets-delete-old-versions",
            "Every bucket with object versioning has a lifecycle rule that deletes noncurrent versions",
            lambda r, _config: old_version_problems(r.type, r.name, r.props),
        ),
        stack_policy(
            "kueue-tpu-quota-within-pools",
            "No Kueue ClusterQueue promises more google.com/tpu than the chips of the stack's TPU pools",
            lambda resources, config: quota_violations(resources, int(config.get(EXTERNAL_CHIPS, 0))),
            config_schema=PolicyConfigSchema(
                properties={EXTERNAL_CHIPS: {"type": "integer", "minimum": 0, "default": 0}},
            ),
        ),
        resource_policy(
            "gke-cluster-hardened",
            "The cluster runs GKE Dataplane V2 (NetworkPolicy enforced), Workload Identity and the security posture; "
            "its default pool as the node pools",
            lambda r, _config: cluster_problems(r.type, r.name, r.props),
        ),
        resource_policy(
            "gke-nodes-hardened",
            "Every node pool runs as the cluster's own service account, never the Compute Engine default one, on "
            "Container-Optimized OS with containerd",
            lambda r, _config: node_pool_problems(r.type, r.name, r.props),
        ),
        stack_policy(
            "boot-disks-encrypted-in-production",
            "On a stack whose program exports production: true, every node pool, and the cluster's default pool, "
            "boots from disks a Cloud KMS key of the project's encrypts (cluster.bootDiskEncryptionKey), but a TPU "
            "pool booting as made before boot hardening (tpu.pools[].hardenedBoot false)",
            lambda resources, _config: unencrypted_boot_disk_violations(resources),
        ),
        resource_policy(
            "objects-in-own-namespaces",
            "No Kubernetes object or Helm release in a namespace Kubernetes or GKE keeps for itself (default, kube-*, "
            "gke-*, gmp-*): each concern in the namespace the program makes for it",
            lambda r, _config: namespace_problems(r.type, r.name, r.props),
        ),
        resource_policy(
            "rbac-no-privileged-bindings",
            "No RoleBinding or ClusterRoleBinding grants cluster-admin or binds system:masters, system:anonymous, "
            "system:unauthenticated or system:authenticated",
            lambda r, _config: binding_problems(r.type, r.name, r.props),
        ),
        resource_policy(
            "rbac-least-privilege-roles",
            "No Role or ClusterRole rule grants a wildcard, a cluster-wide read of Secrets, or bind, escalate or "
            "impersonate",
            lambda r, _config: role_problems(r.type, r.name, r.props),
        ),
        stack_policy(
            "pods-isolated-by-network-policy",
            "Every pod the program runs is selected for ingress by a NetworkPolicy of its own namespace",
            lambda resources, _config: unisolated_pod_violations(resources),
        ),
        resource_policy(
            "namespaces-enforce-pod-security",
            "Every Namespace the stack makes carries the pod-security.kubernetes.io/enforce label at baseline or "
            "restricted (privileged on the node audit logging's alone), and no Helm release makes its namespace itself, "
            "unlabelled",
            lambda r, _config: pod_security_problems(r.type, r.name, r.props),
        ),
        resource_policy(
            "pods-own-service-account",
            "Every pod template names a ServiceAccount of its own, never its namespace's default one",
            lambda r, _config: service_account_problems(r.type, r.name, r.props),
        ),
        resource_policy(
            "helm-charts-pinned",
            "Every Helm chart pinned to one exact version (a chart in this repository is pinned by the commit)",
            lambda r, _config: chart_problems(r.type, r.name, r.props),
        ),
    ]
