"""A Saxml cell on multi-host TPU v5e: state bucket, identity, admin/model/HTTP servers."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from components.gcp.existing_cluster import Target
from components.resources import (
    NEW_ACCOUNT_FIRST,
    REPLACE_ON_SPEC_CHANGE,
    children_of,
    kubernetes_object,
    owned,
    private_bucket,
    waiting_for,
)
from components.workloads.saxml.config import NoncurrentVersionsConfig, SaxmlConfig, bucket_name
from components.workloads.saxml.objects import ADMIN_NAME, HTTP_NAME, MODEL_SERVER_NAME, SaxmlObjects

WORKLOAD_IDENTITY_ANNOTATION = "iam.gke.io/gcp-service-account"


@dataclass(frozen=True)
class SaxmlArgs:
    saxml: SaxmlConfig
    project: str
    region: str
    namespace_object: dict[str, Any]  # the Namespace, with its Pod Security labels
    objects: SaxmlObjects
    cluster: Target  # its provider, and its workload pool: the bindings to it wait for the cluster
    # What the model servers wait for: the JobSet release, which serves the JobSet CRD and webhook (none: installed
    # elsewhere), and the TPU drain gate (the model servers go before the pools)
    model_servers_ready: list[pulumi.Resource]
    load_balancer_ready: list[pulumi.Resource]  # the load-balancer drain gate: the Service goes before the subnets


# What each server does with the bucket (google/saxml v1.1.0): the admin server creates the cell's
# directories and writes its address and config under sax-root and its state under sax-fs-root, every 10 s
# (saxml/tools/docker/Dockerfile.admin; saxml/common/addr.go SetAddr, config.go, state.go;
# saxml/admin/mgr.go); the model servers and the HTTP server only read the admin server's address there
# (saxml/common/location.go Join, addr.go FetchAddr, platform/cloud.go ReadFile).
ADMIN_ROLE = "roles/storage.objectUser"
READER_ROLE = "roles/storage.objectViewer"


def state_lifecycle_rules(versions: NoncurrentVersionsConfig) -> list[gcp.storage.BucketLifecycleRuleArgsDict]:
    """The versioned state bucket's rules: a noncurrent version is deleted once it has been noncurrent for ``days``
    days, or once ``newer_versions`` newer versions of its object exist, whichever comes first; 0 turns that limit
    off (validation requires one on, or the versions of an object that is rewritten grow without bound). One Delete
    rule per limit that is on (the conditions of one rule must all hold, so two rules make either limit enough).
    ``with_state: ARCHIVED``: they never match a live object. A 0 is never sent: the provider drops a 0 of either
    condition (pulumi-gcp BucketLifecycleRuleCondition)."""
    conditions: list[gcp.storage.BucketLifecycleRuleConditionArgsDict] = []
    if versions.days:
        conditions.append({"days_since_noncurrent_time": versions.days, "with_state": "ARCHIVED"})
    if versions.newer_versions:
        conditions.append({"num_newer_versions": versions.newer_versions, "with_state": "ARCHIVED"})
    return [{"action": {"type": "Delete"}, "condition": condition} for condition in conditions]


class SaxmlCell(pulumi.ComponentResource):
    def __init__(self, name: str, args: SaxmlArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-gke:workloads:SaxmlCell", name, None, opts)
        children = children_of(self, opts)
        saxml = args.saxml
        bucket = private_bucket(
            "admin-state",
            bucket_name=bucket_name(saxml, args.project),
            project=args.project,
            region=args.region,
            keep_on_destroy=saxml.keep_bucket_on_destroy,
            lifecycle_rules=state_lifecycle_rules(saxml.noncurrent_versions),
            opts=children,
        )
        self.bucket_name = bucket.name
        on_cluster = pulumi.ResourceOptions(parent=self, provider=args.cluster.provider)
        self.namespace = kubernetes_object(saxml.namespace, args.namespace_object, on_cluster)
        in_namespace = waiting_for(on_cluster, self.namespace)
        # Each server starts with its NetworkPolicy in place (and is deleted before it): the namespace's default
        # deny, made after these (components/workloads/network_policies), never cuts it off a sender.
        policies = {
            p["metadata"]["name"]: kubernetes_object(f"{p['metadata']['name']}-network-policy", p, in_namespace)
            for p in args.objects.network_policies
        }
        self.network_policies: dict[str, list[pulumi.Resource]] = {saxml.namespace: list(policies.values())}

        def identity(prefix: str, account_name: str, account_id: str, role: str, does: str) -> pulumi.ResourceOptions:
            """A Google service account with ``role`` on the state bucket and nothing else, the Kubernetes service
            account ``account_name`` bound to it, and the options of a pod that runs as it (waiting for all three,
            so that it starts only once it can use the bucket, and is deleted before it goes). Resource names:
            ``<prefix>-gsa``, ``<prefix>-gsa-<role>``, ``<prefix>-ksa-workload-identity``."""
            account = gcp.serviceaccount.Account(
                f"{prefix}-gsa",
                project=args.project,
                account_id=account_id,
                display_name=f"Saxml {does} (Workload Identity)",
                # A new id: the new account, grant and binding first, the old ones deleted at the end of the `up`
                opts=pulumi.ResourceOptions.merge(children, NEW_ACCOUNT_FIRST),
            )
            # Known before apply, so the render shows the real annotation and members.
            email = f"{account_id}@{args.project}.iam.gserviceaccount.com"
            # roles/storage.objectUser -> object-user: the existing resource names' form
            role_name = re.sub("([A-Z])", r"-\1", role.rsplit(".", 1)[-1]).lower()
            bucket_role = gcp.storage.BucketIAMMember(
                f"{prefix}-gsa-{role_name}",
                bucket=bucket.name,
                role=role,
                member=f"serviceAccount:{email}",
                opts=waiting_for(children, account),
            )
            workload_identity = gcp.serviceaccount.IAMMember(
                f"{prefix}-ksa-workload-identity",
                service_account_id=account.name,
                role="roles/iam.workloadIdentityUser",
                member=args.cluster.workload_pool.apply(
                    lambda pool: f"serviceAccount:{pool}[{saxml.namespace}/{account_name}]"
                ),
                opts=children,
            )
            metadata = {"name": account_name, "namespace": saxml.namespace}
            # Its annotation names the account its pods act as (GKE's metadata server reads it): it names a new
            # account only once that account may use the bucket and the pods may act as it.
            service_account = k8s.core.v1.ServiceAccount(
                account_name,
                metadata=owned({**metadata, "annotations": {WORKLOAD_IDENTITY_ANNOTATION: email}}),
                opts=waiting_for(in_namespace, account, bucket_role, workload_identity),
            )
            return waiting_for(in_namespace, service_account, bucket_role, workload_identity)

        # The admin server is the one account that writes the cell's state; the model and HTTP servers read it.
        as_admin = identity(
            "sax-admin",
            saxml.admin_service_account_name,
            saxml.admin_google_service_account_id,
            ADMIN_ROLE,
            "admin server: writes the cell's state",
        )
        as_reader = identity(
            "sax",
            saxml.service_account_name,
            saxml.google_service_account_id,
            READER_ROLE,
            "model and HTTP servers: read the cell's state",
        )
        admin = kubernetes_object(
            "admin-server", args.objects.admin_deployment, waiting_for(as_admin, policies[ADMIN_NAME])
        )
        kubernetes_object(
            "model-servers",
            args.objects.model_server_jobset,
            pulumi.ResourceOptions.merge(
                waiting_for(as_reader, *args.model_servers_ready, admin, policies[MODEL_SERVER_NAME]),
                REPLACE_ON_SPEC_CHANGE,
            ),
        )
        http = kubernetes_object(
            "http-server", args.objects.http_deployment, waiting_for(as_reader, admin, policies[HTTP_NAME])
        )
        service = k8s.core.v1.Service(
            "http-load-balancer",
            metadata=owned(args.objects.http_service["metadata"]),
            spec=args.objects.http_service["spec"],
            opts=waiting_for(in_namespace, http, *args.load_balancer_ready),
        )
        self.http_address = service.status.apply(_load_balancer_address)
        self.register_outputs({"bucketName": self.bucket_name, "httpAddress": self.http_address})


def _load_balancer_address(status: Any) -> str | None:
    ingress = (status.load_balancer.ingress if status and status.load_balancer else None) or []
    return (ingress[0].ip or ingress[0].hostname) if ingress else None
