"""Disaggregated prefill/decode serving: weights bucket and identity, the HF token (a Secret, or a Secret
Manager file), the inference Gateway, the llm-d router and the prefill and decode LeaderWorkerSets."""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from components import naming
from components.config_base import secret_of_version
from components.gcp.existing_cluster import Target
from components.gcp.project_services import ProjectServices
from components.gcp.review import read_secret_version, say_review, say_unread
from components.platform.config import HelmChartConfig
from components.platform.gates import ReadyGate
from components.platform.releases import RELEASE_TIMEOUT_SECONDS, helm_release
from components.resources import (
    REPLACE_ON_SPEC_CHANGE,
    ReadAnswer,
    answer_of,
    children_of,
    kubernetes_object,
    object_prefix_condition,
    owned,
    private_bucket,
    secret_reader,
    waiting_for,
)
from components.workloads.serving import objects as serving_objects
from components.workloads.serving.config import (
    RESULTS_DIR,
    XLA_CACHE_DIR,
    ServingConfig,
    served_model_name,
    weights_bucket_name,
    weights_object_prefix,
)
from components.workloads.serving.rules import BucketRead, weights_bucket_review

# Release assets of the Gateway API Inference Extension: the CRDs of one version.
INFERENCE_POOL_CRDS_URL = (
    "https://github.com/kubernetes-sigs/gateway-api-inference-extension/releases/download/{version}/manifests.yaml"
)
# Who may do what on the weights bucket: the model servers read it and write only the XLA cache; the staging Job reads
# it and writes only the snapshot's directory. A write is objectUser under a condition on the object-name prefix;
# listing the bucket is a bucket-level call no such condition matches, so each also reads the whole bucket.
BUCKET_VIEWER = "roles/storage.bucketViewer"
OBJECT_VIEWER = "roles/storage.objectViewer"
OBJECT_USER = "roles/storage.objectUser"


@dataclass(frozen=True)
class ServingArgs:
    serving: ServingConfig
    project: str
    region: str
    # The stack's API enablements (None: a cluster made elsewhere where the stack needs none), whose project number
    # the grants name their principals by: read once for the stack, by the first grant that needs it
    services: ProjectServices | None
    # What the read of an existing bucket (weightsBucket.create false) waits for: the Cloud Storage API's enablement.
    storage_api: list[pulumi.Resource]
    # What the read of the token's secret version waits for: the Secret Manager API's enablement (none: no read)
    secret_manager_api: list[pulumi.Resource]
    objects: serving_objects.ServingObjects
    # The cluster: its provider; its kubeconfig, which the router's gate asks the cluster with; its workload pool,
    # whose bindings wait for the cluster
    cluster: Target
    namespace_ready: list[pulumi.Resource]  # the namespace: all that the account, Secret and Gateway need
    platform_ready: list[pulumi.Resource]  # LWS and slice-controller releases, the TPU gates
    # What admits a workload in the namespace, the staging Job and the LeaderWorkerSets: Kueue (its queue objects, the
    # LocalQueue among them, wait for its webhook) and the slice controller's fail-closed webhook. Not the TPU pools:
    # staging runs meanwhile.
    admission_ready: list[pulumi.Resource]
    network_ready: list[pulumi.Resource]  # the proxy-only subnet and the load-balancer drain gate


# What a pod of each account, the model servers' and the staging Job's, waits for before it may use the bucket or read
# the Hugging Face token (and is deleted before).
_Needs = tuple[list[pulumi.Input[pulumi.Resource]], list[pulumi.Input[pulumi.Resource]]]


class ModelServing(pulumi.ComponentResource):
    def __init__(self, name: str, args: ServingArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-gke:workloads:ModelServing", name, None, opts)
        in_project = children_of(self, opts)
        bucket_for_servers, bucket_for_staging = self._bucket_access(args, in_project)
        on_cluster = pulumi.ResourceOptions(
            parent=self, provider=args.cluster.provider, depends_on=args.namespace_ready
        )
        # Each group of pods starts with its NetworkPolicy in place (and is deleted before it): the namespace's
        # default deny, made after these (components/workloads/network_policies), never cuts them off a sender.
        policies = {
            p["metadata"]["name"]: kubernetes_object(f"{p['metadata']['name']}-network-policy", p, on_cluster)
            for p in args.objects.network_policies
        }
        self.network_policies: dict[str, list[pulumi.Resource]] = {args.serving.namespace: list(policies.values())}
        account = kubernetes_object("model-server-account", args.objects.service_account, on_cluster)
        # `make bench` runs its Job as this account (it is not the stack's): made here with its grants.
        kubernetes_object("serving-benchmark-account", args.objects.benchmark_service_account, on_cluster)
        token_for_servers, token_for_staging = self._hf_token(args, in_project, on_cluster)
        staged = self._weights_staging(args, [*bucket_for_staging, *token_for_staging], on_cluster)
        gateway_ready = self._gateway_and_router(args, on_cluster, policies[serving_objects.ENDPOINT_PICKER_POLICY])
        ready = pulumi.ResourceOptions(
            depends_on=[
                *args.namespace_ready,
                policies[serving_objects.MODEL_SERVERS_POLICY],
                *args.admission_ready,
                *args.platform_ready,
                account,
                *bucket_for_servers,
                *token_for_servers,
                *staged,
            ],
            # Kueue refuses these changes in place; the replacement keeps the name, so the old one
            # goes first (each group reloads the model: see docs/operations.md, "What a change does").
            replace_on_changes=serving_objects.REPLACED_ON,
            delete_before_replace=True,
        )
        for lws in args.objects.leaderworkersets:
            kubernetes_object(lws["metadata"]["name"], lws, pulumi.ResourceOptions.merge(on_cluster, ready))
        self.gateway_address = gateway_ready.status.apply(_gateway_address)
        self.gateway_annotations: pulumi.Output[dict[str, str] | None] = gateway_ready.metadata.apply(
            lambda metadata: (metadata or {}).get("annotations")
        )
        self.register_outputs({"gatewayAddress": self.gateway_address})

    @staticmethod
    def _principal(args: ServingArgs, account: dict[str, Any]) -> pulumi.Output[str]:
        """The IAM principal of the serving namespace's Kubernetes service account ``account`` (a manifest) in the
        cluster's workload pool (``PROJECT.svc.id.goog``)."""
        assert args.services is not None, "the grants name their principals by the project's number"
        return pulumi.Output.format(
            "principal://iam.googleapis.com/projects/{}/locations/global/workloadIdentityPools/{}/subject/ns/{}/sa/{}",
            args.services.project_number,
            args.cluster.workload_pool,
            args.serving.namespace,
            account["metadata"]["name"],
        )

    def _hf_token(
        self, args: ServingArgs, in_project: pulumi.ResourceOptions, on_cluster: pulumi.ResourceOptions
    ) -> _Needs:
        """What hands the pods the Hugging Face token: the Secret of serving.hfToken; or with a Secret Manager secret,
        its SecretProviderClass and each reader's grant on the secret, so that a pod never mounts before its account
        may read. Nothing without a token."""
        serving = args.serving
        if serving.hf_token:
            secret = k8s.core.v1.Secret(
                "hf-token",
                metadata=owned({"name": serving_objects.HF_TOKEN_SECRET_NAME, "namespace": serving.namespace}),
                type="Opaque",
                string_data={serving_objects.HF_TOKEN_SECRET_KEY: pulumi.Output.secret(serving.hf_token)},
                opts=on_cluster,
            )
            return [secret], [secret]
        if args.objects.hf_token_provider_class is None:
            return [], []
        secret_name = secret_of_version(serving.hf_token_secret_version)
        assert secret_name, "a token file needs its secret"
        provider_class = kubernetes_object("hf-token", args.objects.hf_token_provider_class, on_cluster)
        key = "serving.hfTokenSecretVersion"
        reads = [
            read_secret_version(key, serving.hf_token_secret_version, api, self) for api in args.secret_manager_api
        ]
        after_read = waiting_for(in_project, *reads)

        def reader(name: str, account: dict[str, Any]) -> gcp.secretmanager.SecretIamMember:
            return secret_reader(name, secret_name, self._principal(args, account), after_read)

        servers = reader("hf-token-model-server-secretAccessor", args.objects.service_account)
        staging: list[pulumi.Input[pulumi.Resource]] = [provider_class]
        if args.objects.staging_service_account is not None:
            staging.append(reader("hf-token-staging-secretAccessor", args.objects.staging_service_account))
        return [provider_class, servers], staging

    def _bucket_access(self, args: ServingArgs, opts: pulumi.ResourceOptions) -> _Needs:
        """The weights bucket (created, or an existing one) and each account's grants on it."""
        serving, weights_bucket = args.serving, args.serving.weights_bucket
        bucket_name = weights_bucket_name(serving, args.project)
        bucket: list[pulumi.Input[pulumi.Resource]] = []
        if weights_bucket.create:
            bucket.append(
                private_bucket(
                    "weights",
                    bucket_name=bucket_name,
                    project=args.project,
                    region=args.region,
                    keep_on_destroy=weights_bucket.keep_on_destroy,
                    lifecycle_rules=None,
                    opts=opts,
                )
            )
        elif args.storage_api:
            # The grants (and the pods) wait for the preview's read of the bucket, which refuses one they would fail
            # on. A stack on a cluster made elsewhere that neither makes nor grants on the bucket makes no Google
            # Cloud call (the integration lab has none to make it to), and reads nothing.
            storage_api = args.storage_api[0]
            bucket.append(self._check_existing_bucket(args, bucket_name).apply(lambda _: storage_api))
        if not weights_bucket.grant_access:
            return bucket, bucket
        after_bucket = waiting_for(opts, *bucket)

        def grant(
            name: str, account: dict[str, Any], role: str, prefix: str = "", title: str = ""
        ) -> gcp.storage.BucketIAMMember:
            """``role`` on the bucket to ``account`` (a manifest); with a ``prefix``, on its objects there only."""
            condition = object_prefix_condition(bucket_name, prefix, title) if prefix else None
            member = self._principal(args, account)
            return gcp.storage.BucketIAMMember(
                name, bucket=bucket_name, role=role, member=member, condition=condition, opts=after_bucket
            )

        servers = args.objects.service_account
        # weights-bucketViewer keeps the name it had when the servers also wrote the weights: a new name would
        # create the same binding again and then delete it with the old resource.
        server_grants = [
            grant("weights-bucketViewer", servers, BUCKET_VIEWER),
            grant("weights-objectViewer", servers, OBJECT_VIEWER),
            grant("weights-xla-cache-objectUser", servers, OBJECT_USER, f"{XLA_CACHE_DIR}/", "XLA compilation cache"),
        ]
        staging_grants = []
        if (stager := args.objects.staging_service_account) is not None:
            snapshot = weights_object_prefix(serving, args.project)
            staging_grants = [
                grant("staging-objectViewer", stager, OBJECT_VIEWER),
                grant("staging-snapshot-objectUser", stager, OBJECT_USER, snapshot, "weights snapshot"),
            ]
        benchmark = args.objects.benchmark_service_account
        # inference-perf builds its Cloud Storage client before the run and looks the bucket up
        # (inference-perf 0.7.0 inference_perf/client/filestorage/gcs.py:33 lookup_bucket; google-cloud-storage
        # client.py lookup_bucket -> get_bucket -> Bucket.reload, GET /storage/v1/b/<bucket>, a Forbidden re-raised):
        # storage.buckets.get, which bucketViewer carries and no object role does. Unconditioned: a bucket-level
        # call's resource is projects/_/buckets/<bucket>, which no objects/ prefix condition matches.
        grant("benchmark-bucketViewer", benchmark, BUCKET_VIEWER)
        grant("benchmark-objectViewer", benchmark, OBJECT_VIEWER)
        grant("benchmark-results-objectUser", benchmark, OBJECT_USER, f"{RESULTS_DIR}/", "benchmark reports")
        return [*bucket, *server_grants], [*bucket, *staging_grants]

    def _check_existing_bucket(self, args: ServingArgs, bucket_name: str) -> pulumi.Output[None]:
        """Read the existing weights bucket and refuse one the stack cannot use (serving/rules.py
        weights_bucket_review): no uniform bucket-level access under conditional grants, another region, missing.
        Unknown on a new project's first preview: the read waits for the Cloud Storage API this `up` enables."""
        read = answer_of(
            gcp.storage.get_bucket_output(
                name=bucket_name, opts=pulumi.InvokeOutputOptions(parent=self, depends_on=args.storage_api)
            )
        )

        def review(answer: ReadAnswer[Any]) -> None:
            if answer.unknown:
                say_unread(f"weights bucket {bucket_name}", "Cloud Storage API", "the grants")
                return
            bucket = answer.value
            placement = bucket.custom_placement_configs if bucket and bucket.custom_placement_configs else []
            found = BucketRead(
                name=bucket_name,
                error=answer.error,
                location=(bucket.location if bucket else "") or "",
                uniform_access=bool(bucket and bucket.uniform_bucket_level_access),
                data_locations=tuple(placement[0].data_locations or ()) if placement else (),
            )
            say_review(*weights_bucket_review(found, args.region, args.serving.weights_bucket.grant_access))

        return read.apply(review)

    def _weights_staging(
        self, args: ServingArgs, needs: list[pulumi.Input[pulumi.Resource]], on_cluster: pulumi.ResourceOptions
    ) -> list[pulumi.Resource]:
        """The Job that fills the bucket, as its own account, after that account, its bucket grants and what hands it
        the token (``needs``). Pulumi waits for the Job to complete (its pulumi.com/timeoutSeconds), so the model
        servers, which depend on it, start against a complete snapshot. A Job's pod template cannot change: any change
        to it (model, revision, image, script, account) replaces the Job, which stages again (copying only what is
        missing); the fixed name means the old one goes first."""
        job, script = args.objects.staging_job, args.objects.staging_script
        account_manifest = args.objects.staging_service_account
        if job is None or script is None or account_manifest is None:
            return []
        account = kubernetes_object("weights-staging-account", account_manifest, on_cluster)
        after_access = waiting_for(on_cluster, account, *needs, *args.admission_ready)
        configmap = kubernetes_object("weights-staging-script", script, after_access)
        after_script = pulumi.ResourceOptions.merge(waiting_for(after_access, configmap), REPLACE_ON_SPEC_CHANGE)
        return [kubernetes_object("stage-model-weights", job, after_script)]

    def _gateway_and_router(
        self, args: ServingArgs, on_cluster: pulumi.ResourceOptions, picker_policy: pulumi.Resource
    ) -> _Gateway:
        serving = args.serving
        router_after: list[pulumi.Resource] = []
        if serving.inference_pool_crds.install:  # otherwise GKE manages the CRDs
            router_after.append(
                k8s.yaml.v2.ConfigFile(
                    "inference-pool-crds",
                    file=INFERENCE_POOL_CRDS_URL.format(version=serving.inference_pool_crds.version),
                    opts=pulumi.ResourceOptions(parent=self, provider=args.cluster.provider),
                )
            )
        # pulumi.com/waitFor on the Gateway: `up` waits until GKE has programmed the load balancer.
        # The regional internal load balancer runs its proxies in the proxy-only subnet: the Gateway
        # is created after it and deleted (with its endpoint groups, through the gate) before it.
        on_network = waiting_for(on_cluster, *args.network_ready)
        gateway = _Gateway("inference-gateway", args.objects.gateway, on_network)
        if serving.router.install:
            chart = HelmChartConfig(
                chart=serving.router.chart, version=serving.router.version, namespace=serving.namespace
            )
            router = helm_release(
                "router",
                serving_objects.ROUTER_RELEASE_NAME,
                chart,
                args.objects.router_values,
                waiting_for(on_network, gateway, picker_policy, *router_after),
                # Above one replica the chart probes the pickers' gRPC health service `readiness`, SERVING on the
                # lease holder only (llm-d/llm-d-router v0.10.0 config/charts/routerlib/templates/_deployment.yaml,
                # cmd/epp/runner/health.go), and its Deployment is Recreate, for which Helm allows no unavailable
                # replica (helm/helm v3.18.6 pkg/kube/ready.go deploymentReady): Helm would wait for every picker to be
                # Ready, time out, and roll the release back.
                helm_judges_readiness=False,
            )
            # What Helm cannot judge: at least one endpoint picker serves, from the release's current template.
            # The chart names the pickers' Service and Deployment llm-d-router.name, ENDPOINT_PICKER_NAME
            # (llm-d/llm-d-router v0.10.0 config/charts/routerlib/templates/_service.yaml, _deployment.yaml; other
            # names only with provider.gke.preferredBackends, which router-values.yaml leaves off). Nothing depends
            # on the gate: nothing the stack makes needs a picker (the LeaderWorkerSets are what the pickers route
            # to), the `up` waits for the gate whatever depends on it, and the endpoint outputs are the Gateway's
            # address, which takes requests without a picker too (the pool fails open, router-values.yaml).
            ReadyGate(
                "router-endpoint-picker",
                args.cluster.kubeconfig,
                pulumi.ResourceOptions(parent=self, depends_on=[router]),
                service_namespace=serving.namespace,
                service_name=serving_objects.ENDPOINT_PICKER_NAME,
                deployment=serving_objects.ENDPOINT_PICKER_NAME,
                check=_router_check(serving.namespace),
                release_revision=router.status.revision,
                timeout_seconds=RELEASE_TIMEOUT_SECONDS,
            )
        return gateway


class _Gateway(pulumi.CustomResource):
    """A Gateway API Gateway whose status (the load balancer's address) is a resource output."""

    status: pulumi.Output[Any]
    metadata: pulumi.Output[Any]  # as the server holds it: GKE's annotations name the load balancer

    def __init__(self, name: str, manifest: dict[str, Any], opts: pulumi.ResourceOptions):
        properties = {**manifest, "metadata": owned(manifest["metadata"]), "status": None}
        super().__init__(f"kubernetes:{manifest['apiVersion']}:{manifest['kind']}", name, properties, opts)


def _router_check(namespace: str) -> str:
    """What to look at when no endpoint picker becomes Ready."""
    pickers = ",".join(f"{key}={value}" for key, value in serving_objects.endpoint_picker_labels().items())
    return (
        f"the endpoint pickers, `kubectl -n {namespace} get pods -l {pickers}` (Pending: no node with room for their "
        f"requests), their events and their logs (`kubectl -n {namespace} logs -l {pickers}`): only the one that "
        "holds the leader lease is Ready"
    )


def _gateway_address(status: Any) -> str | None:
    addresses = (status or {}).get("addresses") or []
    return addresses[0].get("value") if addresses else None


def endpoint_outputs(serving: ServingConfig, gateway_address: pulumi.Output[str | None]) -> dict[str, Any]:
    """How clients reach the model, as the stack outputs it (by output name, each exported by __main__.py): the served
    model name, the OpenAI-compatible base URL and a request to try."""
    model_name = served_model_name(serving)
    port = serving.gateway.port
    base_url = gateway_address.apply(lambda address: f"http://{address}{'' if port == 80 else f':{port}'}/v1")
    body = json.dumps({"model": model_name, "prompt": "How are you today?", "max_tokens": 64})
    example_curl = base_url.apply(
        lambda url: f"curl -s {url}/completions -H 'Content-Type: application/json' -d {shlex.quote(body)}"
    )
    return {naming.MODEL_NAME_OUTPUT: model_name, naming.BASE_URL_OUTPUT: base_url, "exampleCurl": example_curl}
