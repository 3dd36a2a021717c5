"""Every IAM grant a stack makes, held against what the programs running in its cluster ask of Google Cloud.

Each stack file, and the test's own fixture stacks (tests/data/iam-stacks, varied below: an existing weights bucket
with and without the stack's grants, the Hugging Face token in Secret Manager, Saxml), runs as an `up` would. Every
IAM resource it registers is read back as a grant (what it is on, role, principal, condition); the render's programs
give their Google API calls (tests/gcp_permissions.py, where each call, permission and role comes with its source).
Then, with each condition evaluated on each call's resource as IAM evaluates it:

- every call is let through by the grants (a call Google Cloud would refuse with a 403 fails here);
- every grant lets through a call of some program (a grant nothing needs fails: least privilege);
- no grant lets a principal create, replace or delete an object its programs never write (a lost condition fails);
- every identity holding a grant runs a program the model knows, and every program model is met in some render.

Nothing here names a stack's project, bucket or model: all of it comes from each render and its config. A kind of IAM
resource this test does not read (an authoritative binding or policy, a custom role) fails until it is read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from components.operations.benchmark import Ramp, benchmark_objects
from components.stack import StackConfig, load_pulumi_values
from components.workloads.serving.config import weights_bucket_name
from harness.mock_engine import PROJECT_NUMBER_PLACEHOLDER, ProgramRun, Registration, run_program
from tests.conftest import FIXTURE_STACK_NAMES, FIXTURE_STACKS, as_pulumi_values, run_stack, with_overrides
from tests.gcp_permissions import (
    METHODS,
    PROGRAMS,
    ROLE_PERMISSIONS,
    Call,
    Claimed,
    Cluster,
    Grant,
    Render,
    allows,
    bucket_object,
    condition_holds,
    missing,
    needed_by,
    pods_of,
    program_calls,
)
from tools.render import kubernetes_objects
from tools.stack_file import stack_config_values

FIXTURES_DIR = Path(__file__).parent / "data" / "iam-stacks"
STACKS = FIXTURE_STACK_NAMES


@dataclass(frozen=True)
class Variant:
    stack: str
    stack_dir: Path
    overrides: dict[str, Any]


def _with_token_in_secret_manager(values: dict[str, Any]) -> dict[str, Any]:
    return {
        "serving.hfTokenSecretVersion": f"projects/{values['project']}/secrets/hf-token/versions/1",
        "cluster.secretManager": True,  # GKE's add-on that mounts it
    }


# The fixture stacks and their variants: a function of the fixture's own values, so the test restates none of them.
FIXTURES: dict[str, tuple[str, Any]] = {
    "serving": ("iam-serving", lambda values: {}),
    "serving, an existing bucket": ("iam-serving", lambda values: {"serving.weightsBucket.create": False}),
    "serving, an existing bucket the stack grants nothing on": (
        "iam-serving",
        lambda values: {"serving.weightsBucket.create": False, "serving.weightsBucket.grantAccess": False},
    ),
    "serving, the token in Secret Manager": ("iam-serving", _with_token_in_secret_manager),
    "saxml": ("iam-saxml", lambda values: {}),
    # Docker Hub pulled as an account, its password in Secret Manager: Artifact Registry's agent reads it
    "serving, Docker Hub credentials": (
        "iam-serving",
        lambda values: {
            "images.pullThrough.dockerHubUsername": "iamfixture",
            "images.pullThrough.dockerHubPasswordSecretVersion": f"projects/{values['project']}/secrets/docker-hub"
            "/versions/1",
        },
    ),
    # the Secrets' key in the stack's project (granted by the stack), the boot disks' in another (its owner's)
    "serving, keys in this project and another": (
        "iam-serving",
        lambda values: {
            "cluster.secretsEncryptionKey": f"projects/{values['project']}/locations/{values['region']}"
            "/keyRings/cluster/cryptoKeys/secrets",
            "cluster.bootDiskEncryptionKey": f"projects/{values['project']}-keys/locations/{values['region']}"
            "/keyRings/cluster/cryptoKeys/boot-disks",
        },
    ),
}


def decoded(stack: str, stack_dir: Path) -> tuple[dict[str, Any], list[str]]:
    values, secret_keys = stack_config_values(stack, stack_dir)
    raw = {}
    for key, text in values.items():
        try:
            raw[key.split(":", 1)[1]] = json.loads(text)
        except json.JSONDecodeError:
            raw[key.split(":", 1)[1]] = text
    return raw, secret_keys


@dataclass(frozen=True)
class Checked:
    """One stack run as an `up` would, its grants, and its programs' calls."""

    name: str
    run: ProgramRun
    config: StackConfig
    grants: list[Grant]
    calls: list[Call]
    claimed: list[Claimed]
    render: Render


def check(name: str, stack: str, stack_dir: Path, overrides: dict[str, Any]) -> Checked:
    raw, secret_keys = decoded(stack, stack_dir)
    values = as_pulumi_values(with_overrides(raw, overrides))
    if stack_dir == FIXTURE_STACKS:
        # the tests' own stacks, as run_stack runs them: the `up` other tests run of them (tests/conftest.py caches it)
        secrets = tuple(key.split(":", 1)[1] for key in secret_keys)
        run = run_stack(overrides, stack=stack, preview=False, secrets=secrets)
    else:
        run = run_program(values, secret_keys, stack=stack, preview=False)
    config = load_pulumi_values(values, secret_keys).config
    render = render_of(run, config)
    calls, claimed = program_calls(render)
    return Checked(
        name, run, config, [grant_of(r) for r in run.registrations if r.type in MEMBER_TYPES], calls, claimed, render
    )


def render_of(run: ProgramRun, config: StackConfig) -> Render:
    """The stack's objects, with the benchmark's that `make bench` applies (built as tools/bench.py builds them);
    every image the nodes pull (the pods' and the charts', from the `images` output); the cluster's identities."""
    objects: list[dict[str, Any]] = list(kubernetes_objects(run.registrations))
    if config.serving.enabled:
        ramp = Ramp(run_id="iam-check", base_url="http://10.0.0.2/v1", rates=(1.0,), stage_seconds=60)
        objects += benchmark_objects(config.serving, config.project, config.pull_path(), ramp)
    images = [c["image"] for pod in pods_of(objects) for c in pod.containers]
    images += [image["pull"] for image in run.outputs.get("images", [])]
    clusters = run.of_type("gcp:container/cluster:Cluster")
    # GKE's pool of a project is <project>.svc.id.goog (GKE "About Workload Identity Federation for GKE")
    pool = clusters[0].input("workloadIdentityConfig.workloadPool") if clusters else f"{config.project}.svc.id.goog"
    node_accounts = {
        r.input("nodeConfig.serviceAccount")
        for r in run.registrations
        if r.type in ("gcp:container/cluster:Cluster", "gcp:container/nodePool:NodePool")
    }
    assert len(node_accounts) <= 1, f"nodes of several accounts: {node_accounts}"
    node = f"serviceAccount:{node_accounts.pop()}" if node_accounts else None
    secrets_keys = tuple(
        key for cluster in clusters if (key := (cluster.inputs.get("databaseEncryption") or {}).get("keyName"))
    )
    boot_keys = tuple(
        sorted(
            {
                key
                for r in run.registrations
                if r.type in ("gcp:container/cluster:Cluster", "gcp:container/nodePool:NodePool")
                if (key := (r.inputs.get("nodeConfig") or {}).get("bootDiskKmsKey"))
            }
        )
    )
    upstream_secrets = tuple(
        sorted(
            {
                version
                for r in run.of_type("gcp:artifactregistry/repository:Repository")
                if (
                    version := (
                        ((r.inputs.get("remoteRepositoryConfig") or {}).get("upstreamCredentials") or {}).get(
                            "usernamePasswordCredentials"
                        )
                        or {}
                    ).get("passwordSecretVersion")
                )
            }
        )
    )
    return Render(
        objects,
        images,
        Cluster(config.project, PROJECT_NUMBER_PLACEHOLDER, pool, node, secrets_keys, boot_keys),
        upstream_secrets,
    )


VARIANTS = {
    **{f"stack {stack}": Variant(stack, FIXTURE_STACKS, {}) for stack in STACKS},
    **{
        f"fixture {name}": Variant(stack, FIXTURES_DIR, overrides(decoded(stack, FIXTURES_DIR)[0]))
        for name, (stack, overrides) in FIXTURES.items()
    },
}


@pytest.fixture(scope="module")
def checked() -> dict[str, Checked]:
    return {name: check(name, v.stack, v.stack_dir, v.overrides) for name, v in VARIANTS.items()}


@pytest.fixture(params=sorted(VARIANTS))
def one(request: pytest.FixtureRequest, checked: dict[str, Checked]) -> Checked:
    return checked[request.param]


# --- Reading the grants of a render ---------------------------------------------------------------------------------

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
    "gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember": ("key", ("cryptoKeyId",)),
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
        registration.name,
    )


# --- Calls the stack leaves to others, and grants it makes that no call needs yet ------------------------------------


def delegated(one: Checked) -> set[str]:
    """Where the stack's config says the grants are made elsewhere: the weights bucket with
    serving.weightsBucket.grantAccess false (the docs list what its accounts then need there), a key of another
    project."""
    serving = one.config.serving
    elsewhere = set()
    if serving.enabled and not serving.weights_bucket.grant_access:
        elsewhere.add(f"bucket {weights_bucket_name(serving, one.config.project)}")
    # a key of another project is its owner's to grant: the preview says the command (config.key_grant_warnings)
    elsewhere |= {f"key {g.key.name}" for g in one.config.key_grants() if not g.in_project(one.config.project)}
    return elsewhere


def the_stacks_to_grant(one: Checked) -> list[Call]:
    elsewhere = delegated(one)
    return [call for call in one.calls if not elsewhere & set(call.reached_from)]


@dataclass(frozen=True)
class Acknowledged:
    role: str
    on_kind: str  # "project", "bucket", ...
    why: str


# Grants the model finds no call for, each kept for now with why. An entry no render shows any more fails
# (test_every_acknowledged_grant_is_still_made), so it leaves with its grant.
ACKNOWLEDGED_UNNEEDED: list[Acknowledged] = []


def acknowledged(grant: Grant, one: Checked) -> Acknowledged | None:
    if grant.principal != one.render.cluster.node_account:
        return None
    return next(
        (a for a in ACKNOWLEDGED_UNNEEDED if a.role == grant.role and grant.on.startswith(f"{a.on_kind} ")), None
    )


# --- The checks ------------------------------------------------------------------------------------------------------


def test_every_call_is_let_through(one: Checked) -> None:
    refused = [
        f"{call}: lacks {', '.join(gaps)}" for call in the_stacks_to_grant(one) if (gaps := missing(call, one.grants))
    ]
    assert not refused, "calls Google Cloud would refuse (403):\n" + "\n".join(refused)


def test_every_grant_lets_a_call_through(one: Checked) -> None:
    unneeded = [str(g) for g in one.grants if not needed_by(g, one.calls) and not acknowledged(g, one)]
    assert not unneeded, "grants no program's call needs (least privilege):\n" + "\n".join(unneeded)


# What writes an object: create it, replace or delete it, change its metadata. A role that writes (objectUser) carries
# all of them; the check is where a principal may write, not which of them it uses.
WRITES = frozenset({"storage.objects.create", "storage.objects.delete", "storage.objects.update"})


def test_no_grant_lets_a_program_write_beyond_its_own_writes(one: Checked) -> None:
    """Each principal may write only where its programs write: probed on every object any program of the render
    names (and one more under each prefix a call stands for), in every bucket the principal holds a grant on. So the
    model servers may not touch the weights, the staging Job may not write the XLA cache (JAX runs what it finds
    there), the benchmark writes only under its results prefix."""
    probes = {call.resource for call in one.calls if "/objects/" in call.resource}
    probes |= {call.under + "another-object" for call in one.calls if call.under}
    beyond = []
    for principal in sorted({g.principal for g in one.grants}):
        grants = [g for g in one.grants if g.principal == principal and g.on.startswith("bucket ")]
        writes = [c for c in one.calls if c.principal == principal and WRITES & set(c.permissions)]
        for resource in sorted(probes):
            reached = (f"bucket {resource.split('/')[3]}",)
            allowed = sorted(p for p in WRITES if any(allows(g, principal, p, resource, reached) for g in grants))
            if allowed and not any(c.covers(resource) for c in writes):
                beyond.append(f"{principal} may {', '.join(allowed)} {resource}, where none of its programs writes")
    assert not beyond, "\n".join(beyond)


def test_every_identity_holding_a_grant_runs_a_known_program(one: Checked) -> None:
    """A pod whose identity holds a grant runs a program this model reads; else its calls are unknown."""
    granted = {g.principal for g in one.grants}
    unknown = [c.pod.owner for c in one.claimed if c.principal in granted and not c.programs]
    assert not unknown, f"pods with a Google identity whose programs the model does not know: {unknown}"


def test_every_program_model_is_met_in_some_render(checked: dict[str, Checked]) -> None:
    met = {name for one in checked.values() for c in one.claimed for name in c.programs}
    assert met == {p.name for p in PROGRAMS}, f"models no render exercises: {sorted({p.name for p in PROGRAMS} - met)}"


def test_the_benchmark_may_look_its_bucket_up(checked: dict[str, Checked]) -> None:
    """R3-1: inference-perf gets the bucket (storage.buckets.get) before its run; the benchmark's grants carry it."""
    for one in checked.values():
        lookups = [c for c in one.calls if c.program.startswith("benchmark") and c.method == "storage.buckets.get"]
        assert bool(lookups) == one.config.serving.enabled, one.name
        for call in set(lookups) & set(the_stacks_to_grant(one)):
            assert missing(call, one.grants) == [], f"{one.name}: {call}"


def test_the_benchmark_grants_wait_for_their_bucket_and_pool_and_nothing_waits_for_them(
    checked: dict[str, Checked],
) -> None:
    """Their life on the recorded graph: made after the bucket (when the stack makes it) and the cluster whose
    workload pool names the principal; no resource of the stack waits for them (`make bench` applies the Job), so the
    first `up` adds them in place and `destroy` removes them before the bucket."""
    seen = 0
    for one in checked.values():
        principals = {c.principal for c in one.calls if c.program.startswith("benchmark")}
        grants = {g.name for g in one.grants if g.principal in principals}
        made_here = {b.name for b in one.run.of_type("gcp:storage/bucket:Bucket")}
        clusters = {c.name for c in one.run.of_type("gcp:container/cluster:Cluster")}
        for registration in (r for r in one.run.registrations if r.name in grants):
            seen += 1
            bucket = {
                b
                for b in made_here
                if one.run.one("gcp:storage/bucket:Bucket", b).input("name") == registration.input("bucket")
            }
            assert bucket | clusters <= set(registration.dependencies), (one.name, registration.name)
        assert not [r.name for r in one.run.registrations if grants & set(r.dependencies)], one.name
    assert seen


def test_a_stack_that_grants_nothing_on_the_bucket_grants_nothing_on_it(one: Checked) -> None:
    elsewhere = delegated(one)
    assert not [g for g in one.grants if g.on in elsewhere]
    if elsewhere:  # and the calls are still there, for the docs' list of what the bucket's owner grants
        assert [c for c in one.calls if elsewhere & set(c.reached_from)]


def test_every_granted_role_has_a_permission_table(one: Checked) -> None:
    untabled = sorted({g.role for g in one.grants} - set(ROLE_PERMISSIONS))
    assert not untabled, (
        f"roles without a table in tests/gcp_permissions.py (add each from Google's definition): {untabled}"
    )


def test_every_call_names_a_known_method(one: Checked) -> None:
    assert {c.method for c in one.calls} <= set(METHODS)


def test_every_acknowledged_grant_is_still_made(checked: dict[str, Checked]) -> None:
    for entry in ACKNOWLEDGED_UNNEEDED:
        made = [g for one in checked.values() for g in one.grants if acknowledged(g, one) == entry]
        assert made, (
            f"no stack makes the acknowledged grant any more; remove it from ACKNOWLEDGED_UNNEEDED: {entry.role}"
        )
        assert all(
            not needed_by(g, one.calls) for one in checked.values() for g in one.grants if acknowledged(g, one) == entry
        ), f"a program needs {entry.role} now: remove it from ACKNOWLEDGED_UNNEEDED"


def test_every_iam_resource_is_one_this_test_reads(one: Checked) -> None:
    unread = sorted({r.type for r in one.run.registrations if is_iam(r)} - set(MEMBER_TYPES))
    assert unread == [], "an IAM resource this test does not read: read it in grant_of"


def test_conditions_are_only_on_buckets_with_uniform_access(one: Checked) -> None:
    """Cloud Storage takes IAM conditions only on buckets with uniform bucket-level access: held here for the buckets
    the stack creates (an existing bucket is read at preview)."""
    buckets = {b.input("name"): b for b in one.run.of_type("gcp:storage/bucket:Bucket")}
    for registration in one.run.of_type("gcp:storage/bucketIAMMember:BucketIAMMember"):
        bucket = buckets.get(registration.input("bucket"))
        if registration.inputs.get("condition") and bucket is not None:
            assert bucket.input("uniformBucketLevelAccess"), registration.name


def test_no_grant_is_a_basic_role_or_on_everyone(one: Checked) -> None:
    for grant in one.grants:
        assert grant.role not in ("roles/owner", "roles/editor", "roles/viewer"), grant
        assert grant.principal not in ("allUsers", "allAuthenticatedUsers"), grant


def test_no_grant_is_made_twice(one: Checked) -> None:
    """Two resources making one binding: deleting either revokes it."""
    assert len(one.grants) == len(set(one.grants))


@pytest.mark.parametrize(
    ("expression", "resource", "holds"),
    [
        (
            'resource.name.startsWith("projects/_/buckets/b/objects/xla_cache/")',
            bucket_object("b", "xla_cache/k-cache"),
            True,
        ),
        ('resource.name.startsWith("projects/_/buckets/b/objects/xla_cache/")', "projects/_/buckets/b", False),
        (
            'resource.name.startsWith("projects/_/buckets/b/objects/xla_cache/")',
            bucket_object("b", "xla_cache2/k"),
            False,
        ),
        (
            'resource.name.startsWith("projects/_/buckets/b/objects/xla_cache/")',
            bucket_object("c", "xla_cache/k"),
            False,
        ),
    ],
)
def test_a_condition_is_read_on_the_resource_the_call_names(expression: str, resource: str, holds: bool) -> None:
    """The bucket itself (a bucket-level call) never matches an objects/ prefix."""
    assert condition_holds(expression, resource) is holds


def test_a_condition_on_an_attribute_not_bound_is_an_error() -> None:
    with pytest.raises(ValueError, match="cannot evaluate"):
        condition_holds('request.time < timestamp("2030-01-01T00:00:00Z")', "projects/_/buckets/b")


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
def test_the_walker_sees_an_iam_resource_however_pulumi_gcp_cases_its_name(token: str) -> None:
    """pulumi-gcp spells it IAMMember in some modules and IamMember in others: both are grants to read."""
    assert is_iam(SimpleNamespace(type=token))  # type: ignore[arg-type]
