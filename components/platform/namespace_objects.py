"""The namespaces the stack makes, each labelled for Pod Security admission (CIS GKE 4.2.1), built from
manifests/namespaces/namespace.yaml and a NamespacesInput.

Pure: returns Kubernetes objects as dicts. The workload namespaces and the Saxml cell's are Namespace objects of
the program; the controllers' are applied as patches of the same object (components/platform/releases.py says why).
"""

from __future__ import annotations

from typing import Any

from components.manifests import load_document
from components.platform.config import POD_SECURITY_LEVELS, NamespacesInput

NAMESPACE_FILE = "namespaces/namespace.yaml"
# https://kubernetes.io/docs/concepts/security/pod-security-admission/, "Pod Security Admission labels for namespaces"
ENFORCE_LABEL = "pod-security.kubernetes.io/enforce"
ENFORCE_VERSION_LABEL = "pod-security.kubernetes.io/enforce-version"


def namespace_objects(spec: NamespacesInput) -> dict[str, dict[str, Any]]:
    """Namespace name -> its Namespace object."""
    return {name: namespace_object(name, level, spec.version) for name, level in spec.levels}


def namespace_object(name: str, level: str, version: str) -> dict[str, Any]:
    if level not in POD_SECURITY_LEVELS:
        raise ValueError(f"{level!r} is not a Pod Security level a namespace of the stack may enforce")
    namespace = load_document(NAMESPACE_FILE)
    namespace["metadata"]["name"] = name
    labels = namespace["metadata"]["labels"]
    labels[ENFORCE_LABEL] = level
    labels[ENFORCE_VERSION_LABEL] = version
    return namespace
