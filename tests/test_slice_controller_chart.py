"""The local slice-controller Helm chart: lint, render and schema-validate it, offline.

Rendering uses helm-python-sdk (Helm's Go SDK through ctypes), so no `helm` binary and no
cluster are needed. Every rendered object is validated with kubernetes-validate in strict mode
(unknown fields rejected) through the suite's shared helper, tests.crd_schemas.core_errors.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from harness.gke_network import NAMESPACE_NAME_LABEL
from tests.conftest import PROJECT_ROOT, stack_values
from tests.crd_schemas import core_errors
from tests.slice_controller import WEBHOOKS

helm = pytest.importorskip("helm_python", reason="helm-python-sdk is not installed (pin it in requirements-dev.txt)")

CHART = PROJECT_ROOT / "manifests" / "charts" / "slice-controller"
RELEASE = "slice-controller"
NAMESPACE = "slice-controller-system"
# The chart's defaults, which a default render must carry: the render shows their values, the tests what follows.
DEFAULTS = yaml.safe_load((CHART / "values.yaml").read_text())
IMAGE = DEFAULTS["image"]["repository"]
APP_VERSION = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]
DIGEST = "sha256:" + "0123456789abcdef" * 4
WEBHOOK_SERVICE = "slice-controller-webhook-service"
CERT_SECRET = "slice-controller-webhook-server-cert"
DEPLOYMENT = "slice-controller-controller-manager"

# Lint as for the Kubernetes minor the dev stack's cluster runs (cluster.version). Object schemas
# are checked by the suite's shared strict helper (tests/crd_schemas.py, kubernetes-validate).
KUBERNETES_VERSION = ".".join(stack_values()["cluster"]["version"].split(".")[:2])

# (kind, namespace, name); namespace None for cluster-scoped objects.
EXPECTED_OBJECTS = {
    ("Namespace", None, NAMESPACE),
    ("ServiceAccount", NAMESPACE, "slice-controller-controller-manager"),
    ("Role", NAMESPACE, "slice-controller-leader-election-role"),
    ("RoleBinding", NAMESPACE, "slice-controller-leader-election-rolebinding"),
    ("Role", NAMESPACE, "slice-controller-certificate-role"),
    ("RoleBinding", NAMESPACE, "slice-controller-certificate-rolebinding"),
    ("ClusterRole", None, "slice-controller-manager-role"),
    ("ClusterRoleBinding", None, "slice-controller-manager-rolebinding"),
    ("ClusterRole", None, "slice-controller-metrics-auth-role"),
    ("ClusterRoleBinding", None, "slice-controller-metrics-auth-rolebinding"),
    ("ClusterRole", None, "slice-controller-metrics-reader"),
    ("Secret", NAMESPACE, CERT_SECRET),
    ("Service", NAMESPACE, "slice-controller-controller-manager-metrics-service"),
    ("Service", NAMESPACE, WEBHOOK_SERVICE),
    ("Deployment", NAMESPACE, DEPLOYMENT),
    ("PodDisruptionBudget", NAMESPACE, DEPLOYMENT),
    ("NetworkPolicy", NAMESPACE, DEPLOYMENT),
    ("MutatingWebhookConfiguration", None, "slice-controller-mutating-webhook-configuration"),
}

CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "MutatingWebhookConfiguration"}

# The feature gates the binary registers at that commit (slice/internal/features/features.go). It
# exits at start on any other (k8s.io/component-base featuregate: "unrecognized feature gate"), such
# as ShorterSliceNameLength, removed by xpk#1183.
KNOWN_FEATURE_GATES = {
    "UseRetryMechanismForSliceCreation",
    "FailOnUntoleratedDegradedSlice",
    "TopologyFromNodeSelectorOrAffinity",
}

# (apiGroup, resource) -> verbs of the manager ClusterRole: upstream's config/rbac/role.yaml less
# secrets, which only the certificate Role grants, in the release namespace.
EXPECTED_MANAGER_RULES = {
    ("", "events"): {"create", "patch", "update", "watch"},
    ("", "nodes"): {"get", "list", "watch"},
    ("", "pods"): {"get", "list", "watch"},
    ("accelerator.gke.io", "slices"): {"create", "delete", "get", "list", "patch", "update", "watch"},
    ("accelerator.gke.io", "slices/finalizers"): {"update"},
    ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"): {"get", "list", "update", "watch"},
    ("batch", "jobs"): {"get", "list", "patch", "update", "watch"},
    ("jobset.x-k8s.io", "jobsets"): {"get", "list", "patch", "update", "watch"},
    ("leaderworkerset.x-k8s.io", "leaderworkersets"): {"get", "list", "patch", "update", "watch"},
    ("kueue.x-k8s.io", "admissionchecks"): {"get", "list", "watch"},
    ("kueue.x-k8s.io", "admissionchecks/status"): {"get", "patch", "update"},
    ("kueue.x-k8s.io", "workloads/status"): {"get", "patch", "update"},
    ("kueue.x-k8s.io", "workloads"): {"create", "get", "list", "patch", "update", "watch"},
}


@pytest.fixture(scope="module")
def chart() -> Iterator[Any]:
    with helm.Chart.load(CHART) as loaded:
        yield loaded


@pytest.fixture(scope="module")
def render(chart: Any) -> Any:
    """``render(values=None, namespace=NAMESPACE)``: every object the chart renders.

    Renders are cached per module; each call returns deep copies, so a test may mutate them.
    """
    cache: dict[tuple[str, str], list[dict[str, Any]]] = {}

    def _render(values: dict[str, Any] | None = None, namespace: str = NAMESPACE) -> list[dict[str, Any]]:
        key = (json.dumps(values or {}, sort_keys=True), namespace)
        if key not in cache:
            manifests = chart.render(values or {}, name=RELEASE, namespace=namespace)
            cache[key] = [doc for text in manifests.values() for doc in yaml.safe_load_all(text) if doc]
        return copy.deepcopy(cache[key])

    return _render


def identity(obj: dict[str, Any]) -> tuple[str, str | None, str]:
    return obj["kind"], obj["metadata"].get("namespace"), obj["metadata"]["name"]


def only(objects: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [o for o in objects if o["kind"] == kind and name in (None, o["metadata"]["name"])]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def granted(role: dict[str, Any]) -> dict[tuple[str, str], set[str]]:
    """(apiGroup, resource) -> verbs of a Role or ClusterRole, over all its rules."""
    verbs: dict[tuple[str, str], set[str]] = {}
    for rule in role["rules"]:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                verbs.setdefault((group, resource), set()).update(rule["verbs"])
    return verbs


def flag_port(container: dict[str, Any], flag: str) -> int:
    """The port of a ``--flag=:port`` bind address of the manager."""
    (value,) = [a.split("=", 1)[1] for a in container["args"] if a.startswith(f"{flag}=")]
    return int(value.rsplit(":", 1)[1])


def manager(objects: list[dict[str, Any]]) -> dict[str, Any]:
    containers = only(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["manager"]
    return containers[0]


# --- lint and values schema -------------------------------------------------------------------


def test_lint_finds_no_errors_or_warnings() -> None:
    report = helm.lint(CHART, strict=True, namespace=NAMESPACE, kube_version=f"v{KUBERNETES_VERSION}.0")
    assert report["total_charts_linted"] == 1
    assert report["errors"] == []
    # Severity 1 is informational ("icon is recommended"); 2 warning, 3 error.
    assert [m for m in report["messages"] if m["severity"] >= 2] == []


def test_chart_metadata(chart: Any) -> None:
    assert chart.name == RELEASE  # the program installs it under its own name
    assert chart.metadata["appVersion"] == APP_VERSION


@pytest.mark.parametrize(
    "values",
    [
        pytest.param({"replicaz": 2}, id="misspelled-key"),
        pytest.param({"image": {"digest": "sha256:abc"}}, id="short-digest"),
        pytest.param({"image": {"tag": "v1", "registry": "x"}}, id="unknown-image-key"),
        pytest.param({"replicas": "2"}, id="replicas-as-string"),
        pytest.param({"args": "--leader-elect"}, id="args-not-a-list"),
        pytest.param({"podSecurityVersion": "1.36"}, id="pod-security-version-without-v"),
    ],
)
def test_values_schema_rejects_bad_values(chart: Any, values: dict[str, Any]) -> None:
    with pytest.raises(helm.HelmValuesError):
        chart.render(values, name=RELEASE, namespace=NAMESPACE)
    assert helm.lint(CHART, values)["errors"], "lint must report the same values error"


# --- what is rendered -------------------------------------------------------------------------


def test_default_render_is_exactly_the_reference_objects(render: Any) -> None:
    objects = render()
    assert sorted(map(identity, objects), key=str) == sorted(EXPECTED_OBJECTS, key=str)


def test_namespace_object_is_optional(render: Any) -> None:
    objects = render({"createNamespace": False})
    assert set(map(identity, objects)) == EXPECTED_OBJECTS - {("Namespace", None, NAMESPACE)}


def test_namespace_labels(render: Any) -> None:
    objects = render()
    labels = only(objects, "Namespace")["metadata"]["labels"]
    # the namespace carries the manager pods' own labels
    assert only(objects, "Deployment")["spec"]["selector"]["matchLabels"].items() <= labels.items()
    security = {k.removeprefix("pod-security.kubernetes.io/"): v for k, v in labels.items() if "pod-security" in k}
    modes = ("enforce", "warn", "audit")
    assert set(security) == {*modes, *(f"{mode}-version" for mode in modes)}
    # the manager's pod meets the restricted profile: tests/itest/test_lab_pod_security.py
    assert {security[mode] for mode in modes} == {"restricted"}
    assert {security[f"{mode}-version"] for mode in modes} == {DEFAULTS["podSecurityVersion"]}
    pinned = only(render({"podSecurityVersion": "v1.36"}), "Namespace")["metadata"]["labels"]
    assert pinned["pod-security.kubernetes.io/enforce-version"] == "v1.36"


def test_everything_is_in_the_release_namespace(render: Any) -> None:
    objects = render()
    namespaced = [o for o in objects if o["kind"] not in CLUSTER_SCOPED]
    assert {o["metadata"]["namespace"] for o in namespaced} == {NAMESPACE}
    subjects = [s for o in objects if o["kind"].endswith("Binding") for s in o["subjects"]]
    assert {s["namespace"] for s in subjects} == {NAMESPACE}
    webhooks = only(objects, "MutatingWebhookConfiguration")["webhooks"]
    assert {w["clientConfig"]["service"]["namespace"] for w in webhooks} == {NAMESPACE}


def test_another_namespace_is_refused(chart: Any) -> None:
    """The binary signs its certificate for slice-controller-system and writes it there: elsewhere it never serves."""
    with pytest.raises(Exception, match="must be installed in slice-controller-system"):
        chart.render({}, name=RELEASE, namespace="tpu-system")


def test_common_labels_on_every_object(chart: Any, render: Any) -> None:
    for obj in render():
        labels = obj["metadata"]["labels"]
        assert labels["app.kubernetes.io/name"] == chart.name, identity(obj)
        assert labels["app.kubernetes.io/version"] == APP_VERSION, identity(obj)
        assert labels["app.kubernetes.io/managed-by"] == "Helm", identity(obj)
        assert labels["helm.sh/chart"] == f"{chart.name}-{chart.version}", identity(obj)


def test_services_select_the_manager_pods(render: Any) -> None:
    objects = render()
    deployment = only(objects, "Deployment")
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert selector.items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
    metrics = only(objects, "Service", "slice-controller-controller-manager-metrics-service")
    webhook = only(objects, "Service", WEBHOOK_SERVICE)
    for service in (metrics, webhook):
        assert service["spec"]["selector"] == selector
    container = manager(objects)
    # each Service reaches a port the manager listens on: the metrics one its flag binds, the webhooks' its port
    (metrics_port,) = metrics["spec"]["ports"]
    assert metrics_port["targetPort"] == flag_port(container, "--metrics-bind-address")
    (webhook_port,) = webhook["spec"]["ports"]
    assert webhook_port["port"] == 443  # the API server calls a webhook Service on 443 unless told otherwise
    (server,) = [p for p in container["ports"] if p["name"] == "webhook-server"]
    assert webhook_port["targetPort"] == server["containerPort"]


def test_rbac_matches_upstream_with_secrets_in_the_namespace_only(render: Any) -> None:
    objects = render()
    manager_role = only(objects, "ClusterRole", "slice-controller-manager-role")
    assert granted(manager_role) == EXPECTED_MANAGER_RULES
    # No ClusterRole grants anything on Secrets (review R4).
    for role in (o for o in objects if o["kind"] == "ClusterRole"):
        assert not [r for r in role["rules"] if "secrets" in r.get("resources", [])], role["metadata"]["name"]
    # The certificate rotator lists and watches Secrets in its namespace; it reads and writes only its own.
    certificate = only(objects, "Role", "slice-controller-certificate-role")
    assert certificate["metadata"]["namespace"] == NAMESPACE
    assert certificate["rules"] == [
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["list", "watch"]},
        {"apiGroups": [""], "resources": ["secrets"], "resourceNames": [CERT_SECRET], "verbs": ["get", "update"]},
    ]
    # It may write only its own webhook configuration (the CA injection), not the cluster's others.
    (write,) = [
        r for r in manager_role["rules"] if "mutatingwebhookconfigurations" in r["resources"] and "update" in r["verbs"]
    ]
    assert write["verbs"] == ["update"]
    assert write["resourceNames"] == [only(objects, "MutatingWebhookConfiguration")["metadata"]["name"]]

    full = {"get", "list", "watch", "create", "update", "patch", "delete"}
    assert granted(only(objects, "Role", "slice-controller-leader-election-role")) == {
        ("", "configmaps"): full,
        ("coordination.k8s.io", "leases"): full,
        ("", "events"): {"create", "patch"},
    }

    auth = only(objects, "ClusterRole", "slice-controller-metrics-auth-role")["rules"]
    assert {(rule["apiGroups"][0], rule["resources"][0], tuple(rule["verbs"])) for rule in auth} == {
        ("authentication.k8s.io", "tokenreviews", ("create",)),
        ("authorization.k8s.io", "subjectaccessreviews", ("create",)),
    }
    reader = only(objects, "ClusterRole", "slice-controller-metrics-reader")
    assert reader["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]

    # Each binding grants a rendered role of its own scope (a RoleBinding a Role, a ClusterRoleBinding a
    # ClusterRole) to the controller's ServiceAccount, and nothing else; every role but the metrics reader (for
    # whatever scrapes the controller to be bound to, outside the chart) is bound.
    bindings = [o for o in objects if o["kind"].endswith("Binding")]
    roles = {(o["kind"], o["metadata"]["name"]) for o in objects if o["kind"] in ("Role", "ClusterRole")}
    bound = {(b["roleRef"]["kind"], b["roleRef"]["name"]) for b in bindings}
    assert all(b["roleRef"]["kind"] == b["kind"].removesuffix("Binding") for b in bindings)
    assert bound == roles - {("ClusterRole", reader["metadata"]["name"])}
    (account,) = [o for o in objects if o["kind"] == "ServiceAccount"]
    for binding in bindings:
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": account["metadata"]["name"], "namespace": NAMESPACE}
        ]


def test_cert_secret_is_left_to_the_controller(render: Any) -> None:
    secret = only(render(), "Secret", CERT_SECRET)
    assert "data" not in secret and "stringData" not in secret


# --- the Deployment ---------------------------------------------------------------------------


def test_default_deployment(render: Any) -> None:
    objects = render()
    deployment = only(objects, "Deployment", DEPLOYMENT)
    pod = deployment["spec"]["template"]["spec"]
    container = manager(objects)
    # more than one: a restart of the only replica would refuse every workload create (failurePolicy Fail)
    assert deployment["spec"]["replicas"] == DEFAULTS["replicas"] > 1
    assert "--leader-elect" in container["args"]  # one of them reconciles
    assert container["image"] == f"{IMAGE}:{APP_VERSION}"  # an empty tag means the chart's appVersion
    assert container["args"] == DEFAULTS["args"]
    # Upstream's config/manager/manager.yaml: requests equal to limits (Guaranteed QoS).
    assert container["resources"] == DEFAULTS["resources"]
    assert container["resources"]["requests"] == container["resources"]["limits"]
    # the probes ask the port the manager's health flag binds
    health = flag_port(container, "--health-probe-bind-address")
    assert container["livenessProbe"]["httpGet"]["port"] == container["readinessProbe"]["httpGet"]["port"] == health
    (account,) = [o for o in objects if o["kind"] == "ServiceAccount"]
    assert pod["serviceAccountName"] == account["metadata"]["name"]
    assert "nodeSelector" not in pod and "tolerations" not in pod
    # The webhook server reads the controller-managed certificate from the Secret, read-only.
    assert pod["volumes"] == [{"name": "cert", "secret": {"secretName": CERT_SECRET}}]
    assert container["volumeMounts"] == [
        {"name": "cert", "mountPath": "/tmp/k8s-webhook-server/serving-certs", "readOnly": True}
    ]


def test_args_name_only_flags_and_gates_the_binary_knows(render: Any) -> None:
    args = manager(render())["args"]
    gates = [a.split("=", 1)[1] for a in args if a.startswith("--feature-gates=")]
    assert len(gates) == 1
    named = {pair.split("=")[0] for pair in gates[0].split(",")}
    assert named <= KNOWN_FEATURE_GATES, named - KNOWN_FEATURE_GATES
    assert "--activation-timeout=6m" in args  # docs/slice-controller.md says why not the reference's 60m


def test_security_context_is_hardened(render: Any) -> None:
    objects = render()
    pod = only(objects, "Deployment")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0 and pod["securityContext"]["runAsGroup"] != 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert manager(objects)["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "readOnlyRootFilesystem": True,
    }


def test_ingress_reaches_the_managers_ports_only(render: Any) -> None:
    objects = render()
    policy = only(objects, "NetworkPolicy")
    assert policy["spec"]["podSelector"] == only(objects, "Deployment")["spec"]["selector"]
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    (rule,) = policy["spec"]["ingress"]
    assert "from" not in rule  # the API server calls the webhooks from outside the pod network
    container = manager(objects)
    listening = {p["containerPort"] for p in container["ports"]} | {
        flag_port(container, "--health-probe-bind-address"),
        flag_port(container, "--metrics-bind-address"),
    }
    assert listening == {p["port"] for p in rule["ports"]}


def test_image_checks_are_skipped_only_while_the_image_is_a_tag(render: Any) -> None:
    def skipped(values: dict[str, Any] | None = None) -> set[str]:
        annotations = only(render(values), "Deployment")["metadata"]["annotations"]
        return {v.split("=")[0] for k, v in annotations.items() if k.startswith("checkov.io/skip")}

    assert skipped() == {"CKV_K8S_38", "CKV_K8S_43", "CKV_K8S_15"}
    assert skipped({"image": {"digest": DIGEST}}) == {"CKV_K8S_38"}  # a digest passes both image checks
    assert skipped({"image": {"pullPolicy": "Always"}}) == {"CKV_K8S_38", "CKV_K8S_43"}


def test_image_by_digest(render: Any) -> None:
    assert manager(render({"image": {"digest": DIGEST}}))["image"] == f"{IMAGE}@{DIGEST}"
    # A digest wins over an explicit tag: the tag could move, the digest cannot.
    assert manager(render({"image": {"tag": "v9", "digest": DIGEST}}))["image"] == f"{IMAGE}@{DIGEST}"


def test_image_tag_and_repository_override(render: Any) -> None:
    repository, tag = "mirror.example/slice", "v0.9.0"
    image = manager(render({"image": {"repository": repository, "tag": tag}}))["image"]
    assert image == f"{repository}:{tag}"


def test_deployment_values_override(render: Any) -> None:
    values = {
        "replicas": 2,
        "args": ["--leader-elect", "--zap-log-level=5"],
        # Helm merges maps with the defaults, so an override spells out every key it keeps
        # (or sets one to null to drop it).
        "resources": {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"cpu": None, "memory": "2Gi"}},
        "nodeSelector": {"cloud.google.com/gke-nodepool": "system"},
        "tolerations": [{"key": "components.gke.io/gke-managed-components", "operator": "Exists"}],
    }
    objects = render(values)
    deployment = only(objects, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    container = manager(objects)
    assert deployment["spec"]["replicas"] == values["replicas"]
    assert container["args"] == values["args"]
    assert container["resources"] == {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"memory": "2Gi"}}
    assert pod["nodeSelector"] == values["nodeSelector"]
    assert pod["tolerations"] == values["tolerations"]


# --- the webhooks -----------------------------------------------------------------------------

# The Kueue label the Job, JobSet and LWS webhooks look for (and skip an object without).
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


def test_webhooks(render: Any) -> None:
    objects = render()
    webhooks = only(objects, "MutatingWebhookConfiguration")["webhooks"]
    assert [w["name"] for w in webhooks] == list(WEBHOOKS)
    only(objects, "Service", WEBHOOK_SERVICE)  # the service they call exists
    for webhook in webhooks:
        group, version, resource, path = WEBHOOKS[webhook["name"]]
        assert webhook["failurePolicy"] == "Fail"  # no workload escapes its slice placement while the manager is down
        # No caBundle: the controller injects it, and the chart must not overwrite it.
        assert webhook["clientConfig"] == {"service": {"name": WEBHOOK_SERVICE, "namespace": NAMESPACE, "path": path}}
        assert webhook["rules"] == [
            {"apiGroups": [group], "apiVersions": [version], "operations": ["CREATE"], "resources": [resource]}
        ]
        # The Job, JobSet and LWS webhooks return at once without the queue label: the API server
        # sends them only labelled objects. The StatefulSet webhook reads no label and sees them all.
        if resource == "statefulsets":
            assert "objectSelector" not in webhook
        else:
            assert webhook["objectSelector"] == {"matchExpressions": [{"key": QUEUE_LABEL, "operator": "Exists"}]}
        # never the system namespaces: a webhook down must not block them
        (excluded,) = webhook["namespaceSelector"]["matchExpressions"]
        assert excluded == {"key": NAMESPACE_NAME_LABEL, "operator": "NotIn", "values": DEFAULTS["systemNamespaces"]}
        assert "kube-system" in excluded["values"]


def test_webhooks_see_only_the_workload_namespaces_when_named(render: Any) -> None:
    named = ["serving", "checks"]
    objects = render({"webhookNamespaces": named})
    for webhook in only(objects, "MutatingWebhookConfiguration")["webhooks"]:
        assert webhook["namespaceSelector"] == {
            "matchExpressions": [{"key": NAMESPACE_NAME_LABEL, "operator": "In", "values": named}]
        }


def test_two_replicas_keep_a_disruption_budget_and_one_has_none(render: Any) -> None:
    objects = render()
    budget = only(objects, "PodDisruptionBudget", DEPLOYMENT)
    deployment = only(objects, "Deployment", DEPLOYMENT)
    assert budget["spec"]["selector"] == deployment["spec"]["selector"]
    # a drain may take a replica, never all of them
    assert 0 < budget["spec"]["minAvailable"] < deployment["spec"]["replicas"]
    assert not [o for o in render({"replicas": 1}) if o["kind"] == "PodDisruptionBudget"]


# --- strict schema validation -----------------------------------------------------------------


@pytest.mark.parametrize(
    "values",
    [
        pytest.param({}, id="defaults"),
        pytest.param(
            {
                "image": {"digest": DIGEST},
                "replicas": 2,
                "nodeSelector": {"cloud.google.com/gke-nodepool": "system"},
                "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "system", "effect": "NoSchedule"}],
            },
            id="overrides",
        ),
    ],
)
def test_every_object_validates_strictly(render: Any, values: dict[str, Any]) -> None:
    objects = render(values)
    assert len(objects) == len(EXPECTED_OBJECTS)
    assert [error for obj in objects for error in core_errors(obj)] == []


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        pytest.param(lambda d: d["spec"].update(replicaz=d["spec"].pop("replicas")), "replicaz", id="spec.replicaz"),
        pytest.param(
            lambda d: d["spec"]["template"]["spec"]["containers"][0].update(imagePullPolicyy="Always"),
            "imagePullPolicyy",
            id="container.imagePullPolicyy",
        ),
        pytest.param(lambda d: d["spec"].update(replicas="one"), "'one'", id="replicas-wrong-type"),
    ],
)
def test_validation_rejects_a_bad_field(render: Any, mutate: Any, field: str) -> None:
    deployment = only(render(), "Deployment")
    assert core_errors(deployment) == []  # valid as rendered, so the failure below is the mutation's
    mutate(deployment)
    errors = core_errors(deployment)
    assert len(errors) == 1 and field in errors[0], errors
