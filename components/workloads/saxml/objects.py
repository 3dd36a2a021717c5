"""Saxml on multi-host TPU v5e: the admin server, the model-server JobSet and the HTTP server.

Pure Python (no Pulumi imports): the YAML bases under ``manifests/saxml/`` (which say why each differs from the GKE
tutorial's) with what varies per stack overlaid on fresh copies. A Sax cell here: one admin server (state under
``gs://<bucket>/sax-root`` and ``sax-fs-root``), one model server per TPU slice node pool (a replicated job of the
JobSet, one pod on every host of the slice), and the HTTP server in front of the admin API. The HTTP API has no
authentication (``/publish`` and ``/unpublish`` load and drop models for anyone who reaches it), so its Service is an
internal load balancer with the stack's source ranges unless ``external`` asks otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from components import manifests
from components.config_base import PullPath
from components.gcp.config import NetworkConfig, TpuConfig
from components.tpu.topology import TOPOLOGY_NODE_LABEL, Shape, take_tpu_host
from components.workloads.saxml.config import PLATFORM_CHIPS, SaxmlConfig, bucket_name, http_source_ranges

ADMIN_FILE = "saxml/admin-server.yaml"
MODEL_SERVER_FILE = "saxml/model-server.yaml"
HTTP_FILE = "saxml/http-server.yaml"
NETWORK_POLICIES_FILE = "saxml/network-policies.yaml"

ADMIN_NAME = "sax-admin-server"
MODEL_SERVER_NAME = "sax-model-server-set"
MODEL_SERVER_JOB = "sax-model-server"
HTTP_NAME = "sax-http"

INTERNAL_LB_ANNOTATION = "networking.gke.io/load-balancer-type"


@dataclass(frozen=True)
class SaxmlObjects:
    """Every manifest of the Saxml cell, built once per run from the saxml block and the pools."""

    admin_deployment: dict[str, Any]
    model_server_jobset: dict[str, Any]
    http_deployment: dict[str, Any]
    http_service: dict[str, Any]
    network_policies: list[dict[str, Any]]  # who may connect to each server (admin, model, HTTP), named after it


def saxml_objects(
    saxml: SaxmlConfig, tpu: TpuConfig, network: NetworkConfig, project: str, pull_path: PullPath
) -> SaxmlObjects:
    """``pull_path``: where the nodes pull the images from (images.mirror or the pull-through repositories)."""
    admin = admin_deployment(saxml, project, pull_path)
    jobset = model_server_jobset(saxml, tpu, project, pull_path)
    http = http_deployment(saxml, project, pull_path)
    service = http_service(saxml, network)
    return SaxmlObjects(admin, jobset, http, service, network_policies(saxml, service))


def sax_root(bucket_name: str) -> str:
    """SAX_ROOT of the cell: where the admin server keeps its state and address."""
    return f"gs://{bucket_name}/sax-root"


def _document(relative_path: str, kind: str, namespace: str) -> dict[str, Any]:
    return manifests.by_kind(manifests.load_documents(relative_path, namespace), kind)


def admin_deployment(saxml: SaxmlConfig, project: str, pull_path: PullPath) -> dict[str, Any]:
    deployment = _document(ADMIN_FILE, "Deployment", saxml.namespace)
    pod_spec = deployment["spec"]["template"]["spec"]
    pod_spec["serviceAccountName"] = saxml.admin_service_account_name
    container = manifests.container(pod_spec, ADMIN_NAME)
    container["image"] = pull_path.image(saxml.admin_image)
    manifests.set_env(container, "GSBUCKET", bucket_name(saxml, project))
    manifests.set_env(container, "SAX_CELL", saxml.sax_cell)  # the model servers' --sax_cell: one cell
    return deployment


def model_server_jobset(saxml: SaxmlConfig, tpu: TpuConfig, project: str, pull_path: PullPath) -> dict[str, Any]:
    """One replicated job per slice node pool, a pod on each host of its slice (every pool has the same topology, a
    rule of the block), each pod taking every chip of its host."""
    machine, shape = tpu.machine, Shape.parse(tpu.pools[0].topology)
    hosts = machine.hosts(shape)
    jobset = _document(MODEL_SERVER_FILE, "JobSet", saxml.namespace)
    (replicated_job,) = jobset["spec"]["replicatedJobs"]
    replicated_job["replicas"] = len(tpu.pools)
    job_spec = replicated_job["template"]["spec"]
    job_spec.update(parallelism=hosts, completions=hosts)
    pod_spec = job_spec["template"]["spec"]
    pod_spec["serviceAccountName"] = saxml.service_account_name
    container = manifests.container(pod_spec, MODEL_SERVER_JOB)
    take_tpu_host(pod_spec, container, machine)
    pod_spec["nodeSelector"][TOPOLOGY_NODE_LABEL] = str(shape)
    container["image"] = pull_path.image(saxml.model_server_image)
    manifests.set_flag(container["args"], "--sax_cell", saxml.sax_cell)
    manifests.set_flag(container["args"], "--platform_chip", PLATFORM_CHIPS[tpu.machine_type])
    manifests.set_env(container, "SAX_ROOT", sax_root(bucket_name(saxml, project)))
    return jobset


def http_deployment(saxml: SaxmlConfig, project: str, pull_path: PullPath) -> dict[str, Any]:
    deployment = _document(HTTP_FILE, "Deployment", saxml.namespace)
    pod_spec = deployment["spec"]["template"]["spec"]
    pod_spec["serviceAccountName"] = saxml.service_account_name
    container = manifests.container(pod_spec, HTTP_NAME)
    container["image"] = pull_path.image(saxml.http_image)
    manifests.set_env(container, "SAX_ROOT", sax_root(bucket_name(saxml, project)))
    return deployment


def http_service(saxml: SaxmlConfig, network: NetworkConfig) -> dict[str, Any]:
    """The LoadBalancer Service in front of the HTTP server: internal unless ``saxml.http.external``."""
    service = _document(HTTP_FILE, "Service", saxml.namespace)
    if saxml.http.external:  # the base's load balancer is internal, by its annotation
        annotations = service["metadata"]["annotations"]
        del annotations[INTERNAL_LB_ANNOTATION]
        if not annotations:
            del service["metadata"]["annotations"]
    if source_ranges := http_source_ranges(saxml.http, network):  # the base has none: empty, the field stays out
        service["spec"]["loadBalancerSourceRanges"] = list(source_ranges)
    return service


def network_policies(saxml: SaxmlConfig, service: dict[str, Any]) -> list[dict[str, Any]]:
    """Who may connect to each server of the cell (manifests/saxml/network-policies.yaml says who sends what, and
    why), one policy per server, named after it: each server's pods by the labels the base gives them, those its
    Deployment or JobSet gives its pods (tests/test_saxml_objects.py holds them equal), and the HTTP server's clients
    by exactly the load balancer's source ranges, plus the cluster's pods when ``saxml.http.cluster_clients``."""
    policies = manifests.load_list(NETWORK_POLICIES_FILE, saxml.namespace)
    http_policy = manifests.by_name(policies, HTTP_NAME)
    by_address, cluster_pods = http_policy["spec"]["ingress"]
    ranges = service["spec"].get("loadBalancerSourceRanges") or []
    by_address["from"] = [{"ipBlock": {"cidr": cidr}} for cidr in ranges]
    # A rule without senders would admit every one: each is kept only with senders to name.
    kept = ((by_address, bool(ranges)), (cluster_pods, saxml.http.cluster_clients))
    http_policy["spec"]["ingress"] = [rule for rule, keep in kept if keep]
    return policies
