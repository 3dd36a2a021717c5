"""No project-wide owner, editor or storage.admin grant: every principal gets the narrow role it needs."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from policy.resources import get

FORBIDDEN_PROJECT_ROLES = frozenset({"roles/owner", "roles/editor", "roles/storage.admin"})
PROJECT_IAM_MEMBER = "gcp:projects/iAMMember:IAMMember"
PROJECT_IAM_BINDING = "gcp:projects/iAMBinding:IAMBinding"
PROJECT_IAM_POLICY = "gcp:projects/iAMPolicy:IAMPolicy"


def project_role_problems(resource_type: str, name: str, props: Mapping[str, Any]) -> list[str]:
    if resource_type in (PROJECT_IAM_MEMBER, PROJECT_IAM_BINDING):
        roles = [get(props, "role", "", owner=name)]
    elif resource_type == PROJECT_IAM_POLICY:
        try:
            roles = _policy_roles(get(props, "policyData", "", owner=name))
        except ValueError:
            return [f"{name} has a policyData that is not a JSON policy document, so its roles cannot be checked"]
    else:
        return []
    project = props.get("project") or "the provider's project"
    return [
        f"{name} grants {role} on project {project}: grant a narrower predefined role "
        f"(storage.objectUser on a bucket, not storage.admin on the project)"
        for role in roles
        if role in FORBIDDEN_PROJECT_ROLES
    ]


def _policy_roles(policy_data: Any) -> list[str]:
    """The roles an IAMPolicy's ``policyData`` (a JSON document) binds; ValueError if it is none."""
    document = json.loads(policy_data) if isinstance(policy_data, str) else policy_data
    bindings = document.get("bindings", []) if isinstance(document, Mapping) else []
    return [str(b.get("role", "")) for b in bindings if isinstance(b, Mapping)]
