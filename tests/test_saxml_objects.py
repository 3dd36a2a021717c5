"""The Saxml objects: what the overlays set, what follows from the topology, the reach of the
HTTP load balancer, what cannot be built, and strict validation of every object (the JobSet against
the pinned JobSet CRD schema, the core kinds with kubernetes-validate)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from components.config_base import NO_PULL_PATH
from components.gcp.config import NetworkConfig, TpuConfig, TpuPoolConfig
from components.manifests import by_name, load_documents, load_list
from components.tpu.topology import ACCELERATOR_NODE_LABEL, TOPOLOGY_NODE_LABEL, TPU_RESOURCE, Shape
from components.workloads.saxml import objects as saxml_objects
from components.workloads.saxml.config import PLATFORM_CHIPS, SaxmlConfig
from harness.twin_nodes import NODEPOOL_LABEL, TPU_TAINT
from tests.conftest import not_checkov
from tests.crd_schemas import HALVES, is_custom, strict_errors
from tests.stack_pods import pod_templates
from tools.sax import DEFAULT_PORT

NAMESPACE = "sax"
BUCKET = "proj-sax-state"
PROJECT = "my-tpu-project"
EXCLUSIVE_TOPOLOGY = "alpha.jobset.sigs.k8s.io/exclusive-topology"


@dataclass(frozen=True)
class Cell:
    """The blocks a Saxml cell is built from."""

    saxml: SaxmlConfig
    tpu: TpuConfig
    network: NetworkConfig


def _cell(*, topology: str = "4x8", pools: int = 2, http: dict[str, Any] | None = None, **saxml: Any) -> Cell:
    """The saxml stack's cell (``pools`` v5e pools of ``topology``), its block's defaults with ``saxml`` and
    ``http`` (the block's ``http`` fields) changed. Unchecked, so what the builders refuse reaches them."""
    tpu_pools = [
        TpuPoolConfig(name=f"tpu{i + 1}", node_count=8).model_copy(update={"topology": topology}) for i in range(pools)
    ]
    tpu = TpuConfig(zone="us-west4-a", machine_type="ct5lp-hightpu-4t", pools=tpu_pools, slice_shapes=[])
    block = SaxmlConfig().model_copy(update=saxml)
    return Cell(block.model_copy(update={"http": block.http.model_copy(update=http or {})}), tpu, NetworkConfig())


def _params(**overrides: Any) -> Cell:
    """The cell the tests below build: namespace sax, its own bucket, reached from 10.10.0.0/16 only."""
    values: dict[str, Any] = {
        "namespace": NAMESPACE,
        "bucket_name": BUCKET,
        "http": {"source_ranges": ["10.10.0.0/16"], "cluster_clients": False},
    }
    values.update(overrides)
    return _cell(**values)


def _http(**settings: Any) -> dict[str, Any]:
    return {"http": {"source_ranges": ["10.10.0.0/16"], "cluster_clients": False, **settings}}


def admin_deployment(cell: Cell) -> dict[str, Any]:
    return saxml_objects.admin_deployment(cell.saxml, PROJECT, NO_PULL_PATH)


def model_server_jobset(cell: Cell) -> dict[str, Any]:
    return saxml_objects.model_server_jobset(cell.saxml, cell.tpu, PROJECT, NO_PULL_PATH)


def http_deployment(cell: Cell) -> dict[str, Any]:
    return saxml_objects.http_deployment(cell.saxml, PROJECT, NO_PULL_PATH)


def http_service(cell: Cell) -> dict[str, Any]:
    return saxml_objects.http_service(cell.saxml, cell.network)


def cell_objects(cell: Cell) -> saxml_objects.SaxmlObjects:
    return saxml_objects.saxml_objects(cell.saxml, cell.tpu, cell.network, PROJECT, NO_PULL_PATH)


def build_objects(cell: Cell) -> list[dict[str, Any]]:
    built = cell_objects(cell)
    return [
        built.admin_deployment,
        built.model_server_jobset,
        built.http_deployment,
        built.http_service,
        *built.network_policies,
    ]


def _by_name(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {f"{o['kind']}/{o['metadata']['name']}": o for o in objects}


def _env(container: dict[str, Any]) -> dict[str, str]:
    return {entry["name"]: entry["value"] for entry in container["env"]}


def _model_parts(jobset: dict[str, Any]) -> tuple[dict, dict, dict, dict]:
    (replicated_job,) = jobset["spec"]["replicatedJobs"]
    job_spec = replicated_job["template"]["spec"]
    pod_spec = job_spec["template"]["spec"]
    (container,) = pod_spec["containers"]
    return replicated_job, job_spec, pod_spec, container


def _pod_spec(deployment: dict[str, Any]) -> dict[str, Any]:
    return deployment["spec"]["template"]["spec"]


# --- The set of objects ---------------------------------------------------------------------------


def test_objects_are_the_four_saxml_parts_and_a_network_policy_per_server_in_the_blocks_namespace():
    cell = _params()
    built = cell_objects(cell)
    servers = [built.admin_deployment, built.model_server_jobset, built.http_deployment]
    assert [o["kind"] for o in _parts(cell)] == ["Deployment", "JobSet", "Deployment", "Service"]
    # one policy per server, named after it (the cell finds a server's policy by that name)
    assert [p["metadata"]["name"] for p in built.network_policies] == [s["metadata"]["name"] for s in servers]
    assert {o["metadata"]["namespace"] for o in build_objects(cell)} == {cell.saxml.namespace}
    # the four parts say they are one application
    assert len({obj["metadata"]["labels"]["app.kubernetes.io/part-of"] for obj in _parts(cell)}) == 1


def _parts(cell: Cell) -> list[dict[str, Any]]:
    objects = cell_objects(cell)
    return [objects.admin_deployment, objects.model_server_jobset, objects.http_deployment, objects.http_service]


def test_bases_agree_with_their_own_overlay():
    """Overlaying the bases' own placeholders changes nothing: their numbers follow from 4x8 v5e."""
    bases = [
        *load_documents(saxml_objects.ADMIN_FILE),
        *load_documents(saxml_objects.MODEL_SERVER_FILE),
        *load_documents(saxml_objects.HTTP_FILE),
    ]
    placeholders = _params(namespace="default", bucket_name="my-project-gke-bucket", **_http(source_ranges=[]))
    assert _parts(placeholders) == bases


def test_the_network_policies_base_agrees_with_its_own_overlay():
    """The saxml stack's values (the defaults: namespace sax, the cluster's node and pod ranges) rebuild the
    base of network-policies.yaml: each server's labels are those its own Deployment or JobSet gives its pods."""
    base = load_list(saxml_objects.NETWORK_POLICIES_FILE)
    assert cell_objects(_cell()).network_policies == base


def test_overlays_work_on_copies():
    first = model_server_jobset(_params())
    first["spec"]["replicatedJobs"][0]["replicas"] = 99
    first["metadata"]["namespace"] = "changed"
    cell = _params()
    second = model_server_jobset(cell)
    assert second["spec"]["replicatedJobs"][0]["replicas"] == len(cell.tpu.pools)
    assert second["metadata"]["namespace"] == cell.saxml.namespace


# --- Admin server ---------------------------------------------------------------------------------


def _selects_its_pods(workload: dict[str, Any]) -> bool:
    return (
        workload["spec"]["selector"]["matchLabels"].items()
        <= workload["spec"]["template"]["metadata"]["labels"].items()
    )


def test_admin_server():
    cell = _params()
    deployment = admin_deployment(cell)
    # never two admin servers of one cell: one replica, and no rollout that runs the new one beside the old
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"]["type"] == "Recreate"
    assert _selects_its_pods(deployment)
    pod_spec = _pod_spec(deployment)
    assert pod_spec["serviceAccountName"] == cell.saxml.admin_service_account_name  # the one that writes the state
    assert pod_spec["hostNetwork"] is False
    (container,) = pod_spec["containers"]
    assert container["image"] == cell.saxml.admin_image
    assert _env(container) == {"GSBUCKET": cell.saxml.bucket_name, "SAX_CELL": cell.saxml.sax_cell}
    # Not privileged as in the tutorial: a TCP server that needs no capabilities at all.
    assert container["securityContext"] == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    # ready once it listens on the port the NetworkPolicy opens
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    (clients,) = _policy(cell_objects(cell), saxml_objects.ADMIN_NAME)["spec"]["ingress"]
    assert ports[container["readinessProbe"]["tcpSocket"]["port"]] == clients["ports"][0]["port"]


# --- Model servers --------------------------------------------------------------------------------


def _flags(args: list[str]) -> dict[str, str]:
    return dict(arg.split("=", 1) for arg in args)


def test_model_server_jobset_follows_the_tutorial_shape():
    cell = _params()
    jobset = model_server_jobset(cell)
    replicated_job, job_spec, pod_spec, container = _model_parts(jobset)
    (pool,) = {p.topology for p in cell.tpu.pools}
    shape = Shape.parse(pool)

    # one slice per node pool: JobSet places each replicated job's pods on a node pool of their own
    assert not_checkov(jobset["metadata"]["annotations"]) == {EXCLUSIVE_TOPOLOGY: NODEPOOL_LABEL}
    assert replicated_job["replicas"] == len(cell.tpu.pools)
    assert job_spec["parallelism"] == job_spec["completions"] == cell.tpu.machine.hosts(shape)

    assert pod_spec["serviceAccountName"] == cell.saxml.service_account_name
    # Pods on the host network get no Workload Identity: they would read the bucket as the node.
    assert pod_spec["hostNetwork"] is False
    assert "dnsPolicy" not in pod_spec
    assert jobset["spec"]["network"] == {"enableDNSHostnames": True}
    assert pod_spec["nodeSelector"] == {
        ACCELERATOR_NODE_LABEL: cell.tpu.machine.accelerator_label,
        TOPOLOGY_NODE_LABEL: str(shape),
    }
    # the pods tolerate the taint GKE puts on every TPU node
    assert any(
        t["key"] == TPU_TAINT["key"] and t["operator"] == "Exists" and t["effect"] == TPU_TAINT["effect"]
        for t in pod_spec["tolerations"]
    )

    assert container["image"] == cell.saxml.model_server_image
    flags = _flags(container["args"])
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    _, callers = _policy(cell_objects(cell), saxml_objects.MODEL_SERVER_NAME)["spec"]["ingress"]
    assert int(flags["--port"]) == ports["model"] == callers["ports"][0]["port"]  # the port the policy opens
    assert flags["--sax_cell"] == cell.saxml.sax_cell  # the admin server's cell
    assert flags["--platform_chip"] == PLATFORM_CHIPS[cell.tpu.machine_type]
    assert "tpu-runtime" in ports  # the port the TPU runtime serves on; its number is the base's (render diff)
    assert _env(container) == {
        "SAX_ROOT": saxml_objects.sax_root(cell.saxml.bucket_name),
        "MEGASCALE_NUM_SLICES": "",  # set to empty, as the tutorial "unsets" it
    }
    # every chip of its host, asked for and limited alike
    chips = {TPU_RESOURCE: str(cell.tpu.machine.chips_per_host)}
    assert container["resources"] == {"requests": chips, "limits": chips}
    assert "privileged" not in container["securityContext"]  # the device plugin gives the chips
    assert container["securityContext"] == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["NET_RAW"]}}


def test_every_pod_of_the_cell_runs_under_the_runtimes_seccomp_profile():
    """The restricted Pod Security profile's seccomp rule, which the cell's baseline namespace does not enforce
    (checkov's CKV_K8S_31 holds the render to it too, in make check-tools)."""
    templates = [t for obj in build_objects(_params()) for t in pod_templates(obj)]
    assert len(templates) == 3  # the admin server, the model servers and the HTTP server
    for where, _, spec in templates:
        assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, where


def test_nothing_runs_privileged():
    for obj in build_objects(_params()):
        text = repr(obj)
        assert "privileged" not in text, obj["metadata"]["name"]


@pytest.mark.parametrize(
    "topology, pods",
    [("2x2", 1), ("2x4", 2), ("4x4", 4), ("4x8", 8), ("8x8", 16), ("8x16", 32), ("16x16", 64)],
)
def test_parallelism_follows_the_topology(topology, pods):
    cell = _params(topology=topology)
    _, job_spec, pod_spec, container = _model_parts(model_server_jobset(cell))
    assert job_spec["parallelism"] == job_spec["completions"] == pods
    assert pod_spec["nodeSelector"][TOPOLOGY_NODE_LABEL] == topology
    # one host's chips, whatever the slice
    assert container["resources"]["limits"][TPU_RESOURCE] == str(cell.tpu.machine.chips_per_host)


@pytest.mark.parametrize("pools", [1, 2, 5])
def test_one_replicated_job_per_pool(pools):
    replicated_job, _, _, _ = _model_parts(model_server_jobset(_params(pools=pools)))
    assert replicated_job["replicas"] == pools


def test_cell_bucket_service_account_and_image_are_overlaid():
    params = _params(
        sax_cell="/sax/prod",
        bucket_name="other-bucket",
        service_account_name="saxml-ksa",
        admin_service_account_name="saxml-admin-ksa",
        model_server_image="registry.example/sax-model-server:v1.2.0",
    )
    block = params.saxml
    _, _, pod_spec, container = _model_parts(model_server_jobset(params))
    assert _flags(container["args"])["--sax_cell"] == block.sax_cell
    assert _env(container)["SAX_ROOT"] == f"gs://{block.bucket_name}/sax-root"
    assert pod_spec["serviceAccountName"] == block.service_account_name
    assert container["image"] == block.model_server_image
    assert _pod_spec(http_deployment(params))["serviceAccountName"] == block.service_account_name
    assert _pod_spec(admin_deployment(params))["serviceAccountName"] == block.admin_service_account_name
    # the admin server serves the cell the model servers join, not its image's default /sax/test
    admin_env = _env(_pod_spec(admin_deployment(params))["containers"][0])
    assert admin_env == {"GSBUCKET": block.bucket_name, "SAX_CELL": block.sax_cell}


# --- HTTP server and its load balancer ------------------------------------------------------------


def test_http_server():
    cell = _params()
    deployment = http_deployment(cell)
    assert _selects_its_pods(deployment)
    pod_spec = _pod_spec(deployment)
    assert pod_spec["serviceAccountName"] == cell.saxml.service_account_name  # the model servers' reader
    (container,) = pod_spec["containers"]
    assert container["image"] == cell.saxml.http_image
    assert [p["name"] for p in container["ports"]] == ["http"]  # its number: the policy's (below)
    assert _env(container) == {"SAX_ROOT": saxml_objects.sax_root(cell.saxml.bucket_name)}


def test_service_is_internal_by_default_with_the_source_ranges():
    ranges = ["10.10.0.0/16", "192.168.1.0/24"]
    service = http_service(_params(**_http(source_ranges=ranges)))
    assert service["metadata"]["annotations"] == {saxml_objects.INTERNAL_LB_ANNOTATION: "Internal"}
    assert service["spec"]["type"] == "LoadBalancer"
    assert service["spec"]["loadBalancerSourceRanges"] == ranges
    assert service["spec"]["selector"] == http_deployment(_params())["spec"]["selector"]["matchLabels"]
    (port,) = service["spec"]["ports"]
    assert port["port"] == DEFAULT_PORT and port["protocol"] == "TCP"  # where tools/sax.py calls it by default


def test_service_targets_the_http_container_port_by_name():
    (container,) = _pod_spec(http_deployment(_params()))["containers"]
    (port,) = http_service(_params())["spec"]["ports"]
    assert port["targetPort"] in {p["name"] for p in container["ports"]}


def test_internal_service_without_source_ranges_has_no_ranges_field():
    service = http_service(_params(**_http(source_ranges=[])))
    assert service["metadata"]["annotations"][saxml_objects.INTERNAL_LB_ANNOTATION] == "Internal"
    assert "loadBalancerSourceRanges" not in service["spec"]


def test_external_only_when_asked_and_still_limited_to_the_source_ranges():
    ranges = ["203.0.113.0/24"]
    service = http_service(_params(**_http(external=True, source_ranges=ranges)))
    assert saxml_objects.INTERNAL_LB_ANNOTATION not in service["metadata"].get("annotations", {})
    assert service["spec"]["loadBalancerSourceRanges"] == ranges
    assert service["spec"]["type"] == "LoadBalancer"


# --- What cannot be built ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "overrides, error",
    [
        ({"topology": "2x3"}, ValueError),  # 6 chips do not fill whole hosts of 4
        (_http(source_ranges=["everyone"]), ValueError),
    ],
)
def test_what_cannot_be_built_raises(overrides, error):
    with pytest.raises(error):
        build_objects(_params(**overrides))


# --- Strict validation ----------------------------------------------------------------------------


def _errors(obj: dict[str, Any], half: str | None = None) -> list[str]:
    """Strict validation of ``obj`` (in ``half`` of HALVES, by default its own)."""
    return sorted(strict_errors(obj, half or ("crd" if is_custom(obj) else "core")))


VARIANTS = {
    "default": {},
    "external": _http(external=True, source_ranges=["203.0.113.0/24", "2001:db8::/32"]),
    "no-ranges": _http(source_ranges=[]),
    "small-slices": {"topology": "2x4", "pools": 4},
}


@pytest.mark.parametrize("half", HALVES)
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_object_validates_strictly(variant, half):
    objects = build_objects(_params(**VARIANTS[variant]))
    errors = {name: _errors(obj, half) for name, obj in _by_name(objects).items()}
    assert errors == {name: [] for name in _by_name(objects)}


@pytest.mark.parametrize(
    "path",
    [saxml_objects.ADMIN_FILE, saxml_objects.MODEL_SERVER_FILE, saxml_objects.HTTP_FILE],
)
@pytest.mark.parametrize("half", HALVES)
def test_bases_validate_strictly(path, half):
    for document in load_documents(path):
        assert _errors(document, half) == []


def _misspell_jobset(jobset: dict[str, Any], where: str) -> None:
    _, job_spec, pod_spec, container = _model_parts(jobset)
    if where == "job":
        job_spec["backoffLimt"] = job_spec.pop("backoffLimit")
    elif where == "pod":
        pod_spec["hostNetworking"] = pod_spec.pop("hostNetwork")
    elif where == "container":
        container["arg"] = container.pop("args")
    elif where == "spec":
        jobset["spec"]["failurePolicies"] = jobset["spec"].pop("failurePolicy")


@pytest.mark.external  # the CRD files of schemas.lock
@pytest.mark.parametrize(
    "where, field",
    [("job", "backoffLimt"), ("pod", "hostNetworking"), ("container", "arg"), ("spec", "failurePolicies")],
)
def test_misspelled_jobset_fields_are_rejected(where, field):
    jobset = model_server_jobset(_params())
    _misspell_jobset(jobset, where)
    errors = _errors(jobset)
    assert len(errors) == 1, errors
    assert f"'{field}' was unexpected" in errors[0]


def _rename(mapping: dict[str, Any], old: str, new: str) -> None:
    mapping[new] = mapping.pop(old)


@pytest.mark.parametrize(
    "build, locate, old, new",
    [
        (admin_deployment, lambda d: d["spec"]["template"]["spec"], "serviceAccountName", "serviceAcountName"),
        (http_deployment, lambda d: d["spec"]["template"]["spec"]["containers"][0], "ports", "port"),
        (http_service, lambda s: s["spec"], "loadBalancerSourceRanges", "loadBalancerSourceRange"),
        (http_service, lambda s: s["metadata"], "annotations", "anotations"),
    ],
)
def test_misspelled_core_fields_are_rejected(build, locate, old, new):
    obj = build(_params())
    assert _errors(obj) == []
    _rename(locate(obj), old, new)
    errors = _errors(obj)
    assert len(errors) == 1 and f"'{new}' was unexpected" in errors[0], errors


@pytest.mark.external  # the CRD files of schemas.lock
def test_wrong_types_are_rejected():
    jobset = model_server_jobset(_params())
    jobset["spec"]["replicatedJobs"][0]["replicas"] = "2"
    assert any("replicas" in e and "is not of type 'integer'" in e for e in _errors(jobset))


# --- NetworkPolicies ------------------------------------------------------------------------------


def _policy(objects: saxml_objects.SaxmlObjects, name: str) -> dict[str, Any]:
    return by_name(objects.network_policies, name)


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"http": {"source_ranges": ["192.0.2.0/24", "10.0.0.0/8"], "cluster_clients": False}},
        {"http": {"source_ranges": [], "cluster_clients": True}},
        {"http": {"external": True, "source_ranges": ["203.0.113.0/24"], "cluster_clients": False}},
    ],
)
def test_the_http_server_admits_by_address_exactly_what_its_load_balancer_admits(overrides):
    objects = cell_objects(_params(**overrides))
    http = _policy(objects, saxml_objects.HTTP_NAME)
    ranges = objects.http_service["spec"].get("loadBalancerSourceRanges", [])
    blocks = [peer["ipBlock"]["cidr"] for rule in http["spec"]["ingress"] for peer in rule["from"] if "ipBlock" in peer]
    assert blocks == ranges
    pods_rule = [rule for rule in http["spec"]["ingress"] if rule["from"] == [{"namespaceSelector": {}}]]
    assert bool(pods_rule) is _params(**overrides).saxml.http.cluster_clients
    (container,) = _pod_spec(objects.http_deployment)["containers"]
    (http_port,) = [port["containerPort"] for port in container["ports"]]
    for rule in http["spec"]["ingress"]:
        assert rule["from"], "a rule without senders would admit every one"
        assert rule["ports"] == [{"port": http_port, "protocol": "TCP"}]
    assert objects.http_service["spec"]["externalTrafficPolicy"] == "Local"  # so the address reaches the pod


def test_each_server_is_reached_on_its_own_container_port_by_the_servers_that_call_it():
    built = cell_objects(_params())
    admin_pods = built.admin_deployment["spec"]["template"]["metadata"]["labels"]
    http_pods = built.http_deployment["spec"]["template"]["metadata"]["labels"]
    _, _, _, container = _model_parts(built.model_server_jobset)
    model_pods = built.model_server_jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"][
        "labels"
    ]

    def ports(deployment: dict[str, Any]) -> dict[str, int]:
        (only,) = _pod_spec(deployment)["containers"]
        return {p["name"]: p["containerPort"] for p in only["ports"]}

    model_ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    admin = _policy(built, saxml_objects.ADMIN_NAME)
    assert admin["spec"]["podSelector"]["matchLabels"].items() <= admin_pods.items()
    (clients,) = admin["spec"]["ingress"]
    assert clients["ports"] == [{"port": ports(built.admin_deployment)["admin"], "protocol": "TCP"}]
    assert [peer["podSelector"]["matchLabels"] for peer in clients["from"]] == [
        model_pods,
        built.http_deployment["spec"]["selector"]["matchLabels"],
    ]
    model = _policy(built, saxml_objects.MODEL_SERVER_NAME)
    assert model["spec"]["podSelector"]["matchLabels"] == model_pods
    peers, callers = model["spec"]["ingress"]
    assert peers == {"from": [{"podSelector": {"matchLabels": model_pods}}]}  # the hosts of a slice, any port
    assert callers["ports"] == [{"port": model_ports["model"], "protocol": "TCP"}]
    http = _policy(built, saxml_objects.HTTP_NAME)
    assert http["spec"]["podSelector"]["matchLabels"].items() <= http_pods.items()
    for rule in http["spec"]["ingress"]:
        assert rule["ports"] == [{"port": ports(built.http_deployment)["http"], "protocol": "TCP"}]
