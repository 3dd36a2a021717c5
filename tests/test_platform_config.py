"""The platform and queues blocks: every bad value refused under its key before any resource."""

import pytest

from components.config_base import ImageReference, Problems
from components.platform.config import (
    RELEASE_IMAGES,
    PlatformConfig,
    chart_image,
    chart_own_image,
    validate_release_image,
)
from tests.conftest import assert_bad_input, run_stack

PLATFORM_BAD_INPUTS = [
    pytest.param({"queues.namespaces": []}, "queues.namespaces", "is empty", id="no-workload-namespace"),
    pytest.param(
        {"queues.namespaces": ["llm-d-pd-disaggregation", "llm-d-pd-disaggregation"]},
        "queues.namespaces",
        "lists a namespace twice",
        id="workload-namespace-twice",
    ),
    pytest.param(
        {
            "platform.kueue": {
                "chart": "oci://registry.k8s.io/kueue/charts/kueue",
                "version": "v0",
                "namespace": "kueue-system",
            }
        },
        "platform.kueue.version",
        "not an exact version",
        id="floating-chart-version",
    ),
    pytest.param(
        {"platform.jobset": {"chart": "registry.k8s.io/jobset", "version": "0.12.0", "namespace": "jobset-system"}},
        "platform.jobset.chart",
        "not an oci://",
        id="chart-without-scheme",
    ),
    pytest.param(
        {
            "platform.leaderWorkerSet": {
                "chart": "oci://registry.k8s.io/lws/charts/lws",
                "version": "0.10.0",
                "namespace": "lws",
            }
        },
        "platform.leaderWorkerSet.namespace",
        "lws-system",
        id="lws-outside-lws-system",
    ),
    pytest.param(
        {"queues.namespaces": ["llm-d-pd-disaggregation", "kueue-system"]},
        "queues.namespaces[1]",
        "also the namespace of the platform.kueue release, which enforces Pod Security's restricted level",
        id="workloads-in-a-controllers-namespace",
    ),
    pytest.param(
        {
            "platform.jobset": {
                "chart": "oci://registry.k8s.io/jobset/charts/jobset",
                "version": "0.12.0",
                "namespace": "llm-d-pd-disaggregation",
            }
        },
        "queues.namespaces[0]",
        "also the namespace of the platform.jobset release",
        id="a-controller-in-the-workloads-namespace",
    ),
    pytest.param(
        {"queues.priorityClasses.high.value": 3_000_000_000},
        "queues.priorityClasses.high.value",
        "3000000000 is outside -2147483648-2147483647",
        id="priority-beyond-int32",
    ),
    pytest.param(
        {"platform.drainTimeoutMinutes": 0}, "platform.drainTimeoutMinutes", "0 is not 1 or more", id="no-drain-time"
    ),
    pytest.param(
        {"platform.kueueController": {"replicas": 0}},
        "platform.kueueController.replicas",
        "0 is not 1 or more",
        id="no-kueue-replicas",
    ),
    pytest.param(
        {"platform.kueueController": {"requests": {"cpu": "two", "memory": "4Gi"}}},
        "platform.kueueController.requests.cpu",
        "not a Kubernetes quantity",
        id="bad-quantity",
    ),
    pytest.param(
        {"platform.sliceController": {"namespace": "tpu-system"}},
        "platform.sliceController.namespace",
        "use slice-controller-system",
        id="slice-controller-outside-its-namespace",
    ),
    pytest.param(
        {"platform.sliceController": {"digest": "sha256:abc"}},
        "platform.sliceController.digest",
        "sha256:<64 hex digits>",
        id="short-digest",
    ),
    pytest.param(
        {"queues.namespaces": ["Serving_NS"]}, "queues.namespaces[0]", "not a Kubernetes name", id="bad-namespace"
    ),
    pytest.param(
        {"queues.clusterQueueName": "CQ"},
        "queues.clusterQueueName",
        "not a Kubernetes name",
        id="bad-queue-name",
    ),
    pytest.param(
        {"queues.priorityClasses": {"medium": {"name": "medium", "value": 500}}},
        "queues.priorityClasses.medium.value",
        "not above low",
        id="priorities-out-of-order",
    ),
    pytest.param(
        {"queues.priorityClasses.medium.name": "low-priority-1000"},
        "queues.priorityClasses.medium.name",
        "'low-priority-1000' is also the low level's WorkloadPriorityClass",
        id="two-levels-of-one-priority-class",
    ),
]


DIGEST = "sha256:" + "a" * 64

# A chart's controller image override: that image, at the chart's release, with a digest (a mirror is images.mirror).
PLATFORM_BAD_INPUTS += [
    pytest.param(
        {"platform.kueue.image": f"registry.k8s.io/kueue/kueue:v0.17.7@{DIGEST}"},
        "platform.kueue.image",
        "is tagged v0.17.7, but kueue 0.17.8 runs v0.17.8",
        id="kueue-image-of-another-release",
    ),
    pytest.param(
        {"platform.jobset.image": f"registry.k8s.io/jobset/jobset-controller:v0.12.0@{DIGEST}"},
        "platform.jobset.image",
        "is not jobset, the image jobset 0.12.0 runs",
        id="jobset-image-of-another-name",
    ),
    pytest.param(
        {"platform.leaderWorkerSet.image": "registry.k8s.io/lws/lws:v0.10.0"},
        "platform.leaderWorkerSet.image",
        "has no digest, and a digest is all an override adds",
        id="lws-image-without-digest",
    ),
    pytest.param(
        {"platform.leaderWorkerSet.image": f"registry.k8s.io/lws/lws@{DIGEST}"},
        "platform.leaderWorkerSet.image",
        "has a digest but no tag",
        id="lws-image-digest-only",
    ),
    pytest.param(
        {"platform.kueue.image": "registry.k8s.io/kueue/kueue:main"},
        "platform.kueue.image",
        "floating tag 'main'",
        id="kueue-image-floating",
    ),
    pytest.param(
        {"platform.kueue.image": "registry.k8s.io/kueue/kueue:main"},
        "platform.kueue.image",
        "write registry.k8s.io/kueue/kueue:v0.17.8@sha256:<digest> (`crane digest registry.k8s.io/kueue/kueue:v0.17.8`)",
        id="kueue-image-fix-names-the-command",
    ),
]


# A chart version as its registry tags it: JobSet's and Kueue's charts are published without the release tag's v.
PLATFORM_BAD_INPUTS += [
    pytest.param(
        {"platform.jobset.version": "v0.12.0"},
        "platform.jobset.version",
        "v0.12.0 has a leading v, but the jobset chart is published as 0.12.0 only",
        id="jobset-version-with-v",
    ),
    pytest.param(
        {"platform.kueue.version": "v0.17.8"}, "platform.kueue.version", "write 0.17.8", id="kueue-version-with-v"
    ),
]


def test_a_chart_published_under_both_tags_takes_either_and_warns_of_neither():
    """LeaderWorkerSet's chart is promoted as v0.10.0 and 0.10.0: either is its pinned release, whose ports the stack
    records (no warning), and the corrected JobSet and Kueue versions are accepted."""
    run = run_stack({"platform.leaderWorkerSet.version": "v0.10.0", "platform.jobset.version": "0.12.0"})
    assert not [w for w in run.warnings if "webhook ports" in w], run.warnings


@pytest.mark.parametrize("override, key, fragment", PLATFORM_BAD_INPUTS)
def test_bad_platform_input_names_its_key_and_registers_nothing(override, key, fragment):
    assert_bad_input(override, key, fragment)


def test_an_unpinned_override_is_refused_for_that_alone():
    """A floating tag is the one fault: no second problem for that tag not being the release's, nor for its digest."""
    problems = Problems()
    kueue = "registry.k8s.io/kueue/kueue"
    validate_release_image("platform.kueue.image", f"{kueue}:main", kueue, "v0.17.8", "kueue 0.17.8", problems)
    assert len(problems.items) == 1
    assert "floating tag 'main'" in problems.items[0].what


def test_the_saxml_cell_may_not_share_the_jobset_controllers_namespace():
    assert_bad_input({"saxml.namespace": "jobset-system"}, "saxml.namespace", "platform.jobset release", stack="saxml")


@pytest.mark.parametrize("key", ["jobset", "kueue", "leaderWorkerSet"])
def test_each_pinned_release_writes_its_controller_image_once_at_that_release(key):
    """RELEASE_IMAGES holds each default chart's controller image at the chart's release, once: a chart moved without
    its image would run the new tag (by design), but the default stack would then lose the digest Renovate pins."""
    chart = getattr(PlatformConfig(), {"leaderWorkerSet": "leader_worker_set"}.get(key, key))
    own = chart_own_image(key, chart)
    (written,) = [i for i in RELEASE_IMAGES.values() if ImageReference.parse(i).name == own.name]
    assert ImageReference.parse(written).tag == own.tag
    assert chart_image(key, chart) == written
