"""The cluster platform: Helm releases and the Kueue queue objects, validated against the CRDs."""

import copy
import shutil

import pytest
import yaml

from components.resources import APPLY_ANNOTATIONS
from tests.conftest import pulled, run_stack
from tests.crd_schemas import HALVES, crd_errors, strict_errors
from tools.render import kubernetes_objects

RELEASE = "kubernetes:helm.sh/v3:Release"


def objects_of(run, kind):
    return [o for o in kubernetes_objects(run.registrations) if o["kind"] == kind]


@pytest.mark.parametrize(
    "name, chart, version, namespace",
    [
        ("jobset", "oci://registry.k8s.io/jobset/charts/jobset", "0.12.0", "jobset-system"),
        ("kueue", "oci://registry.k8s.io/kueue/charts/kueue", "0.17.8", "kueue-system"),
        ("lws", "oci://registry.k8s.io/lws/charts/lws", "0.10.0", "lws-system"),
    ],
)
def test_helm_releases_are_pinned_and_on_the_cluster_provider(dev_run, name, chart, version, namespace):
    release = dev_run.one(RELEASE, name)
    assert release.parent == "platform"
    assert (release.input("chart"), release.input("version"), release.input("namespace")) == (chart, version, namespace)
    assert release.input("atomic") is True
    assert release.input("createNamespace") is False, "Helm would make the namespace without its Pod Security labels"
    assert namespace in release.dependencies  # its labelled namespace first
    assert "skipAwait" not in release.inputs  # Helm waits until the controllers are ready
    assert release.provider.split("::")[-2] == "gke", release.provider


def test_kueue_values_size_the_controller_and_enable_the_integrations(dev_run):
    values = dev_run.one(RELEASE, "kueue").input("values")
    manager = values["controllerManager"]
    assert manager["replicas"] == 2
    assert manager["manager"]["resources"] == {
        "requests": {"cpu": "2", "memory": "4Gi"},
        "limits": {"cpu": "4", "memory": "8Gi"},
    }
    assert manager["podDisruptionBudget"] == {"enabled": True, "minAvailable": 1}
    configuration = yaml.safe_load(values["managerConfig"]["controllerManagerConfigYaml"])
    assert configuration["kind"] == "Configuration"
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


def test_queue_objects_follow_the_reference(dev_run):
    (topology,) = objects_of(dev_run, "Topology")
    assert [level["nodeLabel"] for level in topology["spec"]["levels"]] == [
        "cloud.google.com/gce-topology-block",
        "cloud.google.com/gke-tpu-partition-4x4x4-id",
        "cloud.google.com/gke-tpu-partition-2x4x4-id",
        "cloud.google.com/gke-tpu-partition-2x2x4-id",
        "cloud.google.com/gke-tpu-partition-2x2x2-id",
        "cloud.google.com/gke-tpu-partition-2x2x1-id",
        "kubernetes.io/hostname",
    ]
    (flavor,) = objects_of(dev_run, "ResourceFlavor")
    assert flavor["spec"] == {
        "nodeLabels": {"cloud.google.com/gke-tpu-accelerator": "tpu7x"},
        "topologyName": "slice-topology",
    }
    (check,) = objects_of(dev_run, "AdmissionCheck")
    assert check["spec"]["controllerName"] == "accelerator.gke.io/slice"
    (queue,) = objects_of(dev_run, "ClusterQueue")
    assert queue["spec"]["admissionChecksStrategy"] == {"admissionChecks": [{"name": "ac"}]}
    assert queue["spec"]["preemption"] == {"withinClusterQueue": "LowerPriority"}
    (local_queue,) = objects_of(dev_run, "LocalQueue")
    assert local_queue["metadata"] == {
        "name": "lq",
        "namespace": "llm-d-pd-disaggregation",
        "annotations": APPLY_ANNOTATIONS,
    }
    assert local_queue["spec"] == {"clusterQueue": "cq"}
    priorities = {o["metadata"]["name"]: o["value"] for o in objects_of(dev_run, "WorkloadPriorityClass")}
    assert priorities == {"low-priority-1000": 1000, "medium-priority-2000": 2000, "high-priority-3000": 3000}


def quotas(run):
    (queue,) = objects_of(run, "ClusterQueue")
    ((flavor,),) = [group["flavors"] for group in queue["spec"]["resourceGroups"]]
    return {r["name"]: r["nominalQuota"] for r in flavor["resources"]}


def test_quota_is_the_real_capacity_of_two_cubes(dev_run):
    # 32 nodes x (4 chips, 224 vCPU, 960 GB) of tpu7x-standard-4t.
    assert quotas(dev_run) == {"google.com/tpu": "128", "cpu": "7168", "memory": "30720G"}


def test_quota_follows_the_number_of_cubes():
    run = run_stack({"tpu.pools": [{"name": f"cube-{i}", "nodeCount": 16} for i in range(3)]})
    assert quotas(run) == {"google.com/tpu": "192", "cpu": "10752", "memory": "46080G"}


def test_kueue_objects_wait_for_the_kueue_release_and_namespaces(dev_run):
    group = dev_run.one("kubernetes:yaml/v2:ConfigGroup", "kueue-objects")
    assert group.parent == "queues"
    assert {"kueue", "llm-d-pd-disaggregation"} <= set(group.dependencies)
    assert group.provider.split("::")[-2] == "gke"


def test_each_workload_namespace_gets_a_local_queue():
    run = run_stack({"queues.namespaces": ["team-a", "team-b"], "serving.namespace": "team-a"})
    assert sorted(o["metadata"]["namespace"] for o in objects_of(run, "LocalQueue")) == ["team-a", "team-b"]
    namespaces = [r for r in run.registrations if r.type == NAMESPACE]
    assert sorted(r.input("metadata.name") for r in namespaces) == ["team-a", "team-b"]


NAMESPACE, NAMESPACE_PATCH = "kubernetes:core/v1:Namespace", "kubernetes:core/v1:NamespacePatch"
CONTROLLER_NAMESPACES = ["jobset-system", "kueue-system", "lws-system", "slice-controller-system"]
ENFORCE, ENFORCE_VERSION = "pod-security.kubernetes.io/enforce", "pod-security.kubernetes.io/enforce-version"


def test_the_controllers_namespaces_are_labelled_by_patches_that_their_releases_wait_for(dev_run):
    """Helm made these namespaces on a running stack: a patch labels them in place there (a Namespace resource
    would fail with AlreadyExists), and makes them on a new stack; its delete leaves them, as Helm's did."""
    patches = {r.name: r for r in dev_run.registrations if r.type == NAMESPACE_PATCH}
    assert sorted(patches) == CONTROLLER_NAMESPACES
    for name, patch in patches.items():
        assert patch.parent == "platform" and patch.provider.split("::")[-2] == "gke"
        labels = patch.input("metadata.labels")
        assert (labels[ENFORCE], labels[ENFORCE_VERSION]) == ("restricted", "v1.36"), name
        assert patch.input("metadata.annotations") == APPLY_ANNOTATIONS  # takes the labels from any other manager
    releases = {r.input("namespace"): r for r in dev_run.registrations if r.type == RELEASE}
    assert set(releases) == {*CONTROLLER_NAMESPACES, "llm-d-pd-disaggregation"}  # the router's is the queues'
    for namespace in CONTROLLER_NAMESPACES:
        assert namespace in releases[namespace].dependencies


def test_the_workload_namespaces_enforce_baseline_pinned_to_the_clusters_minor():
    run = run_stack(
        {"queues.namespaces": ["team-a", "team-b"], "serving.namespace": "team-a", "cluster.version": "1.37.1-gke.100"}
    )
    watching = {
        "pod-security.kubernetes.io/warn": "restricted",
        "pod-security.kubernetes.io/warn-version": "latest",
        "pod-security.kubernetes.io/audit": "restricted",
        "pod-security.kubernetes.io/audit-version": "latest",
    }
    for namespace in (r for r in run.registrations if r.type == NAMESPACE):
        labels = namespace.input("metadata.labels")
        assert labels == {ENFORCE: "baseline", ENFORCE_VERSION: "v1.37", **watching}
    patches = [r for r in run.registrations if r.type == NAMESPACE_PATCH]
    assert {p.input("metadata.labels")[ENFORCE_VERSION] for p in patches} == {"v1.37"}


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
    assert release.input("chart") == "./manifests/charts/slice-controller"
    assert release.input("version") == "0.3.1"
    assert release.input("namespace") == "slice-controller-system"
    assert release.input("values") == {
        "createNamespace": False,
        "replicas": 2,
        "webhookNamespaces": ["llm-d-pd-disaggregation"],
        "image": {"repository": pulled("tpuongke/kueue-slice-controller"), "tag": "v0.8.0-200", "digest": ""},
    }
    assert {"jobset", "kueue", "lws", "slice-controller-system"} <= set(release.dependencies)
    assert release.provider.split("::")[-2] == "gke"


def test_slice_controller_image_can_be_pinned_by_digest():
    digest = "sha256:" + "ab" * 32
    run = run_stack({"platform.sliceController": {"digest": digest}})
    assert run.one(RELEASE, "slice-controller").input("values")["image"]["digest"] == digest


# JobSet's controller comes by the digest its promotion to registry.k8s.io recorded (kubernetes/k8s.io#9456); the
# others by their release tag until a stack pins them.
JOBSET_DIGEST = "sha256:e75536f1135b7bb2f19f8c3b620782fbdd9091d73398e3a272f9a5fed322980d"


@pytest.mark.parametrize(
    "name, path, image, own_digest",
    [
        ("jobset", ("image",), ("registry.k8s.io/jobset/jobset", "v0.12.0"), JOBSET_DIGEST),
        ("kueue", ("controllerManager", "manager", "image"), ("registry.k8s.io/kueue/kueue", "v0.17.8"), None),
        ("lws", ("image", "manager"), ("registry.k8s.io/lws/lws", "v0.10.0"), None),
    ],
)
def test_each_chart_s_controller_image_is_written_out_where_its_chart_reads_it(dev_run, name, path, image, own_digest):
    """The chart's own image at its release (as its packaging writes it), set in the values so the release shows
    it; a mirror takes its registry, and a digest rides in the tag (the charts read `<repository>:<tag>`)."""

    def at(values, keys):
        for key in keys:
            values = values[key]
        return values

    tag = f"{image[1]}@{own_digest}" if own_digest else image[1]
    assert at(dev_run.one(RELEASE, name).input("values"), path) == {"repository": pulled(image[0]), "tag": tag}
    digest = "sha256:" + "c" * 64
    key = {"lws": "leaderWorkerSet"}.get(name, name)
    mirrored = run_stack(
        {
            "images.mirror": "europe-docker.pkg.dev/my-org-artifacts/mirror",
            f"platform.{key}.image": f"{image[0]}:{image[1]}@{digest}",
        }
    )
    assert at(mirrored.one(RELEASE, name).input("values"), path) == {
        "repository": f"europe-docker.pkg.dev/my-org-artifacts/mirror/{image[0]}",
        "tag": f"{image[1]}@{digest}",
    }


def test_a_recorded_digest_belongs_to_its_release_only():
    """JobSet moved to another release runs that release's tag, never the digest recorded for v0.12.0."""
    run = run_stack({"platform.jobset.version": "0.12.1"})
    assert run.one(RELEASE, "jobset").input("values")["image"] == {
        "repository": pulled("registry.k8s.io/jobset/jobset"),
        "tag": "v0.12.1",
    }


def test_the_slice_controller_comes_from_the_mirror_under_docker_hub_s_name():
    digest = "sha256:" + "ab" * 32
    run = run_stack(
        {
            "images.mirror": "europe-docker.pkg.dev/my-org-artifacts/mirror",
            "platform.sliceController": {"digest": digest},
        }
    )
    assert run.one(RELEASE, "slice-controller").input("values")["image"] == {
        "repository": "europe-docker.pkg.dev/my-org-artifacts/mirror/docker.io/tpuongke/kueue-slice-controller",
        "tag": "v0.8.0-200",
        "digest": digest,
    }


def test_release_versions_are_a_stack_output(dev_run):
    assert dev_run.outputs["helmReleases"] == {
        "jobset": "0.12.0",
        "kueue": "0.17.8",
        "lws": "0.10.0",
        "slice-controller": "0.3.1",
    }


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
