"""Pulumi helpers every component shares: child options and custom resources from manifests."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

# A JobSet's spec is immutable once created: a change must replace it (a new run), and the old
# one must go first because the replacement keeps its name.
REPLACE_ON_SPEC_CHANGE = pulumi.ResourceOptions(replace_on_changes=["spec"], delete_before_replace=True)


def children_of(component: pulumi.ComponentResource, opts: pulumi.ResourceOptions | None) -> pulumi.ResourceOptions:
    """Options for a component's children: parented to it, and waiting on what it waits on.

    Pulumi does not pass a component's ``depends_on`` down to its children, so without this a
    subnet could be created before the compute API it needs is enabled.
    """
    return pulumi.ResourceOptions(parent=component, depends_on=opts.depends_on if opts else None)


def custom_resource(
    name: str, manifest: dict[str, Any], opts: pulumi.ResourceOptions
) -> k8s.apiextensions.CustomResource:
    """A custom resource (JobSet, LeaderWorkerSet) registered from a manifest an overlay built."""
    return k8s.apiextensions.CustomResource(
        name,
        api_version=manifest["apiVersion"],
        kind=manifest["kind"],
        metadata=manifest["metadata"],
        spec=manifest["spec"],
        opts=opts,
    )
