"""No Kubernetes binding that hands out the cluster's highest privileges or binds the built-in groups
of every caller, and no role that reaches past what it needs (the CIS controls held: policy/cis.yaml).

The program's controllers get their own narrow roles; cluster-admin, the system:masters group
(which no RBAC rule can restrict) and the anonymous, unauthenticated and authenticated identities are
never a binding's business here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from policy.resources import kubernetes_objects, list_of, mapping_of

RBAC_GROUP = "rbac.authorization.k8s.io"
BINDING_KINDS = ("RoleBinding", "ClusterRoleBinding")
CLUSTER_ADMIN = "cluster-admin"
# (kind, label, body, owner) -> what is wrong with that one object
ObjectCheck = Callable[[str, str, Mapping[str, Any], str], list[str]]
# subject name -> (the CIS control, why)
FORBIDDEN_SUBJECTS = {
    "system:masters": ("4.1.6", "its members pass every authorization check, whatever RBAC says"),
    "system:anonymous": ("4.1.8", "it is every request without credentials"),
    "system:unauthenticated": ("4.1.9", "it is every request without credentials"),
    "system:authenticated": ("4.1.10", "it is every Google account that can reach the API server"),
}


def _rbac_problems(
    kinds: tuple[str, ...], check: ObjectCheck, resource_type: str, name: str, props: Mapping[str, Any]
) -> list[str]:
    """``check`` on every RBAC object of ``kinds`` a resource declares (itself, or each object a ConfigGroup lists: a
    chart's templates are not in the preview, so a Helm release declares none)."""
    problems = []
    for obj in kubernetes_objects(resource_type, name, props):
        if obj.kind in kinds and obj.api_group == RBAC_GROUP:
            problems += check(obj.kind, obj.label, obj.body, name)
    return problems


def binding_problems(resource_type: str, name: str, props: Mapping[str, Any]) -> list[str]:
    return _rbac_problems(BINDING_KINDS, object_problems, resource_type, name, props)


def object_problems(kind: str, label: str, body: Mapping[str, Any], owner: str = "") -> list[str]:
    """What is wrong with one (Cluster)RoleBinding ``body``."""
    problems = []
    role = mapping_of(body, "roleRef", owner=owner)
    if role.get("kind") == "ClusterRole" and role.get("name") == CLUSTER_ADMIN:
        problems.append(
            f"{kind} {label} grants {CLUSTER_ADMIN}: bind a role with only the permissions needed (CIS GKE 4.1.1)"
        )
    for subject in list_of(body, "subjects", owner=owner):
        if isinstance(subject, Mapping) and subject.get("name") in FORBIDDEN_SUBJECTS:
            control, why = FORBIDDEN_SUBJECTS[str(subject["name"])]
            problems.append(f"{kind} {label} binds {subject['name']}: {why} (CIS GKE {control})")
    return problems


# --- Roles: no wildcard, no cluster-wide read of Secrets, no bind, escalate or impersonate --------

ROLE_KINDS = ("Role", "ClusterRole")
READ_VERBS = frozenset({"get", "list", "watch"})
# verb -> (the resources it is dangerous on, the CIS control, why)
DANGEROUS_VERBS = {
    "bind": ({"rolebindings", "clusterrolebindings", "roles", "clusterroles"}, "4.1.7", "it grants roles it lacks"),
    "escalate": ({"roles", "clusterroles"}, "4.1.7", "it widens roles beyond its own rights"),
    "impersonate": ({"users", "groups", "serviceaccounts", "uids"}, "4.1.7", "it acts as anyone"),
}


def role_problems(resource_type: str, name: str, props: Mapping[str, Any]) -> list[str]:
    return _rbac_problems(ROLE_KINDS, role_object_problems, resource_type, name, props)


def role_object_problems(kind: str, label: str, body: Mapping[str, Any], owner: str = "") -> list[str]:
    """What is wrong with one Role or ClusterRole ``body``: every rule is read (checkov's CKV_K8S_49 reads
    only the first, and its CKV2_K8S_3 and CKV2_K8S_5 pass a role as soon as any rule names resources)."""
    problems = []
    for index, rule in enumerate(list_of(body, "rules", owner=owner)):
        if not isinstance(rule, Mapping):
            continue
        where = f"{kind} {label} rules[{index}]"
        fields = {key: [str(v) for v in list_of(rule, key, owner=owner)] for key in ("apiGroups", "resources", "verbs")}
        wild = [key for key, values in fields.items() if "*" in values]
        if wild:
            problems.append(f"{where} grants '*' in {', '.join(wild)}: name what it needs (CIS GKE 4.1.3)")
        verbs, resources = set(fields["verbs"]), set(fields["resources"])
        named = bool(list_of(rule, "resourceNames", owner=owner))
        if kind == "ClusterRole" and "secrets" in resources and verbs & READ_VERBS and not named:
            problems.append(
                f"{where} reads every Secret of the cluster: use a Role in the namespace, with resourceNames where "
                "it can (CIS GKE 4.1.2)"
            )
        for verb, (targets, control, why) in DANGEROUS_VERBS.items():
            if verb in verbs and resources & targets:
                problems.append(
                    f"{where} grants {verb} on {', '.join(sorted(resources & targets))}: {why} (CIS GKE {control})"
                )
    return problems
