"""Every namespace the stack makes enforces a Pod Security Standard, baseline or stricter (the CIS controls held:
policy/cis.yaml).

The API server's Pod Security admission refuses a pod that breaks the level named by its namespace's
``pod-security.kubernetes.io/enforce`` label; a namespace without the label admits any pod, privileged ones
included (https://kubernetes.io/docs/concepts/security/pod-security-admission/). The rule reads every Namespace the
stack declares, as an object, a patch of one (which makes it when it is missing), or inside a ConfigGroup, and every
Helm release that would make its namespace itself (``createNamespace``: Helm makes it without labels).

One namespace enforces privileged, and must: the node audit logging's (CIS GKE 5.7.2), whose DaemonSet acts on
every node (components/platform/config.py, NODE_AGENTS_POD_SECURITY). No other namespace may.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from components.operations.config import NODE_AUDIT_NAMESPACE
from components.platform.config import NODE_AGENTS_POD_SECURITY, POD_SECURITY_LEVELS
from components.platform.namespace_objects import ENFORCE_LABEL
from policy.resources import HELM_RELEASE_TYPES, UnknownValue, get, is_unknown, kubernetes_objects, mapping_of

NAMESPACE_KINDS = ("Namespace", "NamespacePatch")
PRIVILEGED = "privileged"  # the third level: no restriction at all
# The namespaces that enforce privileged, and only it: each node agent's.
NODE_AGENT_NAMESPACES = {NODE_AUDIT_NAMESPACE: NODE_AGENTS_POD_SECURITY}


def pod_security_problems(resource_type: str, name: str, props: Mapping[str, Any]) -> list[str]:
    if resource_type in HELM_RELEASE_TYPES:
        if get(props, "createNamespace", False, owner=name) is True:
            return [
                f"Helm release {name} makes its namespace {get(props, 'namespace', '?', owner=name)!r} itself "
                f"(createNamespace), without a {ENFORCE_LABEL} label: make it as a labelled Namespace before the "
                "release (CIS GKE 4.2.1)"
            ]
        return []
    problems = []
    for obj in kubernetes_objects(resource_type, name, props):
        if obj.kind in NAMESPACE_KINDS and obj.api_group == "":
            labels = mapping_of(obj.body, "metadata.labels", owner=name)
            level = labels.get(ENFORCE_LABEL)
            if is_unknown(level):
                raise UnknownValue(name, f"metadata.labels[{ENFORCE_LABEL}]")
            namespace = get(obj.body, "metadata.name", None, owner=name)
            if namespace in NODE_AGENT_NAMESPACES:
                if level != NODE_AGENT_NAMESPACES[namespace]:
                    problems.append(
                        f"{obj.described} has {ENFORCE_LABEL}={level}, but the node audit logging's DaemonSet needs "
                        f"{NODE_AGENT_NAMESPACES[namespace]} there (a privileged container, the node's namespaces and "
                        "host paths): its pods would be refused (CIS GKE 4.2.1, 5.7.2)"
                    )
                continue
            if level not in POD_SECURITY_LEVELS:
                if level is None:
                    found = f"has no {ENFORCE_LABEL} label, so the API server admits any pod there"
                elif level == PRIVILEGED:
                    found = f"enforces {PRIVILEGED}, which admits any pod"
                else:
                    found = f"has {ENFORCE_LABEL}={level}, which is no level of the Pod Security Standards"
                problems.append(
                    f"{obj.described} {found}: label it {ENFORCE_LABEL}={' or '.join(POD_SECURITY_LEVELS)} "
                    "(CIS GKE 4.2.1)"
                )
    return problems
