"""Custom resources (JobSets, LeaderWorkerSets) registered from the manifests our overlays build."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

# A JobSet's spec is immutable once created: a change must replace it (a new run), and the old
# one must go first because the replacement keeps its name.
REPLACE_ON_SPEC_CHANGE = pulumi.ResourceOptions(replace_on_changes=["spec"], delete_before_replace=True)


def custom_resource(name: str, manifest: dict[str, Any], opts: pulumi.ResourceOptions) -> k8s.apiextensions.CustomResource:
    return k8s.apiextensions.CustomResource(
        name,
        api_version=manifest["apiVersion"],
        kind=manifest["kind"],
        metadata=manifest["metadata"],
        spec=manifest["spec"],
        opts=opts,
    )
