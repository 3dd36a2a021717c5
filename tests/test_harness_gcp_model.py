"""The harness's model of a Google Cloud project (harness/gcp_model.py) inside the mock engine.

A new project refuses a call of an API that is not enabled by then, and "by then" means what the call
waits for: an invoke that waits for nothing runs when the program starts. These tests drive small
programs through the same engine as the stacks, so the refusals the stacks pass are real ones.
"""

from __future__ import annotations

import re
import typing
from pathlib import Path
from typing import Any

import pulumi_gcp as gcp
import pytest

from harness.gcp_model import (
    BUCKET_NOT_FOUND,
    DEGRADED,
    GET_BUCKET,
    GET_RESERVATION,
    GET_RESERVATION_BLOCK,
    GET_RESERVATION_SUB_BLOCK,
    GET_SUBNETWORK,
    GET_SUBNETWORKS,
    SERVICE_USAGE,
    Block,
    Bucket,
    CloudProject,
    CryptoKey,
    Holdings,
    MaintenanceWindow,
    ProviderError,
    Reservation,
    Secret,
    ServiceDisabled,
    SubBlock,
    Subnetwork,
    UnmodeledCall,
    api_of,
)
from harness.mock_engine import Invocation, run_program

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
    from harness.mock_engine import PROJECT_NUMBER_PLACEHOLDER

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
    from harness.gcp_model import ServiceIdentityRefused

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


TWO_ACCOUNTS = """
import pulumi_gcp as gcp
gcp.serviceaccount.Account("first", project="p-123", account_id="{first}")
gcp.serviceaccount.Account("second", project="p-123", account_id="{second}")
"""


def test_a_second_service_account_of_one_id_is_refused_by_the_up_as_iam_refuses_it(tmp_path):
    """A preview creates nothing, so only the `up` meets IAM's refusal (the preview's own rules say it first:
    tests/test_saxml_config.py); accounts of their own ids are made."""
    from harness.gcp_model import AlreadyExists

    program = tmp_path / "program.py"
    program.write_text(TWO_ACCOUNTS.format(first="shared-sa-1", second="shared-sa-1"))
    run_program(dict(CONFIG), preview=True, cloud=CloudProject(), program_path=program)
    with pytest.raises(AlreadyExists, match=r"Error 409: Service account shared-sa-1 already exists within project"):
        run_program(dict(CONFIG), preview=False, cloud=CloudProject(), program_path=program)
    program.write_text(TWO_ACCOUNTS.format(first="shared-sa-1", second="other-sa-2"))
    run_program(dict(CONFIG), preview=False, cloud=CloudProject(), program_path=program)


TWO_NODE_POOLS = """
import pulumi_gcp as gcp
gcp.container.NodePool("first", project="p-123", location="us-central1", cluster="{first}", name="tpu-pool")
gcp.container.NodePool("second", project="p-123", location="us-central1", cluster="{second}", name="tpu-pool")
"""
TWO_REPOSITORIES = """
import pulumi_gcp as gcp
gcp.artifactregistry.Repository("first", project="p-123", location="us-central1", repository_id="{first}", format="DOCKER")
gcp.artifactregistry.Repository("second", project="p-123", location="us-central1", repository_id="{second}", format="DOCKER")
"""


@pytest.mark.parametrize(
    "program_text, refusal",
    [
        pytest.param(
            TWO_NODE_POOLS,
            r"Error 409: Already exists: projects/p-123/locations/us-central1/clusters/one/nodePools/tpu-pool\.",
            id="node-pool-in-one-cluster",
        ),
        pytest.param(TWO_REPOSITORIES, r"Error 409: the repository already exists", id="repository-in-one-location"),
    ],
)
def test_a_second_create_of_one_name_is_refused_by_the_up_as_google_cloud_refuses_it(tmp_path, program_text, refusal):
    """A node pool's name is its cluster's, a repository's id its project and location's (gcp_model.NAMED_BY): the
    second of one is refused by the `up` only (a preview creates nothing); one of another cluster or id is made."""
    from harness.gcp_model import AlreadyExists

    program = tmp_path / "program.py"
    program.write_text(program_text.format(first="one", second="one"))
    run_program(dict(CONFIG), preview=True, cloud=CloudProject(), program_path=program)
    with pytest.raises(AlreadyExists, match=refusal):
        run_program(dict(CONFIG), preview=False, cloud=CloudProject(), program_path=program)
    program.write_text(program_text.format(first="one", second="two"))
    run_program(dict(CONFIG), preview=False, cloud=CloudProject(), program_path=program)


TWO_OF_ONE_NAME = """
import pulumi_gcp as gcp
gcp.serviceaccount.Account("{first}", project="p-123", account_id="first-sa-1")
gcp.serviceaccount.Account("{second}", project="p-123", account_id="second-sa-2")
"""


@pytest.mark.parametrize("preview", [True, False])
def test_two_resources_of_one_type_and_name_are_refused_by_the_engine(tmp_path, preview):
    """The engine's own refusal (one URN per resource), before any cloud call: in a preview too."""
    from harness.mock_engine import DuplicateUrn

    program = tmp_path / "program.py"
    program.write_text(TWO_OF_ONE_NAME.format(first="account", second="account"))
    with pytest.raises(DuplicateUrn, match=r"Duplicate resource URN '.*::account'; try giving it a unique name"):
        run_program(dict(CONFIG), preview=preview, cloud=CloudProject(), program_path=program)
    program.write_text(TWO_OF_ONE_NAME.format(first="account", second="other-account"))
    run_program(dict(CONFIG), preview=preview, cloud=CloudProject(), program_path=program)


GRANTS_ON_WHAT_IS_MADE_ELSEWHERE = """
import pulumi, pulumi_gcp as gcp
member = "serviceAccount:reader@p-123.iam.gserviceaccount.com"
gcp.storage.BucketIAMMember("weights-reader", bucket="{bucket}", role="roles/storage.objectViewer", member=member)
gcp.secretmanager.SecretIamMember(
    "token-reader", project="p-123", secret_id="{secret}", role="roles/secretmanager.secretAccessor", member=member
)
gcp.kms.CryptoKeyIAMMember("key-user", crypto_key_id="{key}", role="roles/cloudkms.cryptoKeyEncrypterDecrypter", member=member)
gcp.artifactregistry.RepositoryIamMember(
    "mirror-reader", project="{repository_project}", location="us-central1", repository="{repository}",
    role="roles/artifactregistry.reader", member=member,
)
"""
# A bucket, a secret, a key and a repository the stack makes: a grant that waits for them is on something there.
GRANTS_ON_WHAT_THE_RUN_MAKES = """
import pulumi, pulumi_gcp as gcp
member = "serviceAccount:reader@p-123.iam.gserviceaccount.com"
bucket = gcp.storage.Bucket("state", name="sax-state", location="US-CENTRAL1")
gcp.storage.BucketIAMMember("state-user", bucket=bucket.name, role="roles/storage.objectUser", member=member)
secret = gcp.secretmanager.Secret("token", project="p-123", secret_id="made", replication={"auto": {}})
gcp.secretmanager.SecretIamMember(
    "made-reader", project="p-123", secret_id=secret.secret_id, role="roles/secretmanager.secretAccessor", member=member
)
ring = "projects/p-123/locations/us-central1/keyRings/r"
key = gcp.kms.CryptoKey("key", key_ring=ring, name="made")
gcp.kms.CryptoKeyIAMMember(
    "made-key-user", crypto_key_id=key.name.apply(lambda name: f"{ring}/cryptoKeys/{name}"),
    role="roles/cloudkms.cryptoKeyEncrypterDecrypter", member=member,
)
repository = gcp.artifactregistry.Repository("remote", location="us-central1", repository_id="made", format="DOCKER")
gcp.artifactregistry.RepositoryIamMember(
    "made-reader", location="us-central1", repository=repository.repository_id,
    role="roles/artifactregistry.reader", member=member,
)
"""
KEY = "projects/p-123/locations/us-central1/keyRings/r/cryptoKeys/k"
MIRROR = "projects/my-org-artifacts/locations/us-central1/repositories/mirror"  # another project's
PRESENT = {
    "bucket": "weights",
    "secret": "projects/p-123/secrets/hf",
    "key": KEY,
    "repository_project": "my-org-artifacts",
    "repository": "mirror",
}


@pytest.mark.parametrize(
    "missing, refusal",
    [
        pytest.param(
            {"bucket": "gone"},
            'Error retrieving IAM policy for storage bucket "b/gone": ' + BUCKET_NOT_FOUND,
            id="bucket",
        ),
        pytest.param(
            {"secret": "projects/p-123/secrets/gone"},
            'Error retrieving IAM policy for secretmanager secret "projects/p-123/secrets/gone": googleapi: Error 404: '
            "Secret [projects/PROJECT_NUMBER/secrets/gone] not found.",
            id="secret",
        ),
        pytest.param({"secret": "gone"}, 'secretmanager secret "projects/p-123/secrets/gone"', id="secret-by-its-id"),
        pytest.param(
            {"key": KEY + "2"},
            f'Error retrieving IAM policy for KMS CryptoKey "{KEY}2": googleapi: Error 404: CryptoKey {KEY}2 not found.',
            id="key",
        ),
        pytest.param(
            {"repository": "mirorr"},
            'Error retrieving IAM policy for artifactregistry repository "projects/my-org-artifacts/locations/'
            'us-central1/repositories/mirorr": googleapi: Error 404: Requested entity was not found., notFound',
            id="repository",
        ),
        pytest.param(
            {"repository_project": "p-123"},
            '"projects/p-123/locations/us-central1/repositories/mirror"',
            id="repository-of-another-project",
        ),
    ],
)
def test_a_grant_on_what_is_not_there_is_refused_by_the_up(tmp_path, missing, refusal):
    """The grant reads the resource's policy first, which the service answers with its 404 where it does not exist (a
    preview grants nothing); on what the project holds, or what the run made first, it is made."""
    program = tmp_path / "program.py"
    program.write_text(GRANTS_ON_WHAT_IS_MADE_ELSEWHERE.format(**(PRESENT | missing)))
    held = CloudProject().holding(
        Holdings(
            buckets=(Bucket("weights", "US-CENTRAL1"),),
            secrets=(Secret("projects/p-123/secrets/hf"),),
            keys=(CryptoKey(KEY),),
            repositories=(MIRROR,),
        )
    )
    run_program(dict(CONFIG), preview=True, cloud=held, program_path=program)
    with pytest.raises(Exception, match=re.escape(refusal)):
        run_program(dict(CONFIG), preview=False, cloud=held, program_path=program)
    program.write_text(GRANTS_ON_WHAT_IS_MADE_ELSEWHERE.format(**PRESENT))
    run_program(dict(CONFIG), preview=False, cloud=held, program_path=program)
    program.write_text(GRANTS_ON_WHAT_THE_RUN_MAKES)
    run_program(dict(CONFIG), preview=False, cloud=CloudProject().holding(Holdings()), program_path=program)


def test_a_key_grant_goes_through_cloud_kms(tmp_path):
    _, refusal = run(tmp_path, KEY_GRANT, preview=False, cloud=CloudProject.empty())
    assert isinstance(refusal, ServiceDisabled) and refusal.api == "cloudkms.googleapis.com"
    assert "Cloud Key Management Service (KMS) API has not been used in project p-123" in str(refusal)
    key_on = CloudProject.empty("cloudkms.googleapis.com").holding(Holdings(keys=(CryptoKey(KEY),)))
    _, refusal = run(tmp_path, KEY_GRANT, preview=False, cloud=key_on)
    assert refusal is None


# --- The reads of what the project holds: reservations and buckets -----------------------------------------

PROXY = "REGIONAL_MANAGED_PROXY"
HELD = Holdings(
    reservations=(
        Reservation(
            "p-123",
            "us-central1-ai1a",
            "res",
            "tpu7x-standard-4t",
            (Block("block-0", (SubBlock("sub-0", 16, in_use=16), SubBlock("sub-1", 16, health=DEGRADED))),),
            (MaintenanceWindow("2027-01-09T02:00:00Z", "2027-01-09T08:00:00Z"),),
        ),
    ),
    buckets=(Bucket("weights", "US-CENTRAL1"), Bucket("acl-bucket", "EU", uniform_access=False)),
    subnetworks=(
        Subnetwork("projects/p-123/global/networks/vpc", "us-central1", "nodes", "10.0.0.0/20"),
        Subnetwork("projects/p-123/global/networks/vpc", "us-central1", "proxy", "10.1.0.0/23", PROXY, "ACTIVE"),
        Subnetwork("projects/p-123/global/networks/vpc", "us-central1", "proxy-old", "10.2.0.0/26", PROXY, "BACKUP"),
        Subnetwork("projects/p-123/global/networks/vpc", "us-east1", "proxy", "10.3.0.0/26", PROXY, "ACTIVE"),
        Subnetwork("projects/host/global/networks/shared", "us-central1", "proxy", "10.4.0.0/26", PROXY, "ACTIVE"),
    ),
)
SCOPE = {"project": "p-123", "zone": "us-central1-ai1a"}


def wire_names(result_type: type) -> dict[str, type | None]:
    """The wire name of each field of a pulumi-gcp result type, and the type of its items where it nests one."""
    names: dict[str, type | None] = {}
    for member in vars(result_type).values():
        if isinstance(member, property) and hasattr(member.fget, "_pulumi_name"):
            hint = typing.get_type_hints(member.fget).get("return")
            args = [a for a in typing.get_args(hint) if isinstance(a, type) and a.__module__.endswith(".outputs")]
            names[member.fget._pulumi_name] = args[0] if args else None
    return names


def assert_named_as_the_provider(answer: dict[str, Any], result_type: type, where: str) -> None:
    names = wire_names(result_type)
    for key, value in answer.items():
        assert key in names, f"{where}.{key} is no field of {result_type.__name__}: {sorted(names)}"
        if names[key] is not None:
            assert isinstance(value, list), f"{where}.{key}: a nested block is a list (the provider's flatteners)"
            for item in value:
                assert_named_as_the_provider(item, names[key], f"{where}.{key}[]")


@pytest.mark.parametrize(
    "token, args, result_type",
    [
        (GET_RESERVATION, {"name": "res", **SCOPE}, gcp.compute.GetReservationResult),
        (GET_RESERVATION, {"name": "gone", **SCOPE}, gcp.compute.GetReservationResult),
        (
            GET_RESERVATION_BLOCK,
            {"name": "block-0", "reservation": "res", **SCOPE},
            gcp.compute.GetReservationBlockResult,
        ),
        (
            GET_RESERVATION_SUB_BLOCK,
            {"name": "sub-1", "reservationBlock": "block-0", "reservation": "res", **SCOPE},
            gcp.compute.GetReservationSubBlockResult,
        ),
        (GET_BUCKET, {"name": "weights"}, gcp.storage.GetBucketResult),
        (GET_SUBNETWORKS, {"region": "us-central1"}, gcp.compute.GetSubnetworksResult),
        (GET_SUBNETWORK, {"name": "nodes", "region": "us-central1"}, gcp.compute.GetSubnetworkResult),
    ],
)
def test_the_reads_are_answered_under_the_provider_s_field_names(token, args, result_type):
    """Every field the model answers is one pulumi-gcp 10.2.0's result type reads (a misspelt one would read as
    None in the program, not fail)."""
    assert_named_as_the_provider(HELD.answer(token, args, "p-123"), result_type, token)


def test_a_subnetwork_is_read_by_its_project_region_and_name():
    """subnetworks.get answers the one subnetwork of that path, and fails the read on its 404 (another region's)."""
    nodes = HELD.answer(GET_SUBNETWORK, {"name": "nodes", "region": "us-central1"}, "p-123")
    assert (
        nodes["ipCidrRange"] == "10.0.0.0/20" and nodes["id"] == "projects/p-123/regions/us-central1/subnetworks/nodes"
    )
    assert (
        HELD.answer(GET_SUBNETWORK, {"project": "host", "name": "proxy", "region": "us-central1"}, "p-123")[
            "ipCidrRange"
        ]
        == "10.4.0.0/26"
    )
    with pytest.raises(
        ProviderError, match="Error 404: The resource 'projects/p-123/regions/us-east1/subnetworks/nodes"
    ):
        HELD.answer(GET_SUBNETWORK, {"name": "nodes", "region": "us-east1"}, "p-123")


def test_a_subnetworks_listing_is_of_one_project_and_region_through_its_filter():
    """subnetworks.list of a project and region keeps what every parenthesized comparison of its filter holds for;
    a filter of a form the model does not evaluate fails loudly instead of answering as if it did."""

    def listed(filter_text: str, project: str = "p-123") -> list[str]:
        args = {"project": project, "region": "us-central1", "filter": filter_text}
        return [s["name"] for s in HELD.answer(GET_SUBNETWORKS, args, "p-123")["subnetworks"]]

    assert listed("") == ["nodes", "proxy", "proxy-old"]
    assert listed(f'(purpose = "{PROXY}") (role = "ACTIVE")') == ["proxy"]
    assert listed(f"(purpose = {PROXY}) (role != ACTIVE)") == ["proxy-old"]
    assert listed(f'(purpose = "{PROXY}") (role = "ACTIVE")', project="host") == ["proxy"]
    (subnet,) = HELD.answer(GET_SUBNETWORKS, {"project": "host", "region": "us-central1"}, "p-123")["subnetworks"]
    assert subnet["network"] == "https://www.googleapis.com/compute/v1/projects/host/global/networks/shared"
    assert subnet["networkName"] == "shared" and subnet["ipCidrRange"] == "10.4.0.0/26"
    with pytest.raises(UnmodeledCall):
        listed("purpose eq REGIONAL.*")


READS = """
import pulumi, pulumi_gcp as gcp
scope = dict(project="p-123", zone="us-central1-ai1a")
found = gcp.compute.get_reservation_output(name="res", **scope)
gone = gcp.compute.get_reservation_output(name="gone", **scope)
pulumi.export("found", found.resource_statuses[0].health_infos[0].health_status)
pulumi.export("foundBlocks", found.block_names)
pulumi.export("goneStatus", gone.status)
pulumi.export("goneBlocks", gone.block_names)
block = gcp.compute.get_reservation_block_output(name="block-0", reservation="res", **scope)
pulumi.export("degradedSubBlocks", block.health_infos[0].degraded_sub_block_count)
pulumi.export("freeHosts", block.apply(lambda b: b.block_count - b.in_use_count))
sub = gcp.compute.get_reservation_sub_block_output(name="sub-1", reservation_block="block-0", reservation="res", **scope)
pulumi.export("subHealth", sub.health_infos[0].health_status)
bucket = gcp.storage.get_bucket_output(name="acl-bucket")
pulumi.export("bucket", bucket.apply(lambda b: [b.location, b.uniform_bucket_level_access]))
"""

FAILED_READ = """
import pulumi, pulumi_gcp as gcp
{read}
pulumi.export("read", read)
"""


def test_what_the_program_reads_of_the_held_state(tmp_path):
    program = tmp_path / "program.py"
    program.write_text(READS)
    outputs = run_program(dict(CONFIG), preview=True, cloud=CloudProject().holding(HELD), program_path=program).outputs
    assert outputs["found"] == DEGRADED and outputs["foundBlocks"] == ["block-0"]
    # a reservation the API does not know: pulumi-gcp answers it without error, and without any of its fields
    assert outputs["goneStatus"] is None and outputs["goneBlocks"] is None
    assert outputs["degradedSubBlocks"] == 1 and outputs["freeHosts"] == 16
    assert outputs["subHealth"] == DEGRADED
    assert outputs["bucket"] == ["EU", False]


@pytest.mark.parametrize(
    "read, error",
    [
        (
            'read = gcp.compute.get_reservation_block_output(name="block-9", reservation="res", project="p-123", '
            'zone="us-central1-ai1a").status',
            "Error reading ReservationBlock: googleapi: Error 404: The resource "
            "'projects/p-123/zones/us-central1-ai1a/reservations/res/reservationBlocks/block-9' was not found, notFound",
        ),
        (
            'read = gcp.compute.get_reservation_block_output(name="block-0", reservation="gone", project="p-123", '
            'zone="us-central1-ai1a").status',
            "Error 404: The resource 'projects/p-123/zones/us-central1-ai1a/reservations/gone' was not found",
        ),
        ('read = gcp.storage.get_bucket_output(name="nowhere").location', BUCKET_NOT_FOUND),
    ],
)
def test_a_read_of_what_is_not_there_fails_as_the_provider_fails_it(tmp_path, read, error):
    """The provider's error reaches the program as the invoke's failure, worded as the SDK words it; the engine
    records the read as failed (not refused: the API is on)."""
    program = tmp_path / "program.py"
    program.write_text(FAILED_READ.format(read=read))
    invocations: list[Invocation] = []
    with pytest.raises(Exception, match=r"^invoke of gcp:") as raised:
        run_program(
            dict(CONFIG),
            preview=True,
            cloud=CloudProject().holding(HELD),
            program_path=program,
            invocations=invocations,
        )
    assert str(raised.value).startswith("invoke of gcp:")
    assert "returned an error: " in str(raised.value) and error in str(raised.value)
    assert [i.answer.split(":")[0] for i in invocations] == ["failed"]


# A zonal cluster on a /29 (4 addresses left to nodes) with a Pod range of four nodes' blocks at 8 Pods per node (a
# /28 each): its default pool is made and deleted with the cluster, then its one pool of {nodes} nodes is made.
POOL_ON_A_SMALL_SUBNET = """
import pulumi_gcp as gcp
subnet = gcp.compute.Subnetwork(
    "nodes", project="p-123", region="us-central1", name="nodes", network="vpc", ip_cidr_range="10.0.0.0/29",
    secondary_ip_ranges=[{{"range_name": "pods", "ip_cidr_range": "10.4.0.0/26"}}],
)
cluster = gcp.container.Cluster(
    "gke", name="gke", project="p-123", location="us-central1-a", initial_node_count=1, remove_default_node_pool=True,
    default_max_pods_per_node=8,
    subnetwork=subnet.id, ip_allocation_policy={{"cluster_secondary_range_name": "pods"}},
)
gcp.container.NodePool(
    "pool", name="pool", project="p-123", location="us-central1-a", cluster=cluster.name, node_count={nodes},
    max_pods_per_node={max_pods},
)
"""


@pytest.mark.parametrize(
    "nodes, max_pods, refusal",
    [
        pytest.param(4, 8, None, id="exactly-enough"),
        pytest.param(5, 8, "range: primary 10.0.0.0/29", id="node-range-one-short"),
        pytest.param(4, 9, "range: pods 10.4.0.0/26", id="more-pods-per-node-a-/27-each"),
    ],
)
def test_a_node_pool_whose_nodes_get_no_address_is_refused_by_the_up(tmp_path, nodes, max_pods, refusal):
    """GKE makes a pool's nodes only where its subnetwork's primary range (4 addresses kept) and Pod range (a block of
    twice the Pods per node each) hold them: a preview creates nothing, the `up` fails at the pool. The cluster's
    default pool, deleted once the cluster is made (remove_default_node_pool), leaves its address to the pool."""
    from harness.gcp_model import IpSpaceExhausted

    program = tmp_path / "program.py"
    program.write_text(POOL_ON_A_SMALL_SUBNET.format(nodes=nodes, max_pods=max_pods))
    run_program(dict(CONFIG), preview=True, cloud=CloudProject(), program_path=program)
    if refusal is None:
        run_program(dict(CONFIG), preview=False, cloud=CloudProject(), program_path=program)
        return
    with pytest.raises(IpSpaceExhausted, match=re.escape(refusal)) as raised:
        run_program(dict(CONFIG), preview=False, cloud=CloudProject(), program_path=program)
    assert (
        "error creating NodePool pool: IP_SPACE_EXHAUSTED: Instance 'gke-gke-pool' creation failed: IP space of "
        in (str(raised.value))
    )
    assert "'projects/p-123/regions/us-central1/subnetworks/nodes' is exhausted" in str(raised.value)


@pytest.mark.parametrize(
    "ranges, refusal",
    [
        # the dev stack's 35 nodes: its two TPU pools' 16 and the system pool's one in each of three zones
        pytest.param({"network.podCidr": "10.12.0.0/19"}, "range: qwen-serving-pods 10.12.0.0/19", id="pods-for-32"),
        pytest.param({"network.nodeCidr": "10.10.0.0/27"}, "range: primary 10.10.0.0/27", id="nodes-for-28"),
    ],
)
def test_a_stack_whose_ranges_cannot_hold_its_nodes_fails_its_up_at_a_node_pool(monkeypatch, ranges, refusal):
    """The preview's rule (gcp_config.validate_network) let through, Google Cloud still refuses the pool that does not
    fit, halfway through the `up`."""
    from components.gcp import config as gcp_config
    from harness.gcp_model import IpSpaceExhausted
    from tests.conftest import run_stack

    checked = gcp_config.validate_network
    monkeypatch.setattr(gcp_config, "validate_network", lambda network, nodes, problems: checked(network, 0, problems))
    run_stack(ranges, preview=True)
    with pytest.raises(IpSpaceExhausted, match=r"error creating NodePool .*IP_SPACE_EXHAUSTED.*" + re.escape(refusal)):
        run_stack(ranges, preview=False)
