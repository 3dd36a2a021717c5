"""The P/D model-server LeaderWorkerSets, the inference Gateway and the llm-d router values.

Properties that matter rather than snapshots: labels and annotations Kueue, LWS, the slice
controller and the router select on; vLLM arguments (the kv-transfer-config parsed as JSON);
the leader's command run for real with stub ``bash``/``vllm`` to show the arguments pass through
the shell untouched; ports, probes, env, TPU requests and group sizes; strict validation of every
object against the pinned CRDs (LWS v0.10.0, Gateway API v1.6.1) and of the pod templates with
kubernetes-validate; router values checked key by key against the chart's v0.10.0 value listing.
"""

from __future__ import annotations

import copy
import json
import os
import re
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml
from pydantic import BaseModel

from components import stack as stack_config
from components.config_base import NO_PULL_PATH, PullPath
from components.gcp.config import NetworkConfig, TpuConfig
from components.manifests import load_list
from components.platform.config import QueuesConfig
from components.platform.kueue_objects import PRIORITY_LABEL, QUEUE_LABEL
from components.tpu.topology import SLICE_TOPOLOGY_ANNOTATION, MachineType, Shape, partition_state_label
from components.workloads.serving import objects as so
from components.workloads.serving import rules
from components.workloads.serving.config import (
    DECODE,
    PREFILL,
    ROLES,
    STAGING_IMAGE,
    STAGING_TIMEOUT_MINUTES,
    GatewayConfig,
    RouterConfig,
    ServingConfig,
    ServingRoleConfig,
    hf_cache_weights_uri,
)
from components.workloads.serving.objects import (
    ROUTER_VALUES_FILE,
    gateway,
    load_base,
)
from tests.conftest import not_checkov, stack_values
from tests.crd_schemas import core_errors, crd_errors

# The dev fixture stack (tests/data/stacks): the serving block's defaults, with its own weights bucket.
DEV_VALUES = stack_values("dev")
DEV = stack_config.load(DEV_VALUES).config
WEIGHTS_BUCKET = DEV_VALUES["serving"]["weightsBucket"]["name"]
MODEL = DEV.serving.model  # the model the stack serves
WEIGHTS = hf_cache_weights_uri(WEIGHTS_BUCKET, MODEL.id, MODEL.revision)
DEFAULT_GATEWAY = GatewayConfig()
# Every value key of the router chart, transcribed from its v0.10.0 values.yaml files (header of the file).
ROUTER_VALUE_KEYS = Path(__file__).resolve().parent / "data" / "llm-d-router-v0.10.0-value-keys.txt"

B = TypeVar("B", bound=BaseModel)


def flag_values(args: list[str]) -> dict[str, str | None]:
    """``--flag=value`` items of an argument list as ``{flag: value}`` (``None`` for bare flags)."""
    values: dict[str, str | None] = {}
    for arg in args:
        assert arg.startswith("--"), f"argument {arg!r} is not a --flag or --flag=value item"
        flag, sep, value = arg.partition("=")
        values[flag] = value if sep else None
    return values


def updated(block: B, changes: dict[str, Any]) -> B:
    """``block`` with ``changes`` (field paths, dotted into nested blocks: ``{"model.id": "org/m"}``), unchecked, so
    what the rules would refuse still reaches the builders."""
    nested: dict[str, dict[str, Any]] = {}
    update: dict[str, Any] = {}
    for path, value in changes.items():
        head, dot, rest = path.partition(".")
        if dot:
            nested.setdefault(head, {})[rest] = value
        else:
            update[head] = value
    update.update({head: updated(getattr(block, head), inner) for head, inner in nested.items()})
    return block.model_copy(update=update)


@dataclass(frozen=True)
class Blocks:
    """What the serving objects are built from: the stack's blocks and the run's values that are no setting."""

    serving: ServingConfig
    tpu: TpuConfig
    queues: QueuesConfig
    network: NetworkConfig
    project: str
    # Images as written: the stack's pull path on every serving image is tests/test_operations_stack.py's.
    pull_path: PullPath = NO_PULL_PATH
    skip_await: bool = False

    @property
    def machine(self) -> MachineType:
        return self.tpu.machine


def params(
    changes: dict[str, Any] | None = None,
    *,
    queues: dict[str, Any] | None = None,
    network: dict[str, Any] | None = None,
    pull_path: PullPath = NO_PULL_PATH,
    skip_await: bool = False,
    **serving: Any,
) -> Blocks:
    """The dev fixture stack's blocks, its serving block changed by ``changes`` (dotted paths) and ``serving`` (its
    own fields), its queues and network blocks by ``queues`` and ``network``."""
    return Blocks(
        serving=updated(DEV.serving, {**(changes or {}), **serving}),
        tpu=DEV.tpu,
        queues=updated(DEV.queues, queues or {}),
        network=updated(DEV.network, network or {}),
        project=DEV.project,
        pull_path=pull_path,
        skip_await=skip_await,
    )


def serving_objects(b: Blocks) -> so.ServingObjects:
    return so.serving_objects(b.serving, b.tpu, b.queues, b.network, b.project, b.pull_path, b.skip_await)


def prefill_decode_leaderworkersets(b: Blocks) -> list[dict[str, Any]]:
    return [so.leaderworkerset(b.serving, b.tpu, b.queues, b.project, b.pull_path, role) for role in ROLES]


def load_router_values() -> dict[str, Any]:
    return load_base(ROUTER_VALUES_FILE)


def endpoint_picker_config(values: dict[str, Any]) -> dict[str, Any]:
    """The EndpointPickerConfig the values select (``pluginsConfigFile`` in ``pluginsCustomConfig``)."""
    epp = values["router"]["epp"]
    config: dict[str, Any] = yaml.safe_load(epp["pluginsCustomConfig"][epp["pluginsConfigFile"]])
    return config


def router_values(b: Blocks) -> dict[str, Any]:
    return so.router_values(b.serving, b.pull_path)


def default_gateway(namespace: str) -> dict[str, Any]:
    return gateway(namespace, DEFAULT_GATEWAY)


def by_role(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["labels"][so.ROLE_LABEL]: o for o in objects}


def template(lws: dict[str, Any], kind: str) -> dict[str, Any]:
    return lws["spec"]["leaderWorkerTemplate"][f"{kind}Template"]


def container(lws: dict[str, Any], kind: str) -> dict[str, Any]:
    (only,) = template(lws, kind)["spec"]["containers"]
    return only


def env_of(c: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in c["env"]}


def ports_of(c: dict[str, Any]) -> dict[int, str]:
    return {p["containerPort"]: p["name"] for p in c.get("ports", [])}


@pytest.fixture(scope="module")
def lws() -> dict[str, dict[str, Any]]:
    return by_role(prefill_decode_leaderworkersets(params()))


# --- Metadata: what Kueue, LWS and the router select on -----------------------------------


def test_two_leaderworkersets_with_names_inside_the_slice_budget(lws):
    assert list(lws) == [PREFILL, DECODE]
    assert lws[PREFILL]["metadata"]["name"] == "vllm-prefill"
    assert lws[DECODE]["metadata"]["name"] == "vllm-decode"
    for obj in lws.values():
        assert obj["apiVersion"] == "leaderworkerset.x-k8s.io/v1"
        assert obj["metadata"]["namespace"] == "llm-d-pd-disaggregation"


@pytest.mark.parametrize("role", [PREFILL, DECODE])
def test_kueue_and_llm_d_labels(lws, role):
    assert lws[role]["metadata"]["labels"] == {
        "kueue.x-k8s.io/queue-name": "lq",
        "kueue.x-k8s.io/priority-class": "high-priority-3000",
        "llm-d.ai/guide": "pd-disaggregation",
        "llm-d.ai/model": MODEL.id.rpartition("/")[2],  # the model's name, without its organisation
        "llm-d.ai/role": role,
        "inference.networking.k8s.io/engine-type": "vllm",
    }
    assert not_checkov(lws[role]["metadata"]["annotations"]) == {
        "leaderworkerset.sigs.k8s.io/exclusive-topology": "cloud.google.com/gke-tpu-slice"
    }


@pytest.mark.parametrize("role", [PREFILL, DECODE])
def test_only_leaders_carry_the_guide_label_the_router_selects(lws, role):
    match_labels = load_router_values()["router"]["modelServers"]["matchLabels"]
    leader_labels = template(lws[role], "leader")["metadata"]["labels"]
    worker_labels = template(lws[role], "worker")["metadata"]["labels"]
    assert match_labels.items() <= leader_labels.items()
    assert not match_labels.items() <= worker_labels.items(), "workers serve no HTTP; the pool must skip them"
    for labels in (leader_labels, worker_labels):
        assert labels[so.ROLE_LABEL] == role  # prefill-filter / decode-filter read it
        assert labels[so.MODEL_LABEL] == MODEL.id.rpartition("/")[2]


def test_overlaid_names_and_labels():
    objects = by_role(
        prefill_decode_leaderworkersets(
            params(
                {"model.id": "org/Some-Model"},
                namespace="serving",
                queues={"local_queue_name": "serving-lq", "priority_classes.high.name": "urgent"},
            )
        )
    )
    for obj in objects.values():
        labels = obj["metadata"]["labels"]
        assert obj["metadata"]["namespace"] == "serving"
        assert (labels[QUEUE_LABEL], labels[PRIORITY_LABEL]) == ("serving-lq", "urgent")
        assert (labels[so.GUIDE_LABEL], labels[so.MODEL_LABEL]) == ("pd-disaggregation", "Some-Model")
        assert template(obj, "leader")["metadata"]["labels"][so.GUIDE_LABEL] == "pd-disaggregation"
        assert so.GUIDE_LABEL not in template(obj, "worker")["metadata"]["labels"]


# --- Sizes, slices and scheduling ---------------------------------------------------------


@pytest.mark.parametrize("role", [PREFILL, DECODE])
def test_four_groups_of_two_hosts_on_2x2x2(lws, role):
    spec = lws[role]["spec"]
    assert spec["replicas"] == 4
    assert spec["leaderWorkerTemplate"]["size"] == 2
    assert spec["leaderWorkerTemplate"]["restartPolicy"] == "RecreateGroupOnPodRestart"
    for kind in ("leader", "worker"):
        pod = template(lws[role], kind)
        assert not_checkov(pod["metadata"]["annotations"]) == {"cloud.google.com/gke-tpu-slice-topology": "2x2x2"}
        assert pod["spec"]["nodeSelector"] == {"cloud.google.com/gke-tpu-accelerator": "tpu7x"}
        # Not privileged (the device plugin gives the chips), no privilege escalation, no raw sockets.
        assert pod["spec"]["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}
        assert container(lws[role], kind)["securityContext"] == {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["NET_RAW"]},
        }
        assert pod["spec"]["tolerations"] == [{"key": "google.com/tpu", "operator": "Exists", "effect": "NoSchedule"}]
        assert pod["spec"]["serviceAccountName"] == "model-server"
        resources = container(lws[role], kind)["resources"]
        expected = {"google.com/tpu": "4", "cpu": "220", "memory": "850Gi"}
        assert resources == {"requests": expected, "limits": expected}


@pytest.mark.parametrize(
    "shape, size, tp_devices", [("2x2x1", 1, 8), ("2x2x2", 2, 16), ("2x2x4", 4, 32), ("2x4x4", 8, 64)]
)
def test_group_size_follows_the_shape(shape, size, tp_devices):
    objects = prefill_decode_leaderworkersets(
        params(
            {"prefill.tensor_parallel_size": tp_devices, "decode.tensor_parallel_size": tp_devices}, slice_shape=shape
        )
    )
    for obj in objects:
        assert obj["spec"]["leaderWorkerTemplate"]["size"] == size
        for kind in ("leader", "worker"):
            assert template(obj, kind)["metadata"]["annotations"][SLICE_TOPOLOGY_ANNOTATION] == shape
        assert flag_values(container(obj, "leader")["args"])["--tensor-parallel-size"] == str(tp_devices)


def test_replicas_per_role():
    objects = by_role(prefill_decode_leaderworkersets(params({"prefill.replicas": 3, "decode.replicas": 5})))
    assert (objects[PREFILL]["spec"]["replicas"], objects[DECODE]["spec"]["replicas"]) == (3, 5)


def test_webhook_skip_and_healthy_nodes_are_off_by_default_and_apply_to_every_pod(lws):
    for obj in lws.values():
        for kind in ("leader", "worker"):
            pod = template(obj, kind)
            assert so.SKIP_TPU_WEBHOOK_ANNOTATION not in pod["metadata"]["annotations"]
            assert not any(k.endswith("-state") for k in pod["spec"]["nodeSelector"])
    objects = prefill_decode_leaderworkersets(params(skip_tpu_webhook_check=True, healthy_nodes_only=True))
    for obj in objects:
        for kind in ("leader", "worker"):
            pod = template(obj, kind)
            assert pod["metadata"]["annotations"]["cloud.google.com/skip-tpu-webhook-check"] == "true"
            assert pod["spec"]["nodeSelector"]["cloud.google.com/gke-tpu-partition-2x2x2-state"] == "HEALTHY"


# --- vLLM: arguments, command, env ---------------------------------------------------------


@pytest.mark.parametrize("role, kv_role, port", [(PREFILL, "kv_producer", "8000"), (DECODE, "kv_consumer", "8200")])
def test_vllm_arguments(lws, role, kv_role, port):
    flags = flag_values(container(lws[role], "leader")["args"])
    assert flags["--model"] == WEIGHTS
    organisation, name = MODEL.id.split("/")
    assert flags["--model"].startswith(f"gs://{WEIGHTS_BUCKET}/models--{organisation}--{name}/snapshots/")
    assert flags["--load-format"] == "runai_streamer"
    assert flags["--served-model-name"] == MODEL.id  # no servedName: the model id
    assert (flags["--max-model-len"], flags["--max-num-batched-tokens"], flags["--max-num-seqs"]) == (
        "9216",
        "8192",
        "512",
    )
    assert flags["--tensor-parallel-size"] == "16"
    assert flags["--kv-cache-dtype"] == "fp8"
    assert flags["--port"] == port
    for bare in ("--language-model-only", "--enable-expert-parallel", "--no-disable-hybrid-kv-cache-manager"):
        assert flags[bare] is None
    assert json.loads(flags["--limit-mm-per-prompt"]) == {"image": 0, "video": 0}
    assert flags["--disable-access-log-for-endpoints"] == "/health,/metrics,/v1/models"
    assert json.loads(flags["--kv-transfer-config"]) == {
        "kv_connector": "TPUConnectorHMA",
        "kv_connector_module_path": "tpu_inference.distributed.tpu_connector_hma",
        "kv_role": kv_role,
    }


@pytest.mark.parametrize("role", [PREFILL, DECODE])
def test_kv_transfer_config_is_the_bases(lws, role):
    """The same for every stack: the base's, not overlaid."""
    base = flag_values(container(load_base(so.BASE_FILES[role]), "leader")["args"])
    assert flag_values(container(lws[role], "leader")["args"])["--kv-transfer-config"] == base["--kv-transfer-config"]


@pytest.mark.parametrize("role", [PREFILL, DECODE])
def test_kv_transfer_config_names_no_address(lws, role):
    """tpu-inference gathers the hosts' KV addresses over Ray and never reads ``kv_ip``; vllm-tpu
    0.32.0's KVTransferConfig has no such field and refuses unknown keys."""
    kv = json.loads(flag_values(container(lws[role], "leader")["args"])["--kv-transfer-config"])
    assert set(kv) == {"kv_connector", "kv_connector_module_path", "kv_role"}


def test_overlaid_vllm_sizes():
    p = params(
        {"model.served_name": "qwen", "prefill.tensor_parallel_size": 8, "decode.tensor_parallel_size": 8},
        max_model_len=4096,
        max_num_seqs=64,
        max_num_batched_tokens=2048,
        kv_cache_dtype="auto",
        slice_shape="2x2x1",
    )
    for obj in prefill_decode_leaderworkersets(p):
        flags = flag_values(container(obj, "leader")["args"])
        assert (flags["--max-model-len"], flags["--max-num-seqs"], flags["--max-num-batched-tokens"]) == (
            "4096",
            "64",
            "2048",
        )
        assert (flags["--served-model-name"], flags["--kv-cache-dtype"], flags["--tensor-parallel-size"]) == (
            "qwen",
            "auto",
            "8",
        )


VLLM_SETTINGS = sorted(so.VLLM_SETTING_FLAGS.items())


@pytest.mark.parametrize("field, flag", VLLM_SETTINGS)
def test_each_vllm_setting_is_a_field_of_the_serving_block_or_of_each_roles(field, flag):
    """Its block is never ambiguous: a field of exactly one of them."""
    owners = [block for block in (ServingConfig, ServingRoleConfig) if field in block.model_fields]
    assert len(owners) == 1, (field, owners)
    assert flag.startswith("--") and "=" not in flag
    assert list(so.VLLM_SETTING_FLAGS.values()).count(flag) == 1, "one setting per flag"


@pytest.mark.parametrize("field, flag", VLLM_SETTINGS)
@pytest.mark.parametrize("role", [PREFILL, DECODE])
def test_the_bases_hold_each_vllm_setting_at_its_default(field, flag, role):
    """The YAML base runs what the block's default says; a setting unset by default has no flag there."""
    owner = ServingRoleConfig if field in ServingRoleConfig.model_fields else ServingConfig
    default = owner.model_fields[field].default
    base = flag_values(container(load_base(so.BASE_FILES[role]), "leader")["args"])
    if default is None:
        assert flag not in base
    else:
        assert base[flag] == str(default)


@pytest.mark.parametrize("field, flag", VLLM_SETTINGS)
def test_each_vllm_setting_reaches_its_flag_and_unset_leaves_it_out(lws, field, flag):
    for role, obj in lws.items():
        block = DEV.serving.role(role) if field in ServingRoleConfig.model_fields else DEV.serving
        value = getattr(block, field)
        flags = flag_values(container(obj, "leader")["args"])
        assert flags.get(flag) == (None if value is None else str(value))
    path = {f"{role}.{field}": None for role in (PREFILL, DECODE)} if field in ServingRoleConfig.model_fields else {}
    unset = by_role(prefill_decode_leaderworkersets(params(path or {field: None})))
    for role, obj in unset.items():
        args = container(obj, "leader")["args"]
        assert flag not in flag_values(args)
        kept = [a for a in container(lws[role], "leader")["args"] if a.partition("=")[0] != flag]
        assert args == kept, "only that flag goes"


def test_a_flag_the_base_lacks_is_an_error_unless_its_setting_is_unset_by_default():
    """What a setting unset by default (None: vLLM's own default) does to the arguments when it is set."""
    args = ["--a=1", "--bare"]
    with pytest.raises(ValueError, match="no --b"):
        so.manifests.set_flag(args, "--b", 2)
    so.manifests.set_flag(args, "--b", 2, optional=True)
    assert args == ["--a=1", "--bare", "--b=2"]
    so.manifests.set_flag(args, "--b", 3, optional=True)
    assert args == ["--a=1", "--bare", "--b=3"], "replaced where it is"
    so.manifests.set_flag(args, "--b", None, optional=True)
    so.manifests.set_flag(args, "--bare", None)
    assert args == ["--a=1"]


def kubelet_expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes dependent-variable expansion: $(NAME) of a defined variable, $$ -> $."""
    return re.sub(
        r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
        lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)),
        text,
    )


def _stub(directory: Path, name: str, body: str) -> None:
    path = directory / name
    # An absolute interpreter: a `python3` found on PATH may be a shell shim that runs our `bash`.
    path.write_text(f"#!{sys.executable}\nimport json, os, sys\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


@pytest.mark.skipif(not Path("/bin/sh").exists(), reason="needs /bin/sh")
@pytest.mark.parametrize("ray_status, vllm_runs", [(0, True), (1, False)])
def test_leader_command_hands_vllm_its_arguments_verbatim(tmp_path, lws, ray_status, vllm_runs):
    record = tmp_path / "calls.jsonl"
    log = f"open({str(record)!r}, 'a').write(json.dumps([os.path.basename(sys.argv[0])] + sys.argv[1:]) + '\\n')\n"
    _stub(tmp_path, "bash", log + f"sys.exit({ray_status})\n")
    _stub(tmp_path, "vllm", log)
    leader = container(lws[PREFILL], "leader")
    pod_env = {"LWS_GROUP_SIZE": "2"}
    argv = [kubelet_expand(a, pod_env) for a in leader["command"] + leader["args"]]
    env = {"PATH": f"{tmp_path}:{os.environ['PATH']}", **pod_env}
    result = subprocess.run(argv, check=False, env=env, capture_output=True, text=True, timeout=60)
    calls = [json.loads(line) for line in record.read_text().splitlines()]
    assert calls[0][:3] == ["bash", "/workspace/vllm/examples/online_serving/multi-node-serving.sh", "leader"]
    assert "--ray_cluster_size=2" in calls[0] and f"--ray_init_timeout={rules.RAY_INIT_TIMEOUT_SECONDS}" in calls[0]
    if not vllm_runs:
        assert len(calls) == 1 and result.returncode != 0, "vLLM must not start without a Ray cluster"
        return
    assert result.returncode == 0, result.stderr
    assert calls[1][:2] == ["vllm", "serve"]
    assert calls[1][2:] == leader["args"], "no kubelet expansion in the vLLM arguments"
    kv = json.loads(flag_values(calls[1][2:])["--kv-transfer-config"])
    assert kv == {
        "kv_connector": "TPUConnectorHMA",
        "kv_connector_module_path": "tpu_inference.distributed.tpu_connector_hma",
        "kv_role": "kv_producer",
    }


def test_worker_joins_the_leaders_ray_cluster(lws):
    for obj in lws.values():
        worker = container(obj, "worker")
        assert worker["command"][:2] == ["/bin/sh", "-c"]
        script = worker["command"][2]
        assert "multi-node-serving.sh worker" in script
        assert '--ray_address="${LWS_LEADER_ADDRESS}"' in script
        assert "args" not in worker
        assert worker["image"] == container(obj, "leader")["image"]


@pytest.mark.parametrize("role", [PREFILL, DECODE])
def test_env_of_leader_and_worker(lws, role):
    leader, worker = env_of(container(lws[role], "leader")), env_of(container(lws[role], "worker"))
    assert leader == worker
    assert "POD_IP" not in leader, "it fed only kv_ip, which nothing reads"
    assert leader["HF_TOKEN"] == {
        "name": "HF_TOKEN",
        "valueFrom": {"secretKeyRef": {"name": "llm-d-hf-token", "key": "HF_TOKEN", "optional": True}},
    }
    assert leader["VLLM_XLA_CACHE_PATH"]["value"] == f"gs://{WEIGHTS_BUCKET}/xla_cache"
    values = {name: e.get("value") for name, e in leader.items()}
    assert values["TPU_MULTIHOST_BACKEND"] == "ray"
    assert values["TPU_NODE_ID"] == "$(LWS_WORKER_INDEX)"
    assert values["TPU_KV_TRANSFER_PORT"] == "9100" and values["TPU_SIDE_CHANNEL_PORT"] == "9600"
    assert "VLLM_ENGINE_CLIENT_STARTUP_TIMEOUT" not in values, "nothing in vLLM or tpu-inference reads it"
    assert values["SKIP_JAX_PRECOMPILE"] == "1"
    # Every env value is a string (Kubernetes rejects numbers), none is a literal secret.
    for entry in leader.values():
        assert set(entry) in ({"name", "value"}, {"name", "valueFrom"})
        assert isinstance(entry.get("value", ""), str)


def test_secret_xla_cache_and_service_account_overlays():
    p = params({"weights_bucket.name": "cache"}, service_account_name="vllm")
    for obj in prefill_decode_leaderworkersets(p):
        for kind in ("leader", "worker"):
            env = env_of(container(obj, kind))
            secret = {"name": so.HF_TOKEN_SECRET_NAME, "key": "HF_TOKEN", "optional": True}
            assert env["HF_TOKEN"]["valueFrom"]["secretKeyRef"] == secret
            assert env["VLLM_XLA_CACHE_PATH"]["value"] == "gs://cache/xla_cache"
            assert template(obj, kind)["spec"]["serviceAccountName"] == "vllm"
    assert so.HF_TOKEN_SECRET_NAME == "llm-d-hf-token"


def test_images_are_overlaid_on_every_container():
    p = params(image="example.com/vllm-tpu:2026-05-01", routing_sidecar_image="example.com/sidecar:v1")
    objects = by_role(prefill_decode_leaderworkersets(p))
    for obj in objects.values():
        assert {container(obj, k)["image"] for k in ("leader", "worker")} == {"example.com/vllm-tpu:2026-05-01"}
    (sidecar,) = template(objects[DECODE], "leader")["spec"]["initContainers"]
    assert sidecar["image"] == "example.com/sidecar:v1"


def test_default_images_are_pinned(lws):
    image = container(lws[PREFILL], "leader")["image"]
    assert image == "docker.io/vllm/vllm-tpu:nightly-20260430-18ed615-5b39b26"
    assert re.search(r":nightly-20\d{6}-", image), "a dated build, not the floating nightly tag"


# --- Ports, sidecar, probes ----------------------------------------------------------------


def test_ports(lws):
    assert ports_of(container(lws[PREFILL], "leader")) == {
        8000: "modelserver",
        9100: "tpu-kv-transfer",
        9600: "tpu-pd-coord",
    }
    assert ports_of(container(lws[DECODE], "leader")) == {8200: "vllm", 9100: "tpu-kv-transfer", 9600: "tpu-pd-coord"}
    for obj in lws.values():
        assert ports_of(container(obj, "worker")) == {9100: "tpu-kv-transfer", 9600: "tpu-pd-coord"}


def test_routing_sidecar_only_on_the_decode_leader(lws):
    (sidecar,) = template(lws[DECODE], "leader")["spec"]["initContainers"]
    assert sidecar["name"] == "routing-proxy"
    assert sidecar["image"] == "ghcr.io/llm-d/llm-d-router-disagg-sidecar:v0.10.0"
    assert sidecar["restartPolicy"] == "Always"  # native sidecar: runs beside vLLM
    # The flags llm-d-router v0.10.0's pd-sidecar defines (pkg/sidecar/proxy/options.go): it refuses
    # an unknown one such as the removed --connector, and --vllm-port is deprecated.
    assert sidecar["args"] == [
        "--port=8000",
        "--model-server-port=8200",
        "--kv-connector=nixlv2",
        "--zap-log-level=1",
        "--secure-proxy=false",
    ]
    assert ports_of(sidecar) == {8000: "modelserver"}
    assert sidecar["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
    }
    assert sidecar["resources"] == {
        "requests": {"cpu": "250m", "memory": "256Mi"},
        "limits": {"cpu": "2", "memory": "1Gi"},
    }
    assert "initContainers" not in template(lws[PREFILL], "leader")["spec"]
    assert "initContainers" not in template(lws[DECODE], "worker")["spec"]


def test_router_targets_the_port_that_serves_each_role(lws):
    (target,) = load_router_values()["router"]["modelServers"]["targetPorts"]
    assert flag_values(container(lws[PREFILL], "leader")["args"])["--port"] == str(target["number"])
    (sidecar,) = template(lws[DECODE], "leader")["spec"]["initContainers"]
    assert f"--port={target['number']}" in sidecar["args"]
    vllm_port = flag_values(container(lws[DECODE], "leader")["args"])["--port"]
    assert flag_values(sidecar["args"])["--model-server-port"] == vllm_port


def test_the_sidecar_and_the_endpoint_picker_are_the_routers_release():
    """One fact, serving.router.version: the chart, the picker's tag and the sidecar's tag."""
    spec = params()
    version = spec.serving.router.version
    assert version == RouterConfig().version == "v0.10.0"
    built = serving_objects(spec)
    (sidecar,) = template(by_role(built.leaderworkersets)[DECODE], "leader")["spec"]["initContainers"]
    assert sidecar["image"] == f"ghcr.io/llm-d/llm-d-router-disagg-sidecar:{version}"
    assert built.router_values["router"]["epp"]["image"]["tag"] == version
    later = params({"router.version": "v0.11.0"})
    assert router_values(later)["router"]["epp"]["image"]["tag"] == "v0.11.0"
    (sidecar,) = template(by_role(serving_objects(later).leaderworkersets)[DECODE], "leader")["spec"]["initContainers"]
    assert sidecar["image"] == "ghcr.io/llm-d/llm-d-router-disagg-sidecar:v0.11.0"
    assert load_router_values()["router"]["epp"]["image"]["tag"] == RouterConfig().version, "the base as applied"


@pytest.mark.parametrize("role, port", [(PREFILL, 8000), (DECODE, 8200)])
def test_probes_on_the_leader_vllm(lws, role, port):
    leader = container(lws[role], "leader")
    assert leader["startupProbe"]["httpGet"] == {"path": "/v1/models", "port": port}
    assert leader["readinessProbe"]["httpGet"] == {"path": "/v1/models", "port": port}
    assert leader["livenessProbe"]["httpGet"] == {"path": "/health", "port": port}
    startup = leader["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= rules.STARTUP_SECONDS_NEEDED
    assert (startup["periodSeconds"], startup["failureThreshold"]) == (30, 240)
    worker = container(lws[role], "worker")
    assert not {"startupProbe", "readinessProbe", "livenessProbe"} & set(worker), "Ray workers serve no HTTP"


@pytest.mark.parametrize("role", [PREFILL, DECODE])
def test_one_api_server_so_no_vllm_deadline_ends_the_load(lws, role):
    """With one API server vLLM waits for the engine's handshake without a deadline, so the startup
    probe alone bounds the model load (rules.py). Several API servers or data parallelism would put
    VLLM_ENGINE_READY_TIMEOUT_S (600 s by default) on the load and end it before the probe does."""
    leader = container(lws[role], "leader")
    flags = [flag.replace("_", "-") for flag in flag_values(leader["args"])]  # vLLM takes either spelling
    assert not [f for f in flags if f.startswith(("--api-server", "--data-parallel", "--headless"))], flags
    assert "VLLM_ENGINE_READY_TIMEOUT_S" not in env_of(leader)


def test_startup_budget_is_configurable():
    (obj, _) = prefill_decode_leaderworkersets(params(startup_failure_threshold=480))
    startup = container(obj, "leader")["startupProbe"]
    assert (startup["periodSeconds"], startup["failureThreshold"]) == (rules.STARTUP_PERIOD_SECONDS, 480)


# --- Strict validation ---------------------------------------------------------------------


def _all_objects(p: Blocks) -> list[dict[str, Any]]:
    built = serving_objects(p)
    return [*built.leaderworkersets, built.gateway]


@pytest.mark.external  # the CRD files of schemas.lock
@pytest.mark.parametrize(
    "p",
    [
        params(),
        params(
            {"prefill.tensor_parallel_size": 64, "decode.tensor_parallel_size": 64},
            skip_tpu_webhook_check=True,
            healthy_nodes_only=True,
            slice_shape="2x4x4",
        ),
    ],
    ids=["default", "options"],
)
def test_custom_objects_pass_the_pinned_crd_schemas(p):
    for obj in _all_objects(p):
        assert crd_errors(obj) == []


@pytest.mark.parametrize("role", [PREFILL, DECODE])
@pytest.mark.parametrize("kind", ["leader", "worker"])
def test_pod_templates_are_valid_pods(lws, role, kind):
    pod_template = template(lws[role], kind)
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"{role}-{kind}", **pod_template["metadata"]},
        "spec": pod_template["spec"],
    }
    assert core_errors(pod) == []


def test_service_account_is_valid():
    account = load_base("service-account.yaml", name="vllm", namespace="serving")
    assert account["metadata"] == {"name": "vllm", "namespace": "serving"}
    assert core_errors(account) == []


@pytest.mark.external  # the CRD files of schemas.lock
@pytest.mark.parametrize(
    "path, typo",
    [
        (("spec",), "replica"),
        (("spec", "leaderWorkerTemplate"), "sizee"),
        (("spec", "leaderWorkerTemplate", "leaderTemplate", "spec"), "nodeSelectr"),
    ],
)
def test_a_misspelled_field_is_rejected(lws, path, typo):
    obj = json.loads(json.dumps(lws[PREFILL]))
    node = obj
    for key in path:
        node = node[key]
    node[typo] = 1
    errors = crd_errors(obj)
    assert errors and any(typo in e for e in errors)


@pytest.mark.external  # the CRD files of schemas.lock
def test_a_misspelled_container_field_is_rejected(lws):
    obj = json.loads(json.dumps(lws[DECODE]))
    container(obj, "leader")["readinesProbe"] = {}
    assert any("readinesProbe" in e for e in crd_errors(obj))


def test_overlays_do_not_leak_between_calls_or_containers():
    first = by_role(prefill_decode_leaderworkersets(params()))
    container(first[PREFILL], "leader")["env"].append({"name": "LEAK", "value": "1"})
    container(first[PREFILL], "leader")["resources"]["requests"]["cpu"] = "1"
    assert "LEAK" not in env_of(container(first[PREFILL], "worker"))
    assert container(first[PREFILL], "worker")["resources"]["requests"]["cpu"] == "220"
    second = by_role(prefill_decode_leaderworkersets(params()))
    assert "LEAK" not in env_of(container(second[PREFILL], "leader"))


def test_a_shape_that_splits_a_host_cannot_be_built():
    with pytest.raises(ValueError, match="not a multiple"):
        prefill_decode_leaderworkersets(params(slice_shape="1x2x1"))


# --- Rendered LeaderWorkerSets ---------------------------------------------------------------


def test_each_role_is_labelled_and_runs_the_tensor_parallel_size_of_its_setting():
    objects = prefill_decode_leaderworkersets(params())
    assert [o["metadata"]["labels"]["llm-d.ai/role"] for o in objects] == [PREFILL, DECODE]
    settings = [DEV.serving.prefill.tensor_parallel_size, DEV.serving.decode.tensor_parallel_size]
    assert [flag_values(container(o, "leader")["args"])["--tensor-parallel-size"] for o in objects] == [
        str(size) for size in settings
    ]


# --- Gateway -------------------------------------------------------------------------------


def test_gateway():
    gw = default_gateway("serving")
    assert gw["apiVersion"] == "gateway.networking.k8s.io/v1"
    assert gw["metadata"]["name"] == "llm-d-inference-gateway"
    assert gw["metadata"]["namespace"] == "serving"
    # up waits for the load balancer, and longer than the provider's default 10 minutes (a first one in a project)
    assert gw["metadata"]["annotations"] == {
        "pulumi.com/waitFor": "condition=Programmed",
        "pulumi.com/timeoutSeconds": "1800",
    }
    assert gw["spec"]["gatewayClassName"] == "gke-l7-rilb"
    (listener,) = gw["spec"]["listeners"]
    assert (listener["port"], listener["protocol"]) == (80, "HTTP")
    other = gateway("serving", GatewayConfig(name="gw", class_name="gke-l7-regional-external-managed", port=8080))
    assert (other["metadata"]["name"], other["spec"]["gatewayClassName"]) == ("gw", "gke-l7-regional-external-managed")
    assert other["spec"]["listeners"][0]["port"] == 8080


def test_router_routes_to_the_gateway():
    assert load_router_values()["httpRoute"]["inferenceGatewayName"] == default_gateway("x")["metadata"]["name"]


# --- Router values -------------------------------------------------------------------------

# Keys the templates read beyond the listed defaults (platform-facts.md, "Keys read by templates
# but not present in the defaults", and the chart-behaviour table for modelServers.matchLabels).
EXTRA_ROUTER_KEYS = {
    "router.epp.flags",
    "router.epp.grpcHealthPort",
    "httpRoute.baseModel",
    "httpRoute.headerMatches",
    "router.modelServers.matchLabels",
}
# Maps whose keys are free (labels, flags, file names, headers).
OPEN_MAPS = {
    "router.epp.affinity",  # a Kubernetes Affinity, passed through as the pods' affinity
    "router.epp.flags",
    "router.epp.pluginsCustomConfig",
    "router.modelServers.matchLabels",
    "httpRoute.headerMatches",
}
# Transcribed from the chart's v0.10.0 values listing (tests/data/llm-d-router-v0.10.0-value-keys.txt:
# gateway values, and library values under router.*); the parts of the listing this setup can touch.
TRANSCRIBED_ROUTER_KEYS = {
    "provider.name",
    "provider.istio.destinationRule.host",
    "provider.istio.destinationRule.trafficPolicy",
    "provider.gke.preferredBackends.enabled",
    "provider.gke.preferredBackends.preferredReplicas",
    "provider.gke.preferredBackends.defaultReplicas",
    "provider.gke.preferredBackends.balancingMode",
    "provider.gke.preferredBackends.maxRatePerEndpoint",
    "provider.gke.preferredBackends.capacityScalerPercent",
    "httpRoute.create",
    "httpRoute.inferenceGatewayName",
    "httpRoute.inferenceGatewayNamespace",
    "httpRoute.requestTimeout",
    "router.extraServicePorts",
    "router.clusterDomain",
    "router.epp.replicas",
    "router.epp.image.registry",
    "router.epp.image.repository",
    "router.epp.image.tag",
    "router.epp.image.pullPolicy",
    "router.epp.extProcPort",
    "router.epp.parsers",
    "router.epp.metricsDataSource.scheme",
    "router.epp.metricsDataSource.path",
    "router.epp.metricsDataSource.insecureSkipVerify",
    "router.epp.env",
    "router.epp.pluginsConfigFile",
    "router.epp.pluginsCustomConfig",
    "router.epp.extraContainerPorts",
    "router.epp.resources.requests.cpu",
    "router.epp.resources.requests.memory",
    "router.epp.resources.limits.memory",
    "router.epp.affinity",
    "router.epp.tolerations",
    "router.epp.podAnnotations",
    "router.proxy.enabled",
    "router.tokenizer.enabled",
    "router.tokenizer.modelName",
    "router.monitoring.interval",
    "router.monitoring.prometheus.enabled",
    "router.monitoring.prometheus.auth.enabled",
    "router.monitoring.prometheus.auth.secretName",
    "router.tracing.enabled",
    "router.tracing.otelExporterEndpoint",
    "router.tracing.sampling.sampler",
    "router.tracing.sampling.samplerArg",
    "router.inferencePool.create",
    "router.inferencePool.failureMode",
    "router.inferenceObjectives",
    "router.modelServers.type",
    "router.modelServers.protocol",
    "router.modelServers.targetPorts",
    "router.latencyPredictor.enabled",
}


def leaf_paths(node: Any, prefix: str = "") -> set[str]:
    """Dotted paths to every leaf (scalar, list, empty or null map) of a values tree."""
    if isinstance(node, dict) and node:
        return set().union(*(leaf_paths(v, f"{prefix}{k}.") for k, v in node.items()))
    return {prefix.rstrip(".")}


def listed_router_keys(text: str) -> set[str]:
    """The keys of a value-key listing: one dotted path per line, `#` comments and blank lines ignored."""
    return {line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")}


def unknown_keys(values: dict[str, Any], known: set[str]) -> set[str]:
    def is_known(path: str) -> bool:
        return path in known or any(path.startswith(m + ".") and m in known for m in OPEN_MAPS)

    return {p for p in leaf_paths(values) if not is_known(p)}


@pytest.fixture(scope="module")
def listed_keys() -> set[str]:
    return listed_router_keys(ROUTER_VALUE_KEYS.read_text(encoding="utf-8"))


def test_the_value_key_listing_is_sorted_and_well_formed():
    lines = [line for line in ROUTER_VALUE_KEYS.read_text(encoding="utf-8").splitlines() if not line.startswith("#")]
    assert lines == sorted(set(lines)), "one key per line, sorted, no duplicates"
    assert all(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*", key) for key in lines)
    assert RouterConfig().version in ROUTER_VALUE_KEYS.name


def test_every_router_value_is_a_transcribed_chart_key():
    values = router_values(params({"gateway.name": "gw"}))
    assert unknown_keys(values, TRANSCRIBED_ROUTER_KEYS | EXTRA_ROUTER_KEYS) == set()


def test_every_router_value_is_in_the_chart_listing(listed_keys):
    assert "router.epp.replicas" in listed_keys and "httpRoute.inferenceGatewayName" in listed_keys
    values = router_values(params({"gateway.name": "gw"}))
    assert unknown_keys(values, listed_keys | EXTRA_ROUTER_KEYS) == set()


def test_transcribed_keys_match_the_listing(listed_keys):
    assert TRANSCRIBED_ROUTER_KEYS - listed_keys == set()


def test_a_misspelled_router_key_is_caught():
    values = load_router_values()
    values["router"]["epp"]["replica"] = 1
    values["httpRoute"]["inferenceGateway"] = "x"
    assert unknown_keys(values, TRANSCRIBED_ROUTER_KEYS | EXTRA_ROUTER_KEYS) == {
        "router.epp.replica",
        "httpRoute.inferenceGateway",
    }


def test_router_values_for_pd_disaggregation_on_gke():
    values = load_router_values()
    assert set(values) == {"router", "provider", "httpRoute"}, "top-level inferencePool etc. make the chart fail"
    assert values["provider"]["name"] == "gke"
    assert values["httpRoute"]["create"] is True
    epp = values["router"]["epp"]
    assert epp["replicas"] == RouterConfig().replicas == 2, "the base says what the overlay writes"
    assert epp["image"]["tag"] == RouterConfig().version
    assert {"cpu", "memory"} <= set(epp["resources"]["requests"]), "the chart requires EPP requests"
    assert values["router"]["modelServers"]["matchLabels"] == {"llm-d.ai/guide": "pd-disaggregation"}
    assert values["router"]["inferencePool"]["failureMode"] == "FailOpen"


def test_endpoint_picker_config_has_prefill_and_decode_profiles():
    config = endpoint_picker_config(load_router_values())
    assert config["apiVersion"] == "llm-d.ai/v1alpha1"  # what EPP v0.10.0 decodes
    assert config["kind"] == "EndpointPickerConfig"
    declared = {p.get("name", p["type"]) for p in config["plugins"]}
    profiles = {p["name"]: [r["pluginRef"] for r in p["plugins"]] for p in config["schedulingProfiles"]}
    assert set(profiles) == {"prefill", "decode"}
    assert profiles["prefill"][0] == "prefill-filter" and profiles["decode"][0] == "decode-filter"
    assert all(ref in declared for refs in profiles.values() for ref in refs)
    handler = next(p for p in config["plugins"] if p["type"] == "disagg-profile-handler")
    assert handler["parameters"]["deciders"]["prefill"] in declared


def test_router_values_overlay():
    values = router_values(params({"gateway.name": "gw"}))
    assert values["router"]["modelServers"]["matchLabels"] == {"llm-d.ai/guide": "pd-disaggregation"}
    # The Gateway is the release's own: in its namespace, which the chart takes for an empty namespace.
    assert (values["httpRoute"]["inferenceGatewayName"], values["httpRoute"]["inferenceGatewayNamespace"]) == ("gw", "")
    assert load_router_values()["router"]["modelServers"]["matchLabels"] == {"llm-d.ai/guide": "pd-disaggregation"}
    objects = prefill_decode_leaderworkersets(params())
    for obj in objects:
        assert (
            values["router"]["modelServers"]["matchLabels"].items()
            <= template(obj, "leader")["metadata"]["labels"].items()
        )


def test_two_endpoint_pickers_spread_over_nodes_on_the_charts_own_labels():
    built = serving_objects(params(namespace="serving"))
    epp = built.router_values["router"]["epp"]
    assert epp["replicas"] == 2
    (spread,) = epp["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    labels = {
        "llm-d-router-gateway": "pd-disaggregation-epp"
    }  # the chart's selectorLabels of release pd-disaggregation
    assert spread["podAffinityTerm"] == {
        "topologyKey": "kubernetes.io/hostname",
        "labelSelector": {"matchLabels": labels},
    }


def test_the_endpoint_picker_comes_from_the_mirror_pinned_by_its_digest():
    digest = "sha256:" + "f" * 64
    image = f"ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.10.0@{digest}"
    mirror = PullPath(mirror="us-docker.pkg.dev/p/m")
    epp = serving_objects(params({"router.epp_image": image}, pull_path=mirror)).router_values["router"]["epp"]
    assert epp["image"] == {
        "registry": "us-docker.pkg.dev/p/m/ghcr.io/llm-d",
        "repository": "llm-d-router-endpoint-picker",
        "tag": f"v0.10.0@{digest}",  # the chart reads <registry>/<repository>:<tag>
        "pullPolicy": "IfNotPresent",
    }


# Optional: render the real chart offline. Point TPU_GKE_ROUTER_CHART_DIR at an unpacked
# llm-d-router-gateway v0.10.0 chart (`helm pull oci://ghcr.io/llm-d/charts/llm-d-router-gateway
# --version v0.10.0 --untar`, or the git tree with routerlib copied into charts/).
ROUTER_CHART_DIR = os.environ.get("TPU_GKE_ROUTER_CHART_DIR", "")


@pytest.mark.skipif(not ROUTER_CHART_DIR, reason="TPU_GKE_ROUTER_CHART_DIR is not set")
def test_router_chart_renders_the_pool_and_route_we_expect():
    helm = pytest.importorskip("helm_python", reason="helm-python-sdk is not installed")
    values = router_values(params())
    with helm.Chart.load(ROUTER_CHART_DIR) as chart:
        manifests = chart.render(values, name=so.ROUTER_RELEASE_NAME, namespace="serving")
    objects = [d for text in manifests.values() for d in yaml.safe_load_all(text) if isinstance(d, dict)]
    kinds = {(o["kind"], o["metadata"]["name"]) for o in objects}
    assert {
        ("InferencePool", "pd-disaggregation"),
        ("HTTPRoute", "pd-disaggregation"),
        ("Deployment", "pd-disaggregation-epp"),
        ("HealthCheckPolicy", "pd-disaggregation"),
    } <= kinds
    pool = next(o for o in objects if o["kind"] == "InferencePool")
    assert pool["spec"]["selector"]["matchLabels"] == {"llm-d.ai/guide": "pd-disaggregation"}
    assert pool["spec"]["targetPorts"] == [{"number": 8000}]
    route = next(o for o in objects if o["kind"] == "HTTPRoute")
    assert route["spec"]["parentRefs"][0]["name"] == DEFAULT_GATEWAY.name
    epp = next(o for o in objects if o["kind"] == "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert "/config/pd-config.yaml" in epp["args"]
    assert epp["image"].endswith(":" + RouterConfig().version)
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    selector = so.endpoint_picker_labels()
    assert selector == deployment["spec"]["selector"]["matchLabels"]
    assert selector.items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
    assert "--ha-enable-leader-election" in epp["args"] and deployment["spec"]["replicas"] == 2
    assert epp["readinessProbe"]["grpc"]["service"] == "readiness"  # SERVING on the lease holder only
    assert ("Role", "pd-disaggregation-epp-leader-election") in kinds
    config_map = next(o for o in objects if o["kind"] == "ConfigMap" and "pd-config.yaml" in o.get("data", {}))
    assert yaml.safe_load(config_map["data"]["pd-config.yaml"]) == endpoint_picker_config(values)
    for obj in objects:
        if obj["apiVersion"].startswith(("inference.networking.k8s.io/", "gateway.networking.k8s.io/")):
            assert crd_errors(obj) == []
        elif "/" not in obj["apiVersion"] or obj["apiVersion"].startswith(("apps/", "rbac.authorization.k8s.io/")):
            assert core_errors(obj) == []


# --- Helpers and purity --------------------------------------------------------------------


def test_helpers():
    # Hugging Face's cache layout: models--<organisation>--<name>/snapshots/<revision>
    assert hf_cache_weights_uri("b", "acme/model-7B", "0123abc") == "gs://b/models--acme--model-7B/snapshots/0123abc"
    assert partition_state_label(Shape.parse("2x2x2")) == "cloud.google.com/gke-tpu-partition-2x2x2-state"


# --- Weights staging -----------------------------------------------------------------------


def staging_env(job: dict[str, Any]) -> dict[str, Any]:
    (stager,) = job["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in stager["env"]}


def test_the_staging_job_copies_the_served_snapshot_as_its_own_account():
    p = params(
        {
            "model.id": "acme/other-model",
            "model.revision": "0123456789abcdef0123456789abcdef01234567",
            "weights_bucket.name": "b",
            "model.weights_path": "custom/path",
            "weights_staging.service_account_name": "copier",
            "weights_staging.image": "docker.io/library/python:3.13.1-slim-bookworm",
            "weights_staging.timeout_minutes": 90,
        },
        namespace="serving",
        service_account_name="vllm",
    )
    built = serving_objects(p)
    job = built.staging_job
    assert job is not None and built.staging_script is not None
    env = staging_env(job)
    assert (env["MODEL_ID"], env["MODEL_REVISION"]) == ("acme/other-model", "0123456789abcdef0123456789abcdef01234567")
    assert env["DESTINATION"] == "gs://b/custom/path"  # exactly the directory the servers read
    for lws in built.leaderworkersets:
        assert "gs://b/custom/path" in json.dumps(lws)
    assert env["HF_TOKEN"] == {
        "secretKeyRef": {"name": so.HF_TOKEN_SECRET_NAME, "key": so.HF_TOKEN_SECRET_KEY, "optional": True}
    }
    pod = job["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "copier"  # not the model servers' vllm: the one writer of the weights
    assert built.staging_service_account is not None
    assert built.staging_service_account["metadata"] == {"name": "copier", "namespace": "serving"}
    assert core_errors(built.staging_service_account) == []
    for lws in built.leaderworkersets:
        assert "copier" not in json.dumps(lws)
    assert (
        pod["containers"][0]["image"]
        == pod["initContainers"][0]["image"]
        == "docker.io/library/python:3.13.1-slim-bookworm"
    )
    assert job["metadata"]["namespace"] == built.staging_script["metadata"]["namespace"] == "serving"
    assert job["metadata"]["annotations"][so.TIMEOUT_ANNOTATION] == "5400"
    assert job["spec"]["activeDeadlineSeconds"] == 5400  # the Job stops when Pulumi stops waiting
    assert so.SKIP_AWAIT_ANNOTATION not in job["metadata"]["annotations"]
    assert core_errors(job) == []
    assert core_errors(built.staging_script) == []


def test_the_staging_configmap_carries_the_program_and_its_pins_byte_for_byte_and_the_job_their_digest():
    built = serving_objects(params())
    assert built.staging_script is not None and built.staging_job is not None
    files = {name: (Path(so.manifests.MANIFESTS) / "serving" / name).read_bytes() for name in so.STAGING_FILES}
    assert {name: text.encode() for name, text in built.staging_script["data"].items()} == files
    annotations = built.staging_job["spec"]["template"]["metadata"]["annotations"]
    assert annotations[so.manifests.SCRIPT_DIGEST_ANNOTATION] == so.manifests.files_digest(built.staging_script["data"])
    (volume,) = [v for v in built.staging_job["spec"]["template"]["spec"]["volumes"] if "configMap" in v]
    assert volume["configMap"]["name"] == built.staging_script["metadata"]["name"]


@pytest.mark.parametrize("changed", so.STAGING_FILES)
def test_a_change_to_either_staging_file_changes_the_digest(changed):
    files = so.staging_files()
    edited = {**files, changed: files[changed] + "\n"}
    assert so.manifests.files_digest(edited) != so.manifests.files_digest(files)
    # moving bytes from one file to the other is a change too
    a, b = so.STAGING_FILES
    assert so.manifests.files_digest({a: "xy", b: "z"}) != so.manifests.files_digest({a: "x", b: "yz"})


def test_the_staging_job_is_not_awaited_where_nothing_runs_and_absent_when_off():
    job = serving_objects(params(skip_await=True)).staging_job
    assert job is not None and job["metadata"]["annotations"][so.SKIP_AWAIT_ANNOTATION] == "true"
    off = serving_objects(params({"weights_staging.enabled": False}))
    assert off.staging_job is None and off.staging_script is None and off.staging_service_account is None


def test_the_staging_job_base_runs_the_default_image():
    from components.manifests import load_document

    base = load_document(f"serving/{so.STAGING_JOB_FILE}")
    assert base["spec"]["template"]["spec"]["containers"][0]["image"] == STAGING_IMAGE
    assert base["metadata"]["annotations"][so.TIMEOUT_ANNOTATION] == str(STAGING_TIMEOUT_MINUTES * 60)


# --- NetworkPolicies ---------------------------------------------------------------------------


def serving_policies(changes: dict[str, Any], **overrides: Any) -> dict[str, dict[str, Any]]:
    built = serving_objects(params(changes, **overrides))
    return {p["metadata"]["name"]: p for p in built.network_policies}


def test_the_network_policies_base_agrees_with_its_own_overlay():
    """The block's defaults (the namespace, the model and the network's proxy-only subnet) rebuild the YAML base."""
    defaults = params(
        model=ServingConfig().model,
        namespace=ServingConfig().namespace,
        network={"proxy_only_cidr": NetworkConfig().proxy_only_cidr},
    )
    assert serving_objects(defaults).network_policies == load_list(f"serving/{so.NETWORK_POLICIES_FILE}")


def test_the_model_servers_policy_selects_every_model_server_pod_and_only_them():
    built = serving_objects(params())
    (servers,) = [p for p in built.network_policies if p["metadata"]["name"] == so.MODEL_SERVERS_POLICY]
    selector = servers["spec"]["podSelector"]["matchLabels"]
    for lws in built.leaderworkersets:
        for kind in ("leaderTemplate", "workerTemplate"):
            labels = lws["spec"]["leaderWorkerTemplate"][kind]["metadata"]["labels"]
            assert selector.items() <= labels.items(), (lws["metadata"]["name"], kind)
    assert built.staging_job is not None
    staging_labels = built.staging_job["spec"]["template"]["metadata"]["labels"]
    assert not selector.items() <= staging_labels.items()
    peers, *_ = servers["spec"]["ingress"]
    assert peers == {"from": [{"podSelector": {"matchLabels": selector}}]}  # each other, on any port


def test_the_network_policies_follow_the_stack():
    policies = serving_policies(
        {"model.served_name": "m", "model.id": "org/Other-Model"},
        namespace="serving",
        network={"proxy_only_cidr": "10.99.0.0/24"},
    )
    assert {p["metadata"]["namespace"] for p in policies.values()} == {"serving"}
    servers, picker_policy = policies[so.MODEL_SERVERS_POLICY], policies[so.ENDPOINT_PICKER_POLICY]
    assert servers["spec"]["podSelector"]["matchLabels"] == {so.MODEL_LABEL: "Other-Model"}
    blocks = [
        peer["ipBlock"]["cidr"]
        for policy in policies.values()
        for rule in policy["spec"]["ingress"]
        for peer in rule["from"]
        if "ipBlock" in peer
    ]
    assert blocks.count("10.99.0.0/24") == 2  # the proxies reach the servers and the picker
    assert "172.16.0.0/26" not in blocks
    assert picker_policy["spec"]["podSelector"]["matchLabels"] == so.endpoint_picker_labels()


def test_the_load_balancer_and_the_picker_reach_the_pools_target_port_and_the_collectors_vllm():
    built = serving_objects(params())
    servers = {p["metadata"]["name"]: p for p in built.network_policies}[so.MODEL_SERVERS_POLICY]
    _, from_picker, from_load_balancer, from_collectors = servers["spec"]["ingress"]
    (pool_port,) = built.router_values["router"]["modelServers"]["targetPorts"]
    target = pool_port["number"]
    vllm_ports = {
        role: int(str(flag_values(container(lws, "leader")["args"])["--port"]))
        for role, lws in by_role(built.leaderworkersets).items()
    }
    assert target == vllm_ports[PREFILL]
    assert from_picker["ports"] == from_load_balancer["ports"] == [{"port": target, "protocol": "TCP"}]
    assert from_picker["from"] == [{"podSelector": {"matchLabels": so.endpoint_picker_labels()}}]
    # vLLM's own API port on each role: what the dashboards' PodMonitorings scrape
    assert [p["port"] for p in from_collectors["ports"]] == sorted(vllm_ports.values())


def test_the_network_policies_validate_strictly_and_a_misspelled_field_is_rejected():
    policies = serving_objects(params()).network_policies
    assert [core_errors(p) for p in policies] == [[], []]
    broken = copy.deepcopy(policies[0])
    broken["spec"]["ingres"] = broken["spec"].pop("ingress")
    assert core_errors(broken)


# --- The Hugging Face token from Secret Manager (serving.hfTokenSecretVersion) ----------------------------------

TOKEN_VERSION = "projects/my-tpu-project/secrets/hf-token/versions/3"
TOKEN_PATH = "/var/run/secrets/huggingface.co/token"


def token_pods(built: so.ServingObjects) -> list[tuple[dict[str, Any], dict[str, Any], dict[str, Any]]]:
    """(owner, pod spec, container) of every pod that receives the token: each LWS's leader and worker, the Job."""
    pods = [
        (lws, template(lws, kind)["spec"], container(lws, kind))
        for lws in built.leaderworkersets
        for kind in ("leader", "worker")
    ]
    assert built.staging_job is not None
    job_pod = built.staging_job["spec"]["template"]["spec"]
    (stager,) = job_pod["containers"]
    return [*pods, (built.staging_job, job_pod, stager)]


def skipped_checks(owner: dict[str, Any]) -> list[str]:
    return [v.split("=")[0] for k, v in owner["metadata"]["annotations"].items() if k.startswith("checkov.io/skip")]


def test_the_token_file_replaces_the_variable_in_every_pod_that_takes_the_token():
    built = serving_objects(params(hf_token_secret_version=TOKEN_VERSION))
    for owner, pod, c in token_pods(built):
        env = env_of(c)
        assert "HF_TOKEN" not in env, "no variable holds the token"
        assert env["HF_TOKEN_PATH"] == {"name": "HF_TOKEN_PATH", "value": TOKEN_PATH}
        assert not [e for e in c["env"] if "secretKeyRef" in e.get("valueFrom", {})], "no Secret reaches the pod"
        (volume,) = [v for v in pod["volumes"] if v["name"] == "hf-token"]
        assert volume["csi"] == {
            "driver": "secrets-store-gke.csi.k8s.io",
            "readOnly": True,
            "volumeAttributes": {"secretProviderClass": "hf-token"},
        }
        (mount,) = [m for m in c["volumeMounts"] if m["name"] == "hf-token"]
        assert mount == {"name": "hf-token", "mountPath": "/var/run/secrets/huggingface.co", "readOnly": True}
        assert TOKEN_PATH.startswith(mount["mountPath"] + "/")
        # checkov's secret-in-a-variable skip goes with the variable (tests/test_security_checkov.py then runs it)
        assert "CKV_K8S_35" not in skipped_checks(owner)
        assert "CKV_K8S_38" in skipped_checks(owner), "only that skip is dropped"


def test_without_a_secret_version_the_pods_keep_the_optional_secret_and_no_csi_volume():
    built = serving_objects(params())
    assert built.hf_token_provider_class is None
    for owner, pod, c in token_pods(built):
        assert env_of(c)["HF_TOKEN"]["valueFrom"]["secretKeyRef"]["optional"] is True
        assert "HF_TOKEN_PATH" not in env_of(c)
        assert not [v for v in pod.get("volumes", []) if "csi" in v and v["csi"]["driver"].startswith("secrets-store")]
        assert "CKV_K8S_35" in skipped_checks(owner)


def test_the_secret_provider_class_names_the_version_for_the_add_on_s_provider():
    built = serving_objects(params(namespace="serving", hf_token_secret_version=TOKEN_VERSION))
    provider_class = built.hf_token_provider_class
    assert provider_class is not None
    assert (provider_class["apiVersion"], provider_class["kind"]) == (
        "secrets-store.csi.x-k8s.io/v1",
        "SecretProviderClass",
    )
    assert provider_class["metadata"] == {"name": "hf-token", "namespace": "serving"}
    assert provider_class["spec"]["provider"] == "gke"
    # the provider parses `secrets` as YAML: one object, the version, written as the file the pods read
    assert yaml.safe_load(provider_class["spec"]["parameters"]["secrets"]) == [
        {"resourceName": TOKEN_VERSION, "path": "token"}
    ]


@pytest.mark.external  # the CRD files of schemas.lock
def test_a_misspelled_secret_provider_class_field_is_rejected():
    provider_class = serving_objects(params(hf_token_secret_version=TOKEN_VERSION)).hf_token_provider_class
    assert provider_class is not None
    assert crd_errors(provider_class) == []
    broken = copy.deepcopy(provider_class)
    broken["spec"]["provder"] = broken["spec"].pop("provider")
    assert any("provder" in e for e in crd_errors(broken))
    broken = copy.deepcopy(provider_class)
    broken["spec"]["parameters"]["secrets"] = [{"resourceName": TOKEN_VERSION}]  # a list, not the provider's string
    assert crd_errors(broken)


def test_the_pods_with_the_token_file_are_valid_pods_and_lws():
    built = serving_objects(params(hf_token_secret_version=TOKEN_VERSION))
    for lws in built.leaderworkersets:
        for kind in ("leader", "worker"):
            pod_template = template(lws, kind)
            pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": kind}, "spec": pod_template["spec"]}
            assert core_errors(pod) == []
    assert built.staging_job is not None and core_errors(built.staging_job) == []


@pytest.mark.external  # the CRD files of schemas.lock
def test_the_leaderworkersets_with_the_token_file_pass_the_pinned_crd_schema():
    for lws in serving_objects(params(hf_token_secret_version=TOKEN_VERSION)).leaderworkersets:
        assert crd_errors(lws) == []


def test_the_base_still_carries_the_variable_the_token_file_replaces():
    """The overlay removes HF_TOKEN from each container: a base without it fails loudly, not silently."""
    from components import manifests

    bare = {"name": "c", "env": [{"name": "OTHER", "value": "1"}]}
    with pytest.raises(ValueError, match="has no env var 'HF_TOKEN'"):
        manifests.remove_env(bare, "HF_TOKEN")
