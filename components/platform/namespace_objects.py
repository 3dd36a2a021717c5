"""The namespaces the stack makes, each labelled for Pod Security admission (CIS GKE 4.2.1), built from
manifests/namespaces/namespace.yaml, each namespace's level and the Pod Security version pinned.

Pure: returns Kubernetes objects as dicts. The workload namespaces and the Saxml cell's are Namespace objects of
the program; the controllers' are applied as patches of the same object (components/platform/releases.py says why).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from components.manifests import load_document

# https://kubernetes.io/docs/concepts/security/pod-security-admission/, "Pod Security Admission labels for namespaces"
ENFORCE_LABEL = "pod-security.kubernetes.io/enforce"
ENFORCE_VERSION_LABEL = "pod-security.kubernetes.io/enforce-version"


def namespace_objects(levels: Mapping[str, str], version: str) -> dict[str, dict[str, Any]]:
    """Namespace name -> its Namespace object, enforcing its level of ``levels`` at ``version``
    (pod-security.kubernetes.io/enforce-version)."""
    namespaces = {}
    for name, level in levels.items():
        namespace = namespaces[name] = load_document("namespaces/namespace.yaml")
        namespace["metadata"]["name"] = name
        namespace["metadata"]["labels"] |= {ENFORCE_LABEL: level, ENFORCE_VERSION_LABEL: version}
    return namespaces
