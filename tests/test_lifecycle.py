"""The whole life of each resource, read off the recorded dependency graph and lifecycle options.

What `pulumi up` waits for when it creates a resource, what a change replaces, and what must be
gone before `pulumi destroy` deletes it: each property here is a deploy-day failure if it breaks
(the first `up` on an empty project, a changed `up`, a destroy that never finishes).
"""

from __future__ import annotations

import copy
import ipaddress

import pulumi
import pytest

from components import lifecycle as lifecycle_review
from components import stack as stack_config
from components.platform import config as platform_config
from harness.mock_engine import ProgramRun, Registration
from tests.conftest import cubes, run_stack, stack_values
from tests.conftest import stack_config as fixture_stack_config
from tools.render import create_waves, creates_something, depends_on, destroy_waves
from tools.render import kubernetes_objects as objects_of

STACKS = ["dev", "saxml"]
# The names the tests' dev stack gives what the messages below name: said from it, not restated.
DEV = fixture_stack_config("dev")
PROJECT, REGION, PREFIX, CLUSTER_NAME = DEV.project, DEV.region, DEV.network.prefix, DEV.cluster.name
POOLS = [{"name": pool.name, "nodeCount": pool.node_count} for pool in DEV.tpu.pools]
POOL_1, POOL_LAST = POOLS[0]["name"], POOLS[-1]["name"]
BLOCK = DEV.tpu.reservation.block
TPU_POOL = "gcp:container/nodePool:NodePool"
RELEASE = "kubernetes:helm.sh/v3:Release"
GATE = "tpu-drain-gate"
NETWORK_GATE = "load-balancer-drain-gate"
TPU_WORKLOAD_KINDS = ("JobSet", "LeaderWorkerSet")
PATCH_FORCE = "pulumi.com/patchForce"


@pytest.fixture(scope="module")
def runs() -> dict[str, ProgramRun]:
    return {stack: run_stack(stack=stack) for stack in STACKS}


def graph(run: ProgramRun, without: frozenset[str] = frozenset()) -> dict[str, set[str]]:
    return {
        r.name: {d for d in depends_on(r) if d not in without}
        for r in run.registrations
        if creates_something(r) and r.name not in without
    }


def closure(run: ProgramRun, name: str, without: frozenset[str] = frozenset()) -> set[str]:
    """Everything ``name`` waits for, directly or through others."""
    edges, seen, todo = graph(run, without), set(), [name]
    while todo:
        for needed in edges.get(todo.pop(), ()):
            if needed not in seen:
                seen.add(needed)
                todo.append(needed)
    return seen


def tpu_pools(run: ProgramRun) -> list[str]:
    return [r.name for r in run.of_type(TPU_POOL) if r.name != "system-pool"]


def tpu_workloads(run: ProgramRun) -> list[Registration]:
    return [r for r in run.registrations if r.type.split(":")[-1] in TPU_WORKLOAD_KINDS]


def kubernetes_objects(run: ProgramRun) -> list[Registration]:
    return [r for r in run.registrations if r.type.startswith("kubernetes:") and creates_something(r)]


# --- First `pulumi up` ----------------------------------------------------------------------


def applied_objects(run: ProgramRun) -> list[tuple[str, dict]]:
    """(resource name, manifest) of every Kubernetes object the program applies itself (a ConfigGroup's
    objects each on its own), not the charts Helm installs."""
    found = []
    for r in kubernetes_objects(run):
        # Helm installs a release's objects; the InferencePool CRDs come as the upstream release file
        if r.type in (RELEASE, "kubernetes:yaml/v2:ConfigFile") or r.type.startswith("pulumi:providers:"):
            continue
        if "objs" in r.inputs:
            found += [(f"{r.name}:{o['metadata']['name']}", o) for o in r.inputs["objs"]]
        else:
            found.append((r.name, {"metadata": r.input("metadata")}))
    return found


@pytest.mark.parametrize("stack", STACKS)
def test_every_object_the_program_applies_takes_its_fields_back(runs, stack):
    """Drift (a kubectl edit of a declared field) is put back by `pulumi up --refresh`, not refused as a
    server-side apply conflict: every object is applied with force (the lab's drift test shows both)."""
    objects = applied_objects(runs[stack])
    assert len(objects) >= 5
    unforced = [name for name, o in objects if (o["metadata"].get("annotations") or {}).get(PATCH_FORCE) != "true"]
    assert unforced == []


@pytest.mark.parametrize("stack", STACKS)
def test_workload_identity_bindings_wait_for_the_cluster(runs, stack):
    """GKE creates the PROJECT.svc.id.goog pool with the first WI cluster: a binding before it fails."""
    run = runs[stack]
    bindings = [
        r.name
        for r in run.registrations
        if r.type.startswith(("gcp:storage/bucketIAMMember", "gcp:serviceaccount/iAMMember"))
        and "svc.id.goog" in str(r.inputs.get("member", ""))
    ]
    assert bindings, "the stack grants nothing to a Kubernetes service account"
    for name in bindings:
        assert "gke-cluster" in closure(run, name), f"{name} does not wait for the cluster"


@pytest.mark.parametrize("stack", STACKS)
def test_the_kubernetes_provider_has_a_stable_cluster_identifier(runs, stack):
    (provider,) = runs[stack].of_type("pulumi:providers:kubernetes")
    config = runs[stack].raw_outputs["clusterName"]
    assert provider.input("clusterIdentifier").endswith(f"/clusters/{config}")


@pytest.mark.parametrize("stack", STACKS)
def test_no_helm_release_or_kubernetes_object_waits_on_a_tpu_pool_but_through_the_gate(runs, stack):
    """The critical path of `up` stays APIs -> network -> cluster -> pools; the platform never waits on TPUs."""
    run = runs[stack]
    pools = set(tpu_pools(run))
    for r in kubernetes_objects(run):
        reached = closure(run, r.name, without=frozenset({GATE})) & pools
        assert not reached, f"{r.name} waits on {sorted(reached)} other than through {GATE}"
    for release in run.of_type(RELEASE):
        assert not closure(run, release.name) & pools, f"release {release.name} waits on a TPU pool"


NAT = "nat"
NAT_ROUTER = "nat-router"
NODE_POOL = "gcp:container/nodePool:NodePool"


def pulls_from_outside_google(run: ProgramRun) -> list[str]:
    """What runs images or downloads from registries outside Google, Hugging Face or the package index: every
    node pool (its nodes pull), every Helm release and every object the program applies in the cluster (their
    pods run on those nodes), the weights-staging Job and the TPU workloads among them."""
    return [r.name for r in run.of_type(NODE_POOL)] + [r.name for r in kubernetes_objects(run)]


@pytest.mark.parametrize("stack", STACKS)
def test_the_nat_exists_before_anything_pulls_from_outside_google(runs, stack):
    """Private nodes reach Docker Hub, ghcr.io, registry.k8s.io, Hugging Face and PyPI only through Cloud NAT: a
    pod scheduled before it could not pull its image. The NAT waits for its router and the node subnet."""
    run = runs[stack]
    assert {NAT_ROUTER, "node-subnet"} <= closure(run, NAT)
    pullers = pulls_from_outside_google(run)
    assert {"system-pool", *tpu_pools(run)} <= set(pullers)
    assert {r.name for r in run.of_type(RELEASE)} <= set(pullers)
    assert {w.name for w in tpu_workloads(run)} <= set(pullers)
    if stack == "dev":
        assert "stage-model-weights" in pullers  # pip from PyPI, the weights from Hugging Face
    for name in pullers:
        assert NAT in closure(run, name), f"{name} may start before the Cloud NAT exists"


@pytest.mark.parametrize("stack", STACKS)
def test_the_nat_goes_only_after_everything_that_pulls_through_it(runs, stack):
    run = runs[stack]
    wave = {name: i for i, names in enumerate(destroy_waves(run.registrations)) for name in names}
    for name in pulls_from_outside_google(run):
        assert wave[name] < wave[NAT], f"{name} would lose its way out before it is deleted"
    assert wave[NAT] < wave[NAT_ROUTER] < wave["vpc"]


def test_the_nat_is_replaced_only_with_the_cluster(runs):
    """The router's and NAT's replacing inputs (name, region, network, router) derive from network.prefix and
    region alone, and a change of either is announced as the cluster's replacement already."""
    prefix = "other"  # the run of test_a_new_network_under_the_same_cluster_name... (one run: run_stack keeps it)
    run = run_stack({"network.prefix": prefix, "cluster.name": "other"}, previous_outputs=previous_of(runs["dev"]))
    nat = run.one("gcp:compute/routerNat:RouterNat", NAT)
    assert (nat.input("name"), nat.input("router")) == (f"{prefix}-nat", f"{prefix}-router")
    assert any(w.startswith(f"the GKE cluster {CLUSTER_NAME} will be REPLACED") for w in run.warnings)


def test_the_cluster_does_not_wait_for_the_nat(runs):
    """Nothing on the control plane's path pulls from outside Google: the NAT comes up beside the cluster."""
    assert NAT not in closure(runs["dev"], "gke-cluster")


def test_public_nodes_and_clusters_made_elsewhere_have_no_nat():
    from tests.test_gcp_existing_cluster import LAB

    public = run_stack({"cluster.privateNodes": False})
    lab = run_stack(LAB, secrets=("cluster",))
    for run in (public, lab):
        names = {r.name for r in run.registrations}
        assert not {NAT, NAT_ROUTER} & names
        for r in run.registrations:
            assert NAT not in r.dependencies, r.name


# --- `pulumi destroy` -----------------------------------------------------------------------


@pytest.mark.parametrize("stack", STACKS)
def test_every_tpu_workload_is_deleted_before_the_gate_and_the_gate_before_the_pools(runs, stack):
    run = runs[stack]
    gate_needs = closure(run, GATE)
    for pool in tpu_pools(run):
        assert pool in gate_needs, f"{GATE} does not hold {pool} until the slices are gone"
    if stack == "dev":
        assert "slice-controller" in gate_needs, "the slice controller must outlive the Slices it finalizes"
    workloads = tpu_workloads(run)
    assert workloads
    for workload in workloads:
        assert GATE in closure(run, workload.name), f"{workload.name} is not deleted before {GATE}"


@pytest.mark.parametrize("stack", STACKS)
def test_destroy_order_puts_workloads_then_gate_then_pools(runs, stack):
    run = runs[stack]
    wave = {name: i for i, names in enumerate(destroy_waves(run.registrations)) for name in names}
    for workload in tpu_workloads(run):
        assert wave[workload.name] < wave[GATE]
    for pool in tpu_pools(run):
        assert wave[GATE] < wave[pool]


def test_the_gateway_waits_for_the_proxy_only_subnet(runs):
    run = runs["dev"]
    assert "proxy-only-subnet" in closure(run, "inference-gateway")
    assert NETWORK_GATE in closure(run, "inference-gateway")
    assert "proxy-only-subnet" in closure(run, NETWORK_GATE)


@pytest.mark.parametrize("stack", STACKS)
def test_load_balancer_consumers_are_deleted_before_their_network(runs, stack):
    run = runs[stack]
    consumers = [r.name for r in run.registrations if r.name in ("inference-gateway", "router", "http-load-balancer")]
    assert consumers
    for name in consumers:
        assert NETWORK_GATE in closure(run, name), f"{name} is not deleted before the network drain gate"
    for subnet in ("node-subnet", "proxy-only-subnet"):
        if any(r.name == subnet for r in run.registrations):
            assert subnet in closure(run, NETWORK_GATE)


@pytest.mark.parametrize("stack", STACKS)
def test_no_bucket_blocks_destroy(runs, stack):
    for bucket in runs[stack].of_type("gcp:storage/bucket:Bucket"):
        assert not bucket.options.get("protect"), f"bucket {bucket.name} is protected: destroy would fail"
        assert bucket.options.get("retainOnDelete"), f"bucket {bucket.name} would be deleted with its data"


# --- A changed `up` -------------------------------------------------------------------------


@pytest.mark.parametrize("stack", STACKS)
def test_every_graph_is_acyclic_and_names_are_unique(runs, stack):
    run = runs[stack]
    names = [r.name for r in run.registrations]
    assert len(names) == len(set(names)), "two resources share a name: the graph would be ambiguous"
    assert sum(len(w) for w in create_waves(run.registrations)) == len(
        [r for r in run.registrations if creates_something(r)]
    )


def test_the_mirror_grant_waits_for_the_node_account_and_every_object_for_it():
    """The nodes pull every image from the mirror: the grant on it comes before any Kubernetes object (through
    the provider), and a destroy deletes it once they are gone."""
    run = run_stack(stack="prod")
    grant = "node-sa-mirror-reader"
    assert "node-sa" in closure(run, grant)
    objects = [r.name for r in kubernetes_objects(run) if not r.type.startswith("pulumi:providers:")]
    assert objects and all(grant in closure(run, name) for name in objects)
    waves = destroy_waves(run.registrations)
    (grant_wave,) = [i for i, w in enumerate(waves) if grant in w]
    assert all(i < grant_wave for i, w in enumerate(waves) for name in w if name in objects)


def test_the_node_audit_logging_waits_for_the_way_out_not_for_a_tpu_pool_and_goes_before_its_namespace():
    """Its images come from Docker Hub (or the mirror): created after the NAT and deleted before it. It waits for no
    TPU pool (its pods come to the TPU nodes as the pools do), and a destroy deletes the DaemonSet before the
    namespace, account and configuration its pods use."""
    run = run_stack(stack="prod")
    made = ["node-audit-namespace", "node-audit-account", "node-audit-config", "node-audit-logging"]
    pools = set(tpu_pools(run))
    assert pools
    for name in made:
        assert NAT in closure(run, name), f"{name} may be created before the Cloud NAT"
        assert not closure(run, name) & pools, f"{name} waits on a TPU pool"
    wave = {name: i for i, names in enumerate(destroy_waves(run.registrations)) for name in names}
    assert all(wave[name] < wave[NAT] for name in made)
    assert all(wave["node-audit-logging"] < wave[name] for name in made[:3])
    assert (
        wave["node-audit-account"] < wave["node-audit-namespace"]
        and wave["node-audit-config"] < wave["node-audit-namespace"]
    )


# --- What the preview says of a changed `up` ------------------------------------------------


def previous_of(run: ProgramRun) -> dict:
    """The outputs a real engine would hand the next preview of this stack."""
    return {"lifecycle": run.raw_outputs["lifecycle"]}


def test_an_unchanged_stack_warns_of_nothing(runs):
    again = run_stack(previous_outputs=previous_of(runs["dev"]))
    assert not [w for w in again.warnings if "REPLACED" in w or "IN PLACE" in w or ", in place" in w]


def test_renaming_a_pool_is_refused_before_anything_changes(runs):
    """The new pool would ask the reservation for the cube the old one still holds."""
    renamed = [*POOLS[:-1], {**POOLS[-1], "name": "tpu7-pool-b"}]
    with pytest.raises(pulumi.RunError) as raised:
        run_stack({"tpu.pools": renamed}, previous_outputs=previous_of(runs["dev"]))
    message = str(raised.value)
    assert f"tpu.pools: pool(s) {POOL_LAST} leave and tpu7-pool-b arrive in one `up`" in message
    assert "remove the old pools in one `pulumi up`, then add the new ones in the next" in message


def test_removing_or_adding_a_pool_alone_is_not_refused(runs):
    run = run_stack(
        {
            "tpu.pools": POOLS[:1],
            "checks.superslicing.enabled": False,
            "tpu.sliceShapes": ["2x2x2"],
            "serving.prefill.replicas": 2,
            "serving.decode.replicas": 2,
            "checks.subslicing.slices": 2,
        },
        previous_outputs=previous_of(runs["dev"]),
    )
    (deleted,) = [w for w in run.warnings if " will be DELETED" in w]
    assert deleted.startswith(f"TPU pool {POOL_LAST} will be DELETED") and "delete the workloads on it first" in deleted


@pytest.mark.parametrize(
    "override, fragment",
    [
        (
            {"tpu.reservation": {"name": "other-reservation", "block": BLOCK}},
            f"TPU pool {POOL_1} will be REPLACED",
        ),
        ({"tpu.workloadPolicyName": "other-policy"}, "placementPolicy 'superslice-policy' -> 'other-policy'"),
        ({"tpu.zone": "us-central1-ai2b"}, "zone 'us-central1-ai1a' -> 'us-central1-ai2b'"),
        ({"cluster.nodeServiceAccountId": "other-nodes"}, "the system node pool will be REPLACED"),
        (
            {"cluster.nodeServiceAccountId": "other-nodes"},
            f"nodeServiceAccount '{CLUSTER_NAME}-nodes' -> 'other-nodes'",
        ),
        ({"network.prefix": "other", "cluster.name": "other"}, f"network '{PREFIX}-main' -> 'other-main'"),
        (
            {"project": "other-project", "serving.weightsBucket.name": "other-weights"},
            f"project '{PROJECT}' -> 'other-project'",
        ),
    ],
)
def test_a_replacement_is_announced_loudly(override, fragment):
    lines = said(review_of(override))  # the program's warning of it: test_a_new_network_under_the_same_cluster_name...
    assert any(fragment in w for w in lines), lines


def refusal(overrides: dict, previous: dict) -> str:
    with pytest.raises(pulumi.RunError) as raised:
        run_stack(overrides, previous_outputs=previous)
    return str(raised.value)


def test_a_cluster_made_elsewhere_is_refused_on_a_stack_that_made_its_own(runs):
    """The program would stop registering the cluster, its pools and network: the `up` would delete them. A stack
    already on a cluster made elsewhere keeps going."""
    elsewhere = {"cluster.existing": {"name": CLUSTER_NAME, "location": DEV.region}}
    message = refusal(elsewhere, previous_of(runs["dev"]))
    assert f"cluster.existing: set on a running stack that made the cluster {CLUSTER_NAME}" in message
    assert "deploy onto a cluster made elsewhere from another stack" in message
    assert not review_of(elsewhere, before=elsewhere).refused


def test_a_stack_on_a_cluster_made_elsewhere_reviews_only_which_cluster_it_deploys_onto():
    """It makes no cluster or node pool there: a new cluster.name or new pools replace nothing. Another cluster
    replaces the Kubernetes provider, so every object moves: said loudly."""
    elsewhere = {"cluster.existing": {"name": "shared", "location": DEV.region}}
    pools = [{"name": f"pool-{i}", "nodeCount": 16} for i in (1, 2)]
    renamed = review_of({**elsewhere, "cluster.name": "renamed", "tpu.pools": pools}, before=elsewhere)
    assert (renamed.refused, renamed.replaced) == ([], [])
    other = review_of({"cluster.existing": {"name": "other", "location": DEV.region}}, before=elsewhere)
    (line,) = other.replaced
    assert line.startswith("the stack moves from the cluster projects/") and "/clusters/shared to " in line
    assert "/clusters/other: the Kubernetes provider is REPLACED" in line and not other.refused


def test_back_from_a_cluster_made_elsewhere_to_one_of_the_stack():
    """GKE refuses to create a cluster under the name of the one the stack deployed onto; under another name the
    stack's objects move onto the new cluster."""
    elsewhere = {"cluster.existing": {"name": "shared", "location": DEV.region}}
    assert refused_keys(review_of({"cluster.name": "shared"}, before=elsewhere)) == ["cluster.name"]
    back = review_of({}, before=elsewhere)
    (line,) = back.replaced
    assert "moves from the cluster" in line and f"/clusters/{CLUSTER_NAME}: the Kubernetes provider is REPLACED" in line
    assert (back.refused, back.in_place, back.by_hand) == ([], [], [])  # the cluster and all on it are new


def test_the_lifecycle_output_names_the_provider_s_cluster_on_a_cluster_made_elsewhere():
    from tests.test_gcp_existing_cluster import LAB

    lab = run_stack(LAB, secrets=("cluster",))
    (provider,) = lab.of_type("pulumi:providers:kubernetes")
    facts = lab.raw_outputs["lifecycle"]
    assert facts["cluster"] == {"identifier": provider.input("clusterIdentifier")}
    assert (facts["systemPool"], facts["tpuPools"]) == ({}, {})


def test_a_new_network_under_the_same_cluster_name_is_refused_and_a_new_name_goes_through(runs):
    """The cluster would be replaced under the same clusterIdentifier: the provider only updated, nothing made in the
    new cluster. With a new name the provider is replaced, and the preview announces it."""
    message = refusal({"network.prefix": "other"}, previous_of(runs["dev"]))
    assert "network.prefix: moves the cluster to another network" in message
    assert "change cluster.name in the same `up`" in message
    run = run_stack({"network.prefix": "other", "cluster.name": "other"}, previous_outputs=previous_of(runs["dev"]))
    assert any(w.startswith(f"the GKE cluster {CLUSTER_NAME} will be REPLACED") for w in run.warnings)


def test_a_cluster_replacement_under_deletion_protection_is_refused_and_goes_through_without_it(runs):
    """A new cluster name replaces the cluster delete-first, after its pools and objects: with deletion protection on,
    the provider refuses that delete and the `up` stops with the pools gone. Off, the replacement is announced, with
    what the state's protection of the last `up` still does."""
    replacing = {"network.prefix": "other", "cluster.name": "other"}
    message = refusal({**replacing, "cluster.deletionProtection": True}, previous_of(runs["dev"]))
    assert f"cluster.deletionProtection: true while the `up` replaces the GKE cluster {CLUSTER_NAME}" in message
    assert "the provider refuses that delete" in message and "set it false, in an `up` of its own" in message
    run = run_stack(replacing, previous_outputs=previous_of(runs["dev"]))
    (line,) = [w for w in run.warnings if w.startswith(f"the GKE cluster {CLUSTER_NAME} will be REPLACED")]
    assert "if the last `up` left cluster.deletionProtection on" in line


def other_range(cidr: str, offset: int) -> str:
    """A range of ``cidr``'s size, ``offset`` of its own sizes further on: disjoint from it."""
    network = ipaddress.ip_network(cidr)
    return str(ipaddress.ip_network((int(network.network_address) + offset * network.num_addresses, network.prefixlen)))


def review_of(overrides: dict, before: dict | None = None) -> lifecycle_review.ChangeReview:
    """The review of the dev stack with ``overrides`` over its last `up` with ``before``: the preview's own rules on
    the exported facts, without a program run (test_a_new_network_under... runs one end to end)."""
    previous = lifecycle_review.lifecycle_facts(fixture_stack_config("dev", before))
    return lifecycle_review.review_changes(
        previous, lifecycle_review.lifecycle_facts(fixture_stack_config("dev", overrides)), str
    )


def refused_keys(review: lifecycle_review.ChangeReview) -> list[str]:
    return [problem.key for problem in review.refused]


def said(review: lifecycle_review.ChangeReview) -> list[str]:
    """What the preview warns of for ``review``, in its order (components/wiring.py announce_changes), for a review
    that refuses nothing (as the program's run of the change would not stop); the tests that run the program over a
    changed config (test_a_new_network_under..., test_the_first_up_after_...) hold that wiring."""
    assert review.refused == [], review.refused
    return review.replaced + review.in_place + review.by_hand


def warnings_of(run: ProgramRun | list[str]) -> list[str]:
    """A run's warnings, or the lines a review says (``said``)."""
    return run if isinstance(run, list) else run.warnings


@pytest.mark.parametrize(
    "key, value",
    [
        ("nodeCidr", other_range(DEV.network.node_cidr, 64)),
        ("podCidr", other_range(DEV.network.pod_cidr, 8)),
        ("serviceCidr", other_range(DEV.network.service_cidr, 16)),
        ("proxyOnlyCidr", other_range(DEV.network.proxy_only_cidr, 64)),
        ("mtu", 1500),
    ],
)
def test_a_range_or_mtu_the_running_cluster_cannot_take_is_refused_under_its_key(key, value):
    review = review_of({f"network.{key}": value})
    assert refused_keys(review) == [f"network.{key}"], review.refused
    assert "on a running stack" in review.refused[0].what
    # The stack whose last `up` predates these facts is not compared: its first `up` records them.
    previous = lifecycle_review.lifecycle_facts(DEV)
    del previous["network"]
    current = lifecycle_review.lifecycle_facts(fixture_stack_config("dev", {f"network.{key}": value}))
    assert not lifecycle_review.review_changes(previous, current, str).refused


def test_a_node_range_that_contains_the_old_one_grows_the_subnet_in_place():
    wider = str(ipaddress.ip_network(DEV.network.node_cidr).supernet())
    review = review_of({"network.nodeCidr": wider})
    assert not review.refused
    (line,) = [w for w in review.in_place if w.startswith("network.nodeCidr:")]
    assert f"grows from {DEV.network.node_cidr} to {wider} in place" in line


WEIGHTS = DEV.serving.weights_bucket.name


def test_a_bucket_moved_under_its_name_is_refused_and_a_new_name_says_what_becomes_of_the_old():
    """A bucket's region is fixed: the new one would need the name the kept old one still holds."""
    review = review_of({"project": "other-project"})
    (problem,) = [p for p in review.refused if p.key == "serving.weightsBucket.name"]
    assert f"the bucket {WEIGHTS} would be replaced under the same name" in problem.what
    assert "give the bucket another name" in problem.fix
    review = review_of({"serving.weightsBucket.name": "other-weights"})
    assert not review.refused
    (line,) = [w for w in review.replaced if w.startswith("serving.weightsBucket.name:")]
    assert f"the bucket {WEIGHTS} will be REPLACED by other-weights" in line and "left in the project" in line


def test_a_bucket_not_kept_on_destroy_is_said_to_be_deleted_with_its_data():
    unkept = {"serving.weightsBucket.keepOnDestroy": False}
    review = review_of({**unkept, "serving.weightsBucket.name": "other-weights"}, before=unkept)
    (line,) = [w for w in review.replaced if w.startswith("serving.weightsBucket.name:")]
    assert f"{WEIGHTS} is DELETED with everything in it before the new one is made" in line


def test_a_bucket_that_leaves_the_stack_is_said_to_stay_in_the_way_of_its_next_create_or_to_be_deleted():
    """Kept, the bucket is no longer the stack's but holds its name: an `up` that makes it again fails at the create,
    and only the `up` it leaves in can say so. Not kept, it goes with its data."""
    (line,) = [w for w in review_of({"serving.enabled": False}).replaced if w.startswith("serving.weightsBucket.name:")]
    assert f"the bucket {WEIGHTS} leaves the stack" in line and "stays in the project with its data" in line
    assert "An `up` that makes it again fails at its create" in line and "`pulumi import` it" in line
    unkept = {"serving.weightsBucket.keepOnDestroy": False}
    review = review_of({**unkept, "serving.weightsBucket.create": False}, before=unkept)
    assert f"serving.weightsBucket.name: the bucket {WEIGHTS} will be DELETED with everything in it" in review.replaced


def test_uninstalling_the_platform_or_moving_a_release_is_refused():
    (problem,) = review_of({"platform.install": False}).refused
    assert problem.key == "platform.install" and "pulumi state delete" in problem.fix
    (problem,) = review_of({"platform.kueue.namespace": "kueue-other"}).refused
    assert problem.key == "platform.kueue.namespace" and "'kueue-system' -> 'kueue-other'" in problem.what


def test_releases_the_stack_stops_installing_are_said_to_be_uninstalled():
    """A TPU v5e machine type ends dynamic slicing: Kueue, LeaderWorkerSet and the slice controller go with the TPU7x
    pools, Kueue's CRDs and queues with its release. Said loudly, not refused (the pools go in the same `up`); on a
    TPU7x machine type nothing is said of them."""
    v5e = {**stack_values("saxml")["tpu"], "zone": "us-central1-a"}
    unsliced = {
        "tpu": v5e,
        "serving.enabled": False,
        "checks.subslicing.enabled": False,
        "checks.superslicing.enabled": False,
    }
    review = review_of(unsliced)
    assert not review.refused
    (line,) = [w for w in review.replaced if w.startswith("platform:")]
    for release in ("kueue", "leaderWorkerSet", "sliceController"):
        assert release in line
    assert "jobset" not in line and "Kueue's CRDs" in line
    assert not [w for w in review_of({"tpu.zone": "us-central1-b"}).replaced if w.startswith("platform:")]


def test_the_workload_policy_is_replaced_by_a_new_one_on_a_new_name(runs):
    """The provider would update the name in place, addressing the policy by its new name, which does not exist."""
    (policy,) = runs["dev"].of_type("gcp:compute/resourcePolicy:ResourcePolicy")
    assert policy.options["replaceOnChanges"] == ["name"]


SAXML_POOLS = stack_values("saxml")["tpu"]["pools"]


def test_a_new_topology_alone_is_refused_and_a_new_pool_of_it_goes_through(runs):
    """The provider would update the pool's topology in place (not ForceNew) and resize the multi-host slice, which
    GKE refuses; under a new name the pool is a new one. With a fact that replaces the pool, it is made anew with
    the new topology: said, not refused."""
    larger = [{**pool, "topology": "8x8", "nodeCount": 16} for pool in SAXML_POOLS]
    with pytest.raises(pulumi.RunError) as raised:
        run_stack({"tpu.pools": larger}, stack="saxml", previous_outputs=previous_of(runs["saxml"]))
    name = SAXML_POOLS[0]["name"]
    assert f"tpu.pools[0].topology: '4x8' -> '8x8' on the running TPU pool {name}" in str(raised.value)
    assert "give it another name" in str(raised.value)
    previous = lifecycle_review.lifecycle_facts(fixture_stack_config("saxml"))

    def review(overrides: dict) -> lifecycle_review.ChangeReview:
        current = lifecycle_review.lifecycle_facts(fixture_stack_config("saxml", overrides))
        return lifecycle_review.review_changes(previous, current, str)

    renamed = review({"tpu.pools": [{**pool, "name": f"{pool['name']}-8x8"} for pool in larger]})
    assert not renamed.refused and [w for w in renamed.replaced if f"TPU pool {name} will be DELETED" in w]
    replaced = review({"tpu.pools": larger, "cluster.nodeServiceAccountId": "other-nodes"})
    assert not replaced.refused
    assert [w for w in replaced.replaced if f"TPU pool {name} will be REPLACED" in w and "'4x8' -> '8x8'" in w]


def test_a_new_node_service_account_replaces_the_pools_but_not_the_cluster():
    """The cluster's node config serves only the default pool of its create and is ignored after it: only the
    pools carry the account."""
    lines = said(review_of({"cluster.nodeServiceAccountId": "other-nodes"}))  # warned as in test_a_new_network_under...
    assert not [w for w in lines if "GKE cluster" in w], lines
    assert [w for w in lines if w.startswith(f"TPU pool {POOL_LAST} will be REPLACED")], lines


GOOGLE_ACCOUNT = "gcp:serviceaccount/account:Account"
NODE_ACCOUNT_GRANTS = (
    "gcp:projects/iAMMember:IAMMember",
    "gcp:artifactregistry/repositoryIamMember:RepositoryIamMember",
)


@pytest.mark.parametrize("stack", STACKS)
def test_a_new_google_account_id_makes_the_new_account_before_the_old_one_goes(runs, stack):
    """Every Google service account the stack makes is replaced new-first (components/resources.py
    NEW_ACCOUNT_FIRST). Left to the provider, a new id would delete the old account first (the bridge answers
    DeleteBeforeReplace for an auto-named `account_id` the program sets), and its pods or nodes would have no account
    that may do their work until the new one, its grants and its bindings exist."""
    accounts = runs[stack].of_type(GOOGLE_ACCOUNT)
    assert accounts
    for account in accounts:
        assert account.options.get("deleteBeforeReplace") is False, account.name


def test_a_saxml_account_s_annotation_names_its_google_account_once_the_account_may_use_the_bucket(runs):
    """The Kubernetes account's annotation is what its pods act as: on a new Google account id it is updated only
    after the new account, its bucket grant and its Workload Identity binding exist."""
    run = runs["saxml"]
    annotated = [
        (r.name, email)
        for r in run.of_type("kubernetes:core/v1:ServiceAccount")
        if (email := (r.input("metadata").get("annotations") or {}).get("iam.gke.io/gcp-service-account"))
    ]
    assert len(annotated) == 2, annotated
    for name, email in annotated:
        (account,) = [a.name for a in run.of_type(GOOGLE_ACCOUNT) if email.startswith(f"{a.input('accountId')}@")]
        needs = closure(run, name)
        assert account in needs, name
        (grant,) = [
            r.name
            for r in run.of_type("gcp:storage/bucketIAMMember:BucketIAMMember")
            if r.input("member").endswith(email)
        ]
        (binding,) = [
            r.name for r in run.of_type("gcp:serviceaccount/iAMMember:IAMMember") if account in r.dependencies
        ]
        assert {grant, binding} <= needs, name


@pytest.mark.parametrize("stack", ["dev", "saxml", "prod"])
def test_every_node_pool_waits_for_what_the_node_account_may_do(stack):
    """On a new node account (cluster.nodeServiceAccountId) the cluster stays and every pool is replaced onto the new
    account: a pool comes up only once that account holds its project roles and its read on each repository the
    nodes pull from, or the pods that come back on its nodes fail their pulls. The roles come through the cluster
    (whose registration waits for them at every `up`, changed or not), the reads directly."""
    run = run_stack(stack=stack)
    grants = {r.name for r in run.registrations if r.type in NODE_ACCOUNT_GRANTS and "node-sa" in r.dependencies}
    assert any(r.type == NODE_ACCOUNT_GRANTS[1] for r in run.registrations if r.name in grants), "no repository read"
    pools = run.of_type(NODE_POOL)
    assert len(pools) >= 2
    for pool in pools:
        assert grants <= closure(run, pool.name), (
            f"{pool.name} does not wait for {sorted(grants - closure(run, pool.name))}"
        )


@pytest.mark.parametrize(
    "key, chart, version",
    [
        ("jobset", "oci://registry.k8s.io/jobset/charts/jobset", "0.12.1"),
        ("leaderWorkerSet", "oci://registry.k8s.io/lws/charts/lws", "0.10.1"),
    ],
)
def test_a_chart_upgrade_whose_crds_helm_keeps_says_how_to_apply_them(key, chart, version):
    # the program's warning of it: test_the_first_up_after_the_upgrade_of_the_pins_asks_for_both_crd_steps...
    lines = said(review_of({f"platform.{key}.version": version}))
    (line,) = [w for w in lines if w.startswith(f"platform.{key}: the chart goes")]
    assert f"-> {version}, and Helm upgrades the controller but neither updates nor adds the CRDs" in line
    assert line.endswith(
        f"helm show crds {chart} --version {version} | kubectl apply --server-side --force-conflicts -f -"
    )


# The pins before this upgrade (JobSet 0.11.1, Kueue 0.17.4, LWS 0.8.0): what a running stack was deployed with.
EARLIER_PINS = {
    "platform.jobset.version": "0.11.1",
    "platform.kueue.version": "0.17.4",
    "platform.leaderWorkerSet.version": "0.8.0",
}


def by_hand_chart_steps(run: ProgramRun | list[str]) -> list[str]:
    return [w for w in warnings_of(run) if " the chart goes " in w]


def chart_goes(key: str) -> str:
    """The first words of the warning for platform.<key> moved from its earlier pin to the dev stack's."""
    now = getattr(
        stack_config.load(stack_values()).config.platform, {"leaderWorkerSet": "leader_worker_set"}.get(key, key)
    )
    return f"platform.{key}: the chart goes {EARLIER_PINS[f'platform.{key}.version']} -> {now.version}"


def test_the_first_up_after_the_upgrade_of_the_pins_asks_for_both_crd_steps_and_replaces_nothing():
    """LWS 0.10.0 adds two CRDs to its crds/ folder (disaggregatedsets, disaggregatedsetrolescalers) that its
    controller watches; JobSet 0.12.0 changes its one CRD. Kueue's CRDs are templates, upgraded with the release."""
    previous = run_stack(EARLIER_PINS)
    run = run_stack(previous_outputs=previous_of(previous))
    assert [line.split(", and Helm")[0] for line in by_hand_chart_steps(run)] == [
        chart_goes("jobset"),
        chart_goes("leaderWorkerSet"),
    ]
    assert not [w for w in run.warnings if "REPLACED" in w], run.warnings
    assert not [w for w in run.warnings if "platform.kueue" in w], run.warnings


def test_a_stack_whose_last_up_predates_the_chart_facts_is_warned_from_its_helm_releases():
    """Its lifecycle output has no chart versions (or there is none): the helmReleases output stands in."""
    previous = run_stack(EARLIER_PINS)
    lifecycle = {k: v for k, v in previous.raw_outputs["lifecycle"].items() if k != "chartsWithCrdsHelmKeeps"}
    releases = previous.raw_outputs["helmReleases"]
    assert releases["lws"] == EARLIER_PINS["platform.leaderWorkerSet.version"]
    for outputs in ({"lifecycle": lifecycle, "helmReleases": releases}, {"helmReleases": releases}):
        # The program's run with the first; the second through what __main__.py does with the outputs (the review of
        # previous_lifecycle's facts), the same path.
        if "lifecycle" in outputs:
            warned = run_stack(previous_outputs=outputs).warnings
        else:
            previous_facts = lifecycle_review.previous_lifecycle(outputs)
            warned = said(lifecycle_review.review_changes(previous_facts, lifecycle_review.lifecycle_facts(DEV), str))
        assert [line.split(", and Helm")[0] for line in by_hand_chart_steps(warned)] == [
            chart_goes("jobset"),
            chart_goes("leaderWorkerSet"),
        ], warned
        assert not [w for w in warned if "REPLACED" in w], warned


def test_a_kueue_chart_upgrade_needs_nothing_by_hand():
    """Kueue's CRDs are templates of its chart: Helm upgrades them with the release."""
    lines = said(review_of({}, before={"platform.kueue.version": "0.17.4"}))
    assert not by_hand_chart_steps(lines), lines


def test_the_charts_a_stack_installs():
    platform = platform_config.PlatformConfig()
    assert set(platform_config.installed_charts(platform, dynamic_slicing=True)) == {
        "jobset",
        "kueue",
        "leaderWorkerSet",
    }
    assert set(platform_config.installed_charts(platform, dynamic_slicing=False)) == {"jobset"}  # saxml
    none = platform.model_copy(update={"install": False})
    assert platform_config.installed_charts(none, dynamic_slicing=True) == {}


def test_new_node_labels_on_the_resource_flavor_in_use_are_refused(runs):
    """Only tpu7x slices dynamically today, so no config reaches this; the review refuses it all the same."""
    current = lifecycle_review.lifecycle_facts(stack_config.load(stack_values("dev")).config)
    previous = copy.deepcopy(current)
    previous["queues"]["acceleratorLabel"] = "tpu-older"
    review = lifecycle_review.review_changes(previous, current, str)
    assert [problem.key for problem in review.refused] == ["tpu.machineType"], review.refused
    assert lifecycle_review.review_changes(current, current, str).refused == []


@pytest.mark.parametrize("key", ["topologyName", "resourceFlavorName", "clusterQueueName"])
def test_renaming_a_kueue_object_in_use_is_refused(key):
    # the program's refusal of the review's problems: test_a_cluster_queue_renamed_with_the_local_queues_is_new_queues...
    (problem,) = [p for p in review_of({f"queues.{key}": "renamed"}).refused if p.key == f"queues.{key}"]
    assert "keep" in str(problem)


def test_a_cluster_queue_renamed_with_the_local_queues_is_new_queues_not_a_refused_repoint(runs):
    """Renamed LocalQueues are new objects made pointing at the new ClusterQueue (the twin runs that `up`); a stack
    whose last `up` did not export its LocalQueues' name is taken to keep it, and the repoint stays refused there."""
    renamed = {"queues.clusterQueueName": "renamed", "queues.localQueueName": "renamed-lq"}
    previous = previous_of(runs["dev"])
    assert run_stack(renamed, previous_outputs=previous).raw_outputs["clusterQueueName"] == "renamed"
    older = copy.deepcopy(previous)
    del older["lifecycle"]["queues"]["localQueueName"]
    with pytest.raises(pulumi.RunError, match=r"queues\.clusterQueueName: 'cq' -> 'renamed'"):
        run_stack(renamed, previous_outputs=older)


@pytest.mark.parametrize("stack", STACKS)
def test_pods_of_workload_identity_accounts_run_on_the_pod_network(runs, stack):
    """GKE gives hostNetwork pods no Workload Identity: they would reach GCS as the node's account."""

    def pod_specs(node):
        if isinstance(node, dict):
            if "containers" in node and isinstance(node.get("containers"), list):
                yield node
            for value in node.values():
                yield from pod_specs(value)
        elif isinstance(node, list):
            for value in node:
                yield from pod_specs(value)

    bound = {"sax-sa", "sax-admin", "model-server", "weights-staging"}
    checked = 0
    for obj in objects_of(runs[stack].registrations):
        for spec in pod_specs(obj.get("spec", {})):
            if spec.get("serviceAccountName") in bound:
                checked += 1
                assert not spec.get("hostNetwork"), f"{obj['kind']} {obj['metadata']['name']} runs on the host network"
    assert checked


def test_tpu_workloads_wait_until_the_slice_controller_webhook_serves(runs):
    """Its webhooks fail closed: a JobSet or LWS created before they serve is refused."""
    run = runs["dev"]
    gate = run.one("pulumi-python:dynamic/tpu-gke:ReadyGate", "slice-controller-webhook")
    assert "slice-controller" in gate.dependencies
    # the webhook configuration the slice controller's chart renders
    rendered = objects_of(run.registrations)
    webhooks = {o["metadata"]["name"] for o in rendered if o["kind"] == "MutatingWebhookConfiguration"}
    assert gate.input("webhook_configuration") in webhooks
    for workload in tpu_workloads(run):
        assert "slice-controller-webhook" in closure(run, workload.name), workload.name


def test_the_model_servers_wait_for_the_weights_staging_job_and_it_for_its_access(runs):
    run = runs["dev"]
    job = run.one("kubernetes:batch/v1:Job", "stage-model-weights")
    assert {
        "weights-staging-account",
        "staging-objectViewer",
        "staging-snapshot-objectUser",
        "weights-staging-script",
    } <= set(job.dependencies)
    # The Job runs as its own account: the model servers' account and grants are not its to wait for.
    assert not {"model-server-account", "weights-objectViewer", "weights-xla-cache-objectUser"} & closure(run, job.name)
    # The bucket grants wait for the bucket, so the Job cannot start before it exists.
    assert "weights" in closure(run, job.name)
    # Job creation passes the slice controller's fail-closed Job webhook and Kueue's.
    assert {"slice-controller-webhook", "kueue-objects"} <= set(job.dependencies)
    # It copies while the TPU pools come up: nothing TPU is on its path.
    assert not set(tpu_pools(run)) & closure(run, job.name)
    for name in ("vllm-prefill", "vllm-decode"):
        assert "stage-model-weights" in closure(run, name), f"{name} starts before the weights are staged"
    # The pod template of a Job is immutable and its name fixed: a change replaces it, old one first.
    assert job.options["replaceOnChanges"] == ["metadata.labels", "spec"]
    assert job.options["deleteBeforeReplace"] is True


def test_the_staging_job_waits_for_the_token_secret_when_there_is_one():
    run = run_stack({"serving.hfToken": "hf_abcdef"}, secrets=("serving",))
    assert "hf-token" in run.one("kubernetes:batch/v1:Job", "stage-model-weights").dependencies


def test_without_staging_the_model_servers_wait_for_no_job():
    run = run_stack({"serving.weightsStaging.enabled": False})
    assert not run.of_type("kubernetes:batch/v1:Job")
    assert "vllm-prefill" in {r.name for r in run.registrations}


# --- Network isolation on a running stack: every part in place, and said so ------------------------------


def lifecycle_before_private_clusters(run: ProgramRun) -> dict:
    """The lifecycle output of a stack whose last `up` predates private nodes (it exported no isolation facts)."""
    lifecycle = copy.deepcopy(run.raw_outputs["lifecycle"])
    del lifecycle["isolation"]
    return {"lifecycle": lifecycle}


def isolation_warnings(run: ProgramRun | list[str]) -> list[str]:
    keys = ("cluster.privateNodes", "tpu.pools[].privateNodes", "network.nat", "cluster.controlPlane")
    return [w for w in warnings_of(run) if w.startswith(keys)]


def test_the_first_up_after_private_clusters_came_says_what_each_part_does_and_replaces_nothing():
    previous = run_stack({"cluster.privateNodes": False, "cluster.controlPlane": {"dnsEndpoint": False}})
    run = run_stack(previous_outputs=lifecycle_before_private_clusters(previous))
    assert not [w for w in run.warnings if "REPLACED" in w], run.warnings
    lines = isolation_warnings(run)
    pool_lines = lines[2:-1]  # one a TPU pool
    assert [line.split(":")[0] for line in lines] == [
        "network.nat",
        "cluster.privateNodes",
        *["tpu.pools[].privateNodes or cluster.privateNodes"] * len(POOLS),
        "cluster.controlPlane.dnsEndpoint",
    ], lines
    assert f"Cloud NAT {PREFIX}-nat and its Cloud Router are created, before any node goes private" in lines[0]
    assert "the system node pool's nodes lose their external addresses IN PLACE" in lines[1]
    assert f"TPU pool {POOL_1} lose their external addresses IN PLACE" in pool_lines[0]
    assert "keeps its reservation cube" in pool_lines[0] and "move one TPU pool per `up`" in pool_lines[0]
    assert all(f"TPU pool {pool['name']}" in line for pool, line in zip(POOLS, pool_lines, strict=True))
    assert lines[-1].endswith(
        f"kubectl: `gcloud container clusters get-credentials {CLUSTER_NAME} --region {REGION} --project {PROJECT} --dns-endpoint`"
    )


def test_moving_one_cube_at_a_time_names_only_that_pool():
    staged = [*POOLS[:-1], {**POOLS[-1], "privateNodes": False}]
    first = run_stack({"tpu.pools": staged})
    assert first.one(NODE_POOL, POOL_LAST).input("networkConfig") == {"enablePrivateNodes": False}
    run = run_stack(previous_outputs=previous_of(first))
    assert [line.split(" IN PLACE")[0] for line in isolation_warnings(run)] == [
        f"tpu.pools[].privateNodes or cluster.privateNodes: the nodes of TPU pool {POOL_LAST} lose their external "
        "addresses"
    ]


def test_public_nodes_again_delete_the_nat_after_them():
    # the program's warnings of these: test_the_first_up_after_private_clusters_came..., test_moving_one_cube...
    lines = isolation_warnings(said(review_of({"cluster.privateNodes": False})))
    # the system pool's nodes and each TPU pool's
    assert len([line for line in lines if "get external addresses again IN PLACE" in line]) == 1 + len(POOLS)
    assert lines[-1] == (f"network.nat: Cloud NAT {PREFIX}-nat is deleted, after the nodes have external addresses")


@pytest.mark.parametrize(
    "control_plane, expected",
    [
        (
            {"ipEndpoint": "off"},
            "cluster.controlPlane.ipEndpoint: the control plane answers on no IP at all (the DNS-based endpoint only), "
            "in place; kubeconfigs that name its public IP stop working: outside the VPC, use "
            f"`gcloud container clusters get-credentials {CLUSTER_NAME} --region {REGION} --project {PROJECT} --dns-endpoint`",
        ),
        (
            {"authorizedNetworks": [{"cidr": "203.0.113.0/24", "name": "office"}]},
            "cluster.controlPlane.authorizedNetworks: the public IP admits only 203.0.113.0/24 (and no other Google "
            "Cloud address), in place",
        ),
        (
            {"dnsEndpoint": False},
            "cluster.controlPlane.dnsEndpoint: the DNS-based endpoint refuses traffic from outside Google Cloud, in "
            "place; the stack's kubeconfig and Kubernetes provider move to the IP endpoint (the provider is updated, "
            "not replaced), and kubeconfigs made with --dns-endpoint stop working",
        ),
    ],
)
def test_a_control_plane_change_is_in_place_and_says_what_clients_feel(control_plane, expected):
    # the program's warnings of these: test_the_first_up_after_private_clusters_came_says_what_each_part_does...
    lines = said(review_of({"cluster.controlPlane": control_plane}))
    assert isolation_warnings(lines) == [expected]
    assert not [w for w in lines if "REPLACED" in w]


def test_emptying_the_authorized_networks_is_left_to_gcloud():
    """The provider reads a missing master_authorized_networks_config as GKE's, which keeps the old list."""
    restricted = {"cluster.controlPlane": {"authorizedNetworks": [{"cidr": "203.0.113.0/24", "name": "o"}]}}
    # a by-hand step, which the program warns of as test_the_first_up_after_the_upgrade_of_the_pins... sees
    lines = said(review_of({}, before=restricted))
    (line,) = [w for w in lines if w.startswith("cluster.controlPlane.authorizedNetworks")]
    assert "the public IP still admits only 203.0.113.0/24" in line
    assert line.endswith(
        f"gcloud container clusters update {CLUSTER_NAME} --region {REGION} --no-enable-master-authorized-networks"
    )


def test_a_stack_on_a_cluster_made_elsewhere_has_no_isolation_facts():
    from tests.test_gcp_existing_cluster import LAB

    lab = run_stack(LAB, secrets=("cluster",))
    assert "isolation" not in lab.raw_outputs["lifecycle"]


# --- The cluster's CIS GKE settings on a running stack: in place, and what GKE then does said ------------------

HARDENED = {
    "cluster.binaryAuthorization": "PROJECT_SINGLETON_POLICY_ENFORCE",
    "cluster.rbacSecurityGroup": "gke-security-groups@example.com",
    "cluster.intranodeVisibility": True,
}


def hardening_warnings(run: ProgramRun | list[str]) -> list[str]:
    keys = ("cluster.intranodeVisibility", "cluster.binaryAuthorization", "cluster.rbacSecurityGroup")
    return [w for w in warnings_of(run) if w.startswith(keys)]


def lifecycle_before_hardening(run: ProgramRun) -> dict:
    """The lifecycle output of a stack whose last `up` predates these settings (it exported no hardening facts)."""
    lifecycle = copy.deepcopy(run.raw_outputs["lifecycle"])
    del lifecycle["hardening"]
    return {"lifecycle": lifecycle}


def test_the_first_up_of_the_prod_stack_after_the_hardening_says_what_each_setting_does():
    """The prod stack turns all three on: each in place, and the node restart of intranode visibility said first."""
    prod = run_stack(stack="prod")
    run = run_stack(stack="prod", previous_outputs=lifecycle_before_hardening(prod))
    assert not [w for w in run.warnings if "REPLACED" in w], run.warnings
    intranode, binary_authorization, group = hardening_warnings(run)
    assert intranode.startswith(
        "cluster.intranodeVisibility: turned on IN PLACE (the cluster is updated, not replaced)"
    )
    assert "GKE restarts the control plane and every node" in intranode
    assert "each TPU pool loses every slice of its cube at once" in intranode
    assert intranode.endswith("Make this `up` in the maintenance window")
    assert (
        "enforces the project's Binary Authorization policy, in place (its API enabled first)" in binary_authorization
    )
    assert "Running pods keep running" in binary_authorization
    assert group == (
        "cluster.rbacSecurityGroup: Google Groups for RBAC is turned on with gke-security-groups@example.com, in place: "
        "a RoleBinding that names a group nested in it grants the group's members its role"
    )
    assert hardening_warnings(run_stack(stack="prod", previous_outputs=previous_of(prod))) == []


def test_the_first_up_of_a_stack_that_leaves_them_off_says_nothing_of_them():
    """dev and saxml keep GKE's defaults, which is what their clusters had before these settings existed."""
    for stack in STACKS:  # the program's warnings over such an output: test_the_first_up_of_the_prod_stack_after...
        current = lifecycle_review.lifecycle_facts(fixture_stack_config(stack))
        previous = {key: value for key, value in copy.deepcopy(current).items() if key != "hardening"}
        assert "hardening" in current and "hardening" not in previous
        again = said(lifecycle_review.review_changes(previous, current, str))
        assert hardening_warnings(again) == [], stack


def test_turning_them_off_again_is_in_place_and_an_emptied_group_is_left_to_the_api():
    # the program's warnings of these: test_the_first_up_of_the_prod_stack_after_the_hardening_says_what_each...
    intranode, binary_authorization, group = hardening_warnings(said(review_of({}, before=HARDENED)))
    assert intranode.startswith("cluster.intranodeVisibility: turned off IN PLACE")
    assert "not documented in a source this program could read" in intranode
    assert binary_authorization == (
        "cluster.binaryAuthorization: the cluster no longer enforces the project's Binary Authorization policy, in "
        "place: every image is admitted again"
    )
    # The provider reads a missing authenticator_groups_config as GKE's, and gcloud only ever sets a group.
    assert group.startswith(
        "cluster.rbacSecurityGroup: the group is now empty, but the provider reads a missing "
        "authenticator_groups_config as GKE's, so GKE keeps reading the groups of RBAC from "
        "gke-security-groups@example.com"
    )
    assert group.endswith(
        f"clusters.update of projects/{PROJECT}/locations/{REGION}/clusters/{CLUSTER_NAME} with "
        '{"update": {"desiredAuthenticatorGroupsConfig": {"enabled": false}}}'
    )


def test_another_group_is_in_place_and_names_both():
    review = review_of(  # the program's warnings of these: test_the_first_up_of_the_prod_stack_after_the_hardening...
        {"cluster.rbacSecurityGroup": "gke-security-groups@example.org"},
        before={"cluster.rbacSecurityGroup": "gke-security-groups@example.com"},
    )
    assert hardening_warnings(said(review)) == [
        "cluster.rbacSecurityGroup: GKE reads the groups of RBAC from gke-security-groups@example.org instead of "
        "gke-security-groups@example.com, in place: bindings to groups nested only in gke-security-groups@example.com "
        "stop granting"
    ]


def test_a_stack_on_a_cluster_made_elsewhere_has_no_hardening_facts():
    from tests.test_gcp_existing_cluster import LAB

    lab = run_stack({**LAB, **HARDENED}, secrets=("cluster",))
    assert "hardening" not in lab.raw_outputs["lifecycle"] and hardening_warnings(lab) == []


# Each account, and each grant on a bucket, is created before the pods that run as it and deleted after them.
POD_ACCOUNTS = {
    "dev": {
        "stage-model-weights": {"weights-staging-account", "staging-objectViewer", "staging-snapshot-objectUser"},
        "subslice-check": {"slice-check-account"},
        "superslice-check": {"slice-check-account"},
        "vllm-prefill": {
            "model-server-account",
            "weights-bucketViewer",
            "weights-objectViewer",
            "weights-xla-cache-objectUser",
        },
        "vllm-decode": {
            "model-server-account",
            "weights-bucketViewer",
            "weights-objectViewer",
            "weights-xla-cache-objectUser",
        },
    },
    "saxml": {
        "admin-server": {"sax-admin", "sax-admin-gsa-object-user", "sax-admin-ksa-workload-identity", "sax-admin-gsa"},
        "model-servers": {"sax-sa", "sax-gsa-object-viewer", "sax-ksa-workload-identity", "sax-gsa"},
        "http-server": {"sax-sa", "sax-gsa-object-viewer", "sax-ksa-workload-identity", "sax-gsa"},
    },
}


@pytest.mark.parametrize("stack", STACKS)
def test_identities_and_grants_come_before_their_pods_and_go_after_them(runs, stack):
    run = runs[stack]
    create = {name: i for i, names in enumerate(create_waves(run.registrations)) for name in names}
    destroy = {name: i for i, names in enumerate(destroy_waves(run.registrations)) for name in names}
    for pods, identity in POD_ACCOUNTS[stack].items():
        assert identity <= closure(run, pods), f"{pods} does not wait for {sorted(identity - closure(run, pods))}"
        for name in identity:
            assert create[name] < create[pods] and destroy[name] > destroy[pods], (pods, name)


# --- NetworkPolicies: the allows with or before the deny ---------------------------------------

NETWORK_POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"


def network_policies(run: ProgramRun) -> list[Registration]:
    return list(run.of_type(NETWORK_POLICY))


def is_default_deny(r: Registration) -> bool:
    spec = r.input("spec")
    return spec["podSelector"] == {} and not spec.get("ingress")


def namespace_of(r: Registration) -> str:
    return str(r.input("metadata")["namespace"])


@pytest.mark.parametrize("stack", STACKS)
def test_each_namespace_denies_by_default_only_after_every_policy_that_admits_there(runs, stack):
    """Applied to a running namespace, a deny before an allow would cut its pods off a sender until the allow came:
    each default deny waits for the namespace and every other policy of it, and is deleted before them."""
    run = runs[stack]
    denies = [r for r in network_policies(run) if is_default_deny(r)]
    assert denies
    for deny in denies:
        namespace = namespace_of(deny)
        admitting = [r.name for r in network_policies(run) if namespace_of(r) == namespace and r is not deny]
        assert admitting, f"{namespace}: nothing admits any sender there"
        assert {*admitting, namespace} <= closure(run, deny.name), deny.name
        (wave,) = [i for i, w in enumerate(destroy_waves(run.registrations)) if deny.name in w]
        assert all(wave < i for i, w in enumerate(destroy_waves(run.registrations)) for name in admitting if name in w)


@pytest.mark.parametrize("stack", STACKS)
def test_network_policies_wait_for_their_namespace_alone(runs, stack):
    """Nothing else: no TPU pool, release or workload holds them (or the default deny that waits for them) back."""
    run = runs[stack]
    provider = {r.name for r in run.of_type("pulumi:providers:kubernetes")}
    for policy in network_policies(run):
        waits = set(depends_on(policy)) - provider
        others = {r.name for r in network_policies(run)}
        assert waits - others == {namespace_of(policy)}, (policy.name, waits)


@pytest.mark.parametrize("stack", STACKS)
def test_every_workload_starts_after_the_policy_that_admits_its_senders(runs, stack):
    """A pod starts with its senders admitted, and is deleted before its policy: never isolated without them."""
    from policy.network import isolates, pod_templates

    run = runs[stack]
    allows = [r for r in network_policies(run) if not is_default_deny(r)]
    kinds = ("LeaderWorkerSet", "JobSet", "Deployment")
    workloads = [r for r in run.registrations if r.type.split(":")[-1] in kinds and creates_something(r)]
    checked = 0
    for workload in workloads:
        body = {"metadata": workload.input("metadata"), "spec": workload.input("spec")}
        kind = workload.type.split(":")[-1]
        for template in pod_templates(kind, body, workload.name):
            for allow in allows:
                policy = {"metadata": allow.input("metadata"), "spec": allow.input("spec")}
                if isolates(policy, template.pod):
                    assert allow.name in closure(run, workload.name), (workload.name, allow.name)
                    checked += 1
    assert checked
    if stack == "dev":  # the router release runs the endpoint picker, whose pods the render does not show
        assert "endpoint-picker-network-policy" in closure(run, "router")


def test_the_first_up_with_network_policies_says_which_namespaces_it_isolates_and_replaces_nothing(runs):
    for stack, namespaces in (("dev", "llm-d-pd-disaggregation"), ("saxml", "sax")):
        lifecycle = copy.deepcopy(runs[stack].raw_outputs["lifecycle"])
        assert lifecycle.pop(lifecycle_review.DEFAULT_DENY_FACT) == [namespaces]
        run = run_stack(stack=stack, previous_outputs={"lifecycle": lifecycle})
        assert not [w for w in run.warnings if "REPLACED" in w], run.warnings
        (line,) = [w for w in run.warnings if w.startswith("network policies:")]
        assert f"every pod of {namespaces} accepts only what a NetworkPolicy admits, in place" in line
        assert "a pod you run there yourself" in line


def test_a_new_queue_namespace_is_announced_alone():
    # the program's warning of it: test_the_first_up_with_network_policies_says_which_namespaces_it_isolates...
    lines = said(review_of({"queues.namespaces": ["llm-d-pd-disaggregation", "team-b"]}))
    (line,) = [w for w in lines if w.startswith("network policies:")]
    assert "every pod of team-b accepts" in line and "llm-d-pd-disaggregation" not in line


# --- The Hugging Face token in Secret Manager: its grants, its class, and the add-on under them ----------------

SECRET_IAM = "gcp:secretmanager/secretIamMember:SecretIamMember"
ON_WITH_TOKEN_FILE = {
    "cluster.secretManager": True,
    "serving.hfTokenSecretVersion": f"projects/{PROJECT}/secrets/hf-token/versions/1",
}


@pytest.fixture(scope="module")
def token_file_run() -> ProgramRun:
    return run_stack(ON_WITH_TOKEN_FILE)


def test_the_secret_grants_wait_for_the_cluster_and_the_secret_manager_api(token_file_run):
    """The principals are in the pool GKE creates with the cluster; the grants go through Secret Manager's API."""
    run = token_file_run
    grants = run.of_type(SECRET_IAM)
    assert len(grants) == 2
    for grant in grants:
        assert {"gke-cluster", "secretmanager"} <= closure(run, grant.name), grant.name


def test_destroy_deletes_the_pods_before_the_class_and_the_grants_they_mount_with(token_file_run):
    """A pod's volume is unmounted when the pod goes: its class and its account's grant are deleted after it."""
    run = token_file_run
    for workload, grant in (
        ("vllm-prefill", "hf-token-model-server-secretAccessor"),
        ("vllm-decode", "hf-token-model-server-secretAccessor"),
        ("stage-model-weights", "hf-token-staging-secretAccessor"),
    ):
        needs = closure(run, workload)
        assert {"hf-token", grant} <= needs, workload
        waves = destroy_waves(run.registrations)
        wave_of = {name: index for index, names in enumerate(waves) for name in names}
        assert wave_of[workload] < wave_of["hf-token"] and wave_of[workload] < wave_of[grant], workload


def test_the_add_on_goes_off_only_in_the_up_after_the_pods_stop_mounting_it(token_file_run):
    """The cluster is updated before the pods change: turning the add-on off in the `up` that moves them off the
    token file would pull its driver from under their volumes."""
    previous = previous_of(token_file_run)
    with pytest.raises(pulumi.RunError) as raised:
        run_stack({"cluster.secretManager": False}, previous_outputs=previous)
    message = str(raised.value)
    assert "cluster.secretManager: false while the running model servers and staging Job mount" in message
    assert "turn it off in the next one" in message
    # The way down: first the pods move off the token file (the add-on stays on), then the add-on goes.
    moved = run_stack({"cluster.secretManager": True}, previous_outputs=previous)
    run_stack({"cluster.secretManager": False}, previous_outputs=previous_of(moved))
    # With serving off the pods are gone after the same `up`, after the cluster's update: refused as well (by the
    # review the first refusal above sees the program make).
    review = review_of({"serving.enabled": False, "cluster.secretManager": False}, before=ON_WITH_TOKEN_FILE)
    assert "cluster.secretManager" in refused_keys(review), review.refused


def test_turning_the_add_on_on_and_the_token_file_in_one_up_is_not_refused(runs):
    run_stack(ON_WITH_TOKEN_FILE, previous_outputs=previous_of(runs["dev"]))


NAMESPACE_TYPES = ("kubernetes:core/v1:Namespace", "kubernetes:core/v1:NamespacePatch")


def namespaces_used(r: Registration) -> set[str]:
    """The namespaces a resource puts objects in: its own, each of a ConfigGroup's objects', a release's."""
    if r.type == RELEASE:
        return {r.input("namespace")}
    if "objs" in r.inputs:
        return {o["metadata"]["namespace"] for o in r.inputs["objs"] if o["metadata"].get("namespace")}
    metadata = r.inputs.get("metadata") or {}
    return {metadata["namespace"]} if isinstance(metadata, dict) and metadata.get("namespace") else set()


@pytest.mark.parametrize("stack", STACKS)
def test_every_namespace_is_labelled_before_anything_in_it_and_goes_after_it(runs, stack):
    """The Pod Security labels are on a namespace before the first pod is created in it (a pod created before
    them would be held to nothing), and the namespace outlives what is in it."""
    run = runs[stack]
    made = {r.name for r in run.registrations if r.type in NAMESPACE_TYPES}
    create = {name: i for i, names in enumerate(create_waves(run.registrations)) for name in names}
    destroy = {name: i for i, names in enumerate(destroy_waves(run.registrations)) for name in names}
    checked = 0
    for r in kubernetes_objects(run):
        for namespace in namespaces_used(r) - {r.name}:
            assert namespace in made, f"{r.name} puts objects in {namespace}, which the stack does not make"
            assert namespace in closure(run, r.name), f"{r.name} does not wait for its namespace {namespace}"
            assert create[namespace] < create[r.name] and destroy[namespace] > destroy[r.name], (r.name, namespace)
            checked += 1
    assert checked >= 5, checked  # a pass over nothing would prove nothing


# --- Node boot on a running stack: each pool replaced, one cube per `up` -----------------------------


def lifecycle_before_node_boot(run: ProgramRun) -> dict:
    """The lifecycle output of a stack whose last `up` predates node boot (it exported no boot facts)."""
    lifecycle = copy.deepcopy(run.raw_outputs["lifecycle"])
    for facts in (lifecycle["systemPool"], *lifecycle["tpuPools"].values()):
        for key in lifecycle_review.BOOT_FACTS:
            facts.pop(key, None)
    del lifecycle["tpuPoolsProtected"]
    return {"lifecycle": lifecycle}


def replacements(run: ProgramRun | list[str]) -> dict[str, str]:
    """What the preview says it replaces: the pool (or "system") -> its line."""
    lines = {}
    for line in warnings_of(run):
        if line.startswith("TPU pool ") and " will be REPLACED" in line:
            lines[line.split()[2]] = line
        elif line.startswith("the system node pool will be REPLACED"):
            lines["system"] = line
    return lines


def tpu_pool_urn(stack: str, pool: str) -> str:
    return f"urn:pulumi:{stack}::tpu-dynamic-slicing::tpu-gke:gcp:TpuCapacity$gcp:container/nodePool:NodePool::{pool}"


def test_the_urn_of_a_tpu_pool_is_the_one_pulumi_state_unprotect_takes():
    from components.gcp.tpu_capacity import pool_urn

    pool = fixture_stack_config("prod").tpu.pools[0].name
    assert pool_urn("prod", "tpu-dynamic-slicing", pool) == tpu_pool_urn("prod", pool)
    assert run_stack(stack="prod").one(TPU_POOL, pool).parent == "tpu-capacity"  # no other parent


def test_the_first_up_after_node_boot_came_replaces_the_tpu7x_pools_of_dev_and_says_how_to_keep_serving(runs):
    run = run_stack(previous_outputs=lifecycle_before_node_boot(runs["dev"]))
    lines = replacements(run)
    assert sorted(lines) == pool_names("dev"), run.warnings
    for line in lines.values():
        assert "deleted before it is created again (secureBoot False -> True)" in line
        assert "replace one per `up`, with tpu.pools[].hardenedBoot false on the others for this one" in line
        assert "pulumi state unprotect" not in line  # dev's pools are not protected


def test_the_first_up_after_node_boot_came_changes_nothing_on_saxml(runs):
    run = run_stack(stack="saxml", previous_outputs=lifecycle_before_node_boot(runs["saxml"]))
    assert replacements(run) == {}


PROD_BOOT_KEY = stack_values("prod")["cluster"]["bootDiskEncryptionKey"]


def pool_names(stack: str) -> list[str]:
    """The TPU pools ``stack`` declares, sorted."""
    return sorted(pool.name for pool in stack_config.load(stack_values(stack)).config.tpu.pools)


def staged(stack: str) -> list[dict[str, object]]:
    """The stack's TPU pools, the last kept as made (hardenedBoot false)."""
    *first, last = ({"name": pool.name, "nodeCount": pool.node_count} for pool in fixture_stack_config(stack).tpu.pools)
    return [*first, {**last, "hardenedBoot": False}]


def test_the_first_up_of_prod_after_node_boot_replaces_every_pool_and_names_each_unprotect():
    before = lifecycle_before_node_boot(run_stack(stack="prod"))
    lines = replacements(run_stack(stack="prod", previous_outputs=before))
    assert sorted(lines) == sorted(["system", *pool_names("prod")])
    assert f"(bootDiskKey '' -> '{PROD_BOOT_KEY}')" in lines["system"]
    for pool in pool_names("prod"):
        assert f"(bootDiskKey '' -> '{PROD_BOOT_KEY}'; secureBoot False -> True)" in lines[pool]
        assert lines[pool].endswith(
            f"It is protected (tpu.protectPools): the preview stops at it until the state's flag is cleared, "
            f"`pulumi state unprotect '{tpu_pool_urn('prod', pool)}'`, and the `up` protects the new pool"
        )


def test_a_running_production_stack_replaces_one_cube_per_up():
    """A prod stack of two cubes. First `up`: the second pool kept as made (hardenedBoot false), so only the system
    pool and the first are replaced, with no advice to split further; the next `up`, without the override, replaces
    the second alone."""
    two = cubes(2)
    replaced, kept = two["tpu.pools"]
    older = lifecycle_before_node_boot(run_stack(two, stack="prod"))
    first = run_stack({"tpu.pools": [replaced, {**kept, "hardenedBoot": False}]}, stack="prod", previous_outputs=older)
    lines = replacements(first)
    assert sorted(lines) == ["system", replaced["name"]]
    assert "replace one per `up`" not in lines[replaced["name"]]
    assert tpu_pool_urn("prod", replaced["name"]) in lines[replaced["name"]]
    second = run_stack(two, stack="prod", previous_outputs=previous_of(first))
    assert sorted(replacements(second)) == [kept["name"]]
    assert tpu_pool_urn("prod", kept["name"]) in replacements(second)[kept["name"]]
    assert replacements(run_stack(two, stack="prod", previous_outputs=previous_of(second))) == {}


@pytest.mark.parametrize(
    "override, replaced, fragment",
    [
        ({"tpu.secureBoot": False}, [pool["name"] for pool in POOLS], "secureBoot True -> False"),
        (
            {"cluster.bootDiskEncryptionKey": "projects/my-keys/locations/global/keyRings/r/cryptoKeys/boot"},
            ["system", *(pool["name"] for pool in POOLS)],
            "bootDiskKey '' -> 'projects/my-keys/locations/global/keyRings/r/cryptoKeys/boot'",
        ),
        ({"tpu.pools": staged("dev")}, [POOL_LAST], "secureBoot True -> False"),
    ],
)
def test_a_change_of_a_running_stack_s_boot_replaces_the_pools_it_reaches(override, replaced, fragment):
    # the program's warnings of these: test_the_first_up_after_node_boot_came_replaces_the_tpu7x_pools_of_dev...
    warned = said(review_of(override))
    lines = replacements(warned)
    assert sorted(lines) == sorted(replaced)
    assert all(fragment in line for line in lines.values())
    assert not [w for w in warned if "GKE cluster" in w]  # its node config is read at its create only


# --- The service agents' grants on the Cloud KMS keys -----------------------------------------------

GRANT = "gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember"
SERVICE_IDENTITY = "gcp:projects/serviceIdentity:ServiceIdentity"
SERVICE = "gcp:projects/service:Service"
CLUSTER = "gcp:container/cluster:Cluster"
DEV_VALUES = stack_values("dev")
OWN_RING = f"projects/{DEV_VALUES['project']}/locations/{DEV_VALUES['region']}/keyRings/ring"
OWN_KEYS = {
    "cluster.secretsEncryptionKey": f"{OWN_RING}/cryptoKeys/secrets",
    "cluster.bootDiskEncryptionKey": f"{OWN_RING}/cryptoKeys/boot",
}
GKE_AGENT, COMPUTE_AGENT = "container-engine-robot", "compute-system"


def grants(run: ProgramRun) -> dict[tuple[str, str], Registration]:
    """(key, the agent's domain) -> its grant; two grants of one pair would collapse here, so the count is checked."""
    made = {(r.input("cryptoKeyId"), r.input("member").split("@")[1].split(".")[0]): r for r in run.of_type(GRANT)}
    assert len(made) == len(run.of_type(GRANT)), "one key granted twice to one agent"
    return made


def api_service(run: ProgramRun, api: str) -> str:
    (service,) = [s.name for s in run.of_type(SERVICE) if s.input("service") == api]
    return service


@pytest.fixture(scope="module")
def keyed() -> ProgramRun:
    return run_stack(OWN_KEYS)


def test_each_key_is_granted_once_to_the_agent_that_uses_it(keyed):
    secrets, boot = OWN_KEYS["cluster.secretsEncryptionKey"], OWN_KEYS["cluster.bootDiskEncryptionKey"]
    assert set(grants(keyed)) == {(secrets, GKE_AGENT), (boot, COMPUTE_AGENT)}
    for grant in keyed.of_type(GRANT):
        assert grant.input("role") == "roles/cloudkms.cryptoKeyEncrypterDecrypter"
    # one key for both: one grant per agent on it; every pool shares the boot disks' one grant
    same = run_stack({**OWN_KEYS, "cluster.bootDiskEncryptionKey": secrets})
    assert set(grants(same)) == {(secrets, GKE_AGENT), (secrets, COMPUTE_AGENT)}


def test_each_grant_waits_for_the_enablement_that_makes_its_agent(keyed):
    """GKE's agent is asked for (generateServiceIdentity) once its API is on, so it has the role the enablement gives
    it; Compute Engine's is there once its API is, and is never asked for (Google refuses: harness/gcp_model.py)."""
    by_agent = {agent: grant.name for (_, agent), grant in grants(keyed).items()}
    (identity,) = keyed.of_type(SERVICE_IDENTITY)
    assert identity.input("service") == "container.googleapis.com"
    assert api_service(keyed, "container.googleapis.com") in identity.dependencies
    assert identity.name in closure(keyed, by_agent[GKE_AGENT])
    assert api_service(keyed, "compute.googleapis.com") in closure(keyed, by_agent[COMPUTE_AGENT])


def test_the_cluster_and_every_pool_that_uses_a_key_wait_for_its_grant_and_no_other():
    """Each waits for the grant itself, not by chance through another (a pool made while the cluster exists already,
    its boot key newly set, waits for the grant all the same)."""
    run = run_stack({**OWN_KEYS, "tpu.pools": staged("dev")})
    by_agent = {agent: grant.name for (_, agent), grant in grants(run).items()}
    assert {by_agent[GKE_AGENT], by_agent[COMPUTE_AGENT]} <= set(run.one(CLUSTER, "gke-cluster").dependencies)
    for pool in ("system-pool", POOL_1):
        assert by_agent[COMPUTE_AGENT] in run.one(TPU_POOL, pool).dependencies, pool
    assert by_agent[COMPUTE_AGENT] not in run.one(TPU_POOL, POOL_LAST).dependencies  # boots from Google's key


def test_the_grants_outlive_the_cluster_and_pools_and_are_never_revoked_by_the_stack(keyed):
    """Destroy drops a grant from the state only after everything that uses its key is gone, and leaves the binding:
    the provider's delete removes the member whoever added it, and the agent is the whole project's."""
    wave = {name: i for i, names in enumerate(destroy_waves(keyed.registrations)) for name in names}
    users = ["gke-cluster", "system-pool", *tpu_pools(keyed)]
    for grant in keyed.of_type(GRANT):
        assert grant.options.get("retainOnDelete") is True, grant.name
        assert all(wave[user] < wave[grant.name] for user in users), grant.name


def test_a_key_of_another_project_is_not_granted_and_the_preview_says_how():
    ring = f"projects/team-keys/locations/{DEV_VALUES['region']}/keyRings/shared"
    run = run_stack({"cluster.bootDiskEncryptionKey": f"{ring}/cryptoKeys/boot"})
    assert not run.of_type(GRANT) and not run.of_type(SERVICE_IDENTITY)
    assert not [r for r in run.registrations if r.type == "tpu-gke:gcp:ServiceAgents"]
    (warning,) = [w for w in run.warnings if w.startswith("cluster.bootDiskEncryptionKey")]
    project = DEV_VALUES["project"]
    assert (
        f"gcloud kms keys add-iam-policy-binding boot --keyring shared --location {DEV_VALUES['region']} "
        f'--project team-keys --member "serviceAccount:service-$(gcloud projects describe {project} '
        "--format='value(projectNumber)')@compute-system.iam.gserviceaccount.com\" "
        "--role roles/cloudkms.cryptoKeyEncrypterDecrypter"
    ) in warning
    assert f"gcloud services enable compute.googleapis.com --project {project}" in warning
    assert f"TPU pool {POOL_1}" in warning and "system pool" in warning
    assert not [w for w in run_stack(OWN_KEYS).warnings if "add-iam-policy-binding" in w]


def test_a_running_stack_that_now_makes_its_grants_replaces_nothing():
    """The grants existed by hand: the first `up` after this change adds identical members (the provider merges them
    into the binding) and only new waits; no fact the preview compares changes."""
    prod = run_stack(stack="prod")
    again = run_stack(stack="prod", previous_outputs=previous_of(prod))
    assert replacements(again) == {}
    assert len(prod.of_type(GRANT)) == 2
