"""Saxml on multi-host TPU v5e: the admin server, the model-server JobSet and the HTTP server.

Pure Python (no Pulumi imports). The YAML bases under ``manifests/saxml/`` are real manifests;
this module loads them and overlays, on deep copies of the parsed dicts, what varies per stack:
namespace, bucket (``GSBUCKET`` and ``SAX_ROOT``), images, ServiceAccount, Sax cell, the load
balancer's reach, and everything that follows from the slice topology and the machine type
(slices, pods per slice, node selectors, TPU requests, ``--platform_chip``).

A Sax cell here: one admin server (state under ``gs://<bucket>/sax-root``), one model server per
TPU slice node pool (a replicated job of the JobSet, one pod on every host of the slice), and
the HTTP server in front of the admin API. The HTTP API has no authentication (``/publish`` and
``/unpublish`` load and drop models for anyone who reaches it), so its Service is an internal
load balancer with the stack's source ranges unless ``external=True`` asks otherwise.

Neither the admin server nor the model servers run privileged (the GKE tutorial sets
``privileged: true`` on both): GKE 1.28 and later give containers the TPU chips through the
``google.com/tpu`` device plugin without it; see the comment in ``model-server.yaml``.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any

from components import manifests
from components.manifests import by_kind, load_documents
from components.topology import MACHINE_CATALOG, Shape

ADMIN_FILE = "saxml/admin-server.yaml"
MODEL_SERVER_FILE = "saxml/model-server.yaml"
HTTP_FILE = "saxml/http-server.yaml"

ADMIN_NAME = "sax-admin-server"
MODEL_SERVER_NAME = "sax-model-server-set"
MODEL_SERVER_JOB = "sax-model-server"
HTTP_NAME = "sax-http"
HTTP_SERVICE_NAME = "sax-http-lb"

# Image tags as pinned in the GKE multi-host Saxml tutorial (the HTTP server is one release
# behind the others there). Not checked against the registry from here; pin by digest once pulled.
IMAGE_REPOSITORY = "us-docker.pkg.dev/cloud-tpu-images/inference"
ADMIN_IMAGE = f"{IMAGE_REPOSITORY}/sax-admin-server:v1.1.0"
MODEL_SERVER_IMAGE = f"{IMAGE_REPOSITORY}/sax-model-server:v1.1.0"
HTTP_IMAGE = f"{IMAGE_REPOSITORY}/sax-http:v1.0.0"

ADMIN_PORT = 10000
MODEL_SERVER_PORT = 10001
TPU_RUNTIME_PORT = 8471  # communication between the TPU VMs of a slice
HTTP_PORT = 8888

# --platform_chip of the Saxml model server for each machine type it can serve on here.
PLATFORM_CHIPS = {"ct5lp-hightpu-4t": "tpuv5e"}

INTERNAL_LB_ANNOTATION = "networking.gke.io/load-balancer-type"
EXCLUSIVE_TOPOLOGY_ANNOTATION = "alpha.jobset.sigs.k8s.io/exclusive-topology"
ACCELERATOR_NODE_LABEL = "cloud.google.com/gke-tpu-accelerator"
TOPOLOGY_NODE_LABEL = "cloud.google.com/gke-tpu-topology"
TPU_RESOURCE = "google.com/tpu"


@dataclass(frozen=True)
class SaxmlParams:
    """What varies per stack. ``pools`` is the number of TPU slice node pools (= model servers).

    The stack config (components/saxml_config.py) validates these values with their config keys;
    the builders raise only for what cannot be built at all (an unknown machine type, a topology
    that is no slice of it, a source range that is no CIDR).
    """

    namespace: str
    bucket_name: str  # the bucket's name, without gs://
    service_account_name: str = "sax-sa"
    admin_image: str = ADMIN_IMAGE
    model_server_image: str = MODEL_SERVER_IMAGE
    http_image: str = HTTP_IMAGE
    pools: int = 2
    topology: str = "4x8"
    machine_type: str = "ct5lp-hightpu-4t"
    sax_cell: str = "/sax/test"
    source_ranges: tuple[str, ...] = ()  # CIDRs allowed to reach the HTTP load balancer
    external: bool = False  # True: an external load balancer (needs source ranges, none /0)

    def __post_init__(self) -> None:
        if isinstance(self.source_ranges, list):
            object.__setattr__(self, "source_ranges", tuple(self.source_ranges))


def sax_root(bucket_name: str) -> str:
    """SAX_ROOT of the cell: where the admin server keeps its state and address."""
    return f"gs://{bucket_name}/sax-root"


# --- Overlay helpers ----------------------------------------------------------------------------


def _document(relative_path: str, kind: str, namespace: str) -> dict[str, Any]:
    document = by_kind(load_documents(relative_path), kind)
    document["metadata"]["namespace"] = namespace
    return document


# --- The objects --------------------------------------------------------------------------------


def admin_deployment(params: SaxmlParams) -> dict[str, Any]:
    """The admin server Deployment ``sax-admin-server`` (port 10000, ``GSBUCKET``)."""
    deployment = _document(ADMIN_FILE, "Deployment", params.namespace)
    pod_spec = deployment["spec"]["template"]["spec"]
    pod_spec["serviceAccountName"] = params.service_account_name
    container = manifests.container(pod_spec, ADMIN_NAME)
    container["image"] = params.admin_image
    manifests.set_env(container, "GSBUCKET", params.bucket_name)
    return deployment


def model_server_jobset(params: SaxmlParams) -> dict[str, Any]:
    """The model-server JobSet ``sax-model-server-set``: one replicated job per slice node pool.

    Replicas = ``pools``; parallelism = completions = hosts of one ``topology`` slice
    (``MachineType.hosts``: 4x8 on ct5lp-hightpu-4t is 8); each pod takes every chip of its host.
    """
    machine = MACHINE_CATALOG[params.machine_type]
    shape = Shape.parse(params.topology)
    hosts = machine.hosts(shape)

    jobset = _document(MODEL_SERVER_FILE, "JobSet", params.namespace)
    (replicated_job,) = jobset["spec"]["replicatedJobs"]
    replicated_job["replicas"] = params.pools
    job_spec = replicated_job["template"]["spec"]
    job_spec["parallelism"] = hosts
    job_spec["completions"] = hosts
    pod_spec = job_spec["template"]["spec"]
    pod_spec["serviceAccountName"] = params.service_account_name
    pod_spec["nodeSelector"].update({ACCELERATOR_NODE_LABEL: machine.accelerator_label, TOPOLOGY_NODE_LABEL: str(shape)})

    container = manifests.container(pod_spec, MODEL_SERVER_JOB)
    container["image"] = params.model_server_image
    manifests.set_flag(container["args"], "--port", str(MODEL_SERVER_PORT))
    manifests.set_flag(container["args"], "--sax_cell", params.sax_cell)
    manifests.set_flag(container["args"], "--platform_chip", PLATFORM_CHIPS[params.machine_type])
    manifests.set_env(container, "SAX_ROOT", sax_root(params.bucket_name))
    tpus = str(machine.chips_per_host)
    resources = container.setdefault("resources", {})
    resources.setdefault("requests", {})[TPU_RESOURCE] = tpus
    resources.setdefault("limits", {})[TPU_RESOURCE] = tpus
    return jobset


def http_deployment(params: SaxmlParams) -> dict[str, Any]:
    """The HTTP server Deployment ``sax-http`` (port 8888, ``SAX_ROOT``)."""
    deployment = _document(HTTP_FILE, "Deployment", params.namespace)
    pod_spec = deployment["spec"]["template"]["spec"]
    pod_spec["serviceAccountName"] = params.service_account_name
    container = manifests.container(pod_spec, HTTP_NAME)
    container["image"] = params.http_image
    manifests.set_env(container, "SAX_ROOT", sax_root(params.bucket_name))
    return deployment


def http_service(params: SaxmlParams) -> dict[str, Any]:
    """The LoadBalancer Service ``sax-http-lb`` in front of the HTTP server.

    Internal (annotation ``networking.gke.io/load-balancer-type: Internal``) unless
    ``params.external``; ``loadBalancerSourceRanges`` from ``params.source_ranges`` when given.
    """
    service = _document(HTTP_FILE, "Service", params.namespace)
    annotations = service["metadata"].setdefault("annotations", {})
    if params.external:
        annotations.pop(INTERNAL_LB_ANNOTATION, None)
        if not annotations:
            del service["metadata"]["annotations"]
    else:
        annotations[INTERNAL_LB_ANNOTATION] = "Internal"
    if params.source_ranges:
        service["spec"]["loadBalancerSourceRanges"] = [str(ipaddress.ip_network(r)) for r in params.source_ranges]
    else:
        service["spec"].pop("loadBalancerSourceRanges", None)
    return service


def saxml_objects(params: SaxmlParams) -> list[dict[str, Any]]:
    """Admin Deployment, model-server JobSet, HTTP Deployment and its Service, in that order."""
    return [admin_deployment(params), model_server_jobset(params), http_deployment(params), http_service(params)]


def base_params() -> SaxmlParams:
    """The values the YAML bases carry as placeholders (overlaying them changes nothing)."""
    return SaxmlParams(namespace="default", bucket_name="my-project-gke-bucket")
