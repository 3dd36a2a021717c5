"""A Saxml cell on multi-host TPU v5e: state bucket, identity, admin/model/HTTP servers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from components.resources import REPLACE_ON_SPEC_CHANGE, children_of, custom_resource, owned, private_bucket
from components.workloads.saxml.objects import SaxmlObjects

WORKLOAD_IDENTITY_ANNOTATION = "iam.gke.io/gcp-service-account"


@dataclass(frozen=True)
class SaxmlArgs:
    project: str
    region: str
    bucket_name: str
    keep_bucket_on_destroy: bool
    workload_pool: pulumi.Input[str]  # the cluster's: the binding to it waits for the cluster
    google_service_account_id: str
    namespace: str
    service_account_name: str
    objects: SaxmlObjects
    provider: k8s.Provider
    jobset_release: pulumi.Resource | None  # serves the JobSet CRD and webhook; None: installed elsewhere
    tpu_ready: list[pulumi.Resource]  # the TPU drain gate: the model servers go before the pools
    load_balancer_ready: list[pulumi.Resource]  # the load-balancer drain gate: the Service goes before the subnets


class SaxmlCell(pulumi.ComponentResource):
    def __init__(self, name: str, args: SaxmlArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-gke:workloads:SaxmlCell", name, None, opts)
        identity = self._cloud_identity(args, children_of(self, opts))
        on_cluster = pulumi.ResourceOptions(parent=self, provider=args.provider)
        namespace = k8s.core.v1.Namespace(args.namespace, metadata=owned({"name": args.namespace}), opts=on_cluster)
        in_namespace = pulumi.ResourceOptions.merge(on_cluster, pulumi.ResourceOptions(depends_on=[namespace]))
        service_account = k8s.core.v1.ServiceAccount(
            args.service_account_name,
            metadata=owned(
                {
                    "name": args.service_account_name,
                    "namespace": args.namespace,
                    "annotations": {WORKLOAD_IDENTITY_ANNOTATION: self.google_service_account_email},
                }
            ),
            opts=in_namespace,
        )
        # Pods start only once their identity can read and write the bucket.
        with_identity = pulumi.ResourceOptions.merge(
            in_namespace, pulumi.ResourceOptions(depends_on=[service_account, *identity])
        )
        admin = _deployment("admin-server", args.objects.admin_deployment, with_identity)
        custom_resource(
            "model-servers",
            args.objects.model_server_jobset,
            pulumi.ResourceOptions.merge(
                pulumi.ResourceOptions.merge(
                    with_identity,
                    pulumi.ResourceOptions(
                        depends_on=[*([args.jobset_release] if args.jobset_release else []), admin, *args.tpu_ready]
                    ),
                ),
                REPLACE_ON_SPEC_CHANGE,
            ),
        )
        http = _deployment(
            "http-server",
            args.objects.http_deployment,
            pulumi.ResourceOptions.merge(with_identity, pulumi.ResourceOptions(depends_on=[admin])),
        )
        service = k8s.core.v1.Service(
            "http-load-balancer",
            metadata=owned(args.objects.http_service["metadata"]),
            spec=args.objects.http_service["spec"],
            opts=pulumi.ResourceOptions.merge(
                in_namespace, pulumi.ResourceOptions(depends_on=[http, *args.load_balancer_ready])
            ),
        )
        self.http_address = service.status.apply(_load_balancer_address)
        self.register_outputs({"bucketName": self.bucket_name, "httpAddress": self.http_address})

    def _cloud_identity(self, args: SaxmlArgs, opts: pulumi.ResourceOptions) -> list[pulumi.Resource]:
        """State bucket and a Google service account that may use objects in it, and nothing else."""
        bucket = private_bucket(
            "admin-state",
            bucket_name=args.bucket_name,
            project=args.project,
            region=args.region,
            keep_on_destroy=args.keep_bucket_on_destroy,
            versioning=True,
            opts=opts,
        )
        self.bucket_name = bucket.name
        account = gcp.serviceaccount.Account(
            "sax-gsa",
            project=args.project,
            account_id=args.google_service_account_id,
            display_name="Saxml servers (Workload Identity)",
            opts=opts,
        )
        # Known before apply, so the render shows the real annotation and members.
        self.google_service_account_email = f"{args.google_service_account_id}@{args.project}.iam.gserviceaccount.com"
        object_user = gcp.storage.BucketIAMMember(
            "sax-gsa-object-user",
            bucket=bucket.name,
            role="roles/storage.objectUser",
            member=f"serviceAccount:{self.google_service_account_email}",
            opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[account])),
        )
        workload_identity = gcp.serviceaccount.IAMMember(
            "sax-ksa-workload-identity",
            service_account_id=account.name,
            role="roles/iam.workloadIdentityUser",
            member=pulumi.Output.from_input(args.workload_pool).apply(
                lambda pool: f"serviceAccount:{pool}[{args.namespace}/{args.service_account_name}]"
            ),
            opts=opts,
        )
        return [object_user, workload_identity]


def _deployment(name: str, manifest: dict[str, Any], opts: pulumi.ResourceOptions) -> k8s.apps.v1.Deployment:
    return k8s.apps.v1.Deployment(name, metadata=owned(manifest["metadata"]), spec=manifest["spec"], opts=opts)


def _load_balancer_address(status: Any) -> str | None:
    ingress = (status.load_balancer.ingress if status and status.load_balancer else None) or []
    return (ingress[0].ip or ingress[0].hostname) if ingress else None
