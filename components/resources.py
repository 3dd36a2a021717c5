"""Pulumi helpers every component shares: child options and custom resources from manifests."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

# A JobSet's spec is immutable once created, and Kueue refuses a new queue label on a queued one:
# a change to either must replace it (a new run), and the old one must go first because the
# replacement keeps its name.
REPLACE_ON_SPEC_CHANGE = pulumi.ResourceOptions(
    replace_on_changes=["metadata.labels", "spec"], delete_before_replace=True
)


# The program is the source of truth for every field it declares on a Kubernetes object. The provider
# applies with server-side apply, and without force an apply fails on any field another manager took
# since (`kubectl edit`, `kubectl scale`, a console edit): `pulumi up --refresh` could then not put
# drift back. With patchForce the program's apply takes those fields back; fields it does not declare
# stay with whoever set them.
APPLY_ANNOTATIONS = {"pulumi.com/patchForce": "true"}


def owned(metadata: dict[str, Any]) -> Any:  # Any: the typed constructors take it as their ObjectMetaArgsDict
    """An object's metadata with the annotations every object the program applies carries."""
    return {**metadata, "annotations": {**(metadata.get("annotations") or {}), **APPLY_ANNOTATIONS}}


def owned_objects(manifests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Manifests (a ConfigGroup's objects) with ``owned`` metadata."""
    return [{**manifest, "metadata": owned(manifest["metadata"])} for manifest in manifests]


def children_of(component: pulumi.ComponentResource, opts: pulumi.ResourceOptions | None) -> pulumi.ResourceOptions:
    """Options for a component's children: parented to it, and waiting on what it waits on.

    Pulumi does not pass a component's ``depends_on`` down to its children, so without this a
    subnet could be created before the compute API it needs is enabled.
    """
    return pulumi.ResourceOptions(parent=component, depends_on=opts.depends_on if opts else None)


def private_bucket(
    name: str,
    *,
    bucket_name: str,
    project: str,
    region: str,
    keep_on_destroy: bool,
    versioning: bool,
    opts: pulumi.ResourceOptions,
) -> gcp.storage.Bucket:
    """A bucket only IAM grants open: uniform access, public access prevented.

    ``keep_on_destroy``: `pulumi destroy` (or switching its workload off) forgets the bucket and
    leaves it and its data in the project, instead of failing as a protected resource would;
    otherwise the bucket is deleted with everything in it.
    """
    return gcp.storage.Bucket(
        name,
        name=bucket_name,
        project=project,
        location=region.upper(),
        uniform_bucket_level_access=True,
        public_access_prevention="enforced",
        versioning={"enabled": True} if versioning else None,
        force_destroy=not keep_on_destroy,
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(retain_on_delete=keep_on_destroy)),
    )


def custom_resource(
    name: str, manifest: dict[str, Any], opts: pulumi.ResourceOptions
) -> k8s.apiextensions.CustomResource:
    """A custom resource (JobSet, LeaderWorkerSet) registered from a manifest an overlay built."""
    return k8s.apiextensions.CustomResource(
        name,
        api_version=manifest["apiVersion"],
        kind=manifest["kind"],
        metadata=owned(manifest["metadata"]),
        spec=manifest["spec"],
        opts=opts,
    )


def kubernetes_object(name: str, manifest: dict[str, Any], opts: pulumi.ResourceOptions) -> pulumi.CustomResource:
    """A core or RBAC object of a YAML base as its typed resource; any other kind as a custom resource."""
    metadata = owned(manifest["metadata"])
    match manifest["apiVersion"], manifest["kind"]:
        case "v1", "ServiceAccount":
            return k8s.core.v1.ServiceAccount(
                name,
                metadata=metadata,
                automount_service_account_token=manifest.get("automountServiceAccountToken"),
                opts=opts,
            )
        case "v1", "Secret":
            return k8s.core.v1.Secret(name, metadata=metadata, type=manifest.get("type"), opts=opts)
        case "rbac.authorization.k8s.io/v1", "Role":
            return k8s.rbac.v1.Role(name, metadata=metadata, rules=manifest["rules"], opts=opts)
        case "rbac.authorization.k8s.io/v1", "RoleBinding":
            return k8s.rbac.v1.RoleBinding(
                name, metadata=metadata, role_ref=manifest["roleRef"], subjects=manifest["subjects"], opts=opts
            )
        case "rbac.authorization.k8s.io/v1", "ClusterRoleBinding":
            return k8s.rbac.v1.ClusterRoleBinding(
                name, metadata=metadata, role_ref=manifest["roleRef"], subjects=manifest["subjects"], opts=opts
            )
    return custom_resource(name, manifest, opts)


def previous_outputs() -> pulumi.Output[dict[str, Any]]:
    """The outputs of this stack's last update (empty for a new stack), read through a StackReference."""
    name = f"{pulumi.get_organization()}/{pulumi.get_project()}/{pulumi.get_stack()}"
    reference = pulumi.StackReference("previous-update", stack_name=name)
    outputs: pulumi.Output[dict[str, Any]] = reference.outputs.apply(lambda values: dict(values or {}))
    return outputs
