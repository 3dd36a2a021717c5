"""The cluster platform: Helm releases and the Kueue queue objects, validated against the CRDs."""

import copy
import shutil

import pytest
import yaml

from components import stack as stack_config
from components.config_base import ImageReference
from components.platform.config import (
    CHART_IMAGE_VALUES,
    CHART_RELEASE_NAMES,
    CONTROLLERS_POD_SECURITY,
    RELEASE_IMAGES,
    WORKLOADS_POD_SECURITY,
    chart_image,
    pod_security_version,
)
from components.platform.releases import SLICE_CONTROLLER_CHART
from components.resources import APPLY_ANNOTATIONS
from components.tpu.topology import GB, HOSTNAME_LABEL, TPU_RESOURCE
from harness.twin_nodes import tpu_nodes
from tests.conftest import PROJECT_ROOT, pulled, run_stack, stack_values, with_overrides
from tests.crd_schemas import HALVES, crd_errors, strict_errors
from tools.render import kubernetes_objects

RELEASE = "kubernetes:helm.sh/v3:Release"
# The dev fixture stack's validated config: what the expectations below come from.
CONFIG = stack_config.load(stack_values()).config
SLICE_CONTROLLER_CHART_VERSION = yaml.safe_load((PROJECT_ROOT / SLICE_CONTROLLER_CHART / "Chart.yaml").read_text())[
    "version"
]


def objects_of(run, kind):
    return [o for o in kubernetes_objects(run.registrations) if o["kind"] == kind]


@pytest.mark.parametrize("key", sorted(CHART_RELEASE_NAMES))
def test_helm_releases_are_pinned_and_on_the_cluster_provider(dev_run, key):
    """Each published chart as its platform.<key> block declares it, at an exact version."""
    block = getattr(CONFIG.platform, _snake(key))
    namespace = block.namespace
    release = dev_run.one(RELEASE, CHART_RELEASE_NAMES[key])
    assert release.parent == "platform"
    assert (release.input("chart"), release.input("version"), namespace) == (block.chart, block.version, namespace)
    assert release.input("namespace") == namespace
    assert all(part.isdigit() for part in release.input("version").split(".")), "an exact version, no range"
    assert release.input("atomic") is True
    assert release.input("createNamespace") is False, "Helm would make the namespace without its Pod Security labels"
    assert namespace in release.dependencies  # its labelled namespace first
    assert "skipAwait" not in release.inputs  # Helm waits until the controllers are ready
    assert release.provider.split("::")[-2] == "gke", release.provider


def test_kueue_values_size_the_controller_and_enable_the_integrations(dev_run):
    values = dev_run.one(RELEASE, "kueue").input("values")
    manager = values["controllerManager"]
    sizing = CONFIG.platform.kueue_controller
    assert manager["replicas"] == sizing.replicas
    assert manager["manager"]["resources"] == {
        "requests": sizing.requests.model_dump(),
        "limits": sizing.limits.model_dump(),
    }
    # a drain may take a replica, never all of them
    assert manager["podDisruptionBudget"]["enabled"] is True
    assert 0 < manager["podDisruptionBudget"]["minAvailable"] < sizing.replicas
    configuration = yaml.safe_load(values["managerConfig"]["controllerManagerConfigYaml"])
    assert {"jobset.x-k8s.io/jobset", "leaderworkerset.x-k8s.io/leaderworkerset", "pod"} <= set(
        configuration["integrations"]["frameworks"]
    )


@pytest.mark.parametrize("half", HALVES)
def test_every_object_validates_strictly_against_its_schema(dev_run, half):
    objects = kubernetes_objects(dev_run.registrations)
    assert objects
    errors = [e for o in objects for e in strict_errors(o, half)]
    assert errors == []


@pytest.mark.parametrize(
    "kind, mutate, fragment",
    [
        ("ClusterQueue", lambda o: o["spec"].update(admissionChecks=["ac"]), "admissionChecks"),
        ("Topology", lambda o: o["spec"]["levels"][0].update(nodelabel="x"), "nodelabel"),
        ("ResourceFlavor", lambda o: o["spec"].update(topology="slice-topology"), "topology"),
        ("WorkloadPriorityClass", lambda o: o.update(valu=5), "valu"),
    ],
)
@pytest.mark.external  # the CRD files of schemas.lock
def test_a_misspelled_field_is_rejected(dev_run, kind, mutate, fragment):
    obj = copy.deepcopy(objects_of(dev_run, kind)[0])
    mutate(obj)
    errors = crd_errors(obj)
    assert errors and any(fragment in e for e in errors), errors


def test_the_topology_levels_are_labels_of_every_tpu_node_from_the_widest_to_one_host(dev_run):
    """Kueue places a slice by the Topology's levels: each is a label GKE gives every TPU node of the stack (the
    twin's nodes, harness/twin_nodes.py), from the widest domain to the narrowest, each domain of a level inside one
    of the level above, and the last is the node itself."""
    (topology,) = objects_of(dev_run, "Topology")
    levels = [level["nodeLabel"] for level in topology["spec"]["levels"]]
    nodes = [n["metadata"]["labels"] for n in tpu_nodes(CONFIG)]
    for labels in nodes:
        assert set(levels) <= set(labels)
    alone = [len({labels[level] for labels in nodes}) for level in levels]
    assert alone == sorted(alone), dict(zip(levels, alone, strict=True))
    # nested: a level's value says the values of every level above it
    within = [len({tuple(labels[level] for level in levels[: i + 1]) for labels in nodes}) for i in range(len(levels))]
    assert within == alone
    assert levels[-1] == HOSTNAME_LABEL and alone[-1] == len(nodes)


def test_queue_objects_refer_to_each_other_and_to_the_tpu_nodes(dev_run):
    (topology,) = objects_of(dev_run, "Topology")
    (flavor,) = objects_of(dev_run, "ResourceFlavor")
    # the flavor is the stack's TPU nodes, placed by the Topology
    for node in tpu_nodes(CONFIG):
        assert flavor["spec"]["nodeLabels"].items() <= node["metadata"]["labels"].items()
    assert flavor["spec"]["topologyName"] == topology["metadata"]["name"]
    (check,) = objects_of(dev_run, "AdmissionCheck")
    assert check["spec"]["controllerName"] == "accelerator.gke.io/slice"  # the slice controller's
    (queue,) = objects_of(dev_run, "ClusterQueue")
    assert queue["spec"]["admissionChecksStrategy"] == {"admissionChecks": [{"name": check["metadata"]["name"]}]}
    ((queue_flavor,),) = [group["flavors"] for group in queue["spec"]["resourceGroups"]]
    assert queue_flavor["name"] == flavor["metadata"]["name"]
    # the admission plan's model (components/tpu/admission.py): a higher priority preempts a lower one
    assert queue["spec"]["preemption"] == {"withinClusterQueue": "LowerPriority"}
    local_queues = objects_of(dev_run, "LocalQueue")
    assert sorted(q["metadata"]["namespace"] for q in local_queues) == sorted(CONFIG.queues.namespaces)
    for local_queue in local_queues:
        assert local_queue["metadata"]["name"] == CONFIG.queues.local_queue_name
        assert local_queue["metadata"]["annotations"] == APPLY_ANNOTATIONS
        assert local_queue["spec"] == {"clusterQueue": queue["metadata"]["name"]}
    priorities = {o["metadata"]["name"]: o["value"] for o in objects_of(dev_run, "WorkloadPriorityClass")}
    levels = CONFIG.queues.priority_classes.levels()
    assert priorities == {priority.name: priority.value for _, priority in levels}
    values = [priority.value for _, priority in levels]
    assert values == sorted(set(values)), "each level above the one below it"


def quotas(run):
    (queue,) = objects_of(run, "ClusterQueue")
    ((flavor,),) = [group["flavors"] for group in queue["spec"]["resourceGroups"]]
    return {r["name"]: r["nominalQuota"] for r in flavor["resources"]}


def capacity(config):
    """What the TPU nodes GKE makes for the stack's pools hold together (harness/twin_nodes.py): the quota."""
    nodes = tpu_nodes(config)
    total = {key: sum(int(n["status"]["capacity"][key]) for n in nodes) for key in (TPU_RESOURCE, "cpu", "memory")}
    return {TPU_RESOURCE: str(total[TPU_RESOURCE]), "cpu": str(total["cpu"]), "memory": f"{total['memory'] // GB}G"}


def test_quota_is_the_real_capacity_of_the_pools(dev_run):
    assert quotas(dev_run) == capacity(CONFIG)


@pytest.mark.parametrize("pools", [3, 4])
def test_quota_follows_the_number_of_cubes(pools):
    overrides = {"tpu.pools": [{"name": f"cube-{i}", "nodeCount": 16} for i in range(pools)]}
    config = stack_config.load(with_overrides(stack_values(), overrides)).config
    assert quotas(run_stack(overrides)) == capacity(config)
    # nodes = pools x nodes per pool: the chips grow with the pools
    assert int(capacity(config)[TPU_RESOURCE]) == pools * 16 * config.tpu.machine.chips_per_host


def test_kueue_objects_wait_for_the_kueue_release_and_namespaces(dev_run):
    group = dev_run.one("kubernetes:yaml/v2:ConfigGroup", "kueue-objects")
    assert group.parent == "queues"
    assert {"kueue", "llm-d-pd-disaggregation"} <= set(group.dependencies)
    assert group.provider.split("::")[-2] == "gke"


def test_each_workload_namespace_gets_a_local_queue():
    teams = ["team-a", "team-b"]
    run = run_stack({"queues.namespaces": teams, "serving.namespace": teams[0]})
    assert sorted(o["metadata"]["namespace"] for o in objects_of(run, "LocalQueue")) == teams
    namespaces = [r for r in run.registrations if r.type == NAMESPACE]
    assert sorted(r.input("metadata.name") for r in namespaces) == teams


NAMESPACE, NAMESPACE_PATCH = "kubernetes:core/v1:Namespace", "kubernetes:core/v1:NamespacePatch"
CONTROLLER_NAMESPACES = sorted(
    [
        *(getattr(CONFIG.platform, key).namespace for key in ("jobset", "kueue", "leader_worker_set")),
        CONFIG.platform.slice_controller.namespace,
    ]
)
ENFORCE, ENFORCE_VERSION = "pod-security.kubernetes.io/enforce", "pod-security.kubernetes.io/enforce-version"


def test_the_controllers_namespaces_are_labelled_by_patches_that_their_releases_wait_for(dev_run):
    """Helm made these namespaces on a running stack: a patch labels them in place there (a Namespace resource
    would fail with AlreadyExists), and makes them on a new stack; its delete leaves them, as Helm's did."""
    patches = {r.name: r for r in dev_run.registrations if r.type == NAMESPACE_PATCH}
    assert sorted(patches) == CONTROLLER_NAMESPACES
    for name, patch in patches.items():
        assert patch.parent == "platform" and patch.provider.split("::")[-2] == "gke"
        labels = patch.input("metadata.labels")
        assert (labels[ENFORCE], labels[ENFORCE_VERSION]) == (
            CONTROLLERS_POD_SECURITY,
            pod_security_version(CONFIG.cluster),
        ), name
        assert patch.input("metadata.annotations") == APPLY_ANNOTATIONS  # takes the labels from any other manager
    releases = {r.input("namespace"): r for r in dev_run.registrations if r.type == RELEASE}
    assert set(releases) == {*CONTROLLER_NAMESPACES, *CONFIG.queues.namespaces}  # the router's is the queues'
    for namespace in CONTROLLER_NAMESPACES:
        assert namespace in releases[namespace].dependencies


def test_the_workload_namespaces_enforce_baseline_pinned_to_the_clusters_minor():
    run = run_stack(
        {"queues.namespaces": ["team-a", "team-b"], "serving.namespace": "team-a", "cluster.version": "1.37.1-gke.100"}
    )
    minor = "v1.37"  # of cluster.version
    watching = {
        "pod-security.kubernetes.io/warn": "restricted",
        "pod-security.kubernetes.io/warn-version": "latest",
        "pod-security.kubernetes.io/audit": "restricted",
        "pod-security.kubernetes.io/audit-version": "latest",
    }
    for namespace in (r for r in run.registrations if r.type == NAMESPACE):
        labels = namespace.input("metadata.labels")
        assert labels == {ENFORCE: WORKLOADS_POD_SECURITY, ENFORCE_VERSION: minor, **watching}
    patches = [r for r in run.registrations if r.type == NAMESPACE_PATCH]
    assert {p.input("metadata.labels")[ENFORCE_VERSION] for p in patches} == {minor}


def test_a_stack_that_installs_nothing_labels_no_controllers_namespace():
    run = run_stack({"platform.install": False})
    assert [r.name for r in run.registrations if r.type == NAMESPACE_PATCH] == []


@pytest.mark.parametrize(
    "shapes",
    [["4x4x8"], ["2x2x2", "4x4x8"], ["2x2x1", "2x2x2", "4x4x8"], ["2x4x4"]],
    ids=["super-only", "dev", "a-smaller-shape-added", "one-sub-slice"],
)
def test_adding_or_removing_a_slice_shape_never_changes_the_immutable_topology(dev_run, shapes):
    """Kueue refuses any change to Topology.spec.levels: the levels must not follow tpu.sliceShapes."""
    run = run_stack(
        {
            "tpu.sliceShapes": shapes,
            "checks.subslicing.enabled": "2x2x2" in shapes,
            "checks.superslicing.enabled": "4x4x8" in shapes,
            "serving.enabled": "2x2x2" in shapes,
        }
    )
    (before,) = objects_of(dev_run, "Topology")
    (after,) = objects_of(run, "Topology")
    assert after == before


def test_slice_controller_release_comes_from_the_local_chart_after_the_controllers(dev_run):
    release = dev_run.one(RELEASE, "slice-controller")
    controller = CONFIG.platform.slice_controller
    assert release.input("chart") == SLICE_CONTROLLER_CHART
    assert release.input("version") == SLICE_CONTROLLER_CHART_VERSION
    assert release.input("namespace") == controller.namespace
    assert release.input("values") == {
        "createNamespace": False,  # the program makes it, with its Pod Security labels
        "replicas": controller.replicas,
        "webhookNamespaces": CONFIG.queues.namespaces,  # the webhooks see the workloads' namespaces only
        "image": {"repository": pulled(controller.image), "tag": controller.tag, "digest": controller.digest},
    }
    assert {"jobset", "kueue", "lws", "slice-controller-system"} <= set(release.dependencies)
    assert release.provider.split("::")[-2] == "gke"


def test_slice_controller_image_can_be_pinned_by_digest():
    digest = "sha256:" + "ab" * 32
    run = run_stack({"platform.sliceController": {"digest": digest}})
    assert run.one(RELEASE, "slice-controller").input("values")["image"]["digest"] == digest


MIRROR = "europe-docker.pkg.dev/my-org-artifacts/mirror"
CHART_DIGEST, SLICE_CONTROLLER_DIGEST = "sha256:" + "c" * 64, "sha256:" + "ab" * 32


@pytest.fixture(scope="module")
def mirrored_run():
    """The dev stack under an image mirror, with each chart's controller image and the slice controller pinned by
    digest: one run for every chart's case below (each reads its own release's values) and the slice controller's."""
    images = {}
    for key in CHART_IMAGE_VALUES:
        image = ImageReference.parse(chart_image(key, getattr(CONFIG.platform, _snake(key))))
        images[f"platform.{key}.image"] = f"{image.name}:{image.tag}@{CHART_DIGEST}"
    return run_stack(
        {"images.mirror": MIRROR, **images, "platform.sliceController": {"digest": SLICE_CONTROLLER_DIGEST}}
    )


@pytest.mark.parametrize("key", sorted(CHART_IMAGE_VALUES))
def test_each_chart_s_controller_image_is_written_out_where_its_chart_reads_it(dev_run, mirrored_run, key):
    """The chart's own image at its release (as its packaging writes it, by the digest recorded for that release
    when there is one), set in the values so the release shows it; a mirror takes its registry, and a digest rides
    in the tag (the charts read `<repository>:<tag>`)."""

    def at(values, keys):
        for part in keys:
            values = values[part]
        return values

    name, path = CHART_RELEASE_NAMES[key], CHART_IMAGE_VALUES[key]
    image = ImageReference.parse(chart_image(key, getattr(CONFIG.platform, _snake(key))))
    assert image.name == ImageReference.parse(RELEASE_IMAGES[key]).name
    tag = f"{image.tag}@{image.digest}" if image.digest else image.tag
    assert at(dev_run.one(RELEASE, name).input("values"), path) == {"repository": pulled(image.name), "tag": tag}
    assert at(mirrored_run.one(RELEASE, name).input("values"), path) == {
        "repository": f"{MIRROR}/{image.name}",
        "tag": f"{image.tag}@{CHART_DIGEST}",
    }


def test_a_recorded_digest_belongs_to_its_release_only():
    """JobSet moved to another release runs that release's tag, never the digest recorded for v0.12.0."""
    other = "0.12.1"
    assert other != CONFIG.platform.jobset.version
    run = run_stack({"platform.jobset.version": other})
    assert run.one(RELEASE, "jobset").input("values")["image"] == {
        "repository": pulled(ImageReference.parse(RELEASE_IMAGES["jobset"]).name),
        "tag": f"v{other}",
    }


def test_the_slice_controller_comes_from_the_mirror_under_docker_hub_s_name(mirrored_run):
    assert mirrored_run.one(RELEASE, "slice-controller").input("values")["image"] == {
        "repository": "europe-docker.pkg.dev/my-org-artifacts/mirror/docker.io/tpuongke/kueue-slice-controller",
        "tag": "v0.8.0-200",
        "digest": SLICE_CONTROLLER_DIGEST,
    }


def test_release_versions_are_a_stack_output(dev_run):
    releases = {r.name: r.input("version") for r in dev_run.registrations if r.type == RELEASE}
    platform = {CHART_RELEASE_NAMES[key] for key in CHART_RELEASE_NAMES} | {"slice-controller"}
    assert dev_run.outputs["helmReleases"] == {name: releases[name] for name in sorted(platform)}


def test_a_change_to_any_file_of_the_local_chart_changes_the_release(dev_run, tmp_path):
    """Helm diffs a local chart's release by its inputs: the digest of the chart's files is one of them."""
    from components.manifests import MANIFESTS
    from components.platform.releases import chart_digest

    chart = MANIFESTS / "charts" / "slice-controller"
    release = dev_run.one(RELEASE, "slice-controller")
    assert release.input("description") == f"chart files sha256:{chart_digest(chart)}"

    copy = tmp_path / "chart"
    shutil.copytree(chart, copy)
    assert chart_digest(copy) == chart_digest(chart)
    template = copy / "templates" / "deployment.yaml"
    template.write_text(
        template.read_text().replace("terminationGracePeriodSeconds: 10", "terminationGracePeriodSeconds: 11")
    )
    assert chart_digest(copy) != chart_digest(chart), "a template edit without a version bump would not apply"
    (copy / "templates" / "extra.yaml").write_text("")
    assert len({chart_digest(copy), chart_digest(chart)}) == 2


def test_the_leaderworkerset_release_runs_its_manager_under_the_runtimes_seccomp_profile(dev_run):
    """The chart sets none (kubernetes-sigs/lws v0.10.0 charts/lws/values.yaml); restricted needs it."""
    values = dev_run.one(RELEASE, "lws").input("values")
    assert values["podSecurityContext"] == {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
    assert values["image"]["manager"] == {"repository": pulled("registry.k8s.io/lws/lws"), "tag": "v0.10.0"}


def _snake(key: str) -> str:
    """A stack-file key's field name: leaderWorkerSet -> leader_worker_set."""
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in key)
