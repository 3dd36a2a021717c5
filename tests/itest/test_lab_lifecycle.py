"""The program's Kubernetes layer through its whole life, with the real engine against a real API server.

One stack, `lab`, in the order a user lives it: `pulumi stack init` and `config set` (secrets included),
`preview`, `up`, a preview that must be empty, changes that update in place, replace, or must not touch
what the CRD forbids changing, `stack export`, and a `destroy` that waits for a Slice. The stack is the
dev stack plus the lab overrides of tests/test_gcp_existing_cluster.py (deploy onto an existing cluster
given by a kubeconfig, platform installed elsewhere, no weights bucket, skipAwait), so it registers no
Google Cloud resource and no Helm release. The program runs in this process as the Automation API's
inline program (tests/itest/engine.py). The tests run in file order and share the stack.
"""

from __future__ import annotations

import base64
import json
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pulumi import automation as auto

from components.tpu.topology import MACHINE_CATALOG
from policy import PACK_NAME  # not policy.pack: the lab venv has no pulumi_policy SDK
from policy.tpu import EXTERNAL_CHIPS
from tests.conftest import stack_values
from tests.itest.conftest import Report
from tests.itest.engine import (
    HF_TOKEN,
    SECRET_TOP_LEVEL_KEYS,
    STAND_IN_SLICE,
    WORKLOAD_NAMESPACE,
    Lab,
    Operation,
    close_lab,
    kubernetes_objects_of,
    open_lab,
    stack_config,
)
from tests.itest.lab import (
    PROJECT_NAME,
    REPO_ROOT,
    SECRET_MARKER,
    STACK_NAME,
    ControlPlane,
    KubeApi,
    PulumiHome,
    Tools,
    differences,
    object_key,
)


@pytest.fixture(scope="module")
def lab(control_plane: ControlPlane, api: KubeApi, pulumi_home: PulumiHome, report: Report) -> Iterator[Lab]:
    lab = open_lab(STACK_NAME, control_plane, api, pulumi_home, report)
    yield lab
    close_lab(lab)


# --- 1. stack init and config ----------------------------------------------------------------------


def test_stack_init_and_config_set_with_real_secrets(lab: Lab):
    config = stack_config(lab)
    began = time.monotonic()
    lab.stack.set_all_config(config, path=True)  # pulumi config set-all --path [--secret]
    lab.report.operation("pulumi config set-all --path", time.monotonic() - began, "ok", keys=len(config))

    stack_file = Path(lab.home.project_dir, f"Pulumi.{STACK_NAME}.yaml").read_text()
    assert HF_TOKEN not in stack_file, "the Hugging Face token is in plain text in the stack file"
    assert "client-key-data" not in stack_file, "the kubeconfig is in plain text in the stack file"
    settings = yaml.safe_load(stack_file)["config"]
    assert "secure" in settings[f"{PROJECT_NAME}:serving"]["hfToken"], "serving.hfToken is not stored encrypted"
    assert "secure" in settings[f"{PROJECT_NAME}:cluster"]["existing"]["kubeconfig"], "the kubeconfig is not encrypted"
    shown = lab.stack.get_all_config()
    assert all(shown[f"{PROJECT_NAME}:{key}"].secret for key in SECRET_TOP_LEVEL_KEYS), (
        "the engine does not hold them as secrets"
    )
    assert json.loads(shown[f"{PROJECT_NAME}:cluster"].value)["existing"]["kubeconfig"] == lab.kubeconfig, (
        "the kubeconfig does not decrypt to what was set"
    )
    lab.state["configured"] = True


# --- 2. preview ------------------------------------------------------------------------------------


def test_preview_plans_every_kubernetes_object_the_render_declares(lab: Lab):
    lab.require("configured")
    operation, _ = lab.run(
        "preview",
        lambda op: lab.stack.preview(on_output=op.on_output, on_event=op.on_event, color="never", diff=True),
    )
    planned = kubernetes_objects_of(operation, ("create",))
    rendered = {object_key(o): o for o in lab.expected}
    assert not sorted(set(rendered) - set(planned)), (
        f"the render declares objects the preview does not plan: {sorted(set(rendered) - set(planned))}"
    )
    assert not sorted(set(planned) - set(rendered)), (
        f"the preview plans objects the render does not show: {sorted(set(planned) - set(rendered))}"
    )
    # the StackReference to the stack's own previous outputs (components/resources.py) is a read
    not_created = {u: op for u, op in operation.steps.items() if op != "create" and "pulumi:StackReference" not in u}
    assert not not_created, f"a first preview plans only creates; got {not_created}"
    registered = {name for _, name in lab.registrations}
    step_names = {urn.split("::")[-1] for urn in operation.steps}
    assert registered <= step_names, f"registered under the mocks but not planned: {sorted(registered - step_names)}"
    assert not [u for u in operation.steps if "::gcp:" in u or "helm.sh" in u], (
        "the lab stack plans a GCP resource or a Helm release"
    )
    mismatched = []
    for key, obj in rendered.items():
        if obj["kind"] == "Secret" and "stringData" in obj:
            # the provider's check turns stringData into data, and the whole of it into one secret value
            data = planned[key].get("data")
            if not (isinstance(data, dict) and SECRET_MARKER in data):
                mismatched.append(f"{key}: data is not a secret in the plan: {data!r}"[:300])
            obj = {k: v for k, v in obj.items() if k != "stringData"}
        mismatched += [f"{key}: {d}" for d in differences(obj, planned[key], other="the plan")]
    assert not mismatched, "the planned inputs differ from the render:\n" + "\n".join(mismatched)
    lab.report.data["objects"]["planned"] = sorted(planned)


# --- 3. up -----------------------------------------------------------------------------------------


def _served_differences(lab: Lab, obj: dict[str, Any], served: dict[str, Any]) -> list[str]:
    """Every field the render shows, on the server; a Secret's stringData is written into data."""
    if obj["kind"] == "Secret" and "stringData" in obj:
        rest = {k: v for k, v in obj.items() if k != "stringData"}
        found = differences(rest, served)
        data = served.get("data") or {}
        for key in obj["stringData"]:
            if key not in data:
                found.append(f"data.{key}: absent on the server")
            elif base64.b64decode(data[key]).decode() != HF_TOKEN:
                found.append(f"data.{key}: does not hold the token set with --secret")
        return found
    return differences(obj, served)


def test_up_creates_every_object_with_the_fields_the_render_shows(lab: Lab):
    lab.require("configured")
    operation = lab.up("up")
    lab.state["up"] = True
    created = sorted(kubernetes_objects_of(operation, ("create",)))
    missing, mismatched, uids = [], [], {}
    for obj in lab.expected:
        served = lab.served(obj)
        if served is None:
            missing.append(object_key(obj))
            continue
        uids[object_key(obj)] = served["metadata"]["uid"]
        mismatched += [f"{object_key(obj)}: {d}" for d in _served_differences(lab, obj, served)]
    lab.report.data["objects"]["created"] = created
    lab.state["uids"] = uids
    assert not missing, f"up did not create: {missing}"
    assert not mismatched, "the server's objects differ from the render:\n" + "\n".join(mismatched)
    assert set(operation.steps.values()) <= {"create", "same", "read"}, operation.steps
    assert len(created) == len(lab.expected), (
        f"up created {len(created)} Kubernetes objects, the render has {len(lab.expected)}"
    )


def test_key_fields_of_the_created_objects(lab: Lab):
    """A few fields spelled out, so a failure here reads as what the cluster got wrong."""
    lab.require("uids")
    namespace = lab.served({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": WORKLOAD_NAMESPACE}})
    assert namespace is not None and namespace["status"]["phase"] == "Active"
    topology = lab.served(lab.expected_object("Topology", "slice-topology"))
    assert topology is not None and len(topology["spec"]["levels"]) == 7, "the Topology must always list all 7 levels"
    queue = lab.served(lab.expected_object("ClusterQueue", "cq"))
    assert queue is not None
    quota = {r["name"]: r["nominalQuota"] for r in queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"]}
    assert str(quota["google.com/tpu"]) == "128", (
        f"the ClusterQueue's TPU quota is {quota['google.com/tpu']}, the stack has 128 chips"
    )
    for name in ("subslice-check", "superslice-check"):
        jobset = lab.served(lab.expected_object("JobSet", name))
        assert jobset is not None and jobset["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "lq", (
            f"{name} is not queued"
        )
    for kind, name in (("Gateway", "llm-d-inference-gateway"), ("Job", "stage-model-weights")):
        served = lab.served(lab.expected_object(kind, name))
        assert served is not None and served["metadata"]["annotations"].get("pulumi.com/skipAwait") == "true", (
            f"{kind} {name} lacks skipAwait: no controller or kubelet runs in the lab"
        )


# --- 4. an empty second preview --------------------------------------------------------------------


def test_a_second_preview_has_no_changes(lab: Lab):
    lab.require("uids")
    operation, _ = lab.run(
        "preview --expect-no-changes",
        lambda op: lab.stack.preview(
            on_output=op.on_output, on_event=op.on_event, color="never", diff=True, expect_no_changes=True
        ),
    )
    assert not operation.changed(), f"the second preview plans changes: {operation.changed()}"


# --- 5. changes ------------------------------------------------------------------------------------


def test_a_priority_value_updates_its_class_in_place(lab: Lab):
    uids = lab.require("uids")
    lab.stack.set_config(f"{PROJECT_NAME}:queues.priorityClasses.low.value", auto.ConfigValue("1500"), path=True)
    operation = lab.up("up: queues.priorityClasses.low.value 1000 -> 1500")
    assert operation.changed_by_the_program() == {"kueue-objects:low-priority-1000": "update"}, operation.changed()
    served = lab.served(lab.expected_object("WorkloadPriorityClass", "low-priority-1000"))
    assert served is not None and served["value"] == 1500, "the server's WorkloadPriorityClass keeps its old value"
    assert served["metadata"]["uid"] == uids["WorkloadPriorityClass low-priority-1000"], (
        "the class was replaced, not updated"
    )


def test_a_check_s_hold_time_replaces_its_jobset(lab: Lab):
    uids = lab.require("uids")
    lab.stack.set_config(f"{PROJECT_NAME}:checks.subslicing.holdSeconds", auto.ConfigValue("1200"), path=True)
    operation = lab.up("up: checks.subslicing.holdSeconds 1800 -> 1200")
    changed = operation.changed_by_the_program()
    assert changed == {"subslice-check": "replace"}, changed
    # deleteBeforeReplace (components/resources.py): the old JobSet goes first, the new one keeps its name
    ops = [op for op in operation.ops_of("subslice-check") if op != "replace"]
    assert ops == ["delete-replaced", "create-replacement"], operation.ops_of("subslice-check")
    key = f"JobSet {WORKLOAD_NAMESPACE}/subslice-check"
    served = lab.served(lab.expected_object("JobSet", "subslice-check"))
    assert served is not None, "the replacement JobSet does not exist"
    assert served["metadata"]["uid"] != uids[key], "the JobSet has its old uid: it was not replaced"
    env = {
        e["name"]: e.get("value")
        for job in served["spec"]["replicatedJobs"]
        for c in job["template"]["spec"]["template"]["spec"]["containers"]
        for e in c.get("env") or []
    }
    assert env.get("HOLD_SECONDS") == "1200", f"the new JobSet holds for {env.get('HOLD_SECONDS')} s"
    other = lab.served(lab.expected_object("JobSet", "superslice-check"))
    assert other is not None and other["metadata"]["uid"] == uids[f"JobSet {WORKLOAD_NAMESPACE}/superslice-check"]


def test_a_slice_shapes_change_leaves_the_topology_alone(lab: Lab, control_plane: ControlPlane):
    uids = lab.require("uids")
    topology_object = lab.expected_object("Topology", "slice-topology")
    before = lab.served(topology_object)
    assert before is not None
    lab.stack.set_all_config(
        {
            f"{PROJECT_NAME}:tpu.sliceShapes[1]": auto.ConfigValue("2x2x4"),
            f"{PROJECT_NAME}:tpu.sliceShapes[2]": auto.ConfigValue("4x4x8"),
        },
        path=True,
    )
    operation = lab.up("up: tpu.sliceShapes [2x2x2, 4x4x8] -> [2x2x2, 2x2x4, 4x4x8]")
    assert operation.ops_of("kueue-objects:slice-topology") == ["same"], operation.ops_of(
        "kueue-objects:slice-topology"
    )
    after = lab.served(topology_object)
    assert after is not None and after["metadata"]["uid"] == uids["Topology slice-topology"]
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"], "the Topology was written"
    # why the program never changes it: the real CRD refuses new levels on an existing Topology (CEL)
    refused = control_plane.kubectl(
        "patch", "topology", "slice-topology", "--type=json", "--dry-run=server",
        "-p", json.dumps([{"op": "remove", "path": "/spec/levels/3"}]), check=False,
    )  # fmt: skip
    assert refused.returncode != 0 and "immutable" in refused.stderr, (
        f"the Topology's levels can be changed: {refused.stderr or refused.stdout}"
    )


# --- 6. no secret in the state ---------------------------------------------------------------------


def test_stack_export_contains_no_plaintext_secret(lab: Lab):
    lab.require("up")
    exported = lab.home.cli("stack", "export", "--stack", STACK_NAME).stdout  # without --show-secrets
    key_data = re.search(r"client-key-data: (\S+)", lab.kubeconfig)
    assert key_data, "the lab kubeconfig has no inline key"
    pem_body = "".join(base64.b64decode(key_data[1]).decode().splitlines()[1:-1])
    needles = {
        "the Hugging Face token": HF_TOKEN,
        "the kubeconfig's client key": key_data[1],
        "its PEM body": pem_body[:64],
    }
    leaked = [what for what, text in needles.items() if text in exported]
    assert not leaked, f"pulumi stack export shows in plain text: {leaked}"
    on_disk = [p for p in lab.home.state_dir.rglob("*") if p.is_file()] + [
        Path(lab.home.project_dir, f"Pulumi.{STACK_NAME}.yaml")
    ]
    leaked_files = [
        f"{p.relative_to(lab.home.root)}: {what}"
        for p in on_disk
        for what, text in needles.items()
        if text in p.read_text(errors="replace")
    ]
    assert not leaked_files, f"plain-text secrets in the backend's files: {leaked_files}"
    assert exported.count(SECRET_MARKER) >= 3, (
        "the state holds fewer secret values than the token, the kubeconfig and the Secret"
    )


# --- 7. the policy pack ----------------------------------------------------------------------------

POLICY_DIR = REPO_ROOT / "policy"
POLICY_ANALYZER_BOOT = REPO_ROOT / "lab" / "pulumi-analyzer-policy-python"
# An internet-facing class the preview accepts (components/workloads/serving/config.py GatewayClass): the pack
# refuses it.
PUBLIC_GATEWAY_CLASS = "gke-l7-regional-external-managed"
GATEWAY_TYPE = "kubernetes:gateway.networking.k8s.io/v1:Gateway"


@pytest.fixture(scope="module")
def policy_pack(lab: Lab, tools: Tools) -> Path:
    """What `pulumi preview --policy-pack` is given: the pack's directory, which the CLI runs through the
    Python language host, or, where that host is not built (the Go module proxy refuses it), the executable
    lab/pulumi-analyzer-policy-python, which the CLI launches as the analyzer plugin itself and which starts
    the same pack from the same virtualenv (make policy-venv)."""
    assert (POLICY_DIR / ".venv" / "bin" / "python").exists(), "policy/.venv is missing: make policy-venv"
    if tools.language_host.exists():
        return POLICY_DIR
    lab.report.data["not_runnable"].append(
        {
            "item": "pulumi preview --policy-pack policy (the directory)",
            "reasons": [f"{tools.language_host.name} is not built; the pack runs as {POLICY_ANALYZER_BOOT.name}"],
        }
    )
    return POLICY_ANALYZER_BOOT


@pytest.fixture(scope="module")
def policy_config(lab: Lab) -> Path:
    """The policy config a stack on an existing cluster needs: its TPU pools are made elsewhere (here, nowhere:
    no kubelet), so the quota rule is told their chips, those the dev stack's pools would hold."""
    tpu = stack_values("dev")["tpu"]
    chips = sum(p["nodeCount"] for p in tpu["pools"]) * MACHINE_CATALOG[tpu["machineType"]].chips_per_host
    path = lab.home.root / "policy-config.json"
    path.write_text(json.dumps({"kueue-tpu-quota-within-pools": {EXTERNAL_CHIPS: chips}}))
    return path


def policy_preview(lab: Lab, name: str, pack: Path, config: Path, operation: Operation | None = None) -> Operation:
    done, _ = lab.run(
        name,
        lambda op: lab.stack.preview(
            on_output=op.on_output,
            on_event=op.on_event,
            color="never",
            policy_packs=[str(pack)],
            policy_pack_configs=[str(config)],
        ),
        operation=operation,
    )
    return done


def test_the_policy_pack_passes_the_stack_in_a_real_preview(lab: Lab, policy_pack: Path, policy_config: Path):
    lab.require("up")
    operation = policy_preview(lab, "preview --policy-pack policy", policy_pack, policy_config)
    text = operation.text()
    assert PACK_NAME in text, "the preview does not report the pack, so it did not run:\n" + text[-3000:]
    assert "mandatory" not in text, "the pack refuses the dev stack:\n" + text[-3000:]
    assert operation.changed_by_the_program() == {}, operation.changed_by_the_program()
    lab.state["policy"] = True


def test_the_policy_pack_refuses_a_public_gateway(lab: Lab, policy_pack: Path, policy_config: Path):
    lab.require("policy")
    key = f"{PROJECT_NAME}:serving.gateway.className"
    lab.stack.set_config(key, auto.ConfigValue(PUBLIC_GATEWAY_CLASS), path=True)
    operation = Operation()
    try:
        with pytest.raises(auto.CommandError) as refused:
            policy_preview(
                lab,
                f"preview --policy-pack policy (serving.gateway.className {PUBLIC_GATEWAY_CLASS})",
                policy_pack,
                policy_config,
                operation,
            )
    finally:
        lab.stack.remove_config(key, path=True)
    text = operation.text() + str(refused.value)
    (gateway,) = [name for kind, name in lab.registrations if kind == GATEWAY_TYPE]  # the resource, by its name
    violation = re.search(rf"\[mandatory\]\s+no-public-endpoints\s+\({GATEWAY_TYPE}: {gateway}\)", text)
    assert violation, (
        "the preview failed, but not on the pack's no-public-endpoints rule for the Gateway:\n" + text[-3000:]
    )
    assert PUBLIC_GATEWAY_CLASS in text, "the violation does not say which class is public"


# --- 8. destroy ------------------------------------------------------------------------------------


def test_destroy_waits_for_a_slice_and_reports_it(lab: Lab, control_plane: ControlPlane, api: KubeApi):
    lab.require("up")
    slice_name = STAND_IN_SLICE["metadata"]["name"]
    control_plane.kubectl("apply", "-f", "-", stdin=json.dumps(STAND_IN_SLICE))
    # as the slice controller leaves a Slice while it tears it down: deleted, held by its finalizer
    control_plane.kubectl("delete", "slice", slice_name, "--wait=false")
    waiting = f"tpu-drain-gate: waiting for 1 to go (Slice {slice_name})"
    live = Operation()
    box: dict[str, Any] = {}

    def destroy() -> None:
        try:
            lab.run(
                "destroy (a stand-in Slice holds on)",
                lambda op: lab.stack.destroy(on_output=op.on_output, on_event=op.on_event, color="never"),
                operation=live,
            )
        except Exception as error:  # the assertions below report it
            box["error"] = error

    thread = threading.Thread(target=destroy, name="pulumi-destroy", daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and thread.is_alive() and waiting not in live.text():
            time.sleep(1)
        assert waiting in live.text(), (
            f"destroy did not report the Slice within 240 s (error: {box.get('error')}); its output ends:\n"
            + "\n".join(live.text().splitlines()[-30:])
        )
        time.sleep(15)  # more than one poll of the gate (components/platform/drain.py POLL_SECONDS)
        assert thread.is_alive(), f"destroy finished while the Slice still held on: {box.get('error')}"
        assert api.get(f"/apis/accelerator.gke.io/v1beta1/slices/{slice_name}") is not None
        lab.state["waited"] = True
    finally:
        control_plane.kubectl("patch", "slice", slice_name, "--type=merge", "-p", '{"metadata":{"finalizers":null}}')
    thread.join(timeout=300)
    assert not thread.is_alive(), "destroy did not finish within 300 s of the finalizer's removal"
    assert "error" not in box, f"destroy failed: {box.get('error')}"
    lab.state["destroyed"] = True
    assert "tpu-drain-gate: nothing holds on any more" in live.text(), "the gate did not report the Slice gone"
    lab.report.data["objects"]["deleted"] = sorted(kubernetes_objects_of(live, ("delete",), before=True))
    # the order the engine announced the deletes in (event order; timestamps are whole seconds), against graph.txt
    lab.report.data["destroy_order"] = [urn.split("::")[-1] for _, op, urn in live.order if op == "delete"]


def test_destroy_leaves_no_object_and_no_namespace(lab: Lab, api: KubeApi):
    lab.require("destroyed")
    left = [object_key(o) for o in lab.expected if lab.served(o) is not None]
    assert not left, f"objects of the stack left after destroy: {left}"
    assert api.get(f"/api/v1/namespaces/{WORKLOAD_NAMESPACE}") is None, f"namespace {WORKLOAD_NAMESPACE} is left"
    resources = (
        json.loads(lab.home.cli("stack", "export", "--stack", STACK_NAME).stdout)["deployment"].get("resources") or []
    )
    assert not resources, f"the state still holds {len(resources)} resources"
    assert len(lab.report.data["objects"].get("deleted", [])) == len(lab.expected), lab.report.data["objects"].get(
        "deleted"
    )
