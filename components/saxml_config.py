"""The `saxml` block of the stack config: Saxml on multi-host TPU v5e, and its preview rules."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from components import naming, saxml_objects, saxml_rules
from components.config_base import Problems, image_pin_problem, is_k8s_name, setting

if TYPE_CHECKING:
    from components.stack_config import StackConfig

_SAX_CELL = re.compile(r"^/sax/[A-Za-z0-9_-]+$")


@dataclass(frozen=True)
class SaxmlModelConfig:
    parameters_billions: float = setting(175, "Parameters of the largest model a slice serves, in billions (the sizing check).")
    precision: str = setting("bf16", "Weight precision: fp32, bf16, fp16, fp8, int8 or int4.")


@dataclass(frozen=True)
class SaxmlHttpConfig:
    source_ranges: list[str] = setting(
        [], "CIDR ranges allowed to reach the HTTP load balancer (required: /publish has no authentication)."
    )
    external: bool = setting(False, "Expose the HTTP server on an external load balancer instead of an internal one.")


@dataclass(frozen=True)
class SaxmlConfig:
    enabled: bool = setting(False, "Deploy a Saxml cell on the TPU v5e pools (one model server per pool).")
    namespace: str = setting("sax", "Namespace of the Saxml workloads.")
    bucket_name: str = setting("", "Bucket of the admin server's state; empty means `<project>-sax-admin`.")
    protect_bucket: bool = setting(True, "Mark the bucket `protect`, so `pulumi destroy` cannot delete the cell's state.")
    service_account_name: str = setting("sax-sa", "Kubernetes service account of the Saxml pods.")
    google_service_account_id: str = setting("sax-iam-sa", "Google service account the pods act as (Workload Identity).")
    sax_cell: str = setting("/sax/test", "Sax cell the servers join.")
    admin_image: str = setting(saxml_objects.ADMIN_IMAGE, "Admin server image (pinned tag or digest).")
    model_server_image: str = setting(saxml_objects.MODEL_SERVER_IMAGE, "Model server image (pinned tag or digest).")
    http_image: str = setting(saxml_objects.HTTP_IMAGE, "HTTP server image (pinned tag or digest).")
    model: SaxmlModelConfig = setting(SaxmlModelConfig(), "The model the slices must hold.")
    http: SaxmlHttpConfig = setting(SaxmlHttpConfig(), "The HTTP server's load balancer.")


def bucket_name(config: StackConfig) -> str:
    return config.saxml.bucket_name or f"{config.project}-sax-admin"


def validate_saxml(config: StackConfig, problems: Problems) -> None:
    saxml = config.saxml
    if not saxml.enabled:
        return
    machine_type = config.tpu.machine_type
    if machine_type not in saxml_objects.PLATFORM_CHIPS:
        problems.add("saxml.enabled", f"Saxml here serves on {', '.join(saxml_objects.PLATFORM_CHIPS)}, not {machine_type}", "set tpu.machineType to ct5lp-hightpu-4t or saxml.enabled false")
        return
    _validate_names(config, problems)
    _validate_images(saxml, problems)
    _validate_http(saxml.http, problems)
    _validate_model_fit(config, problems)


def _validate_names(config: StackConfig, problems: Problems) -> None:
    saxml = config.saxml
    for key, value in (("namespace", saxml.namespace), ("serviceAccountName", saxml.service_account_name)):
        if not is_k8s_name(value):
            problems.add(f"saxml.{key}", f"{value!r} is not a Kubernetes name", "use lowercase letters, digits and hyphens")
    name = bucket_name(config)
    if problem := naming.bucket_name_problem(name):
        key = "saxml.bucketName" if saxml.bucket_name else "project"
        problems.add(key, f"bucket name {name!r} is not a valid bucket name: {problem}", "set saxml.bucketName")
    if problem := naming.service_account_id_problem(saxml.google_service_account_id):
        problems.add("saxml.googleServiceAccountId", problem, "use a 6-30 character id")
    if not _SAX_CELL.match(saxml.sax_cell):
        problems.add("saxml.saxCell", f"{saxml.sax_cell!r} is not a Sax cell", "write /sax/<name>, e.g. /sax/test")


def _validate_images(saxml: SaxmlConfig, problems: Problems) -> None:
    for key, image in (("adminImage", saxml.admin_image), ("modelServerImage", saxml.model_server_image), ("httpImage", saxml.http_image)):
        if problem := image_pin_problem(image):
            problems.add(f"saxml.{key}", problem, "pin a dated tag or @sha256:<digest>")


def _validate_http(http: SaxmlHttpConfig, problems: Problems) -> None:
    if not http.source_ranges:
        problems.add("saxml.http.sourceRanges", "is empty, so every address that reaches the load balancer could publish models", "list the CIDR ranges of the Sax clients")
    for i, text in enumerate(http.source_ranges):
        try:
            network = ipaddress.ip_network(text)
        except ValueError as error:
            problems.add(f"saxml.http.sourceRanges[{i}]", f"{text!r} is not a CIDR range ({error})", "write it as a.b.c.d/n")
            continue
        if network.prefixlen == 0:
            problems.add(f"saxml.http.sourceRanges[{i}]", f"{network} admits everyone to the unauthenticated HTTP API", "list only the clients' ranges")


def _validate_model_fit(config: StackConfig, problems: Problems) -> None:
    model = config.saxml.model
    if model.precision not in saxml_rules.BYTES_PER_PARAMETER:
        problems.add("saxml.model.precision", f"{model.precision!r} is not a known precision", f"use one of {', '.join(saxml_rules.BYTES_PER_PARAMETER)}")
        return
    topologies = {pool.topology for pool in config.tpu.pools}
    if len(topologies) > 1:
        problems.add("tpu.pools", f"Saxml pools have different topologies {sorted(topologies)}", "give every pool the same topology: each runs one model server")
        return
    for topology_text in topologies:
        if saxml_rules.topology_problem(topology_text, config.tpu.machine_type):
            return  # reported under tpu.pools
        if problem := saxml_rules.model_fit_problem(model.parameters_billions, model.precision, topology_text, config.tpu.machine_type):
            problems.add("saxml.model.parametersBillions", problem, "use larger pools (tpu.pools[].topology and nodeCount) or a smaller or quantized model")

