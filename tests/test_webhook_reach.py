"""Every call the control plane makes into a stack's cluster is admitted, by the firewall and by the NetworkPolicies.

The calls (admission and conversion webhooks, aggregated APIs) and the ports they land on are derived from what
the stack renders, registry charts included (tests/webhook_reach.py); where the control plane calls from, and what
GKE's own rule admits, is the model's (harness/gke_network.py); the firewall is the rules the stack registers. On a
cluster made elsewhere the stack makes no rule: its preview must say what to open, and that rule must do.
"""

from __future__ import annotations

import ipaddress
import re
import shlex

import pytest
import yaml

from components import stack as stack_config
from components.platform import config as platform_config
from harness import charts, gke_network
from harness.gke_network import ControlPlaneSource, FirewallRule, PortRule
from harness.mock_engine import ProgramRun, Registration, unwrap_secrets
from policy.network import Pod, selects
from tests import webhook_reach
from tests.conftest import run_stack, stack_values
from tests.test_lifecycle import closure
from tests.webhook_reach import NOT_RENDERED, STAND_INS, ControlPlaneCall
from tools.render import destroy_waves

STACKS = ["dev", "prod", "saxml"]
FIREWALL = "gcp:compute/firewall:Firewall"
SUBNET = "gcp:compute/subnetwork:Subnetwork"
CLUSTER = "gcp:container/cluster:Cluster"
EXISTING = {"cluster.existing": {"name": "team-cluster", "location": "us-central1"}, "dashboards.enabled": False}


@pytest.fixture(scope="module")
def runs() -> dict[str, ProgramRun]:
    return {stack: run_stack(stack=stack) for stack in STACKS}


@pytest.fixture(scope="module")
def calls(runs) -> dict[str, list[ControlPlaneCall]]:
    return {stack: webhook_reach.control_plane_calls(webhook_reach.stack_objects(run)) for stack, run in runs.items()}


@pytest.fixture(scope="module")
def existing_run() -> ProgramRun:
    return run_stack(EXISTING)


def _subnet(run: ProgramRun, reference: str) -> Registration:
    """The subnetwork a cluster input names (the mocks give a resource the id `<name>-id`)."""
    (subnet,) = [s for s in run.of_type(SUBNET) if f"{s.name}-id" == reference]
    return subnet


def control_plane_sources(run: ProgramRun) -> list[ControlPlaneSource]:
    """The model's sources of the control plane of the stack's cluster, from the cluster and subnetworks it registers."""
    (cluster,) = run.of_type(CLUSTER)
    node_subnet = _subnet(run, cluster.input("subnetwork"))
    private = unwrap_secrets(cluster.inputs.get("privateClusterConfig") or {})
    endpoint_subnet = private.get("privateEndpointSubnetwork")
    endpoint_range = _subnet(run, endpoint_subnet).input("ipCidrRange") if endpoint_subnet else None
    pods = cluster.input("ipAllocationPolicy.clusterSecondaryRangeName")
    (pod_range,) = [r["ipCidrRange"] for r in node_subnet.input("secondaryIpRanges") if r["rangeName"] == pods]
    return gke_network.control_plane_sources(private, endpoint_range or node_subnet.input("ipCidrRange"), pod_range)


def unadmitted(
    calls: list[ControlPlaneCall], rules: list[FirewallRule], network: str, sources: list[ControlPlaneSource]
) -> list[str]:
    """Every (call, source) no firewall rule admits and GKE's own control-plane rule does not cover."""
    return [
        f"{call} from {source.name} ({source.addresses})"
        for call in calls
        for source in sources
        if call.port not in gke_network.GKE_CONTROL_PLANE_RULE_PORTS
        and gke_network.firewall_admits(rules, network, source.addresses, call.port) is None
    ]


def firewall_rules(run: ProgramRun) -> list[FirewallRule]:
    return [FirewallRule.from_inputs(r.name, unwrap_secrets(r.inputs)) for r in run.of_type(FIREWALL)]


# --- What is rendered -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("stack", STACKS)
def test_every_release_is_rendered_or_says_why_not(runs, stack):
    assert webhook_reach.unrendered(runs[stack]) == []


@pytest.mark.parametrize("stack", STACKS)
def test_each_chart_rendered_is_the_release_the_program_pins_or_its_named_stand_in(runs, stack):
    for release in runs[stack].of_type(webhook_reach.RELEASE):
        if release.inputs["name"] not in {c.release for c in charts.load_lock()}:
            continue
        locked = webhook_reach.locked_chart(release.inputs["name"])
        version = release.inputs["version"]
        if locked.version != f"v{version}":
            pinned, tag, why = STAND_INS[release.inputs["name"]]
            assert (version, locked.version) == (pinned, tag), f"{release.name}: charts.lock renders {locked.version}"
            assert "403" in why and "git diff" in why


@pytest.mark.external  # the registry charts of charts.lock
def test_the_calls_are_found_where_the_stacks_install_them(calls):
    """Not an empty derivation: the dev stack installs every controller, the saxml stack JobSet only."""
    kinds = {call.kind for call in calls["dev"]}
    assert kinds == {
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
        "CustomResourceDefinition",
        "APIService",
    }
    namespaces = {call.service[0] for call in calls["dev"]}
    assert namespaces == {"jobset-system", "kueue-system", "lws-system", "slice-controller-system"}
    assert {call.service[0] for call in calls["saxml"]} == {"jobset-system"}
    assert any(call.failure_policy == "Fail" for call in calls["dev"])


@pytest.mark.external  # the registry charts of charts.lock
def test_the_recorded_ports_of_each_release_are_the_rendered_ones(runs, calls):
    """The program's fact (RELEASE_CONTROL_PLANE_PORTS) against the charts."""
    config = stack_config.load(stack_values("dev")).config
    namespaces = platform_config.release_namespaces(config.platform, config.tpu.dynamic_slicing)
    for key, namespace in namespaces.items():
        recorded = platform_config.RELEASE_CONTROL_PLANE_PORTS[key]
        rendered = {call.port for call in calls["dev"] if call.service[0] == namespace}
        assert set(recorded) == rendered, f"platform.{key}: recorded {recorded}, rendered {sorted(rendered)}"
    # what the stack opens to the control plane: every installed release's ports, sorted, each once
    opened = platform_config.control_plane_ports(config.platform, config.tpu.dynamic_slicing)
    assert opened == tuple(sorted({call.port for call in calls["dev"] if call.service[0] in namespaces.values()}))


@pytest.mark.external  # the registry charts of charts.lock
def test_kueue_binds_its_webhooks_where_its_service_sends_them(runs):
    """The Kueue manager listens on its configuration's webhook.port (manifests/kueue/controller-config.yaml, handed
    to the chart); the chart's Service sends the calls to its own targetPort: they must agree."""
    objects = webhook_reach.stack_objects(runs["dev"])
    (config_map,) = [o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "kueue-manager-config"]
    manager = yaml.safe_load(config_map["data"]["controller_manager_config.yaml"])
    (call,) = {c.port for c in webhook_reach.control_plane_calls(objects) if c.service[1] == "kueue-webhook-service"}
    assert manager["webhook"]["port"] == call


@pytest.mark.external  # the registry charts of charts.lock
def test_kueue_refuses_pods_only_in_the_workload_namespaces_while_it_is_down(runs):
    """Kueue's pod webhooks fail closed: the chart scopes them by the Configuration's managedJobsNamespaceSelector,
    which the program sets to the workload namespaces, so a Kueue outage stops no pod of GKE's or the controllers'."""
    config = stack_config.load(stack_values("dev")).config
    workloads = set(config.queues.namespaces)
    others = {
        "kube-system",
        "gmp-system",
        "default",
        "node-audit",
        *platform_config.release_namespaces(config.platform, True).values(),
    }
    configurations = [
        o
        for o in webhook_reach.stack_objects(runs["dev"])
        if o["kind"] in webhook_reach.WEBHOOK_KINDS and o["metadata"]["name"].startswith("kueue-")
    ]
    pod_webhooks = [
        webhook
        for configuration in configurations
        for webhook in configuration["webhooks"]
        if webhook.get("failurePolicy") == "Fail" and any("pods" in rule["resources"] for rule in webhook["rules"])
    ]
    assert pod_webhooks, "Kueue's pod integration registers its webhooks"
    for webhook in pod_webhooks:
        selected = {
            namespace
            for namespace in workloads | others
            if selects(webhook.get("namespaceSelector"), {gke_network.NAMESPACE_NAME_LABEL: namespace})
        }
        assert selected == workloads, f"{webhook['name']} refuses pods in {sorted(selected - workloads)}"


# --- The firewall -----------------------------------------------------------------------------------------------------


@pytest.mark.external  # the registry charts of charts.lock
@pytest.mark.parametrize("stack", STACKS)
def test_every_call_of_the_control_plane_is_admitted_by_the_stacks_firewall(runs, calls, stack):
    run = runs[stack]
    (cluster,) = run.of_type(CLUSTER)
    sources = control_plane_sources(run)
    assert {s.name for s in sources} == {"the private endpoint's subnetwork", "the konnectivity agents' pods"}
    assert unadmitted(calls[stack], firewall_rules(run), cluster.input("network"), sources) == []


@pytest.mark.external  # the registry charts of charts.lock
@pytest.mark.parametrize("stack", STACKS)
def test_the_control_plane_rule_opens_exactly_the_called_ports_from_the_models_sources(runs, calls, stack):
    """The stack's own rule, alone, admits every call: the reach does not hang on how wide allow-internal is."""
    run = runs[stack]
    (cluster,) = run.of_type(CLUSTER)
    rule = FirewallRule.from_inputs(
        "allow-control-plane", unwrap_secrets(run.one(FIREWALL, "allow-control-plane").inputs)
    )
    called = {call.port for call in calls[stack]}
    assert rule.allows == (PortRule("tcp", tuple(str(p) for p in sorted(called))),)
    assert unadmitted(calls[stack], [rule], cluster.input("network"), control_plane_sources(run)) == []


@pytest.mark.external  # the registry charts of charts.lock
def test_a_port_the_rule_leaves_out_is_found_unadmitted(runs, calls):
    """The check can fail: the rule without one called port, and allow-internal without the ranges it shares."""
    run = runs["dev"]
    (cluster,) = run.of_type(CLUSTER)
    sources = control_plane_sources(run)
    narrowed = []
    for rule in firewall_rules(run):
        if rule.name == "allow-control-plane":
            rule = FirewallRule(**{**rule.__dict__, "allows": (PortRule("tcp", ("9443",)),)})
        if rule.name == "allow-internal":
            rule = FirewallRule(**{**rule.__dict__, "source_ranges": ()})
        narrowed.append(rule)
    missing = unadmitted(calls["dev"], narrowed, cluster.input("network"), sources)
    assert missing and all("tcp:8082" in line and "APIService" in line for line in missing)
    assert len(missing) == 2 * len(sources)  # the two visibility APIServices, from each source


def test_the_rule_outlives_every_webhook_server(runs):
    """It waits for the VPC alone; every Helm release waits for it, so the first `up` opens it before a webhook serves
    and `pulumi destroy` uninstalls every release (its pods and webhooks) before deleting it."""
    run = runs["dev"]
    assert closure(run, "allow-control-plane") - closure(run, "vpc") == {"vpc"}  # and the APIs the VPC waits for
    releases = [r.name for r in run.of_type(webhook_reach.RELEASE) if r.parent == "platform"]
    assert releases and all("allow-control-plane" in closure(run, name) for name in releases)
    waves = destroy_waves(run.registrations)
    gone = {name: i for i, wave in enumerate(waves) for name in wave}
    assert all(gone[name] < gone["allow-control-plane"] for name in releases)


# --- NetworkPolicies (GKE Dataplane V2 enforces them) -----------------------------------------------------------------


@pytest.mark.external  # the registry charts of charts.lock
@pytest.mark.parametrize("stack", STACKS)
def test_the_network_policies_admit_the_control_plane_to_every_webhook_pod(runs, calls, stack):
    objects = webhook_reach.stack_objects(runs[stack])
    policies = webhook_reach.network_policies(objects)
    assert policies  # the slice controller's and the workloads' own
    refused = [
        f"{call} on pod {pod.labels} from {source.name}"
        for call in calls[stack]
        for pod in call.pods
        for source in control_plane_sources(runs[stack])
        if not gke_network.policies_admit(policies, pod, call.port, source)
    ]
    assert refused == []


NODE_RANGE = ipaddress.IPv4Network("10.10.0.0/18")
POD_SOURCE = ControlPlaneSource(
    "agents",
    ipaddress.IPv4Network("10.12.0.0/14"),
    pod_namespace="kube-system",
    pod_labels=gke_network.KONNECTIVITY_LABELS,
)
ADDRESS_SOURCE = ControlPlaneSource("endpoint", NODE_RANGE)
WEBHOOK_POD = Pod("kueue-system", {"app": "kueue"}, {"webhook-server": 9443, "9443": 9443})


def _policy(spec: dict) -> dict:
    return {"kind": "NetworkPolicy", "metadata": {"name": "p", "namespace": "kueue-system"}, "spec": spec}


DENY = _policy({"podSelector": {}, "policyTypes": ["Ingress"]})


@pytest.mark.parametrize(
    "policies, source, admitted",
    [
        ([], POD_SOURCE, True),  # no policy selects the pod
        ([DENY], POD_SOURCE, False),
        ([DENY], ADDRESS_SOURCE, False),
        ([DENY, _policy({"podSelector": {}, "ingress": [{"ports": [{"port": 9443}]}]})], ADDRESS_SOURCE, True),
        ([DENY, _policy({"podSelector": {}, "ingress": [{"ports": [{"port": "webhook-server"}]}]})], POD_SOURCE, True),
        ([DENY, _policy({"podSelector": {}, "ingress": [{"ports": [{"port": 8443}]}]})], POD_SOURCE, False),
        ([DENY, _policy({"podSelector": {"matchLabels": {"app": "other"}}, "ingress": [{}]})], POD_SOURCE, False),
        (  # kube-system's agents, whichever label GKE gives them, but not an address outside the pod network
            [
                DENY,
                _policy(
                    {
                        "podSelector": {},
                        "ingress": [
                            {
                                "from": [
                                    {
                                        "namespaceSelector": {
                                            "matchLabels": {gke_network.NAMESPACE_NAME_LABEL: "kube-system"}
                                        }
                                    }
                                ]
                            }
                        ],
                    }
                ),
            ],
            POD_SOURCE,
            True,
        ),
        (
            [
                DENY,
                _policy(
                    {
                        "podSelector": {},
                        "ingress": [
                            {
                                "from": [
                                    {
                                        "namespaceSelector": {
                                            "matchLabels": {gke_network.NAMESPACE_NAME_LABEL: "kube-system"}
                                        }
                                    }
                                ]
                            }
                        ],
                    }
                ),
            ],
            ADDRESS_SOURCE,
            False,
        ),
        (  # one label of the two only
            [
                DENY,
                _policy(
                    {
                        "podSelector": {},
                        "ingress": [
                            {
                                "from": [
                                    {
                                        "namespaceSelector": {},
                                        "podSelector": {"matchLabels": {"k8s-app": "konnectivity-agent"}},
                                    }
                                ]
                            }
                        ],
                    }
                ),
            ],
            POD_SOURCE,
            False,
        ),
        (
            [DENY, _policy({"podSelector": {}, "ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0.0/8"}}]}]})],
            ADDRESS_SOURCE,
            True,
        ),
        (  # an ipBlock never matches a pod of the cluster under Dataplane V2, even one whose range it covers
            [DENY, _policy({"podSelector": {}, "ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0.0/8"}}]}]})],
            POD_SOURCE,
            False,
        ),
        (
            [
                DENY,
                _policy(
                    {
                        "podSelector": {},
                        "ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.10.0.0/24"]}}]}],
                    }
                ),
            ],
            ADDRESS_SOURCE,
            False,
        ),
        (
            [DENY, _policy({"podSelector": {}, "ingress": [{"from": [{"podSelector": {}}]}]})],
            POD_SOURCE,
            False,
        ),  # own namespace only
    ],
)
def test_the_network_policy_model(policies, source, admitted):
    assert gke_network.policies_admit(policies, WEBHOOK_POD, 9443, source) is admitted


# --- The firewall model, against bad rules ----------------------------------------------------------------------------

GOOD = FirewallRule("good", "vpc-id", source_ranges=(NODE_RANGE,), allows=(PortRule("tcp", ("9443",)),))


@pytest.mark.parametrize(
    "change",
    [
        {"allows": (PortRule("tcp", ("9444",)),)},
        {"allows": (PortRule("udp", ("9443",)),)},
        {"allows": (PortRule("tcp", ("8000-9000",)),)},
        {"direction": "EGRESS"},
        {"disabled": True},
        {"network": "other-vpc"},
        {"source_ranges": (ipaddress.IPv4Network("10.10.0.2/32"),)},  # a part of the range only
        {"source_ranges": ()},
        {"target_tags": ("gke-node",)},
        {"target_service_accounts": ("someone-else@p.iam.gserviceaccount.com",)},
    ],
    ids=repr,
)
def test_a_rule_that_does_not_reach_the_call_is_not_counted(change):
    assert gke_network.firewall_admits([GOOD], "vpc-id", NODE_RANGE, 9443) is GOOD
    broken = FirewallRule(**{**GOOD.__dict__, **change})
    assert gke_network.firewall_admits([broken], "vpc-id", NODE_RANGE, 9443) is None


@pytest.mark.parametrize("priority, admitted", [(900, False), (1000, False), (1100, True)])
def test_a_deny_of_the_same_or_a_better_priority_wins(priority, admitted):
    deny = FirewallRule(
        "deny",
        "vpc-id",
        priority=priority,
        source_ranges=(ipaddress.IPv4Network("10.10.0.0/24"),),
        denies=(PortRule("all", ()),),
    )
    assert (gke_network.firewall_admits([GOOD, deny], "vpc-id", NODE_RANGE, 9443) is GOOD) is admitted


def test_a_rule_for_the_nodes_service_account_reaches_them():
    rule = FirewallRule(**{**GOOD.__dict__, "target_service_accounts": ("nodes@p.iam.gserviceaccount.com",)})
    assert gke_network.firewall_admits([rule], "vpc-id", NODE_RANGE, 9443, ["nodes@p.iam.gserviceaccount.com"]) is rule


def test_a_peering_cluster_is_called_from_its_control_plane_range_only():
    (source,) = gke_network.control_plane_sources(
        {"masterIpv4CidrBlock": "172.16.0.32/28"}, "10.0.0.0/20", "10.4.0.0/14"
    )
    assert source.addresses == ipaddress.IPv4Network("172.16.0.32/28") and source.pod_namespace is None


# --- A cluster made elsewhere -----------------------------------------------------------------------------------------


def _warning(run: ProgramRun) -> str:
    (warning,) = [w for w in run.warnings if w.startswith("cluster.existing: the stack installs webhooks")]
    return warning


def _rule_of(command: str) -> FirewallRule:
    """The rule the warning's gcloud command makes, the subnetwork look-up answered as gcloud would for the model's
    cluster made elsewhere."""
    command = re.sub(
        r"\$\(gcloud compute networks subnets describe default [^']*'value\(ipCidrRange\)'\)",
        gke_network.EXISTING_CLUSTER_SUBNET_RANGE,
        command,
    )
    words = shlex.split(command[command.index("gcloud compute firewall-rules create") :].split(" (docs/")[0])
    flags = {words[i]: words[i + 1] for i in range(3, len(words) - 1) if words[i].startswith("--")}
    assert flags["--direction"] == "INGRESS" and flags["--action"] == "ALLOW"
    ports = tuple(p.removeprefix("tcp:") for p in flags["--rules"].split(","))
    return FirewallRule(
        words[3],
        flags["--network"],
        source_ranges=tuple(ipaddress.IPv4Network(r) for r in flags["--source-ranges"].split(",")),
        allows=(PortRule("tcp", ports),),
    )


@pytest.mark.external  # the registry charts of charts.lock
def test_on_a_cluster_made_elsewhere_the_preview_says_what_to_open_and_that_rule_admits_every_call(existing_run):
    assert not existing_run.of_type(FIREWALL)
    calls = webhook_reach.control_plane_calls(webhook_reach.stack_objects(existing_run))
    assert calls
    rule = _rule_of(_warning(existing_run))
    found = gke_network.existing_cluster_network(
        stack_values("dev")["project"], EXISTING["cluster.existing"]["location"]
    )
    network = found["network"].rsplit("/", 1)[-1]
    sources = gke_network.control_plane_sources(
        found["privateClusterConfigs"][0], gke_network.EXISTING_CLUSTER_SUBNET_RANGE, found["clusterIpv4Cidr"]
    )
    assert unadmitted(calls, [rule], network, sources) == []
    fewer = FirewallRule(**{**rule.__dict__, "allows": (PortRule("tcp", rule.allows[0].ports[1:]),)})
    assert unadmitted(calls, [fewer], network, sources)  # a port left out of the command is found


def test_on_a_peering_cluster_made_elsewhere_the_source_is_its_control_plane_range():
    from pulumi_gcp.container import GetClusterResult

    from components.gcp.config import ExistingClusterConfig
    from components.gcp.existing_cluster import ExistingClusterArgs, control_plane_access_warning

    existing = ExistingClusterConfig(name="team-cluster", location="us-central1-a")
    args = ExistingClusterArgs("p", "team-cluster", existing, (8082, 9443))
    found = GetClusterResult(
        network="projects/host/global/networks/net",
        subnetwork="sub",
        cluster_ipv4_cidr="10.4.0.0/14",
        private_cluster_configs=[{"master_ipv4_cidr_block": "172.16.0.32/28", "private_endpoint_subnetwork": ""}],
    )
    text = control_plane_access_warning(args, found)
    assert (
        "--network net " in text and "--rules tcp:8082,tcp:9443 " in text and "--source-ranges 172.16.0.32/28 " in text
    )
    assert "--project host " in text  # a Shared VPC: the rule goes to the network's (host) project


@pytest.mark.external  # the registry charts of charts.lock
def test_a_cluster_given_by_kubeconfig_is_told_where_to_read_the_source():
    kubeconfig = "apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\ncurrent-context: c\n"
    run = run_stack({"cluster.existing": {"kubeconfig": kubeconfig}, "dashboards.enabled": False}, secrets=("cluster",))
    warning = _warning(run)
    assert "masterIpv4CidrBlock" in warning and "clusterIpv4Cidr" in warning
    ports = {call.port for call in webhook_reach.control_plane_calls(webhook_reach.stack_objects(run))}
    assert f"--rules {','.join(f'tcp:{p}' for p in sorted(ports))} " in warning


def test_a_stack_that_installs_no_controller_asks_nothing():
    run = run_stack({**EXISTING, "platform.install": False, "serving.router.install": False})
    assert not [w for w in run.warnings if w.startswith("cluster.existing: the stack installs webhooks")]


def test_a_chart_moved_off_its_pinned_release_is_said_at_preview():
    pinned = platform_config.PlatformConfig().kueue.version
    moved = f"{pinned}-moved"
    run = run_stack({"platform.kueue.version": moved})
    (warning,) = [w for w in run.warnings if w.startswith("platform.kueue.version")]
    recorded = ", ".join(f"tcp:{p}" for p in platform_config.RELEASE_CONTROL_PLANE_PORTS["kueue"])
    assert f"{moved} is not the release" in warning and f"({pinned})" in warning and recorded in warning
    assert not [w for w in run_stack().warnings if w.startswith("platform.")]


def test_nothing_unrendered_is_left_unexplained():
    assert all(len(reason) > 40 for reason in NOT_RENDERED.values())
