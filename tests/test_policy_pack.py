"""The policy pack as the SDK and the engine see it: its files and pins, the pulumi_policy wrappers,
and the analyzer process itself, started the way the Pulumi CLI starts a Python pack
(``python -u -m pulumi.policy <engine> <pack dir>``) and driven over its gRPC interface."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml
from google.protobuf import empty_pb2, json_format, struct_pb2
from pulumi.runtime.proto import analyzer_pb2, analyzer_pb2_grpc
from pulumi_policy import (
    EnforcementLevel,
    ResourceValidationPolicy,
    StackValidationPolicy,
)
from pulumi_policy.proxy import UnknownValueError

from components.stack import PRODUCTION_OUTPUT
from policy import PACK_NAME
from policy.pack import build_policies
from policy.resources import ROOT_STACK, UNKNOWN, Resource
from tests.conftest import PROJECT_ROOT
from tests.policy_sdk import POLICIES, reported

POLICY_DIR = PROJECT_ROOT / "policy"
PURE_MODULES = (
    "resources", "endpoints", "iam", "images", "buckets", "charts", "tpu", "gke", "rbac", "boundaries", "namespaces",
    "service_accounts", "network", "cis",
)  # fmt: skip

GATEWAY = "kubernetes:gateway.networking.k8s.io/v1:Gateway"
NODE_POOL = "gcp:container/nodePool:NodePool"
PUBLIC_GATEWAY = {"metadata": {"name": "gw"}, "spec": {"gatewayClassName": "gke-l7-global-external-managed"}}
TPU_POOL = {
    "nodeConfig": {
        "machineType": "tpu7x-standard-4t",
        "serviceAccount": "nodes@my-tpu-prod-project.iam.gserviceaccount.com",
        "bootDiskKmsKey": "projects/my-tpu-prod-project/locations/us-central1/keyRings/qwen-prod/cryptoKeys/gke-boot-disks",
        "shieldedInstanceConfig": {"enableSecureBoot": True},
    },
    "nodeCount": 16,
}
UNENCRYPTED_POOL = {
    **TPU_POOL,
    "nodeConfig": {k: v for k, v in TPU_POOL["nodeConfig"].items() if k != "bootDiskKmsKey"},
}


def requirement_pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("-"):
            name, _, version = line.partition("==")
            assert version, f"{path.name}: {line!r} is not pinned with =="
            pins[re.sub(r"[-_.]+", "-", name).lower()] = version
    return pins


# --- Files and pins ---------------------------------------------------------------------------


def test_the_pack_is_a_python_pack_with_its_own_virtualenv() -> None:
    project = yaml.safe_load((POLICY_DIR / "PulumiPolicy.yaml").read_text())
    assert project["runtime"]["name"] == "python"
    assert project["runtime"]["options"] == {"toolchain": "pip", "virtualenv": ".venv"}
    assert re.fullmatch(r"\d+\.\d+\.\d+", project["version"])
    assert (POLICY_DIR / "__main__.py").is_file()


def test_the_pack_requirements_are_pinned_as_the_project_pins_them() -> None:
    pack = requirement_pins(POLICY_DIR / "requirements.txt")
    constraints = requirement_pins(PROJECT_ROOT / "constraints.txt")
    dev = requirement_pins(PROJECT_ROOT / "requirements-dev.txt")
    assert "pulumi-policy" in pack
    for name, version in pack.items():
        assert constraints.get(name) == version, f"{name}=={version} differs from constraints.txt"
    assert dev["pulumi-policy"] == pack["pulumi-policy"], "the tests import the SDK version the pack runs"


@pytest.mark.parametrize("module", PURE_MODULES)
def test_the_rules_are_pure(module: str) -> None:
    """Only pack.py and __main__.py may import Pulumi: the rules run on plain data."""
    tree = ast.parse((POLICY_DIR / f"{module}.py").read_text())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not [name for name in imported if name.split(".")[0].startswith("pulumi")]


def test_every_policy_is_mandatory_and_named_once() -> None:
    policies = build_policies()
    names = [p.name for p in policies]
    assert len(names) == len(set(names)) == 17
    assert all(p.enforcement_level == EnforcementLevel.MANDATORY for p in policies)


# --- The wrappers, called as the SDK calls them ------------------------------------------------


def validate(
    name: str,
    resource_type: str,
    props: dict[str, Any],
    *,
    protect: bool = False,
    config: dict[str, Any] | None = None,
) -> list[tuple[str, str | None]]:
    """What the resource policy ``name`` reports on one resource of ``props`` (the engine attaches its URN itself)."""
    assert isinstance(POLICIES[name], ResourceValidationPolicy)
    return reported(name, [Resource(resource_type, "res", props, protect, f"urn:x::{resource_type}::res")], config)


def test_a_resource_wrapper_reports_the_rule_messages() -> None:
    ((message, urn),) = validate("no-public-endpoints", GATEWAY, PUBLIC_GATEWAY)
    assert "Gateway res" in message and urn is None  # the engine attaches the resource's URN itself
    assert validate("no-public-endpoints", GATEWAY, PUBLIC_GATEWAY, config={"allowPublicEndpoints": True}) == []


def validate_stack(name: str, resources: list[Resource], config: dict[str, Any] | None = None) -> list[tuple[str, Any]]:
    assert isinstance(POLICIES[name], StackValidationPolicy)
    return reported(name, resources, config)


def test_a_wrapper_leaves_unknown_values_the_rule_does_not_need_alone() -> None:
    props = {"role": "roles/owner", "member": UNKNOWN, "project": "p"}
    ((message, _),) = validate("no-broad-project-roles", "gcp:projects/iAMMember:IAMMember", props)
    assert "roles/owner" in message


def test_a_value_the_rule_needs_unknown_in_preview_is_the_sdks_unknown_signal() -> None:
    """The SDK turns UnknownValueError into an advisory "can't run policy during preview"."""
    with pytest.raises(UnknownValueError) as raised:
        validate("no-broad-project-roles", "gcp:projects/iAMMember:IAMMember", {"role": UNKNOWN})
    assert raised.value.message == "string value at .role can't be known during preview"


def test_the_stack_wrapper_points_the_violation_at_the_queue() -> None:
    quota = [{"name": "google.com/tpu", "nominalQuota": "65"}]
    queue = {"metadata": {"name": "cq"}, "spec": {"resourceGroups": [{"flavors": [{"resources": quota}]}]}}
    pool = Resource(NODE_POOL, "pool", {"nodeConfig": {"machineType": "tpu7x-standard-4t"}, "nodeCount": 16}, urn="u")
    resources = [pool, Resource("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue", "cq", queue, urn="urn:cq")]
    ((message, urn),) = validate_stack("kueue-tpu-quota-within-pools", resources)
    assert urn == "urn:cq" and "promises 65" in message
    # chips of pools made outside the stack come from the policy config
    assert validate_stack("kueue-tpu-quota-within-pools", resources, {"externalTpuChips": 1}) == []


WEB = {
    "metadata": {"name": "web", "namespace": "apps"},
    "spec": {"template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c"}]}}},
}
DENY = {"metadata": {"name": "deny", "namespace": "apps"}, "spec": {"podSelector": {}, "policyTypes": ["Ingress"]}}
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
NETWORK_POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"


def test_the_isolation_wrapper_points_the_violation_at_the_workload() -> None:
    web, deny = Resource(DEPLOYMENT, "web", WEB, urn="urn:web"), Resource(NETWORK_POLICY, "deny", DENY, urn="urn:deny")
    ((message, urn),) = validate_stack("pods-isolated-by-network-policy", [web])
    assert urn == "urn:web" and "4.3.2" in message
    assert validate_stack("pods-isolated-by-network-policy", [web, deny]) == []


PROGRAM_STACK = "tpu-dynamic-slicing-prod"


def test_the_boot_disk_wrapper_reads_production_from_the_stacks_outputs_and_points_at_the_pool() -> None:
    """Production is what the program exports (the root stack's outputs), not the stack's name or its config."""
    pool = Resource(NODE_POOL, "tpu7-pool-1", UNENCRYPTED_POOL, urn="urn:pool")

    def root(outputs: dict[str, Any]) -> Resource:
        return Resource(ROOT_STACK, PROGRAM_STACK, outputs, urn="urn:stack")

    ((message, urn),) = validate_stack("boot-disks-encrypted-in-production", [root({PRODUCTION_OUTPUT: True}), pool])
    assert urn == "urn:pool" and "tpu7-pool-1" in message and "(CIS GKE 5.9.2)" in message
    assert validate_stack("boot-disks-encrypted-in-production", [root({PRODUCTION_OUTPUT: False}), pool]) == []
    assert validate_stack("boot-disks-encrypted-in-production", [root({}), pool]) == []


# --- The analyzer process, as the CLI starts it ------------------------------------------------


@pytest.fixture(scope="module")
def analyzer() -> Iterator[analyzer_pb2_grpc.AnalyzerStub]:
    """The pack served by ``python -u -m pulumi.policy``, in the pack directory, with the
    environment the CLI gives an analyzer (stack, project, dry run, the stack's config)."""
    env = {
        **os.environ,
        "PULUMI_STACK": "prod",
        "PULUMI_PROJECT": "tpu-dynamic-slicing",
        "PULUMI_DRY_RUN": "true",
        # The stack's config reaches every analyzer; the pack reads none of it (production is the stack's output).
        "PULUMI_CONFIG": json.dumps(
            {"tpu-dynamic-slicing:region": "us-central1", "tpu-dynamic-slicing:production": "true"}
        ),
    }
    # The engine address is not dialled by a pack; the SDK only requires the argument.
    process = subprocess.Popen(
        [sys.executable, "-u", "-m", "pulumi.policy", "127.0.0.1:1", "."],
        cwd=POLICY_DIR,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line.strip().isdigit():
            process.kill()
            _, stderr = process.communicate(timeout=10)
            pytest.fail(f"the pack did not start: {line!r}\n{stderr}")
        channel = grpc.insecure_channel(f"127.0.0.1:{line.strip()}")
        yield analyzer_pb2_grpc.AnalyzerStub(channel)
        channel.close()
    finally:
        process.kill()
        process.wait(timeout=10)


def struct(value: dict[str, Any]) -> struct_pb2.Struct:
    return json_format.ParseDict(value, struct_pb2.Struct())


def test_the_analyzer_announces_the_pack_all_mandatory(analyzer: analyzer_pb2_grpc.AnalyzerStub) -> None:
    info = analyzer.GetAnalyzerInfo(empty_pb2.Empty(), timeout=30)
    assert info.name == PACK_NAME
    assert {p.name for p in info.policies} == {p.name for p in build_policies()}
    assert {p.enforcementLevel for p in info.policies} == {analyzer_pb2.MANDATORY}


def test_the_analyzer_refuses_a_public_gateway(analyzer: analyzer_pb2_grpc.AnalyzerStub) -> None:
    request = analyzer_pb2.AnalyzeRequest(
        type=GATEWAY, properties=struct(PUBLIC_GATEWAY), urn="urn:gw", name="inference-gateway"
    )
    (diagnostic,) = analyzer.Analyze(request, timeout=30).diagnostics
    assert diagnostic.policyName == "no-public-endpoints"
    assert diagnostic.enforcementLevel == analyzer_pb2.MANDATORY
    assert "inference-gateway" in diagnostic.message


def test_the_analyzer_refuses_an_unencrypted_boot_disk_where_the_program_exports_production(
    analyzer: analyzer_pb2_grpc.AnalyzerStub,
) -> None:
    """The root stack comes with its outputs, as the engine hands a stack policy every resource; the stack named prod
    (PULUMI_STACK) with production: true in its config (PULUMI_CONFIG) is not production without the output."""

    def analyze(outputs: dict[str, Any]) -> list[Any]:
        resources = [
            analyzer_pb2.AnalyzerResource(
                type=ROOT_STACK, properties=struct(outputs), urn="urn:stack", name=PROGRAM_STACK
            ),
            analyzer_pb2.AnalyzerResource(
                type=NODE_POOL, properties=struct(UNENCRYPTED_POOL), urn="urn:pool", name="tpu7-pool-1"
            ),
        ]
        request = analyzer_pb2.AnalyzeStackRequest(resources=resources)
        return list(analyzer.AnalyzeStack(request, timeout=30).diagnostics)

    (diagnostic,) = analyze({PRODUCTION_OUTPUT: True})
    assert diagnostic.policyName == "boot-disks-encrypted-in-production" and diagnostic.urn == "urn:pool"
    assert "tpu7-pool-1" in diagnostic.message and diagnostic.enforcementLevel == analyzer_pb2.MANDATORY
    assert analyze({}) == []


def test_the_analyzer_refuses_a_quota_above_the_chips(analyzer: analyzer_pb2_grpc.AnalyzerStub) -> None:
    queue = {
        "metadata": {"name": "cq"},
        "spec": {"resourceGroups": [{"flavors": [{"resources": [{"name": "google.com/tpu", "nominalQuota": "256"}]}]}]},
    }
    resources = [
        analyzer_pb2.AnalyzerResource(type=NODE_POOL, properties=struct(TPU_POOL), urn="urn:pool", name="pool"),
        analyzer_pb2.AnalyzerResource(
            type="kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue", properties=struct(queue), urn="urn:cq", name="cq"
        ),
    ]
    response = analyzer.AnalyzeStack(analyzer_pb2.AnalyzeStackRequest(resources=resources), timeout=30)
    (diagnostic,) = response.diagnostics
    assert diagnostic.policyName == "kueue-tpu-quota-within-pools" and diagnostic.urn == "urn:cq"
    assert "promises 256" in diagnostic.message and diagnostic.enforcementLevel == analyzer_pb2.MANDATORY


def test_the_analyzer_refuses_pods_no_network_policy_isolates(analyzer: analyzer_pb2_grpc.AnalyzerStub) -> None:
    def analyze(*resources: tuple[str, dict[str, Any]]) -> list[Any]:
        request = analyzer_pb2.AnalyzeStackRequest(
            resources=[
                analyzer_pb2.AnalyzerResource(
                    type=kind,
                    properties=struct(props),
                    urn=f"urn:{props['metadata']['name']}",
                    name=props["metadata"]["name"],
                )
                for kind, props in resources
            ]
        )
        return list(analyzer.AnalyzeStack(request, timeout=30).diagnostics)

    (diagnostic,) = analyze((DEPLOYMENT, WEB))
    assert diagnostic.policyName == "pods-isolated-by-network-policy" and diagnostic.urn == "urn:web"
    assert "(CIS GKE 4.3.2)" in diagnostic.message and diagnostic.enforcementLevel == analyzer_pb2.MANDATORY
    assert analyze((DEPLOYMENT, WEB), (NETWORK_POLICY, DENY)) == []
