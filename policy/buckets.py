"""Every bucket with uniform bucket-level access (IAM only, no object ACLs) and public access
prevention enforced (no allUsers or allAuthenticatedUsers grant can take effect)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policy.resources import get

BUCKET = "gcp:storage/bucket:Bucket"


def bucket_problems(resource_type: str, name: str, props: Mapping[str, Any]) -> list[str]:
    if resource_type != BUCKET:
        return []
    problems = []
    if get(props, "uniformBucketLevelAccess", False, owner=name) is not True:
        problems.append(f"bucket {name} does not set uniformBucketLevelAccess: true, so object ACLs can grant access")
    prevention = get(props, "publicAccessPrevention", None, owner=name)
    if prevention != "enforced":
        problems.append(
            f"bucket {name} has publicAccessPrevention {prevention or 'unset'} (inherited from the project), "
            "not enforced, so a public grant could take effect"
        )
    return problems
