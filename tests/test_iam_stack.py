"""Every IAM grant the program makes, per stack, against a table written here: the review surface of who
may do what in Google Cloud.

Each stack file runs as an `up` would (apply-time outputs known, so Google service account emails are
real), and every IAM resource it registers is read back as (what it is granted on, role, principal,
condition). The set must equal the stack's table below exactly: a new grant, a widened one or one that
moved to another principal fails here until its row is added with the reason it is needed. A new stack
file needs a table of its own; a kind of IAM resource this walker does not read (an authoritative
binding or policy, a custom role) fails until it is read.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import NamedTuple

import pytest

from tests.conftest import PROJECT_ROOT, run_stack
from tools.mock_engine import PROJECT_NUMBER_PLACEHOLDER, ProgramRun, Registration

STACKS = sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in PROJECT_ROOT.glob("Pulumi.*.yaml"))

# The IAM resources the program uses, and what each is granted on: the inputs that name it, joined by "/".
MEMBER_TYPES = {
    "gcp:projects/iAMMember:IAMMember": ("project", ("project",)),
    "gcp:storage/bucketIAMMember:BucketIAMMember": ("bucket", ("bucket",)),
    "gcp:serviceaccount/iAMMember:IAMMember": ("service account", ("serviceAccountId",)),
    "gcp:secretmanager/secretIamMember:SecretIamMember": ("secret", ("secretId",)),
    "gcp:artifactregistry/repositoryIamMember:RepositoryIamMember": (
        "repository",
        ("project", "location", "repository"),
    ),
}


class Grant(NamedTuple):
    on: str  # "project <id>", "bucket <name>", "service account <email>", "secret projects/<p>/secrets/<s>", ...
    role: str
    principal: str
    condition: str | None  # the IAM condition's expression


class Row(NamedTuple):
    grant: Grant
    why: str


def workload(project: str, namespace: str, account: str) -> str:
    """A Kubernetes service account as a Workload Identity Federation principal (the project number is
    what a real preview looks up; the mocks show its placeholder)."""
    return (
        f"principal://iam.googleapis.com/projects/{PROJECT_NUMBER_PLACEHOLDER}/locations/global/"
        f"workloadIdentityPools/{project}.svc.id.goog/subject/ns/{namespace}/sa/{account}"
    )


def google_account(account_id: str, project: str) -> str:
    return f"serviceAccount:{account_id}@{project}.iam.gserviceaccount.com"


def objects_under(bucket: str, prefix: str) -> str:
    return f'resource.name.startsWith("projects/_/buckets/{bucket}/objects/{prefix}")'


SNAPSHOT = "models--Qwen--Qwen3.5-397B-A17B-FP8/snapshots/ea5b4f81096f3901c91dea97f81324302495781d/"
SERVING_NAMESPACE = "llm-d-pd-disaggregation"
SECRET_ACCESSOR = "roles/secretmanager.secretAccessor"


def node_rows(project: str, account_id: str) -> list[Row]:
    nodes = google_account(account_id, project)
    return [
        Row(
            Grant(f"project {project}", "roles/container.defaultNodeServiceAccount", nodes, None),
            "the nodes' own account (not Compute Engine's default): GKE's node role, logs, metrics and metadata",
        ),
    ]


def pull_through_rows(project: str, account_id: str, region: str, repositories: list[str]) -> list[Row]:
    return [
        Row(
            Grant(
                f"repository {project}/{region}/{repository}",
                "roles/artifactregistry.reader",
                google_account(account_id, project),
                None,
            ),
            "the nodes pull one registry's images through the pull-through repository the stack makes for it: read "
            "on that repository alone",
        )
        for repository in repositories
    ]


def mirror_rows(project: str, account_id: str, repository: str) -> list[Row]:
    return [
        Row(
            Grant(
                f"repository {repository}", "roles/artifactregistry.reader", google_account(account_id, project), None
            ),
            "the nodes pull every image from images.mirror: read on that repository alone",
        )
    ]


def hf_token_rows(project: str, secret: str) -> list[Row]:
    on = f"secret projects/{project}/secrets/{secret}"
    return [
        Row(
            Grant(on, SECRET_ACCESSOR, workload(project, SERVING_NAMESPACE, "model-server"), None),
            "model servers: GKE's Secret Manager add-on mounts the Hugging Face token as their pod's own account",
        ),
        Row(
            Grant(on, SECRET_ACCESSOR, workload(project, SERVING_NAMESPACE, "weights-staging"), None),
            "staging Job: the token for gated downloads from the Hub, mounted the same way; no other account reads it",
        ),
    ]


def serving_rows(project: str, bucket: str) -> list[Row]:
    servers = workload(project, SERVING_NAMESPACE, "model-server")
    stager = workload(project, SERVING_NAMESPACE, "weights-staging")
    bench = workload(project, SERVING_NAMESPACE, "serving-benchmark")
    on = f"bucket {bucket}"
    return [
        Row(
            Grant(on, "roles/storage.bucketViewer", servers, None),
            "model servers: the bucket's metadata, as the codelab grants for the Run:ai streamer",
        ),
        Row(
            Grant(on, "roles/storage.objectViewer", servers, None),
            "model servers: stream the weights (get and list; listing is a bucket-level call)",
        ),
        Row(
            Grant(on, "roles/storage.objectUser", servers, objects_under(bucket, "xla_cache/")),
            "model servers: JAX's compilation cache (VLLM_XLA_CACHE_PATH), their only write; never the weights",
        ),
        Row(
            Grant(on, "roles/storage.objectViewer", stager, None),
            "staging Job: list and read what is already complete",
        ),
        Row(
            Grant(on, "roles/storage.objectUser", stager, objects_under(bucket, SNAPSHOT)),
            "staging Job: the one writer of the weights, in the served snapshot's directory only",
        ),
        Row(
            Grant(on, "roles/storage.objectViewer", bench, None),
            "`make bench`: read the snapshot's tokenizer files (Cloud Storage FUSE, read-only)",
        ),
        Row(
            Grant(on, "roles/storage.objectUser", bench, objects_under(bucket, "results/")),
            "`make bench`: inference-perf writes its reports under results/, its only write",
        ),
    ]


def saxml_rows(project: str) -> list[Row]:
    bucket = f"bucket {project}-sax-admin"
    admin, reader = google_account("sax-admin-sa", project), google_account("sax-iam-sa", project)
    pool = f"serviceAccount:{project}.svc.id.goog"
    return [
        Row(
            Grant(bucket, "roles/storage.objectUser", admin, None),
            "admin server: writes the cell's address, config and state (sax-root, sax-fs-root); the bucket holds "
            "nothing else",
        ),
        Row(
            Grant(bucket, "roles/storage.objectViewer", reader, None),
            "model and HTTP servers: read the admin server's address",
        ),
        Row(
            Grant(
                f"service account {admin.removeprefix('serviceAccount:')}",
                "roles/iam.workloadIdentityUser",
                f"{pool}[sax/sax-admin]",
                None,
            ),
            "the admin server's Kubernetes service account acts as its Google service account",
        ),
        Row(
            Grant(
                f"service account {reader.removeprefix('serviceAccount:')}",
                "roles/iam.workloadIdentityUser",
                f"{pool}[sax/sax-sa]",
                None,
            ),
            "the model and HTTP servers' Kubernetes service account acts as theirs",
        ),
    ]


EXPECTED: dict[str, list[Row]] = {
    "dev": [
        *node_rows("my-tpu-project", "qwen-serving-cluster-nodes"),
        *pull_through_rows(
            "my-tpu-project",
            "qwen-serving-cluster-nodes",
            "us-central1",
            [f"qwen-serving-cluster-{r}" for r in ("registry-k8s-io", "docker-io", "ghcr-io", "quay-io")],
        ),
        *serving_rows("my-tpu-project", "my-model-weights"),
    ],
    "prod": [
        *node_rows("my-tpu-prod-project", "qwen-prod-cluster-nodes"),
        *mirror_rows("my-tpu-prod-project", "qwen-prod-cluster-nodes", "my-org-artifacts/us-central1/tpu-gke-mirror"),
        *serving_rows("my-tpu-prod-project", "my-prod-model-weights"),
        *hf_token_rows("my-tpu-prod-project", "hf-token"),
    ],
    "saxml": [
        *node_rows("my-tpu-project", "saxml-nodes"),
        # its JobSet controller's image is registry.k8s.io's; the Saxml images are in Google's public repositories
        *pull_through_rows("my-tpu-project", "saxml-nodes", "us-west4", ["saxml-registry-k8s-io"]),
        *saxml_rows("my-tpu-project"),
    ],
}


def is_iam(registration: Registration) -> bool:
    """Any IAM resource of pulumi-gcp, however its name is cased (IAMMember, BucketIAMMember, SecretIamMember)."""
    return registration.type.startswith("gcp:") and "iam" in registration.type.rsplit(":", 1)[-1].lower()


def grant_of(registration: Registration) -> Grant:
    kind, fields = MEMBER_TYPES[registration.type]
    target = "/".join(registration.input(field) for field in fields)
    if kind == "service account":  # projects/<project>/serviceAccounts/<email>
        target = target.rsplit("/", 1)[-1]
    condition = registration.inputs.get("condition")
    return Grant(
        f"{kind} {target}",
        registration.input("role"),
        registration.input("member"),
        condition["expression"] if condition else None,
    )


@pytest.fixture(scope="module", params=STACKS)
def applied(request: pytest.FixtureRequest) -> tuple[str, ProgramRun]:
    return request.param, run_stack(stack=request.param, preview=False)


def test_every_stack_has_a_table() -> None:
    assert set(STACKS) == set(EXPECTED), "a stack file without a table of its grants here (or a table without one)"


def test_every_iam_resource_is_one_this_table_reads(applied: tuple[str, ProgramRun]) -> None:
    _stack, run = applied
    unread = sorted({r.type for r in run.registrations if is_iam(r)} - set(MEMBER_TYPES))
    assert unread == [], "an IAM resource the grant table does not read: read it in grant_of and list its grants"


def test_the_grants_are_exactly_the_table(applied: tuple[str, ProgramRun]) -> None:
    stack, run = applied
    made = [grant_of(r) for r in run.registrations if r.type in MEMBER_TYPES]
    assert len(made) == len(set(made)), "one grant made twice: deleting either would revoke it"
    expected = {row.grant for row in EXPECTED[stack]}
    assert not set(made) - expected, f"grants not in the table (add each with why): {sorted(set(made) - expected)}"
    assert not expected - set(made), f"grants in the table the stack no longer makes: {sorted(expected - set(made))}"


def test_every_row_says_why() -> None:
    for stack, rows in EXPECTED.items():
        assert len({row.grant for row in rows}) == len(rows), stack
        assert all(len(row.why) > 20 for row in rows), stack


def test_conditions_are_only_on_buckets_with_uniform_access(applied: tuple[str, ProgramRun]) -> None:
    """Cloud Storage takes IAM conditions only on buckets with uniform bucket-level access."""
    _stack, run = applied
    uniform = {b.input("name") for b in run.of_type("gcp:storage/bucket:Bucket") if b.input("uniformBucketLevelAccess")}
    for registration in run.of_type("gcp:storage/bucketIAMMember:BucketIAMMember"):
        if registration.inputs.get("condition"):
            assert registration.input("bucket") in uniform, registration.name


def test_no_grant_is_a_basic_role_or_on_everyone(applied: tuple[str, ProgramRun]) -> None:
    _stack, run = applied
    for grant in (grant_of(r) for r in run.registrations if r.type in MEMBER_TYPES):
        assert grant.role not in ("roles/owner", "roles/editor", "roles/viewer"), grant
        assert grant.principal not in ("allUsers", "allAuthenticatedUsers"), grant


@pytest.mark.parametrize(
    "token",
    [
        "gcp:projects/iAMMember:IAMMember",
        "gcp:storage/bucketIAMMember:BucketIAMMember",
        "gcp:secretmanager/secretIamMember:SecretIamMember",
        "gcp:artifactregistry/repositoryIamMember:RepositoryIamMember",
        "gcp:secretmanager/secretIamBinding:SecretIamBinding",
    ],
)
def test_the_walker_sees_an_iam_resource_however_pulumi_gcp_cases_its_name(token):
    """pulumi-gcp spells it IAMMember in some modules and IamMember in others: both are grants to read."""
    assert is_iam(SimpleNamespace(type=token))  # type: ignore[arg-type]
