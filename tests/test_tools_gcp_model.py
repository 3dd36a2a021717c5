"""The harness's model of a Google Cloud project (tools/gcp_model.py) inside the mock engine.

A new project refuses a call of an API that is not enabled by then, and "by then" means what the call
waits for: an invoke that waits for nothing runs when the program starts. These tests drive small
programs through the same engine as the stacks, so the refusals the stacks pass are real ones.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.gcp_model import SERVICE_USAGE, CloudProject, ServiceDisabled, UnmodeledCall, api_of
from tools.mock_engine import Invocation, run_program

CONFIG = {"tpu-dynamic-slicing:project": "p-123"}

# The version lookup as the cluster component made it before: with only its parent among its options.
LOOKUP_WITHOUT_ITS_API = """
import pulumi, pulumi_gcp as gcp
gcp.container.get_engine_versions_output(location="us-central1", project="p-123", version_prefix="1.36.")
"""

LOOKUP_AFTER_ITS_API = """
import pulumi, pulumi_gcp as gcp
api = gcp.projects.Service("container", project="p-123", service="container.googleapis.com")
gcp.container.get_engine_versions_output(
    location="us-central1", project="p-123", version_prefix="1.36.",
    opts=pulumi.InvokeOutputOptions(depends_on=[api]),
)
"""

NETWORK_BESIDE_ITS_API = """
import pulumi, pulumi_gcp as gcp
api = gcp.projects.Service("compute", project="p-123", service="compute.googleapis.com")
gcp.compute.Network("vpc", project="p-123", auto_create_subnetworks=False)  # does not wait for it
"""

NETWORK_AFTER_ITS_API = """
import pulumi, pulumi_gcp as gcp
api = gcp.projects.Service("compute", project="p-123", service="compute.googleapis.com")
gcp.compute.Network("vpc", project="p-123", auto_create_subnetworks=False, opts=pulumi.ResourceOptions(depends_on=[api]))
"""


# A cluster that enforces the project's Binary Authorization policy, waiting for the Kubernetes Engine API only, or
# for the Binary Authorization API too.
ENFORCING_CLUSTER = """
import pulumi, pulumi_gcp as gcp
apis = [gcp.projects.Service(name, project="p-123", service=f"{{name}}.googleapis.com") for name in {apis}]
gcp.container.Cluster(
    "gke", name="gke", project="p-123", location="us-central1", initial_node_count=1,
    binary_authorization={{"evaluation_mode": "{mode}"}},
    opts=pulumi.ResourceOptions(depends_on=apis),
)
"""


def run(tmp_path: Path, source: str, *, preview: bool, cloud: CloudProject) -> tuple[list[Invocation], object]:
    program = tmp_path / "program.py"
    program.write_text(source)
    invocations: list[Invocation] = []
    try:
        run_program(dict(CONFIG), preview=preview, cloud=cloud, invocations=invocations, program_path=program)
    except ServiceDisabled as refusal:
        return invocations, refusal
    return invocations, None


@pytest.mark.parametrize("preview", [True, False])
def test_an_invoke_that_waits_for_nothing_is_refused_in_a_new_project(tmp_path, preview):
    """R1: a preview and an up of an empty project both fail at the lookup, naming the API."""
    invocations, refusal = run(tmp_path, LOOKUP_WITHOUT_ITS_API, preview=preview, cloud=CloudProject.empty())
    assert isinstance(refusal, ServiceDisabled)
    assert refusal.api == "container.googleapis.com"
    assert "Error 403: Kubernetes Engine API has not been used in project p-123" in str(refusal)
    assert "SERVICE_DISABLED" in str(refusal)
    assert [(i.waited_for, i.answer[:8]) for i in invocations] == [([], "refused:")]


def test_the_same_invoke_is_answered_where_every_api_is_on(tmp_path):
    invocations, refusal = run(tmp_path, LOOKUP_WITHOUT_ITS_API, preview=True, cloud=CloudProject())
    assert refusal is None and [i.answer for i in invocations] == ["answered"]


@pytest.mark.parametrize("preview, answer", [(True, "unknown"), (False, "answered")])
def test_an_invoke_waiting_for_its_api_is_unknown_in_the_first_preview_and_runs_in_the_up(tmp_path, preview, answer):
    """The engine answers an invoke whose dependencies are pending creation as unknown; the up runs it
    once the Service exists."""
    invocations, refusal = run(tmp_path, LOOKUP_AFTER_ITS_API, preview=preview, cloud=CloudProject.empty())
    assert refusal is None
    assert [(i.token, i.waited_for, i.answer) for i in invocations] == [
        ("gcp:container/getEngineVersions:getEngineVersions", ["container"], answer)
    ]


def test_a_resource_created_beside_its_api_instead_of_after_it_is_refused_by_the_up(tmp_path):
    """Registration order under mocks is not what counts: only a wait makes the API on in time."""
    _, refusal = run(tmp_path, NETWORK_BESIDE_ITS_API, preview=False, cloud=CloudProject.empty())
    assert isinstance(refusal, ServiceDisabled) and refusal.api == "compute.googleapis.com"
    _, refusal = run(tmp_path, NETWORK_BESIDE_ITS_API, preview=True, cloud=CloudProject.empty())
    assert refusal is None, "a preview creates nothing, so it calls no API for a resource"
    _, refusal = run(tmp_path, NETWORK_AFTER_ITS_API, preview=False, cloud=CloudProject.empty())
    assert refusal is None


@pytest.mark.parametrize(
    "apis, mode, refused",
    [
        (["container"], "PROJECT_SINGLETON_POLICY_ENFORCE", "binaryauthorization.googleapis.com"),
        (["container", "binaryauthorization"], "PROJECT_SINGLETON_POLICY_ENFORCE", None),
        (["container"], "DISABLED", None),
        (["binaryauthorization"], "PROJECT_SINGLETON_POLICY_ENFORCE", "container.googleapis.com"),
    ],
)
def test_a_cluster_that_enforces_binary_authorization_needs_that_api_too(tmp_path, apis, mode, refused):
    """What a cluster asks of the project decides which APIs it needs: enforcement reads the project's policy."""
    source = ENFORCING_CLUSTER.format(apis=apis, mode=mode)
    _, refusal = run(tmp_path, source, preview=False, cloud=CloudProject.empty())
    assert (refusal.api if isinstance(refusal, ServiceDisabled) else None) == refused
    if refused == "binaryauthorization.googleapis.com":
        assert "Error 403: Binary Authorization API has not been used in project p-123" in str(refusal)


@pytest.mark.parametrize(
    "token, api",
    [
        ("gcp:container/cluster:Cluster", "container.googleapis.com"),
        ("gcp:container/getEngineVersions:getEngineVersions", "container.googleapis.com"),
        ("gcp:organizations/getProject:getProject", "cloudresourcemanager.googleapis.com"),
        ("gcp:projects/iAMMember:IAMMember", "cloudresourcemanager.googleapis.com"),
        ("gcp:projects/service:Service", SERVICE_USAGE),
        ("gcp:projects/serviceIdentity:ServiceIdentity", SERVICE_USAGE),  # generateServiceIdentity
        ("gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember", "cloudkms.googleapis.com"),
        ("gcp:serviceaccount/iAMMember:IAMMember", "iam.googleapis.com"),
        ("gcp:storage/bucketIAMMember:BucketIAMMember", "storage.googleapis.com"),
        ("kubernetes:core/v1:Namespace", None),
        ("pulumi:providers:kubernetes", None),
    ],
)
def test_each_call_goes_through_its_api(token, api):
    assert api_of(token) == api


def test_a_call_the_model_cannot_place_fails_loudly():
    with pytest.raises(UnmodeledCall, match="add 'tpu' to API_OF_MODULE"):
        api_of("gcp:tpu/v2Vm:V2Vm")


# Asking Google for a service's agent: a Service Usage call, answered with the agent's address where Google makes the
# agent on request, refused where it does not.
SERVICE_AGENT = """
import pulumi, pulumi_gcp as gcp
agent = gcp.projects.ServiceIdentity("agent", project="p-123", service="{service}")
pulumi.export("email", agent.email)
pulumi.export("member", agent.member)
"""


def test_the_agent_google_makes_on_request_is_answered_with_its_address_and_the_program_names_it_alike(tmp_path):
    from components.gcp.config import GKE_SERVICE_AGENT
    from tools.mock_engine import PROJECT_NUMBER_PLACEHOLDER

    program = tmp_path / "program.py"
    program.write_text(SERVICE_AGENT.format(service="container.googleapis.com"))
    up = run_program(dict(CONFIG), preview=False, cloud=CloudProject.empty(), program_path=program)
    assert up.outputs["email"] == f"service-{PROJECT_NUMBER_PLACEHOLDER}@container-engine-robot.iam.gserviceaccount.com"
    assert up.outputs["member"] == f"serviceAccount:{up.outputs['email']}"
    # the program writes the address from the project number rather than reading it back: the same principal
    assert GKE_SERVICE_AGENT.member(PROJECT_NUMBER_PLACEHOLDER) == up.outputs["member"]
    preview = run_program(dict(CONFIG), preview=True, cloud=CloudProject.empty(), program_path=program)
    assert preview.outputs["email"] == "[unknown]", "a preview asks Google nothing"


def test_compute_engine_s_agent_is_refused_on_request_and_an_unknown_service_fails_loudly(tmp_path):
    from components.gcp.config import COMPUTE_SERVICE_AGENT
    from tools.gcp_model import ServiceIdentityRefused

    program = tmp_path / "program.py"
    program.write_text(SERVICE_AGENT.format(service="compute.googleapis.com"))
    with pytest.raises(ServiceIdentityRefused, match=r"compute\.googleapis\.com has not been configured for service"):
        run_program(dict(CONFIG), preview=False, cloud=CloudProject(), program_path=program)
    assert not COMPUTE_SERVICE_AGENT.made_on_request, "the program asks for what Google refuses"
    program.write_text(SERVICE_AGENT.format(service="pubsub.googleapis.com"))
    with pytest.raises(UnmodeledCall, match="SERVICE_IDENTITY_DOMAINS"):
        run_program(dict(CONFIG), preview=False, cloud=CloudProject(), program_path=program)


# A grant on a key of the project, with Cloud KMS on or not.
KEY_GRANT = """
import pulumi, pulumi_gcp as gcp
gcp.kms.CryptoKeyIAMMember(
    "grant", crypto_key_id="projects/p-123/locations/us-central1/keyRings/r/cryptoKeys/k",
    role="roles/cloudkms.cryptoKeyEncrypterDecrypter",
    member="serviceAccount:service-1@compute-system.iam.gserviceaccount.com",
)
"""


def test_a_key_grant_goes_through_cloud_kms(tmp_path):
    _, refusal = run(tmp_path, KEY_GRANT, preview=False, cloud=CloudProject.empty())
    assert isinstance(refusal, ServiceDisabled) and refusal.api == "cloudkms.googleapis.com"
    assert "Cloud Key Management Service (KMS) API has not been used in project p-123" in str(refusal)
    _, refusal = run(tmp_path, KEY_GRANT, preview=False, cloud=CloudProject.empty("cloudkms.googleapis.com"))
    assert refusal is None
