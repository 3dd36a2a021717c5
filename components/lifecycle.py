"""What a changed `up` would do to the stack that is running: the lifecycle review.

Each `up` exports the inputs whose change replaces a resource, or that an API refuses to change (``lifecycle_facts``,
the ``lifecycle`` output); the next preview compares the config against them (``review_changes``) and refuses what
would fail halfway or strand capacity, and says loudly what it replaces, what it changes in place that running work
feels, and what is left to do by hand.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from components import naming
from components.config_base import Problem
from components.gcp import config as gcp_config
from components.platform import config as platform_config
from components.stack import StackConfig, workload_namespaces
from components.workloads.saxml.config import bucket_name as saxml_bucket_name
from components.workloads.serving.config import weights_bucket_name

LIFECYCLE_OUTPUT = "lifecycle"  # the stack output the next preview compares against
RELEASES_OUTPUT = "helmReleases"  # Helm release name -> chart version, exported since the platform was first pinned


def lifecycle_facts(config: StackConfig) -> dict[str, Any]:
    """The inputs whose change replaces (or that Kueue refuses to change): exported, then compared.

    GKE replaces a cluster on a change of its name, region, network or ranges, and a node pool (the
    system pool and the TPU pools) on one of its reservation, service account, placement policy or boot (the key of
    its boot disks, secure boot: NodeBoot); this program also replaces a TPU pool whose zone or machine type changes
    (GKE cannot move a multi-host slice in place). A TPU pool's topology alone would change in place, which GKE
    cannot do to a multi-host slice: the review refuses it. Kueue refuses a new topologyName or nodeLabels on a
    ResourceFlavor in use, and a new ClusterQueue of a LocalQueue that keeps its name. GKE's Secret Manager add-on must
    outlive the pods that mount the token file through it (the cluster is updated before them). On a cluster made
    elsewhere the stack makes no cluster and no pool: the facts name only the cluster it deploys onto, whose change
    moves every object.
    """
    cluster = config.cluster
    names = naming.network_names(config.network.prefix)
    facts: dict[str, Any] = {
        "cluster": {
            "name": cluster.name,
            "region": config.region,
            "project": config.project,
        },
        # the system pool's service account and boot disk key are ForceNew on the node pool; the cluster's node config
        # (its create's default pool) is ignored after the create
        "systemPool": {
            "nodeServiceAccount": cluster.node_account_id,
            "bootDiskKey": cluster.system_pool_boot.boot_disk_key,
        },
        "tpuPools": {
            pool.name: {
                "zone": config.tpu.zone,
                "machineType": config.tpu.machine_type,
                "reservation": config.tpu.reservation_path(pool, config.project) or "",
                "placementPolicy": config.tpu.workload_policy_name if config.tpu.dynamic_slicing else "",
                "topology": pool.topology,
                "nodeServiceAccount": cluster.node_account_id,
                **boot_facts(config.tpu.pool_boot(pool, cluster)),
            }
            for pool in config.tpu.pools
        },
        "tpuPoolsProtected": config.tpu.protect_pools,
    }
    # The platform's Helm releases by their key under `platform`, each with its namespace (none when platform.install
    # is false): a release in another namespace is a replacement, a release gone an uninstall.
    facts["platformReleases"] = platform_config.release_namespaces(config.platform, config.tpu.dynamic_slicing)
    facts["chartsWithCrdsHelmKeeps"] = {
        key: chart.model_dump(include={"chart", "version"})
        for key, chart in platform_config.installed_charts(config.platform, config.tpu.dynamic_slicing).items()
        if key in platform_config.CHARTS_WITH_CRDS_HELM_KEEPS
    }
    if config.tpu.dynamic_slicing:
        # the Topology's and the ResourceFlavor's names, the flavor's nodeLabels (the accelerator label) and the
        # LocalQueues' name and spec.clusterQueue
        facts["queues"] = config.queues.model_dump(
            by_alias=True, include={"topology_name", "resource_flavor_name", "cluster_queue_name", "local_queue_name"}
        ) | {"acceleratorLabel": config.tpu.machine.accelerator_label}
    if not cluster.existing.enabled:
        # the network the stack makes the cluster on (a cluster made elsewhere is on its own)
        facts["cluster"] |= {
            "network": names["network"],
            "subnetwork": names["nodeSubnet"],
            "secondaryRanges": sorted(naming.secondary_range_names(config.network.prefix).values()),
        }
        # Who reaches the nodes and the control plane, and the cluster's CIS GKE settings a production stack
        # requires: each changes in place (components/gcp/cluster.py), but what GKE then does is felt, so the preview
        # says it.
        facts["network"] = config.network.model_dump(
            by_alias=True, include={"node_cidr", "pod_cidr", "service_cidr", "proxy_only_cidr", "mtu"}
        )
        control_plane = cluster.control_plane
        facts["isolation"] = {
            "privateNodes": {
                naming.SYSTEM_POOL_NAME: cluster.private_nodes,
                **{pool.name: config.tpu.pool_private_nodes(pool, cluster) for pool in config.tpu.pools},
            },
            "nat": names["nat"] if config.nat_needed else "",
            "dnsEndpoint": control_plane.dns_endpoint,
            "ipEndpoint": control_plane.ip_endpoint,
            "authorizedNetworks": sorted(network.cidr for network in control_plane.authorized_networks),
        }
        facts["hardening"] = cluster.model_dump(
            by_alias=True, include={"binary_authorization", "rbac_security_group", "intranode_visibility"}
        )
        facts["secretManager"] = {
            "addOn": cluster.secret_manager,
            "tokenFile": config.serving.enabled and bool(config.serving.hf_token_secret_version),
        }
        # Registry -> its pull-through repository's id and upstream, which replace it, and its upstream credentials,
        # which change in place (components/gcp/pull_through.py says where each is read).
        pull_through = config.images.pull_through
        credentials = f"{pull_through.docker_hub_username} {pull_through.docker_hub_password_secret_version}"
        facts["pullThrough"] = {
            repository.registry: {
                "repository": repository.repository_id,
                "upstream": repository.upstream,
                "credentials": credentials if repository.docker_hub and pull_through.docker_hub_credentials else "",
            }
            for repository in config.pull_through_repositories()
        }
    else:
        # A cluster made elsewhere: the stack makes no cluster and no node pool there, and which cluster it deploys
        # onto is the Kubernetes provider's identifier alone.
        identifier = cluster.existing.identifier(config.project, cluster.target_name)
        facts |= {"cluster": {IDENTIFIER_FACT: identifier}, "systemPool": {}, "tpuPools": {}}
    # The buckets the stack makes, by the setting that names each: their name, and what places them (a bucket's
    # location and project are fixed), and whether destroy keeps them (components/resources.py private_bucket).
    buckets = {}
    if config.serving.enabled and config.serving.weights_bucket.create:
        keep = config.serving.weights_bucket.keep_on_destroy
        buckets["serving.weightsBucket.name"] = (weights_bucket_name(config.serving, config.project), keep)
    if config.saxml.enabled:
        buckets["saxml.bucketName"] = (
            saxml_bucket_name(config.saxml, config.project),
            config.saxml.keep_bucket_on_destroy,
        )
    facts["buckets"] = {
        key: {"name": name, "region": config.region, "project": config.project, "keepOnDestroy": keep}
        for key, (name, keep) in buckets.items()
    }
    if namespaces := workload_namespaces(config):
        facts[DEFAULT_DENY_FACT] = sorted(namespaces)
    return facts


# The lifecycle fact of the namespaces whose pods accept only what a NetworkPolicy admits (the default deny).
DEFAULT_DENY_FACT = "defaultDenyNamespaces"
BOOT_FACTS = ("bootDiskKey", "secureBoot")  # a TPU pool's facts of its boot: what boot hardening replaces
# The cluster facts the Kubernetes provider's clusterIdentifier is made of (components/gcp/cluster.py
# cluster_identifier). The provider is replaced, and every object of the stack with it, only when the identifier
# changes (pulumi/pulumi-kubernetes provider/pkg/provider/provider.go, DiffConfig: with the identifier unchanged it
# clears every replacement, a new kubeconfig's included).
CLUSTER_IDENTITY = ("project", "region", "name")
IDENTIFIER_FACT = "identifier"  # the cluster fact of a stack on a cluster made elsewhere


def boot_facts(boot: gcp_config.NodeBoot) -> dict[str, Any]:
    return dict(zip(BOOT_FACTS, (boot.boot_disk_key, boot.secure_boot), strict=True))


def before_boot_hardening(previous: Mapping[str, Any], current: Mapping[str, Any]) -> dict[str, Any]:
    """A pool's ``previous`` facts, with the boot facts ``current`` has and an `up` of an older program did not export
    as that program made every pool: no key, no secure boot (the system pool's secure boot was always on, no fact)."""
    unhardened = boot_facts(gcp_config.UNHARDENED_BOOT)
    return {**{key: unhardened[key] for key in BOOT_FACTS if key in current}, **previous}


def creates_cluster(outputs: Mapping[str, Any], current: Mapping[str, Any]) -> bool | None:
    """Whether this `up` creates the GKE cluster the stack makes (``current``: its lifecycle facts): on a new stack
    (no outputs), after a cluster made elsewhere, or when a cluster fact changes (each replaces the cluster). None when
    the last `up` exported no lifecycle facts: not known."""
    if not outputs:
        return True
    before = (outputs.get(LIFECYCLE_OUTPUT) or {}).get("cluster")
    if before is None:
        return None
    return IDENTIFIER_FACT in before or bool(_changed(before, current["cluster"]))


def previous_pool_reservations(outputs: Mapping[str, Any] | None) -> dict[str, str]:
    """The TPU pools of the stack's last `up` and the reservation path each consumes (its ``lifecycle`` output;
    nothing for a new stack, or one whose last `up` predates that output)."""
    pools: Mapping[str, Any] = ((outputs or {}).get(LIFECYCLE_OUTPUT) or {}).get("tpuPools") or {}
    return {name: facts.get("reservation") or "" for name, facts in pools.items()}


def previous_lifecycle(outputs: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The ``lifecycle`` output of the stack's last update, for ``review_changes``. A stack whose last `up` predates
    the chart versions in that output (or the output itself) still exported ``helmReleases``: its versions stand
    in, so the first chart upgrade after it is announced too."""
    lifecycle: Mapping[str, Any] | None = outputs.get(LIFECYCLE_OUTPUT)
    releases: Mapping[str, str] = outputs.get(RELEASES_OUTPUT) or {}
    if (lifecycle and "chartsWithCrdsHelmKeeps" in lifecycle) or not releases:
        return lifecycle
    charts = {
        key: {"version": releases[name]}
        for key in platform_config.CHARTS_WITH_CRDS_HELM_KEEPS
        if (name := platform_config.CHART_RELEASE_NAMES[key]) in releases
    }
    return {**(lifecycle or {}), "chartsWithCrdsHelmKeeps": charts}


def _changed(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """The facts whose value ``after`` changes, in its order: a fact ``before`` lacks (the last `up` did not export
    it) is not compared."""
    return [key for key in after if key in before and before[key] != after[key]]


def _changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> str:
    """What ``after`` changes, as the review words it: each fact with its old and new value."""
    return "; ".join(f"{key} {before[key]!r} -> {after[key]!r}" for key in _changed(before, after))


@dataclass(frozen=True)
class ChangeReview:
    refused: list[Problem]  # the `up` would fail halfway or strand capacity: stop the preview
    replaced: list[str]  # what the `up` replaces, said loudly
    by_hand: list[str] = field(default_factory=list)  # what the `up` cannot do and the operator must, said as loudly
    in_place: list[str] = field(default_factory=list)  # what the `up` changes in place that running work feels


def _review_cluster_made_elsewhere(before: Mapping[str, Any], after: Mapping[str, Any], review: ChangeReview) -> None:
    """A stack on a cluster made elsewhere, before this `up` or after it: from its own cluster (refused), onto another
    one, or back onto a cluster it makes."""
    if IDENTIFIER_FACT not in before:
        # The stack made its cluster (its network is a fact only then) and is now pointed at one made elsewhere: the
        # program no longer registers the cluster, its pools or its network, and Pulumi deletes what a program stops
        # registering at the end of the `up` (pulumi/pulumi pkg/resource/deploy/step_generator.go GenerateDeletes: the
        # resources not registered in the new snapshot), the same cluster included when cluster.existing names it.
        if "network" in before:
            review.refused.append(
                Problem(
                    "cluster.existing",
                    f"set on a running stack that made the cluster {before.get('name')}: the stack would stop "
                    "making it, so the `up` deletes it at its end, with every node pool (the TPU pools give up their "
                    "cubes), the network and the Cloud NAT",
                    "leave cluster.existing empty on this stack; deploy onto a cluster made elsewhere from another "
                    "stack",
                )
            )
        return
    was = before[IDENTIFIER_FACT]
    now = after.get(IDENTIFIER_FACT) or gcp_config.cluster_identifier(after["project"], after["region"], after["name"])
    if now == was and IDENTIFIER_FACT not in after:
        # GKE refuses to create a cluster whose name is taken in its location (409 ALREADY_EXISTS).
        review.refused.append(
            Problem(
                "cluster.name",
                f"names the cluster {was} that the stack deployed onto until now (cluster.existing): GKE refuses to "
                "create a cluster of a name its location already holds",
                "give the cluster the stack makes another name, or keep cluster.existing",
            )
        )
    elif now != was:
        review.replaced.append(
            f"the stack moves from the cluster {was} to {now}: the Kubernetes provider is REPLACED, so every "
            f"Kubernetes object and Helm release of the stack is created on {now}, then deleted from {was}"
        )


def review_changes(
    previous: Mapping[str, Any] | None,
    current: Mapping[str, Any],
    tpu_pool_urn: Callable[[str], str],
    deletion_protection: bool = False,
) -> ChangeReview:
    """What applying ``current`` over the stack whose last ``lifecycle`` output was ``previous`` does.

    ``tpu_pool_urn``: the URN a TPU pool has in the stack's state, by its name (what `pulumi state unprotect` takes).
    ``deletion_protection``: cluster.deletionProtection as this config sets it.
    """
    review = ChangeReview([], [])
    if not previous:
        return review  # a new stack: nothing to replace
    refused, replaced, by_hand, in_place = review.refused, review.replaced, review.by_hand, review.in_place
    cluster_before = previous.get("cluster") or {}
    if IDENTIFIER_FACT in cluster_before or IDENTIFIER_FACT in current["cluster"]:
        _review_cluster_made_elsewhere(cluster_before, current["cluster"], review)
        if IDENTIFIER_FACT not in current["cluster"]:
            # Back to a cluster the stack makes: it, its pools, its network and every object on it are new; only the
            # buckets were there before.
            _review_buckets(previous.get("buckets") or {}, current["buckets"], review)
            return review
    elif cluster_changes := _changes(cluster_before, current["cluster"]):
        if all(cluster_before.get(key, current["cluster"][key]) == current["cluster"][key] for key in CLUSTER_IDENTITY):
            refused.append(
                Problem(
                    "network.prefix",
                    f"moves the cluster to another network ({cluster_changes}), which replaces it under "
                    "the same name: the Kubernetes provider, whose clusterIdentifier is the cluster's project, region "
                    "and name, is then only updated, not replaced, so the new, empty cluster would be taken to hold "
                    "every Kubernetes object and Helm release of the stack, and none would be created in it",
                    "keep the prefix of this stack, or change cluster.name in the same `up`: a new identifier "
                    "replaces the provider, and every object is created in the new cluster",
                )
            )
        elif deletion_protection:
            # The old cluster goes first: its name is the program's, so the bridge answers DeleteBeforeReplace
            # (pulumi/pulumi-terraform-bridge 59de6c6 pkg/tfbridge/schema.go nameRequiresDeleteBeforeReplace; pulumi-gcp
            # autonames `name`, provider/resources.go SetAutonaming), and Pulumi deletes what depends on it before it
            # (pulumi/pulumi 9e1882e tests/integration/delete_before_create/step2/index.ts: DeleteReplacement of the
            # dependents, then of the base): every node pool and, through the Kubernetes provider, every object. The
            # provider then refuses the cluster's delete while its state holds deletion_protection true
            # (hashicorp/terraform-provider-google-beta 93c65b2 google-beta/services/container/
            # resource_container_cluster.go resourceContainerClusterDelete; the delete reads the state, not the config).
            refused.append(
                Problem(
                    "cluster.deletionProtection",
                    f"true while the `up` replaces the GKE cluster {cluster_before.get('name')} ({cluster_changes}): "
                    "the old cluster is deleted first, after every node pool (the TPU pools give up their cubes) and "
                    "every Kubernetes object, and the provider refuses that delete while deletion protection is on in "
                    "the stack's state, as an `up` with it on leaves it: the `up` would stop there, the cluster empty",
                    "set it false, in an `up` of its own with the old cluster settings if the last `up` had it on (the "
                    "delete reads the state; a production stack: production false too, docs/recovery.md); then "
                    "replace the cluster, and set it true again after",
                )
            )
        else:
            replaced.append(
                f"the GKE cluster {cluster_before.get('name')} will be REPLACED ({cluster_changes}): "
                "every node pool, every Kubernetes object, the Kueue queues and their state are deleted and created "
                "anew. The old cluster is deleted first, after them: if the last `up` left cluster.deletionProtection "
                "on, the provider (which reads it from the state) refuses that delete and the `up` stops there; "
                "turn it off in an `up` of its own first"
            )
    network_name = current["cluster"].get("network")
    if "network" in current and cluster_before.get("network", network_name) == network_name:
        _review_network(previous.get("network") or {}, current["network"], review)  # a new network: all new
    _review_platform_releases(previous.get("platformReleases"), current["platformReleases"], review)
    _review_buckets(previous.get("buckets") or {}, current["buckets"], review)
    system_after = current.get("systemPool") or {}
    if system_changes := _changes(before_boot_hardening(previous.get("systemPool") or {}, system_after), system_after):
        replaced.append(
            f"the system node pool will be REPLACED ({system_changes}): the controllers and the staging "
            "Job move to its new nodes, and the webhooks that fail closed refuse workload creates until they are back"
        )
    before_pools, after_pools = previous.get("tpuPools") or {}, current["tpuPools"]
    removed = sorted(set(before_pools) - set(after_pools))
    added = sorted(set(after_pools) - set(before_pools))
    if removed and added and any(after_pools[name]["reservation"] for name in added):
        refused.append(
            Problem(
                "tpu.pools",
                f"pool(s) {', '.join(removed)} leave and {', '.join(added)} arrive in one `up`: the new pools would ask "
                "the reservation for the cubes the old ones still hold, and Pulumi creates before it deletes",
                "remove the old pools in one `pulumi up`, then add the new ones in the next",
            )
        )
    pool_changes: dict[str, str] = {}  # TPU pool -> what replaces it
    rebooted: set[str] = set()  # the TPU pools whose boot changes
    for name in sorted(set(before_pools) & set(after_pools)):
        before, after = before_boot_hardening(before_pools[name], after_pools[name]), after_pools[name]
        # A new topology alone does not replace the pool (every other fact does): of placement_policy only the
        # block's count and policy_name are ForceNew, tpu_topology is not, and the update sends no placement policy
        # (hashicorp/terraform-provider-google-beta v7.45.0 google-beta/services/container/
        # resource_container_node_pool.go; a nested field diffs by its own schema, terraform-plugin-sdk v2
        # helper/schema/schema.go diffList). The `up` would resize the slice in place, which GKE refuses ("After you
        # create a multi-host TPU slice node pool, you can't add nodes to it": cloud.google.com/kubernetes-engine/
        # docs/concepts/tpus), or, at the same node count, leave the old topology under a config that names the new.
        if (changed_facts := _changed(before, after)) == ["topology"]:
            index = list(after_pools).index(name)  # the facts follow tpu.pools' order
            refused.append(
                Problem(
                    f"tpu.pools[{index}].topology",
                    f"{before['topology']!r} -> {after['topology']!r} on the running TPU pool {name}: the provider "
                    "would update the pool in place, not replace it, and GKE neither resizes a multi-host slice nor "
                    "changes its topology",
                    f"keep {before['topology']!r} on this pool; a pool of another topology is a new pool: give it "
                    "another name (tpu.pools[].name), and the `up` makes it and deletes this one",
                )
            )
            continue
        if changed := _changes(before, after):
            pool_changes[name] = changed
        if any(key in BOOT_FACTS for key in changed_facts):
            rebooted.add(name)
    # Pulumi refuses, at preview, to replace a resource protected before and after (pulumi/pulumi v3.259.0,
    # pkg/resource/deploy/step_generator.go: "unable to replace resource ... marked for protection"), unless the
    # state's flag is cleared first; the `up` then protects the new pool again.
    # (the state's flag is the last `up`'s; one of a program that did not export it is taken as today's setting)
    protected = bool(current.get("tpuPoolsProtected")) and bool(previous.get("tpuPoolsProtected", True))
    unprotect = ". It is protected (tpu.protectPools): the preview stops at it until the state's flag is cleared, "
    for name in removed:
        line = (
            f"TPU pool {name} will be DELETED, with its nodes and every slice on them, at the end of the `up`: delete "
            "the workloads on it first (active Slices hold a pool)"
        )
        if protected:
            line += f"{unprotect}`pulumi state unprotect '{tpu_pool_urn(name)}'`"
        replaced.append(line)
    for name, changed in pool_changes.items():
        line = (
            f"TPU pool {name} will be REPLACED, deleted before it is created again ({changed}): "
            "its nodes and every slice on them go; delete the workloads on it first (active Slices hold a pool)"
        )
        if name in rebooted and len(rebooted) > 1:
            line += (
                ". Its boot is what changes: to keep serving on the other cubes, replace one per `up`, with "
                "tpu.pools[].hardenedBoot false on the others for this one"
            )
        if protected:
            line += f"{unprotect}`pulumi state unprotect '{tpu_pool_urn(name)}'`, and the `up` protects the new pool"
        replaced.append(line)
    before_charts = previous.get("chartsWithCrdsHelmKeeps") or {}
    for key, chart in (current.get("chartsWithCrdsHelmKeeps") or {}).items():
        old_version = (before_charts.get(key) or {}).get("version")
        if old_version and old_version != chart["version"]:
            by_hand.append(
                f"platform.{key}: the chart goes {old_version} -> {chart['version']}, and Helm upgrades the controller "
                "but neither updates nor adds the CRDs this chart ships in its crds/ folder (a controller that watches "
                "a kind without its CRD exits once its cache cannot sync, which Helm's wait may not see). Apply them "
                "before this `up`: "
                f"helm show crds {chart['chart']} --version {chart['version']} "
                "| kubectl apply --server-side --force-conflicts -f -"
            )
    before_queues, after_queues = previous.get("queues") or {}, current.get("queues") or {}
    # A ResourceFlavor with a topology keeps its topologyName and nodeLabels for good (XValidation rules of its CRD,
    # kueue v0.17.8 apis/kueue/v1beta2/resourceflavor_types.go), in use or not; a renamed one is a new flavor, and the
    # old one, like a renamed Topology, is held by Kueue's finalizer while anything references it.
    in_use = (
        "Kueue's CRD holds a ResourceFlavor's topologyName and nodeLabels immutable once it has a topology, and Kueue "
        "holds a Topology or flavor in use until nothing references it"
    )
    # Kueue's LocalQueue CRD holds spec.clusterQueue immutable (an XValidation rule, kueue v0.17.1
    # apis/kueue/v1beta2/localqueue_types.go:35): a LocalQueue that keeps its name cannot follow a renamed ClusterQueue
    # (the twin saw the update refused), while renamed LocalQueues are new objects, made pointing at it (the twin ran
    # that `up`). A stack whose last `up` did not export its LocalQueues' name is taken to keep it.
    repointed = (
        "each LocalQueue of the stack points at the ClusterQueue by name, and Kueue holds that immutable (renamed with "
        "queues.localQueueName, the LocalQueues are new ones)"
    )
    renamed = set(_changed(before_queues, after_queues))
    if "localQueueName" in renamed:
        renamed.discard("clusterQueueName")
    for key, setting_key, why in (
        ("topologyName", "queues.topologyName", in_use),
        ("resourceFlavorName", "queues.resourceFlavorName", in_use),
        ("acceleratorLabel", "tpu.machineType", in_use),
        ("clusterQueueName", "queues.clusterQueueName", repointed),
    ):
        if key in renamed:
            refused.append(
                Problem(
                    setting_key,
                    f"{before_queues[key]!r} -> {after_queues[key]!r}: {why}",
                    f"keep {before_queues[key]!r} on this stack",
                )
            )
    token_file_before = (previous.get("secretManager") or {}).get("tokenFile")
    if token_file_before and (current.get("secretManager") or {}).get("addOn") is False:
        refused.append(
            Problem(
                "cluster.secretManager",
                "false while the running model servers and staging Job mount the Hugging Face token through GKE's "
                "Secret Manager add-on: the cluster is updated before those pods change, so the add-on's driver "
                "would be gone while they still hold its volumes",
                "keep it true in this `up`, which moves the pods off the token file; turn it off in the next one",
            )
        )
    if "isolation" in current:
        # Before these settings existed the program made nodes with external addresses and no NAT, GKE's default IP
        # endpoints (public, no authorized network), the DNS-based endpoint not opened to outside traffic.
        isolation_before = previous.get("isolation") or {
            "privateNodes": dict.fromkeys([naming.SYSTEM_POOL_NAME, *(before_pools or after_pools)], False),
            "nat": "",
            "dnsEndpoint": False,
            "ipEndpoint": "public",
            "authorizedNetworks": [],
        }
        _review_isolation(isolation_before, current["isolation"], current["cluster"], review)
    if "hardening" in current:
        _review_hardening(previous.get("hardening") or {}, current["hardening"], current["cluster"], review)
    if "pullThrough" in current:
        _review_pull_through(previous.get("pullThrough") or {}, current["pullThrough"], review)
    denied_before = set(previous.get(DEFAULT_DENY_FACT) or [])
    if newly_denied := [n for n in current.get(DEFAULT_DENY_FACT) or [] if n not in denied_before]:
        in_place.append(
            f"network policies: every pod of {', '.join(newly_denied)} accepts only what a NetworkPolicy admits, "
            "in place: each namespace's default-deny-ingress policy is made after the policies that admit the "
            "senders of the stack's own pods there, so nothing the stack runs is cut off; a pod you run there "
            "yourself accepts connections only from its own node until it has a NetworkPolicy of its own "
            "(docs/network.md, Network policies)"
        )
    return review


def _review_network(before: Mapping[str, Any], after: Mapping[str, Any], review: ChangeReview) -> None:
    """What a new range or MTU of the network the stack makes does to the cluster running on it (the network itself
    unchanged). A fact the last `up` did not export is not compared.

    The provider replaces a subnet whose new range does not contain the old one, and grows it in place otherwise
    (hashicorp/terraform-provider-google-beta v7.45.0 google-beta/services/compute/resource_compute_subnetwork.go,
    ForceNewIfChange of ip_cidr_range with IsShrinkageIpCidr; the growth is Compute Engine's expandIpCidrRange, which
    a proxy-only subnet does not take: gcloud's reference of `compute networks subnets expand-ip-range`). Its secondary
    ranges are updated in place, under the cluster that takes its pods' and Services' addresses from them, which
    GKE says leaves the cluster unstable ("Create a VPC-native cluster", Limitations). The MTU is updated in place
    (the same release's resource_compute_network.go), but Google Cloud asks that every VM of the network be stopped
    first: VMs that started before and after the change differ ("Change the MTU setting of a VPC network").
    """
    refused = review.refused

    def keep(key: str, what: str, fix: str = "") -> None:
        fix = fix or f"keep {before[key]!r} on this stack"
        refused.append(Problem(f"network.{key}", f"{before[key]!r} -> {after[key]!r} on a running stack: {what}", fix))

    changed = _changed(before, after)
    if "nodeCidr" in changed:
        old, new = ipaddress.ip_network(before["nodeCidr"]), ipaddress.ip_network(after["nodeCidr"])
        if old.subnet_of(new):  # type: ignore[arg-type]
            review.in_place.append(
                f"network.nodeCidr: the node subnet's range grows from {old} to {new} in place (a subnet's range can "
                "only grow: it cannot go back)"
            )
        else:
            keep(
                "nodeCidr",
                "a range that does not contain the old one replaces the node subnet, under its name, while every node "
                "of the cluster is on it",
                f"keep {before['nodeCidr']!r}, or a range that contains it (the subnet then grows in place)",
            )
    for key, of in (("podCidr", "pods'"), ("serviceCidr", "Services'")):
        if key in changed:
            keep(
                key,
                f"the cluster takes its {of} addresses from this secondary range of the node subnet, and GKE says a "
                "secondary range replaced under a running cluster leaves it unstable",
            )
    if "proxyOnlyCidr" in changed:
        keep(
            "proxyOnlyCidr",
            "a proxy-only subnet's range cannot grow, and any other range replaces the subnet, under its name, under "
            "the load balancers whose proxies run in it",
        )
    if "mtu" in changed:
        keep(
            "mtu",
            "the network's MTU would change under its running nodes, and nodes made after it would not match the others "
            "(Google Cloud asks that every VM of the network be stopped first)",
            f"keep {before['mtu']}; a network of another MTU is a new network: change network.prefix and cluster.name "
            "together, or destroy the stack and bring it up again",
        )


def _review_buckets(before: Mapping[str, Any], after: Mapping[str, Any], review: ChangeReview) -> None:
    """What a bucket of the stack that changes its name or place does to its data.

    A bucket's name, location and project are ForceNew (hashicorp/terraform-provider-google-beta v7.45.0
    google-beta/services/storage/resource_storage_bucket.go), and a name the program sets makes the bridge delete the
    old bucket first (pulumi/pulumi-terraform-bridge pkg/tfbridge/provider.go, nameRequiresDeleteBeforeReplace). Kept
    on destroy (retain_on_delete), the delete is skipped (pulumi/pulumi v3.259.0 pkg/resource/deploy/step.go,
    DeleteStep.Apply): the old bucket stays, and with it its name, which Cloud Storage holds globally, so a new bucket
    of that name cannot be made. Otherwise the old bucket is deleted with everything in it (force_destroy) first.

    A bucket that leaves the stack (its workload off, serving.weightsBucket.create false) goes the same way, at the
    end of the `up`. Kept, it is no longer the stack's, and an `up` that makes it again (its workload back on) fails at
    the create: the provider's create only inserts (resource_storage_bucket.go resourceStorageBucketCreate returns
    the insert's error), and Cloud Storage answers 409 conflict for a name that exists, the caller's own bucket
    included (cloud.google.com/storage/docs/json_api/v1/status-codes, 409 Conflict). Only this `up` can say so: the
    next one's facts no longer name it.
    """
    for key, gone in before.items():
        if key in after:
            continue
        name = gone["name"]
        if gone.get("keepOnDestroy", True):
            review.replaced.append(
                f"{key}: the bucket {name} leaves the stack at the end of the `up` and stays in the project with its "
                "data (keepOnDestroy). An `up` that makes it again fails at its create while it exists (Cloud Storage "
                "refuses a name that is taken): then `pulumi import` it into the stack, or delete it, first"
            )
        else:
            review.replaced.append(f"{key}: the bucket {name} will be DELETED with everything in it")
    for key, bucket in after.items():
        old = before.get(key)
        if not old:
            continue
        name, kept = old["name"], old.get("keepOnDestroy", True)
        moved = _changes({fact: old[fact] for fact in ("region", "project")}, bucket)  # of the facts that place it
        if name == bucket["name"] and moved:
            what = (
                "and the old one, kept on destroy, would still hold its name: the `up` fails at the create"
                if kept
                else "deleted first with everything in it"
            )
            review.refused.append(
                Problem(
                    key,
                    f"the bucket {name} would be replaced under the same name ({moved}), {what}",
                    "give the bucket another name in the same `up`, or keep its region and project",
                )
            )
        elif name != bucket["name"]:
            fate = (
                "left in the project with its data (keepOnDestroy), no longer used"
                if kept
                else "DELETED with everything in it before the new one is made"
            )
            review.replaced.append(
                f"{key}: the bucket {name} will be REPLACED by {bucket['name']}, which starts empty; {name} is {fate}"
            )


def _review_platform_releases(before: Mapping[str, str] | None, after: Mapping[str, str], review: ChangeReview) -> None:
    """Refuses the platform's releases going all at once (platform.install false) or one moving to another namespace,
    under the running stack, and says loudly which go when the stack stops installing some of them (dynamic slicing
    ends with a machine type that has none); nothing is compared against an `up` that did not export the releases.

    Uninstalled, Kueue's release takes its CRDs with it (they are templates of its chart, with no keep policy:
    kubernetes-sigs/kueue v0.17.8 charts/kueue/templates/crd), and every ClusterQueue, LocalQueue and Workload with
    them. A release's namespace is replaced by the Kubernetes provider, the new release installed first
    (pulumi/pulumi-kubernetes v4.32.0 provider/pkg/provider/helm_release.go Diff: `.namespace` forces a new release,
    DeleteBeforeReplace false), and Helm refuses to install over the cluster-wide objects the old release owns.
    """
    if not before:
        return
    if not after:
        review.refused.append(
            Problem(
                "platform.install",
                f"false on a running stack: the releases {', '.join(sorted(before))} would be uninstalled at the end of "
                "the `up`, Kueue's CRDs with its release, and with them every queue and Workload under the running "
                "workloads",
                "keep it true; to hand the controllers to another owner, first `pulumi state delete` each release "
                "(kubernetes:helm.sh/v3:Release), which leaves it installed",
            )
        )
        return
    if gone := [key for key in before if key not in after]:
        with_crds = ", Kueue's CRDs with its release, and every ClusterQueue, LocalQueue and Workload with them"
        review.replaced.append(
            f"platform: the releases {', '.join(gone)} will be UNINSTALLED at the end of the `up`, as this stack no "
            f"longer installs them{with_crds if 'kueue' in gone else ''}: delete the workloads that use them first"
        )
    for key in _changed(before, after):
        review.refused.append(
            Problem(
                f"platform.{key}.namespace",
                f"{before[key]!r} -> {after[key]!r} on a running stack: the release would be installed anew in "
                f"{after[key]!r} before the old one goes, and Helm refuses to install it over the cluster-wide "
                "objects (CRDs, webhook configurations, cluster roles) the old release owns",
                f"keep {before[key]!r} on this stack",
            )
        )


def _review_pull_through(before: Mapping[str, Any], after: Mapping[str, Any], review: ChangeReview) -> None:
    """What is replaced and what changes in place when the pull-through repositories change."""
    replaced, in_place = review.replaced, review.in_place
    added = [registry for registry in after if registry not in before]
    removed = [registry for registry in before if registry not in after]
    kept = [registry for registry in after if registry in before]
    if added:
        ids = ", ".join(after[registry]["repository"] for registry in added)
        in_place.append(
            f"images.pullThrough: the Artifact Registry remote repositories {ids} are created (the API first, then each "
            "repository and the nodes' read on it) before any Kubernetes object changes; every image from "
            f"{', '.join(added)} is then pulled through them, so each pod template naming one changes and its "
            "workload rolls as for a new image (docs/operations.md, What a change does). Each repository starts empty "
            "and fetches an image at its first pull"
        )
    if removed:
        ids = ", ".join(before[registry]["repository"] for registry in removed)
        in_place.append(
            f"images.pullThrough: the repositories {ids} and their caches are deleted once no pod template names them; "
            f"the workloads roll back to pulling from {', '.join(removed)} (or the mirror)"
        )
    for registry in kept:
        if before[registry].get("credentials", "") != after[registry]["credentials"]:
            in_place.append(
                f"images.pullThrough: the upstream credentials of {after[registry]['repository']} ({registry}) change "
                "in place: the repository and its cache stay, and its next fetch from the registry uses them"
            )
        if changed := [key for key in ("repository", "upstream") if before[registry].get(key) != after[registry][key]]:
            replaced.append(
                f"the pull-through repository {before[registry].get('repository')} of {registry} will be REPLACED, "
                f"deleted before it is created again ({', '.join(changed)} changed): its cache starts empty, a pod that "
                "pulls in between waits in back-off until it is back, and the nodes' read on it is granted again"
            )


def _review_hardening(
    before: Mapping[str, Any], after: Mapping[str, Any], cluster: Mapping[str, Any], review: ChangeReview
) -> None:
    """What changes in place and what is left to do by hand when a CIS GKE setting of the cluster changes. A setting
    the last `up` did not export is as the program made it before the setting existed: off (Binary Authorization's
    enforcement and a group of RBAC until asked for, https://cloud.google.com/binary-authorization/docs/enable-cluster
    turns enforcement on for an existing cluster; intranode visibility, which GKE leaves off on Standard clusters,
    https://cloud.google.com/kubernetes-engine/docs/how-to/intranode-visibility).

    Intranode visibility turned on for a running cluster restarts its control plane and nodes: gcloud's help of
    --enable-intra-node-visibility (google-cloud-sdk 578.0.0, lib/googlecloudsdk/command_lib/container/flags.py,
    read in the google-cloud-sdk-unofficial/google-cloud-sdk mirror at v578.0.0); nothing read here says what turning
    it off restarts. gcloud turns Google Groups for RBAC on only: every --security-group sends enabled=True
    (lib/googlecloudsdk/api_lib/container/api_adapter.py, same release), so turning it off is an API call.
    """
    in_place = review.in_place
    if before.get("intranodeVisibility", False) != after["intranodeVisibility"]:
        in_place.append(
            "cluster.intranodeVisibility: turned on IN PLACE (the cluster is updated, not replaced), and GKE "
            "restarts the control plane and every node to apply it (gcloud's help of --enable-intra-node-"
            "visibility): the controllers restart, and each TPU pool loses every slice of its cube at once, the "
            "serving groups on it reloading the model. Make this `up` in the maintenance window"
            if after["intranodeVisibility"]
            else "cluster.intranodeVisibility: turned off IN PLACE (the cluster is updated, not replaced); what GKE "
            "restarts to apply it is not documented in a source this program could read: plan for what turning "
            "it on does, the control plane and every node restarted, in the maintenance window"
        )
    if before.get("binaryAuthorization", gcp_config.BINARY_AUTHORIZATION_OFF) != after["binaryAuthorization"]:
        in_place.append(
            "cluster.binaryAuthorization: the cluster enforces the project's Binary Authorization policy, in place "
            "(its API enabled first). Running pods keep running; every pod created after it (a rollout, a pod "
            "moved by a node upgrade or repair, the next slice check) is admitted only if the policy allows its "
            "images: read the policy first, `gcloud container binauthz policy export`"
            if after["binaryAuthorization"] == gcp_config.BINARY_AUTHORIZATION_ENFORCED
            else "cluster.binaryAuthorization: the cluster no longer enforces the project's Binary Authorization "
            "policy, in place: every image is admitted again"
        )
    group_before, group_after = before.get("rbacSecurityGroup", ""), after["rbacSecurityGroup"]
    if group_after and not group_before:
        in_place.append(
            f"cluster.rbacSecurityGroup: Google Groups for RBAC is turned on with {group_after}, in place: a "
            "RoleBinding that names a group nested in it grants the group's members its role"
        )
    elif group_after and group_after != group_before:
        in_place.append(
            f"cluster.rbacSecurityGroup: GKE reads the groups of RBAC from {group_after} instead of "
            f"{group_before}, in place: bindings to groups nested only in {group_before} stop granting"
        )
    elif group_before and not group_after:
        review.by_hand.append(
            "cluster.rbacSecurityGroup: the group is now empty, but the provider reads a missing "
            f"authenticator_groups_config as GKE's, so GKE keeps reading the groups of RBAC from {group_before}. "
            "gcloud only sets a group (--security-group); to turn the feature off, update the cluster through "
            f"GKE's API: clusters.update of projects/{cluster['project']}/locations/{cluster['region']}/clusters/"
            f'{cluster["name"]} with {{"update": {{"desiredAuthenticatorGroupsConfig": {{"enabled": false}}}}}}'
        )


def _review_isolation(
    before: Mapping[str, Any], after: Mapping[str, Any], cluster: Mapping[str, Any], review: ChangeReview
) -> None:
    """What changes in place and what is left to do by hand when the nodes' or the control plane's exposure changes."""
    in_place, by_hand = review.in_place, review.by_hand
    # the project named, as the stack's getCredentialsCommand output names it: gcloud's default project may be another
    credentials = (
        f"gcloud container clusters get-credentials {cluster['name']} --region {cluster['region']} "
        f"--project {cluster['project']}"
    )
    nodes_before: Mapping[str, bool] = before.get("privateNodes") or {}
    if after["nat"] and not before.get("nat"):
        in_place.append(
            f"network.nat: Cloud NAT {after['nat']} and its Cloud Router are created, before any node goes private: "
            "the private nodes' way to registries outside Google, Hugging Face and the package index"
        )
    for pool, private in after["privateNodes"].items():
        if pool not in nodes_before or nodes_before[pool] == private:
            continue
        change = "lose their external addresses" if private else "get external addresses again"
        in_place.append(
            f"cluster.privateNodes: the system node pool's nodes {change} IN PLACE (the pool is updated, not "
            "replaced); GKE may recreate the nodes to apply it, and the controllers on them restart elsewhere"
            if pool == naming.SYSTEM_POOL_NAME
            else f"tpu.pools[].privateNodes or cluster.privateNodes: the nodes of TPU pool {pool} {change} IN PLACE "
            "(the pool is updated, not replaced, and keeps its reservation cube); GKE may recreate the nodes to apply "
            "it, which takes every slice of the cube down at once. To keep serving, move one TPU pool per `up` "
            "(tpu.pools[].privateNodes), in the maintenance window"
        )
    if before.get("nat") and not after["nat"]:
        in_place.append(f"network.nat: Cloud NAT {before['nat']} is deleted, after the nodes have external addresses")
    if before.get("dnsEndpoint") != after["dnsEndpoint"]:
        in_place.append(
            "cluster.controlPlane.dnsEndpoint: the DNS-based endpoint takes traffic from outside Google Cloud, in "
            "place (IAM's container.clusters.connect decides who); the stack's kubeconfig and Kubernetes provider "
            f"move to it (the provider is updated, not replaced). kubectl: `{credentials} --dns-endpoint`"
            if after["dnsEndpoint"]
            else "cluster.controlPlane.dnsEndpoint: the DNS-based endpoint refuses traffic from outside Google Cloud, "
            "in place; the stack's kubeconfig and Kubernetes provider move to the IP endpoint (the provider is "
            "updated, not replaced), and kubeconfigs made with --dns-endpoint stop working"
        )
    ip_before, ip_after = before.get("ipEndpoint"), after["ipEndpoint"]
    if ip_before != ip_after:
        answers = {
            "public": "a public and a private IP",
            "private": "the private IP only (the VPC)",
            "off": "no IP at all (the DNS-based endpoint only)",
        }[ip_after]
        line = f"cluster.controlPlane.ipEndpoint: the control plane answers on {answers}, in place"
        if ip_after != "public":
            line += "; kubeconfigs that name its public IP stop working: outside the VPC, use "
            line += f"`{credentials} --dns-endpoint`"
        in_place.append(line)
    networks_before, networks_after = before.get("authorizedNetworks") or [], after["authorizedNetworks"]
    if ip_after == "public" and networks_before != networks_after:
        if networks_after:
            in_place.append(
                f"cluster.controlPlane.authorizedNetworks: the public IP admits only {', '.join(networks_after)} "
                "(and no other Google Cloud address), in place"
            )
        elif ip_before == "public":
            by_hand.append(
                "cluster.controlPlane.authorizedNetworks: the list is now empty, but the provider reads a missing "
                "list as 'keep GKE's', so the public IP still admits only "
                f"{', '.join(networks_before)}. To open it to every address: gcloud container clusters update "
                f"{cluster['name']} --region {cluster['region']} --no-enable-master-authorized-networks"
            )
