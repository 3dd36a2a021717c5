"""Resource options shared by the components."""

from __future__ import annotations

import pulumi


def children_of(component: pulumi.ComponentResource, opts: pulumi.ResourceOptions | None) -> pulumi.ResourceOptions:
    """Options for a component's children: parented to it, and waiting on what it waits on.

    Pulumi does not pass a component's ``depends_on`` down to its children, so without this a
    subnet could be created before the compute API it needs is enabled.
    """
    return pulumi.ResourceOptions(parent=component, depends_on=opts.depends_on if opts else None)
