"""The node audit logging as data: every object valid against the strict core schemas, the overlay of images and
cluster, the agent's configuration consistent with what the pod mounts and probes, the pods reaching every node
the program's TPU workloads run on, and the privileges they take, each where the manifest says why."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import pytest

from components import manifests
from components.config_base import NO_PULL_PATH, PullPath, parse_quantity
from components.gcp.config import ClusterConfig
from components.operations import node_audit_objects as nao
from components.operations.config import (
    NODE_AUDIT_AGENT_IMAGE,
    NODE_AUDIT_NAMESPACE,
    NODE_AUDIT_SETUP_IMAGE,
    NodeAuditLoggingConfig,
)
from tests.crd_schemas import core_errors

MIRROR = "us-central1-docker.pkg.dev/my-org-artifacts/tpu-gke-mirror"
OBJECT_FIELDS = [field.name for field in dataclasses.fields(nao.NodeAuditObjects)]  # every object of the block
# The program's TPU workloads: every toleration of their pods must let the audit pods onto the same nodes.
TPU_WORKLOAD_FILES = (
    "serving/prefill-leaderworkerset.yaml",
    "serving/decode-leaderworkerset.yaml",
    "slice-checks/subslicing-check.yaml",
    "slice-checks/superslicing-check.yaml",
    "saxml/model-server.yaml",
)


def built(
    cluster_name: str = ClusterConfig().name, location: str = "us-central1", pull_path: PullPath = NO_PULL_PATH
) -> nao.NodeAuditObjects:
    """The objects of the block's defaults."""
    cluster = ClusterConfig().model_copy(update={"name": cluster_name})
    return nao.node_audit_objects(NodeAuditLoggingConfig(), cluster, location, pull_path)


def pod(objects: nao.NodeAuditObjects) -> dict[str, Any]:
    found: dict[str, Any] = objects.daemonset["spec"]["template"]["spec"]
    return found


def agent(objects: nao.NodeAuditObjects) -> dict[str, Any]:
    return manifests.container(pod(objects), nao.AGENT_CONTAINER)


def setup(objects: nao.NodeAuditObjects) -> dict[str, Any]:
    return manifests.container(pod(objects), nao.SETUP_CONTAINER, key="initContainers")


def sections(conf: str) -> list[tuple[str, dict[str, list[str]]]]:
    """Fluent Bit's classic format: ``[SECTION]`` headers, then ``Key value`` lines (comments dropped)."""
    found: list[tuple[str, dict[str, list[str]]]] = []
    for raw in conf.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if header := re.fullmatch(r"\[([A-Z]+)\]", line):
            found.append((header.group(1), {}))
            continue
        key, _, value = line.partition(" ")
        found[-1][1].setdefault(key.lower(), []).append(value.strip())
    return found


def section(conf: str, name: str) -> dict[str, list[str]]:
    (found,) = [keys for header, keys in sections(conf) if header == name]
    return found


def conf(objects: nao.NodeAuditObjects) -> str:
    text: str = objects.config["data"]["fluent-bit.conf"]
    return text


def mounts(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {m["name"]: m for m in container["volumeMounts"]}


def volumes(objects: nao.NodeAuditObjects) -> dict[str, dict[str, Any]]:
    return {v["name"]: v for v in pod(objects)["volumes"]}


@pytest.mark.parametrize("field", OBJECT_FIELDS)
def test_every_object_passes_the_strict_core_schema(field):
    assert core_errors(getattr(built(), field)) == []


def test_the_overlay_sets_both_images_and_the_cluster_the_entries_are_written_under():
    objects = built(cluster_name="qwen-prod-cluster", location="europe-west4")
    assert setup(objects)["image"] == NODE_AUDIT_SETUP_IMAGE
    assert agent(objects)["image"] == NODE_AUDIT_AGENT_IMAGE
    env = {e["name"]: e for e in agent(objects)["env"]}
    assert env["CLUSTER_NAME"] == {"name": "CLUSTER_NAME", "value": "qwen-prod-cluster"}
    assert env["CLUSTER_LOCATION"] == {"name": "CLUSTER_LOCATION", "value": "europe-west4"}
    assert env["NODE_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}


def test_both_images_come_from_the_mirror_under_their_registry_and_path():
    objects = built(pull_path=PullPath(mirror=MIRROR))
    assert agent(objects)["image"] == f"{MIRROR}/docker.io/fluent/fluent-bit:5.1.1"
    assert (
        setup(objects)["image"]
        == f"{MIRROR}/docker.io/library/busybox:1.37.0@sha256:9db7b59979c38555a39def84a31fb98b5296952f9e3afd4f6f11f05b07adfab0"
    )


def test_the_base_names_the_default_images_so_renovate_moves_both_pins_as_one():
    (daemonset,) = [d for d in manifests.load_documents(nao.NODE_AUDIT_FILE) if d["kind"] == "DaemonSet"]
    base = daemonset["spec"]["template"]["spec"]
    assert manifests.container(base, nao.AGENT_CONTAINER)["image"] == NODE_AUDIT_AGENT_IMAGE
    assert manifests.container(base, nao.SETUP_CONTAINER, key="initContainers")["image"] == NODE_AUDIT_SETUP_IMAGE


def test_a_new_configuration_rolls_the_pods():
    objects = built()
    annotation = objects.daemonset["spec"]["template"]["metadata"]["annotations"][nao.CONFIG_DIGEST_ANNOTATION]
    assert annotation == manifests.files_digest(objects.config["data"])
    assert annotation == built().daemonset["spec"]["template"]["metadata"]["annotations"][nao.CONFIG_DIGEST_ANNOTATION]
    edited = {"fluent-bit.conf": conf(objects).replace("Flush           5", "Flush           1")}
    assert edited["fluent-bit.conf"] != conf(objects)
    assert manifests.files_digest(edited) != annotation


def test_the_setup_starts_the_audit_unit_of_container_optimized_os_on_the_node():
    objects = built()
    assert setup(objects)["command"] == ["chroot", "/host", "systemctl", "start", "cloud-audit-setup"]
    assert mounts(setup(objects))["host-root"]["mountPath"] == "/host"
    assert volumes(objects)["host-root"]["hostPath"]["path"] == "/"
    assert pod(objects)["nodeSelector"] == {"cloud.google.com/gke-os-distribution": "cos"}


def test_the_agent_reads_the_journal_and_keeps_its_cursor_where_the_pod_mounts_them():
    objects = built()
    text = conf(objects)
    (journal,) = section(text, "INPUT")["path"]
    (cursor,) = section(text, "INPUT")["db"]
    agent_mounts = mounts(agent(objects))
    assert agent_mounts["journal"]["mountPath"] == journal == volumes(objects)["journal"]["hostPath"]["path"]
    assert agent_mounts["journal"]["readOnly"] is True
    assert cursor.startswith(agent_mounts["cursor"]["mountPath"] + "/")
    assert volumes(objects)["cursor"]["hostPath"]["path"] == agent_mounts["cursor"]["mountPath"]
    assert section(text, "INPUT")["systemd_filter"] == ["SYSLOG_IDENTIFIER=audit"]
    # The command reads the configuration the ConfigMap mounts.
    command = agent(objects)["command"]
    config_path = command[command.index("-c") + 1]
    directory, _, key = config_path.rpartition("/")
    assert agent_mounts["config"]["mountPath"] == directory and key in objects.config["data"]
    assert volumes(objects)["config"]["configMap"]["name"] == objects.config["metadata"]["name"]


def test_the_entries_go_to_the_nodes_log_linux_auditd_in_this_cluster():
    text = conf(objects := built())
    output, modify = section(text, "OUTPUT"), section(text, "FILTER")
    assert output["name"] == ["stackdriver"] and output["resource"] == ["k8s_node"]
    assert output["k8s_cluster_name"] == ["${CLUSTER_NAME}"]
    assert output["k8s_cluster_location"] == ["${CLUSTER_LOCATION}"]
    assert sorted(modify["add"]) == [
        "logging.googleapis.com/local_resource_id k8s_node.${NODE_NAME}",
        "logging.googleapis.com/logName linux-auditd",
    ]
    tag = section(text, "INPUT")["tag"]
    assert modify["match"] == output["match"] == tag
    # Every variable the configuration names is set in the agent's environment.
    named = set(re.findall(r"\$\{([A-Z_]+)\}", text))
    assert named == {"NODE_NAME", "CLUSTER_NAME", "CLUSTER_LOCATION"}
    assert named <= {e["name"] for e in agent(objects)["env"]}


def test_the_probes_reach_the_health_endpoint_on_the_nodes_loopback():
    objects = built()
    service = section(conf(objects), "SERVICE")
    assert service["http_listen"] == ["127.0.0.1"] and service["health_check"] == ["On"]
    for probe, path in (("livenessProbe", "/"), ("readinessProbe", "/api/v1/health")):
        get = agent(objects)[probe]["httpGet"]
        assert (get["host"], str(get["port"]), get["path"]) == ("127.0.0.1", service["http_port"][0], path)
    # 127.0.0.1 is the node's loopback only because the pod is on the node's network.
    assert pod(objects)["hostNetwork"] is True
    # The agent flushes what it holds within the pod's grace period.
    (grace,) = service["grace"]
    assert int(grace) < pod(objects)["terminationGracePeriodSeconds"]


def tpu_tolerations() -> list[dict[str, Any]]:
    found = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            found.extend(node.get("tolerations") or [])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    for path in TPU_WORKLOAD_FILES:
        walk(manifests.load_documents(path))
    return found


def tolerates(tolerations: list[dict[str, Any]], wanted: dict[str, Any]) -> bool:
    return any(
        t.get("key") == wanted.get("key")
        and t.get("effect") == wanted.get("effect")
        and (t.get("operator") == "Exists" or t.get("value") == wanted.get("value"))
        for t in tolerations
    )


def test_the_pods_go_wherever_the_programs_tpu_workloads_go():
    own = pod(built())["tolerations"]
    wanted = tpu_tolerations()
    assert wanted, "the TPU workload manifests tolerate nothing: this test reads the wrong files"
    for toleration in wanted:
        assert tolerates(own, toleration), f"the audit pods do not tolerate {toleration}"
    # No node selector but the operating system's: every pool of the program runs Container-Optimized OS.
    assert list(pod(built())["nodeSelector"]) == ["cloud.google.com/gke-os-distribution"]


def test_only_the_setup_is_privileged_and_the_agent_keeps_one_capability():
    objects = built()
    assert setup(objects)["securityContext"] == {"privileged": True, "readOnlyRootFilesystem": True}
    assert agent(objects)["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"], "add": ["DAC_OVERRIDE"]},
    }
    assert pod(objects)["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}
    assert pod(objects)["hostPID"] is True
    assert "hostIPC" not in pod(objects)


def test_every_object_is_in_the_node_audit_namespace_and_the_account_carries_no_token():
    objects = built()
    assert {getattr(objects, field)["metadata"]["namespace"] for field in OBJECT_FIELDS} == {NODE_AUDIT_NAMESPACE}
    # The base's placeholder is the namespace the stack uses, so the file applies as it says.
    assert {d["metadata"]["namespace"] for d in manifests.load_documents(nao.NODE_AUDIT_FILE)} == {NODE_AUDIT_NAMESPACE}
    assert objects.service_account["automountServiceAccountToken"] is False
    assert pod(objects)["automountServiceAccountToken"] is False
    assert pod(objects)["serviceAccountName"] == objects.service_account["metadata"]["name"]


def test_every_container_requests_and_limits_cpu_and_memory():
    objects = built()
    for container in (setup(objects), agent(objects)):
        for kind in ("requests", "limits"):
            assert set(container["resources"][kind]) == {"cpu", "memory"}, container["name"]
    # The input's buffer (Fluent Bit's MB: 10^6 bytes) takes at most a quarter of the agent's memory limit.
    (buffer,) = section(conf(objects), "INPUT")["mem_buf_limit"]
    held = int(buffer.removesuffix("MB")) * 10**6
    assert 4 * held <= parse_quantity(agent(objects)["resources"]["limits"]["memory"])


def test_a_rollout_replaces_a_share_of_the_nodes_at_a_time_and_never_doubles_an_agent():
    strategy = built().daemonset["spec"]["updateStrategy"]
    assert strategy == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%"}}
