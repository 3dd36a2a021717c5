"""The pulumi_policy wrappers: each turns what the SDK hands over into plain data, calls its rule,
and reports what the rule finds. No rule logic lives here (see the modules it imports)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi.runtime
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
from policy.endpoints import OPT_IN, public_endpoint_problems
from policy.gke import (
    PROGRAM_CONFIG_TPU,
    boot_disk_problems,
    cluster_problems,
    node_pool_problems,
    pools_kept_unhardened,
)
from policy.iam import project_role_problems, registry_role_problems
from policy.images import PROGRAM_CONFIG_IMAGES, REQUIRE_DIGESTS, digests_required, image_problems
from policy.namespaces import pod_security_problems
from policy.network import unisolated_pod_violations
from policy.rbac import binding_problems, role_problems
from policy.resources import UNKNOWN, Resource, UnknownValue
from policy.service_accounts import service_account_problems
from policy.tpu import (
    EXTERNAL_CHIPS,
    PROGRAM_CONFIG_PRODUCTION,
    is_production,
    quota_violations,
    unprotected_pool_problems,
)

MANDATORY = EnforcementLevel.MANDATORY


@dataclass(frozen=True)
class StackContext:
    """What the pack knows of the stack besides its resources (the CLI sets it in the analyzer's
    environment: PULUMI_STACK and the stack's config in PULUMI_CONFIG)."""

    name: str = ""
    program_config: Mapping[str, Any] = field(default_factory=dict)


def engine_stack() -> StackContext:
    """The stack's name and the settings of its config the rules read: the production marker, the images block and
    the tpu block."""
    keys = (PROGRAM_CONFIG_PRODUCTION, PROGRAM_CONFIG_IMAGES, PROGRAM_CONFIG_TPU)
    return StackContext(
        name=pulumi.get_stack() or "",
        program_config={key: value for key in keys if (value := pulumi.runtime.get_config(key)) is not None},
    )


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


def _unknown(error: UnknownValue) -> UnknownValueError:
    """The SDK's own signal for a value unknown in preview: it reports an advisory diagnostic, which
    the engine shows on the resource being analyzed."""
    return UnknownValueError(UNKNOWN, error.path.split("."))


ResourceRule = Callable[[Resource, Mapping[str, Any], StackContext], list[str]]


def resource_policy(
    name: str, description: str, rule: ResourceRule, stack: Callable[[], StackContext], **extra: Any
) -> ResourceValidationPolicy:
    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        resource = as_resource(args)
        try:
            problems = rule(resource, args.get_config() or {}, stack())
        except UnknownValue as error:
            raise _unknown(error) from None
        for problem in problems:
            report_violation(problem, None)

    return ResourceValidationPolicy(
        name=name, description=description, validate=validate, enforcement_level=MANDATORY, **extra
    )


def as_resource(given: ResourceValidationArgs | PolicyResource) -> Resource:
    """What the SDK hands over (one resource, or one of a stack's) as the rules read it."""
    return Resource(given.resource_type, given.name, plain(given.props), bool(given.opts.protect), given.urn)


def stack_resources(args: StackValidationArgs) -> list[Resource]:
    return [as_resource(r) for r in args.resources]


def build_policies(
    stack: Callable[[], StackContext] = engine_stack,
) -> list[Policy]:
    def quota(args: StackValidationArgs, report_violation: ReportViolation) -> None:
        external = (args.get_config() or {}).get(EXTERNAL_CHIPS, 0)
        try:
            violations = quota_violations(stack_resources(args), int(external))
        except UnknownValue as error:
            raise _unknown(error) from None
        for violation in violations:
            report_violation(violation.message, violation.urn or None)

    def isolated(args: StackValidationArgs, report_violation: ReportViolation) -> None:
        try:
            violations = unisolated_pod_violations(stack_resources(args))
        except UnknownValue as error:
            raise _unknown(error) from None
        for violation in violations:
            report_violation(violation.message, violation.urn or None)

    return [
        resource_policy(
            "no-public-endpoints",
            "No load balancer reachable from the internet (LoadBalancer Service, Gateway class, GKE Ingress) "
            f"unless the stack opts in with {OPT_IN}: true.",
            lambda r, config, _: public_endpoint_problems(r.type, r.name, r.props, config.get(OPT_IN) is True),
            stack,
            config_schema=PolicyConfigSchema(
                properties={OPT_IN: {"type": "boolean", "default": False}},
            ),
        ),
        resource_policy(
            "no-broad-project-roles",
            "No project-level roles/owner, roles/editor or roles/storage.admin grant.",
            lambda r, _config, _stack: project_role_problems(r.type, r.name, r.props),
            stack,
        ),
        resource_policy(
            "registry-access-read-only",
            "Every Artifact Registry role granted, on the project or on a repository, is roles/artifactregistry.reader "
            "(CIS GKE 5.1.3).",
            lambda r, _config, _stack: registry_role_problems(r.type, r.name, r.props),
            stack,
        ),
        resource_policy(
            "container-images-pinned",
            "Every container image, in Kubernetes objects and Helm values, pinned by digest or by a tag with a "
            "full version or a date; never latest, nightly, another floating tag, or no tag. By digest on a stack "
            f"that requires digests (images.requireDigests; unset, a production stack does), or with {REQUIRE_DIGESTS}: "
            "true in the policy config.",
            lambda r, config, s: image_problems(
                r.type, r.name, r.props, digests_required(config.get(REQUIRE_DIGESTS), s.name, s.program_config)
            ),
            stack,
            config_schema=PolicyConfigSchema(properties={REQUIRE_DIGESTS: {"type": "boolean"}}),
        ),
        resource_policy(
            "buckets-uniform-and-not-public",
            "Every bucket has uniform bucket-level access and public access prevention enforced.",
            lambda r, _config, _stack: bucket_problems(r.type, r.name, r.props),
            stack,
        ),
        resource_policy(
            "versioned-buckets-delete-old-versions",
            "Every bucket with object versioning has a lifecycle rule that deletes noncurrent versions.",
            lambda r, _config, _stack: old_version_problems(r.type, r.name, r.props),
            stack,
        ),
        resource_policy(
            "tpu-pools-protected-in-production",
            "On a production stack every TPU node pool is protected (tpu.protectPools).",
            lambda r, config, s: unprotected_pool_problems(
                r.type, r.name, r.props, r.protect, is_production(config.get("production"), s.name, s.program_config)
            ),
            stack,
            config_schema=PolicyConfigSchema(properties={"production": {"type": "boolean"}}),
        ),
        StackValidationPolicy(
            name="kueue-tpu-quota-within-pools",
            description="No Kueue ClusterQueue promises more google.com/tpu than the chips of the stack's TPU pools.",
            validate=quota,
            enforcement_level=MANDATORY,
            config_schema=PolicyConfigSchema(
                properties={EXTERNAL_CHIPS: {"type": "integer", "minimum": 0, "default": 0}},
            ),
        ),
        resource_policy(
            "gke-cluster-hardened",
            "The cluster runs GKE Dataplane V2 (NetworkPolicy enforced), Workload Identity and the security posture; "
            "its default pool as the node pools (CIS GKE 4.3.1, 5.2.2, 5.10.4).",
            lambda r, _config, _stack: cluster_problems(r.type, r.name, r.props),
            stack,
        ),
        resource_policy(
            "gke-nodes-hardened",
            "Every node pool runs as the cluster's own service account, never the Compute Engine default one, on "
            "Container-Optimized OS with containerd (CIS GKE 5.2.1, 5.5.1).",
            lambda r, _config, _stack: node_pool_problems(r.type, r.name, r.props),
            stack,
        ),
        resource_policy(
            "boot-disks-encrypted-in-production",
            "On a production stack every node pool, and the cluster's default pool, boots from disks a Cloud KMS key of "
            "the project's encrypts (cluster.bootDiskEncryptionKey), but the TPU pools the stack file keeps as made "
            "before (tpu.pools[].hardenedBoot false) (CIS GKE 5.9.2).",
            lambda r, config, s: boot_disk_problems(
                r.type,
                r.name,
                r.props,
                is_production(config.get("production"), s.name, s.program_config),
                pools_kept_unhardened(s.program_config),
            ),
            stack,
            config_schema=PolicyConfigSchema(properties={"production": {"type": "boolean"}}),
        ),
        resource_policy(
            "objects-in-own-namespaces",
            "No Kubernetes object or Helm release in a namespace Kubernetes or GKE keeps for itself (default, kube-*, "
            "gke-*, gmp-*): each concern in the namespace the program makes for it (CIS GKE 4.6.1).",
            lambda r, _config, _stack: namespace_problems(r.type, r.name, r.props),
            stack,
        ),
        resource_policy(
            "rbac-no-privileged-bindings",
            "No RoleBinding or ClusterRoleBinding grants cluster-admin or binds system:masters, system:anonymous, "
            "system:unauthenticated or system:authenticated (CIS GKE 4.1.1, 4.1.6, 4.1.8 to 4.1.10).",
            lambda r, _config, _stack: binding_problems(r.type, r.name, r.props),
            stack,
        ),
        resource_policy(
            "rbac-least-privilege-roles",
            "No Role or ClusterRole rule grants a wildcard, a cluster-wide read of Secrets, or bind, escalate or "
            "impersonate (CIS GKE 4.1.2, 4.1.3, 4.1.7).",
            lambda r, _config, _stack: role_problems(r.type, r.name, r.props),
            stack,
        ),
        StackValidationPolicy(
            name="pods-isolated-by-network-policy",
            description="Every pod the program runs is selected for ingress by a NetworkPolicy of its own namespace "
            "(CIS GKE 4.3.2).",
            validate=isolated,
            enforcement_level=MANDATORY,
        ),
        resource_policy(
            "namespaces-enforce-pod-security",
            "Every Namespace the stack makes carries the pod-security.kubernetes.io/enforce label at baseline or "
            "restricted (privileged on the node audit logging's alone), and no Helm release makes its namespace itself, "
            "unlabelled (CIS GKE 4.2.1).",
            lambda r, _config, _stack: pod_security_problems(r.type, r.name, r.props),
            stack,
        ),
        resource_policy(
            "pods-own-service-account",
            "Every pod template names a ServiceAccount of its own, never its namespace's default one (CIS GKE 4.1.4).",
            lambda r, _config, _stack: service_account_problems(r.type, r.name, r.props),
            stack,
        ),
        resource_policy(
            "helm-charts-pinned",
            "Every Helm chart pinned to one exact version (a chart in this repository is pinned by the commit).",
            lambda r, _config, _stack: chart_problems(r.type, r.name, r.props),
            stack,
        ),
    ]
