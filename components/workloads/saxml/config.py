"""The `saxml` block of the stack config: Saxml on multi-host TPU v5e and its rules."""

from __future__ import annotations

import ipaddress
import math
from fractions import Fraction

from pydantic import Field

from components import naming
from components.config_base import Block, K8sName, Problems, ServiceAccountName, form
from components.gcp.config import ClusterConfig, NetworkConfig, TpuConfig
from components.tpu import sizing, topology
from components.tpu.topology import GB, MachineType, Shape

# The cell name after /sax/ as Saxml takes it: a lowercase letter, then lowercase letters, digits, '-' or '_'
# (google/saxml v1.1.0, 70f314c, saxml/common/naming.go `pattern`); admin_config exits on any other name
# (saxml/bin/admin_config.go), so the admin server would never start.
_SAX_CELL = r"^/sax/[a-z][a-z0-9_-]*$"

# Image tags as pinned in the GKE multi-host Saxml tutorial (the HTTP server is one release
# behind the others there). Not checked against the registry from here; pin by digest once pulled.
IMAGE_REPOSITORY = "us-docker.pkg.dev/cloud-tpu-images/inference"
ADMIN_IMAGE = f"{IMAGE_REPOSITORY}/sax-admin-server:v1.1.0"
MODEL_SERVER_IMAGE = f"{IMAGE_REPOSITORY}/sax-model-server:v1.1.0"
HTTP_IMAGE = f"{IMAGE_REPOSITORY}/sax-http:v1.0.0"

# --platform_chip of the Saxml model server for each machine type it can serve on here.
PLATFORM_CHIPS = {topology.V5E: "tpuv5e"}


class SaxmlModelConfig(Block):
    parameters_billions: float = Field(
        175, description="Parameters of the largest model a slice serves, in billions (the sizing check).", gt=0
    )
    precision: str = Field("bf16", description=f"Weight precision: {sizing.DTYPES_TEXT}.")


class SaxmlHttpConfig(Block):
    cluster_clients: bool = Field(
        True,
        description="Admit the cluster's own nodes and pods (network.nodeCidr and network.podCidr) to the HTTP load balancer: "
        "a pod that calls its address is seen with the pod's own address. On a GKE cluster made elsewhere, "
        "set those two to its ranges (the preview reads them); false on one given by its kubeconfig.",
    )
    source_ranges: list[str] = Field(
        [],
        description="Further CIDR ranges allowed to reach the HTTP load balancer (clients on the VPC outside the cluster); "
        "/publish has no authentication, so with clusterClients false at least one is required.",
    )
    external: bool = Field(
        False, description="Expose the HTTP server on an external load balancer instead of an internal one."
    )


# The admin server rewrites its state (state.proto) every 10 seconds whether it changed or not (google/saxml
# v1.1.0 saxml/admin/mgr.go: refreshPeriod, Start saves on every tick): each write is a new noncurrent version.
STATE_VERSION_DAYS = 7


class NoncurrentVersionsConfig(Block):
    days: int = Field(
        STATE_VERSION_DAYS,
        description="Cloud Storage deletes a replaced version of the cell's state once it has been noncurrent this many days "
        "(0: no age limit).",
        ge=0,
    )
    newer_versions: int = Field(
        0,
        description="Cloud Storage deletes a replaced version once this many newer versions of it exist (0: no count limit).",
        ge=0,
    )


class SaxmlConfig(Block):
    enabled: bool = Field(False, description="Deploy a Saxml cell on the TPU v5e pools (one model server per pool).")
    namespace: K8sName = Field("sax", description="Namespace of the Saxml workloads.")
    bucket_name: str = Field("", description="Bucket of the admin server's state; empty means `<project>-sax-admin`.")
    keep_bucket_on_destroy: bool = Field(
        True,
        description="`pulumi destroy` (or saxml.enabled false) leaves the bucket and the cell's state in the project; "
        "false deletes the bucket with everything in it.",
    )
    noncurrent_versions: NoncurrentVersionsConfig = Field(
        NoncurrentVersionsConfig(),
        description="When the versioned state bucket deletes old versions of the state (at least one limit is required).",
    )
    service_account_name: ServiceAccountName = Field(
        "sax-sa",
        description="Kubernetes service account of the model servers and the HTTP server, which read the cell's state.",
    )
    google_service_account_id: str = Field(
        "sax-iam-sa",
        description="Google service account the model servers and the HTTP server act as (Workload Identity): reads the bucket.",
    )
    admin_service_account_name: ServiceAccountName = Field(
        "sax-admin",
        description="Kubernetes service account of the admin server, the one identity that writes the cell's state.",
    )
    admin_google_service_account_id: str = Field(
        "sax-admin-sa",
        description="Google service account the admin server acts as (Workload Identity): writes the bucket.",
    )
    sax_cell: str = Field(
        "/sax/test",
        description="Sax cell the servers join.",
        pattern=_SAX_CELL,
        json_schema_extra=form(
            "Sax cell", "write /sax/<name>: a lowercase letter, then lowercase letters, digits, - or _ (e.g. /sax/test)"
        ),
        examples=["/sax/test"],
    )
    admin_image: str = Field(ADMIN_IMAGE, description="Admin server image (pinned tag or digest).")
    model_server_image: str = Field(MODEL_SERVER_IMAGE, description="Model server image (pinned tag or digest).")
    http_image: str = Field(HTTP_IMAGE, description="HTTP server image (pinned tag or digest).")
    model: SaxmlModelConfig = Field(SaxmlModelConfig(), description="The model the slices must hold.")
    http: SaxmlHttpConfig = Field(SaxmlHttpConfig(), description="The HTTP server's load balancer.")


def bucket_name(saxml: SaxmlConfig, project: str) -> str:
    return saxml.bucket_name or f"{project}-sax-admin"


def validate_saxml(
    saxml: SaxmlConfig, tpu: TpuConfig, cluster: ClusterConfig, project: str, problems: Problems
) -> None:
    if not saxml.enabled:
        return
    if tpu.machine_type not in PLATFORM_CHIPS:
        problems.add(
            "saxml.enabled",
            f"Saxml here serves on {', '.join(PLATFORM_CHIPS)}, not {tpu.machine_type}",
            f"set tpu.machineType to {topology.V5E} or saxml.enabled false",
        )
        return
    _validate_names(saxml, cluster, project, problems)
    _validate_images(saxml, problems)
    _validate_http(saxml.http, cluster, problems)
    _validate_versions(saxml.noncurrent_versions, problems)
    _validate_model_fit(saxml, tpu, problems)


def _validate_names(saxml: SaxmlConfig, cluster: ClusterConfig, project: str, problems: Problems) -> None:
    if saxml.admin_service_account_name == saxml.service_account_name:
        problems.add(
            "saxml.adminServiceAccountName",
            f"{saxml.admin_service_account_name!r} is also saxml.serviceAccountName: the servers that only read the "
            "cell's state would act as the admin server, which writes it",
            "give the admin server its own name, e.g. sax-admin",
        )
    name = bucket_name(saxml, project)
    if problem := naming.bucket_name_problem(name):
        key = "saxml.bucketName" if saxml.bucket_name else "project"
        problems.add(key, f"bucket name {name!r} is not a valid bucket name: {problem}", "set saxml.bucketName")
    for key, account_id in (
        ("googleServiceAccountId", saxml.google_service_account_id),
        ("adminGoogleServiceAccountId", saxml.admin_google_service_account_id),
    ):
        if problem := naming.service_account_id_problem(account_id):
            problems.add(f"saxml.{key}", problem, "use a 6-30 character id")
        elif account_id == cluster.node_account_id and not cluster.existing.enabled:
            problems.add(
                f"saxml.{key}",
                f"{account_id!r} is the nodes' service account (cluster.nodeServiceAccountId), which the stack makes "
                "too: Google Cloud refuses the second account of one id in a project, halfway through the `up`",
                "give Saxml its own account id",
            )
    if saxml.admin_google_service_account_id == saxml.google_service_account_id:
        problems.add(
            "saxml.adminGoogleServiceAccountId",
            f"{saxml.admin_google_service_account_id!r} is also saxml.googleServiceAccountId: the readers would "
            "write the cell's state",
            "give the admin server its own account, e.g. sax-admin-sa",
        )


def _validate_images(saxml: SaxmlConfig, problems: Problems) -> None:
    for key, image in (
        ("adminImage", saxml.admin_image),
        ("modelServerImage", saxml.model_server_image),
        ("httpImage", saxml.http_image),
    ):
        problems.require_pinned(f"saxml.{key}", image, "pin a dated tag or @sha256:<digest>")


def _validate_http(http: SaxmlHttpConfig, cluster: ClusterConfig, problems: Problems) -> None:
    # On a GKE cluster named by cluster.existing.name the preview reads its node and Pod ranges and refuses other
    # network.nodeCidr or podCidr (components/gcp/existing_cluster.py, client_range_problems); of a kubeconfig's it
    # can read none.
    if http.cluster_clients and cluster.existing.kubeconfig:
        problems.add(
            "saxml.http.clusterClients",
            "admits the ranges of the network block (nodeCidr, podCidr), which the preview cannot check against a "
            "cluster given by its kubeconfig (cluster.existing.kubeconfig)",
            "name the GKE cluster by cluster.existing.name and location instead, or set it false and list the Sax "
            "clients' ranges in saxml.http.sourceRanges (the cluster's own pods are then not admitted)",
        )
    if not http.source_ranges and not http.cluster_clients:
        problems.add(
            "saxml.http.sourceRanges",
            "is empty, so every address that reaches the load balancer could publish models",
            "list the CIDR ranges of the Sax clients, or set saxml.http.clusterClients true",
        )
    for i, text in enumerate(http.source_ranges):
        key = f"saxml.http.sourceRanges[{i}]"
        try:
            network = ipaddress.ip_network(text)
        except ValueError as error:
            problems.add(key, f"{text!r} is not a CIDR range ({error})", "write it as a.b.c.d/n")
            continue
        if network.prefixlen == 0:
            problems.add(
                key, f"{network} admits everyone to the unauthenticated HTTP API", "list only the clients' ranges"
            )


def _validate_versions(versions: NoncurrentVersionsConfig, problems: Problems) -> None:
    if versions.days == 0 and versions.newer_versions == 0:
        problems.add(
            "saxml.noncurrentVersions.days",
            "0 with newerVersions 0 keeps every version of the state, and the admin server writes a new one every "
            "10 seconds: the bucket grows without bound",
            f"keep old versions {STATE_VERSION_DAYS} days (or set saxml.noncurrentVersions.newerVersions)",
        )


def _validate_model_fit(saxml: SaxmlConfig, tpu: TpuConfig, problems: Problems) -> None:
    model = saxml.model
    if problem := sizing.dtype_problem(model.precision):
        problems.add("saxml.model.precision", problem, f"use one of {', '.join(sizing.DTYPES)}")
        return
    topologies = {pool.topology for pool in tpu.pools}
    if len(topologies) > 1:
        problems.add(
            "tpu.pools",
            f"Saxml pools have different topologies {sorted(topologies)}",
            "give every pool the same topology: each runs one model server",
        )
        return
    machine = tpu.machine
    for text in topologies:
        shape = topology.try_shape(text)
        if shape is None or topology.static_slice_problem(shape, machine):
            return  # reported under tpu.pools
        if problem := model_fit_problem(model.parameters_billions, model.precision, shape, machine):
            problems.add(
                "saxml.model.parametersBillions",
                problem,
                "use larger pools (tpu.pools[].topology and nodeCount) or a smaller or quantized model",
            )


def _gb(size: float | Fraction) -> str:
    return f"{float(size) / GB:,.1f}".removesuffix(".0") + " GB"


def model_fit_problem(parameters_billions: float, dtype: str, shape: Shape, machine: MachineType) -> str | None:
    """Whether the weights fit the HBM of one ``shape`` slice of ``machine``; a reason or None. The fit counts the
    weights only (parameters x bytes per parameter against chips x HBM per chip): a floor, not a capacity plan, as the
    KV cache, activations and the runtime need HBM on top. 175B at bf16 is 350 GB, at least 22 v5e chips of 16 GB: it
    fits 4x8 (32 chips, 512 GB), not 4x4 (16 chips, 256 GB). The reason names both sizes and the smallest topology of
    the machine type that would fit (or says that none does)."""
    try:
        needed = sizing.weight_bytes(parameters_billions, dtype)
    except ValueError as error:
        return str(error)
    available = machine.hbm_bytes(shape)
    if needed <= available:
        return None
    chips = math.ceil(needed / machine.hbm_bytes_per_chip)
    text = (
        f"a {parameters_billions:g}B-parameter model at {dtype} ({float(sizing.BYTES_PER_PARAMETER[dtype]):g} bytes "
        f"per parameter) needs {_gb(needed)} of HBM for its weights alone, at least {chips} chips of "
        f"{machine.name} ({_gb(machine.hbm_bytes_per_chip)} each); {shape} has {shape.chips} chips, {_gb(available)}"
    )
    fitting = sizing.smallest_fitting_topology(needed, machine)
    if fitting is None:
        largest = sizing.slice_topologies(machine)[-1]
        return (
            f"{text}. No {machine.name} topology holds it (the largest, {largest}, has "
            f"{largest.chips} chips, {_gb(machine.hbm_bytes(largest))}): quantize the model or "
            "serve it across slices"
        )
    return (
        f"{text}. The smallest {machine.name} topology that fits is {fitting} "
        f"({fitting.chips} chips, {_gb(machine.hbm_bytes(fitting))})"
    )


def http_source_ranges(http: SaxmlHttpConfig, network: NetworkConfig) -> tuple[str, ...]:
    """Who may reach the HTTP load balancer: the cluster's nodes and pods (with clusterClients), then the configured
    ranges, each once, as normalised CIDRs.

    In-cluster clients keep their own addresses: in a VPC-native cluster a pod's packets carry the pod's IP (GKE network
    architecture), and loadBalancerSourceRanges is enforced on that source address, by the VPC firewall rule GKE makes
    from it and on the node (kube-proxy's KUBE-FW chain, kubernetes/kubernetes pkg/proxy/iptables/proxier.go; Dataplane
    V2's eBPF load balancer implements the field too). Admitting the pod range opens nothing new: pods reach the server
    at the Service's cluster IP, which no source range filters. See docs/saxml.md, "The saxml stack".
    """
    ranges = [network.node_cidr, network.pod_cidr] if http.cluster_clients else []
    normalised = [str(ipaddress.ip_network(text)) for text in [*ranges, *http.source_ranges]]
    return tuple(dict.fromkeys(normalised))
