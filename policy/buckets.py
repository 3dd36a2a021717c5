"""Every bucket with uniform bucket-level access (IAM only, no object ACLs) and public access
prevention enforced (no allUsers or allAuthenticatedUsers grant can take effect); a versioned bucket
deletes its noncurrent versions."""

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


def old_version_problems(resource_type: str, name: str, props: Mapping[str, Any]) -> list[str]:
    """A versioned bucket keeps every version of an object it ever held unless a lifecycle rule deletes the
    noncurrent ones: a Delete rule with daysSinceNoncurrentTime or numNewerVersions above 0 (the provider
    drops a 0), never matching a live object."""
    if resource_type != BUCKET or get(props, "versioning.enabled", False, owner=name) is not True:
        return []
    rules = get(props, "lifecycleRules", None, owner=name) or []
    for index, _rule in enumerate(rules):
        rule = f"lifecycleRules.{index}"
        if get(props, f"{rule}.action.type", None, owner=name) != "Delete":
            continue
        if get(props, f"{rule}.condition.withState", "ANY", owner=name) == "LIVE":
            continue
        days = get(props, f"{rule}.condition.daysSinceNoncurrentTime", 0, owner=name) or 0
        newer = get(props, f"{rule}.condition.numNewerVersions", 0, owner=name) or 0
        if days > 0 or newer > 0:
            return []
    return [
        f"bucket {name} keeps object versions (versioning.enabled) but no lifecycle rule deletes the noncurrent "
        "ones: every overwrite is kept for ever. Add a Delete rule with daysSinceNoncurrentTime or numNewerVersions"
    ]
