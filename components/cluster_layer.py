"""Maps the validated stack config onto the in-cluster components' typed args."""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components import kueue_objects, saxml_config, saxml_objects, serving_config, serving_objects, slice_check_objects
from components.admission import AdmissionPlan
from components.platform import PlatformArgs
from components.queues import QueuesArgs
from components.saxml import SaxmlArgs
from components.serving import ServingArgs
from components.slice_checks import SliceChecksArgs
from components.stack_config import HelmChartConfig, StackConfig


def platform_args(config: StackConfig, provider: k8s.Provider) -> PlatformArgs:
    platform = config.platform
    return PlatformArgs(
        provider=provider,
        jobset=platform.jobset,
        kueue=platform.kueue if config.dynamic_slicing else None,
        kueue_controller=platform.kueue_controller,
        leader_worker_set=platform.leader_worker_set if config.dynamic_slicing else None,
        slice_controller=platform.slice_controller if config.dynamic_slicing else None,
    )


def queues_args(config: StackConfig, provider: k8s.Provider, kueue_release: pulumi.Resource) -> QueuesArgs:
    return QueuesArgs(
        provider=provider,
        kueue_release=kueue_release,
        namespaces=list(config.queues.namespaces),
        queue_objects=kueue_objects.queue_objects(config),
        priority_class_objects=kueue_objects.priority_class_objects(config),
    )


def slice_check_jobsets(config: StackConfig) -> list[dict]:
    namespace = config.checks_namespace
    return [
        slice_check_objects.slice_check_jobset(
            kind,
            name=check.name,
            namespace=namespace,
            queue_name=config.queues.local_queue_name,
            priority_class=config.priority_class(check.priority).name,
            image=config.checks.image,
            hold_seconds=check.hold_seconds,
            shape=check.shape,
            machine_type=config.tpu.machine_type,
            replicas=check.slices,
        )
        for kind, check in config.enabled_checks().items()
    ]


def slice_checks_args(config: StackConfig, provider: k8s.Provider, after: list[pulumi.Resource]) -> SliceChecksArgs:
    return SliceChecksArgs(
        provider=provider,
        script_configmap=slice_check_objects.check_script_configmap(config.checks_namespace),
        jobsets=slice_check_jobsets(config),
        after=after,
    )


def admission_plan(config: StackConfig) -> AdmissionPlan:
    return AdmissionPlan(config.cubes, tuple(config.slice_workloads()))


def saxml_args(config: StackConfig, provider: k8s.Provider, jobset_release: pulumi.Resource) -> SaxmlArgs:
    saxml = config.saxml
    params = saxml_objects.SaxmlParams(
        namespace=saxml.namespace,
        bucket_name=saxml_config.bucket_name(config),
        service_account_name=saxml.service_account_name,
        admin_image=saxml.admin_image,
        model_server_image=saxml.model_server_image,
        http_image=saxml.http_image,
        pools=len(config.tpu.pools),
        topology=config.tpu.pools[0].topology,
        machine_type=config.tpu.machine_type,
        sax_cell=saxml.sax_cell,
        source_ranges=tuple(saxml.http.source_ranges),
        external=saxml.http.external,
    )
    return SaxmlArgs(
        project=config.project,
        region=config.region,
        bucket_name=params.bucket_name,
        protect_bucket=saxml.protect_bucket,
        google_service_account_id=saxml.google_service_account_id,
        namespace=saxml.namespace,
        service_account_name=saxml.service_account_name,
        admin_deployment=saxml_objects.admin_deployment(params),
        model_server_jobset=saxml_objects.model_server_jobset(params),
        http_deployment=saxml_objects.http_deployment(params),
        http_service=saxml_objects.http_service(params),
        provider=provider,
        jobset_release=jobset_release,
    )


def serving_args(
    config: StackConfig,
    provider: k8s.Provider,
    namespace_ready: list[pulumi.Resource],
    platform_ready: list[pulumi.Resource],
) -> ServingArgs:
    serving = config.serving
    params = serving_config.serving_params(config)
    return ServingArgs(
        project=config.project,
        region=config.region,
        bucket_name=serving_config.weights_bucket_name(config),
        create_bucket=serving.weights_bucket.create,
        protect_bucket=serving.weights_bucket.protect,
        namespace=serving.namespace,
        service_account=serving_objects.model_server_service_account(serving.namespace, serving.service_account_name),
        hf_token=serving.hf_token,
        gateway=serving_objects.gateway(
            serving.namespace, name=serving.gateway.name, gateway_class=serving.gateway.class_name, port=serving.gateway.port
        ),
        router=HelmChartConfig(serving.router.chart, serving.router.version, serving.namespace),
        router_values=serving_objects.router_values(guide=params.guide, gateway_name=serving.gateway.name),
        inference_pool_crds_version=serving.inference_pool_crds.version if serving.inference_pool_crds.install else None,
        leaderworkersets=serving_objects.prefill_decode_leaderworkersets(params),
        provider=provider,
        namespace_ready=namespace_ready,
        platform_ready=platform_ready,
    )


@dataclass(frozen=True)
class ServingEndpoint:
    model_name: str
    base_url: pulumi.Output[str]
    example_curl: pulumi.Output[str]


def serving_endpoint(config: StackConfig, gateway_address: pulumi.Output[str]) -> ServingEndpoint:
    """How clients reach the model: the OpenAI-compatible base URL and a request to try."""
    model_name = config.serving.model.served_name or config.serving.model.id
    port = config.serving.gateway.port
    base_url = gateway_address.apply(lambda address: f"http://{address}{'' if port == 80 else f':{port}'}/v1")
    body = json.dumps({"model": model_name, "prompt": "How are you today?", "max_tokens": 64})
    example_curl = base_url.apply(
        lambda url: f"curl -s {url}/completions -H 'Content-Type: application/json' -d {shlex.quote(body)}"
    )
    return ServingEndpoint(model_name, base_url, example_curl)
