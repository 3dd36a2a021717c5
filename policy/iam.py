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
PROJECT_GRANTS = (PROJECT_IAM_MEMBER, PROJECT_IAM_BINDING, PROJECT_IAM_POLICY)


def _granted_roles(resource_type: str, name: str, props: Mapping[str, Any]) -> list[str]:
    """The roles an IAM member, binding or policy resource grants (an IAMPolicy's in its ``policyData``, a JSON
    document); ValueError when a policy's document is none."""
    if resource_type not in (PROJECT_IAM_POLICY, REPOSITORY_IAM_POLICY):
        return [get(props, "role", "", owner=name)]
    policy_data = get(props, "policyData", "", owner=name)
    document = json.loads(policy_data) if isinstance(policy_data, str) else policy_data
    bindings = document.get("bindings", []) if isinstance(document, Mapping) else []
    return [str(b.get("role", "")) for b in bindings if isinstance(b, Mapping)]


def _unreadable(name: str) -> list[str]:
    return [f"{name} has a policyData that is not a JSON policy document, so its roles cannot be checked"]


def project_role_problems(resource_type: str, name: str, props: Mapping[str, Any]) -> list[str]:
    if resource_type not in PROJECT_GRANTS:
        return []
    try:
        roles = _granted_roles(resource_type, name, props)
    except ValueError:
        return _unreadable(name)
    project = props.get("project") or "the provider's project"
    return [
        f"{name} grants {role} on project {project}: grant a narrower predefined role "
        f"(storage.objectUser on a bucket, not storage.admin on the project)"
        for role in roles
        if role in FORBIDDEN_PROJECT_ROLES
    ]


# Artifact Registry's one read-only predefined role: every other roles/artifactregistry.* role uploads, deletes or
# administers artifacts or repositories (docs.cloud.google.com/iam/docs/roles-permissions/artifactregistry, read
# 2026-12). An allow-list, so a role added upstream later is refused until someone reads what it does.
REGISTRY_READ_ROLE = "roles/artifactregistry.reader"
REGISTRY_ROLE_PREFIX = "roles/artifactregistry."
REPOSITORY_IAM_MEMBER = "gcp:artifactregistry/repositoryIamMember:RepositoryIamMember"
REPOSITORY_IAM_POLICY = "gcp:artifactregistry/repositoryIamPolicy:RepositoryIamPolicy"
REPOSITORY_GRANTS = (
    REPOSITORY_IAM_MEMBER,
    "gcp:artifactregistry/repositoryIamBinding:RepositoryIamBinding",
    REPOSITORY_IAM_POLICY,
)
_GRANT_TYPES = dict.fromkeys(PROJECT_GRANTS, "project") | dict.fromkeys(REPOSITORY_GRANTS, "repository")


def registry_role_problems(resource_type: str, name: str, props: Mapping[str, Any]) -> list[str]:
    """Every Artifact Registry role the program grants, on a project or on a repository, is the reader's."""
    scope = _GRANT_TYPES.get(resource_type)
    if scope is None:
        return []
    try:
        roles = _granted_roles(resource_type, name, props)
    except ValueError:
        return _unreadable(name)
    where = props.get("repository") if scope == "repository" else props.get("project")
    return [
        f"{name} grants {role} on {scope} {where or 'of the provider'}: access to image repositories is read-only "
        f"(CIS GKE 5.1.3); grant {REGISTRY_READ_ROLE}"
        for role in roles
        if str(role).startswith(REGISTRY_ROLE_PREFIX) and role != REGISTRY_READ_ROLE
    ]
