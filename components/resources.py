"""Pulumi helpers every component shares: child options and custom resources from manifests."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s
from pydantic.alias_generators import to_camel

# A JobSet's spec is immutable once created, and Kueue refuses a new queue label on a queued one: a change to either
# must replace it (a new run), and the old one must go first because the replacement keeps its name.
REPLACE_ON_SPEC_CHANGE = pulumi.ResourceOptions(
    replace_on_changes=["metadata.labels", "spec"], delete_before_replace=True
)

# A Google service account the stack makes is replaced new-first: the new account (and, through their own replacement,
# its grants and bindings) exists before the old one is deleted, so its pods or nodes are never left with no account
# that may do their work. Without this option a replacement deletes the old account first: `account_id` is ForceNew
# (hashicorp/terraform-provider-google-beta v7.45.0 google-beta/services/resourcemanager/
# resource_google_service_account.go) and auto-named by pulumi-gcp (provider/resources.go, AutoName), so for an id the
# program sets the bridge answers DeleteBeforeReplace (pulumi/pulumi-terraform-bridge v3.136.0
# pkg/tfbridge/provider.go Diff, schema.go nameRequiresDeleteBeforeReplace), an answer an explicit false overrides
# (pulumi/pulumi v3.259.0 pkg/resource/deploy/step_generator.go: goal.DeleteBeforeReplace over
# diff.DeleteBeforeReplace). Both may exist at once: only `account_id` and `project` replace an account, and either
# gives another email.
NEW_ACCOUNT_FIRST = pulumi.ResourceOptions(delete_before_replace=False)

# The program is the source of truth for every field it declares on a Kubernetes object. The provider applies with
# server-side apply, and without force an apply fails on any field another manager took since (`kubectl edit`,
# `kubectl scale`, a console edit): `pulumi up --refresh` could then not put drift back. With patchForce the program's
# apply takes those fields back; fields it does not declare stay with whoever set them.
APPLY_ANNOTATIONS = {"pulumi.com/patchForce": "true"}


def owned(metadata: dict[str, Any]) -> Any:  # Any: the typed constructors take it as their ObjectMetaArgsDict
    """An object's metadata with the annotations every object the program applies carries."""
    return {**metadata, "annotations": {**(metadata.get("annotations") or {}), **APPLY_ANNOTATIONS}}


def children_of(component: pulumi.ComponentResource, opts: pulumi.ResourceOptions | None) -> pulumi.ResourceOptions:
    """Options for a component's children: parented to it, and waiting on what it waits on (Pulumi does not pass a
    component's ``depends_on`` down to its children: a subnet could be created before the compute API it needs)."""
    return pulumi.ResourceOptions(parent=component, depends_on=opts.depends_on if opts else None)


def waiting_for(opts: pulumi.ResourceOptions, *resources: pulumi.Input[pulumi.Resource]) -> pulumi.ResourceOptions:
    """``opts`` that also wait for ``resources``."""
    return pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=list(resources)))


def private_bucket(
    name: str,
    *,
    bucket_name: str,
    project: str,
    region: str,
    keep_on_destroy: bool,
    lifecycle_rules: list[gcp.storage.BucketLifecycleRuleArgsDict] | None,
    opts: pulumi.ResourceOptions,
) -> gcp.storage.Bucket:
    """A bucket only IAM grants open: uniform access (which IAM conditions on the bucket also need), public access
    prevented. ``keep_on_destroy``: `pulumi destroy` (or switching its workload off) forgets the bucket and leaves it
    and its data in the project, instead of failing as a protected resource would; otherwise the bucket is deleted
    with everything in it. ``lifecycle_rules``: object versioning on, with these rules deleting old versions; None leaves
    versioning off."""
    return gcp.storage.Bucket(
        name,
        name=bucket_name,
        project=project,
        location=region.upper(),
        uniform_bucket_level_access=True,
        public_access_prevention="enforced",
        versioning={"enabled": True} if lifecycle_rules is not None else None,
        lifecycle_rules=lifecycle_rules,
        force_destroy=not keep_on_destroy,
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(retain_on_delete=keep_on_destroy)),
    )


# Read a secret (its versions' payloads): the Hugging Face token's, Docker Hub's password; granted on that one secret.
SECRET_ACCESSOR = "roles/secretmanager.secretAccessor"


def secret_reader(
    name: str, secret: str, member: pulumi.Input[str], opts: pulumi.ResourceOptions
) -> gcp.secretmanager.SecretIamMember:
    """``member``'s read of a Secret Manager ``secret`` (projects/<project>/secrets/<secret>), granted on the secret in
    its own project: whatever version of it they read."""
    return gcp.secretmanager.SecretIamMember(
        name, project=secret.split("/")[1], secret_id=secret, role=SECRET_ACCESSOR, member=member, opts=opts
    )


def object_prefix_condition(bucket: str, prefix: str, title: str) -> gcp.storage.BucketIAMMemberConditionArgsDict:
    """An IAM condition limiting a bucket grant to the objects whose names start with ``prefix``. Cloud Storage names
    an object ``projects/_/buckets/<bucket>/objects/<name>`` in conditions (IAM "Resource attributes for IAM
    Conditions"), and takes conditions only on buckets with uniform bucket-level access (Cloud Storage "Uniform
    bucket-level access"). A bucket-level call (listing the bucket) never matches it: grant that unconditionally, with
    a read role."""
    return {
        "title": title,
        "description": f"objects of gs://{bucket}/{prefix}",
        "expression": f'resource.name.startsWith("projects/_/buckets/{bucket}/objects/{prefix}")',
    }


# The kinds a YAML base holds that are registered as their typed resource, each with the keywords its constructor takes
# besides the metadata, each the snake_case of a field of the manifest; any other kind is a custom resource.
TYPED_KINDS: dict[tuple[str, str], tuple[Callable[..., pulumi.CustomResource], tuple[str, ...]]] = {
    ("v1", "Namespace"): (k8s.core.v1.Namespace, ()),
    ("v1", "ServiceAccount"): (k8s.core.v1.ServiceAccount, ("automount_service_account_token",)),
    ("v1", "Secret"): (k8s.core.v1.Secret, ("type",)),
    ("v1", "ConfigMap"): (k8s.core.v1.ConfigMap, ("data",)),
    ("rbac.authorization.k8s.io/v1", "Role"): (k8s.rbac.v1.Role, ("rules",)),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): (k8s.rbac.v1.RoleBinding, ("role_ref", "subjects")),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): (k8s.rbac.v1.ClusterRoleBinding, ("role_ref", "subjects")),
    ("networking.k8s.io/v1", "NetworkPolicy"): (k8s.networking.v1.NetworkPolicy, ("spec",)),
    ("apps/v1", "Deployment"): (k8s.apps.v1.Deployment, ("spec",)),
    ("batch/v1", "Job"): (k8s.batch.v1.Job, ("spec",)),
}


def kubernetes_object(name: str, manifest: dict[str, Any], opts: pulumi.ResourceOptions) -> pulumi.CustomResource:
    """An object of a YAML base, as an overlay built it, registered as its typed resource (``TYPED_KINDS``); any other
    kind (a JobSet, a LeaderWorkerSet, a SecretProviderClass) as a custom resource."""
    typed = TYPED_KINDS.get((manifest["apiVersion"], manifest["kind"]))
    if typed is None:
        return k8s.apiextensions.CustomResource(
            name,
            api_version=manifest["apiVersion"],
            kind=manifest["kind"],
            metadata=owned(manifest["metadata"]),
            spec=manifest["spec"],
            opts=opts,
        )
    resource, keywords = typed
    given = {keyword: manifest.get(to_camel(keyword)) for keyword in keywords}
    return resource(name, metadata=owned(manifest["metadata"]), opts=opts, **given)


def previous_outputs() -> pulumi.Output[dict[str, Any]]:
    """The outputs of this stack's last update (empty for a new stack), read through a StackReference."""
    name = f"{pulumi.get_organization()}/{pulumi.get_project()}/{pulumi.get_stack()}"
    outputs = pulumi.StackReference("previous-update", stack_name=name).outputs
    return outputs.apply(lambda values: dict(values or {}))


# --- Reads of the cloud (invokes) whose answer a review words ---------------------------------------

T = TypeVar("T")


@dataclass(frozen=True)
class ReadAnswer(Generic[T]):
    """An invoke's answer as the program sees it: its value, or the provider's error, or unknown (a preview
    whose engine declines the read: what it waits for is created by this `up`)."""

    value: T | None = None
    error: str = ""
    unknown: bool = False

    @property
    def ok(self) -> bool:
        return not (self.error or self.unknown)


def answer_of(read: pulumi.Output[T]) -> pulumi.Output[ReadAnswer[T]]:
    """The invoke's answer, its failure included, for a review to name the key of. The SDK makes a provider's error
    the invoke Output's exception (pulumi 3.272.0 runtime/invoke.py), and at the program's end re-raises every failed
    Output it still tracks (runtime/stack.py wait_for_rpcs, SETTINGS.outputs), whoever read it; an Output derived from
    another takes over its tracking (output.py Output._untrack, which apply calls): this one does, so the failure
    reaches the user as the review words it, or not at all where the review takes it (tpu.reservation.acceptRisk)."""
    read._untrack()  # the SDK's own hand-over of a failure to the Output that reads it

    async def outcome() -> ReadAnswer[T]:
        try:
            if not await read.is_known():
                return ReadAnswer(unknown=True)
            return ReadAnswer(value=await read.future())
        except Exception as error:  # the provider's error, any type: the review words it
            return ReadAnswer(error=str(error))

    return pulumi.Output.from_input(outcome())
