"""The protections a stack asks for across its blocks: what a production stack must have on (high availability, the
TPU upgrade policy of a stack that serves), the CIS GKE controls held in production, and the supply chain (the digest
rule over every image the stack runs, StackConfig.stack_images, with the setting that pins each). They read several
blocks, so they live above them.
"""

from __future__ import annotations

from dataclasses import dataclass

from components.config_base import ImageReference, Problems, PullPath, image_name_problem
from components.gcp.config import (
    BINARY_AUTHORIZATION_ENFORCED,
    RBAC_SECURITY_GROUP_NAME,
    ClusterConfig,
    ImagesConfig,
    NetworkConfig,
    TpuConfig,
)
from components.operations.config import NodeAuditLoggingConfig
from components.platform.config import PlatformConfig
from components.workloads.serving.config import ServingConfig

MIN_HA_REPLICAS = 2  # one controller replica may restart (or its node upgrade) while the other serves
MIN_PRODUCTION_SYSTEM_NODES = 2  # per zone: a system-node upgrade or repair never leaves a zone empty


def validate_upgrade_policy(cluster: ClusterConfig, serves: bool, production: bool, problems: Problems) -> None:
    """A stack that serves, or is production, has a maintenance window: GKE then upgrades a TPU cube only inside it.

    Without one, an auto-upgrade of a TPU pool may start at any hour: GKE recreates the pool's
    nodes as one unit (the pools upgrade with max_surge 0 and every node unavailable, the only way
    a multi-host slice can), which takes every slice of that cube down and reloads the weights of
    each serving group on it. One problem for both reasons: the serving one says more.
    """
    if cluster.existing.enabled or cluster.maintenance_window is not None:
        return
    if serves:
        problems.add(
            "cluster.maintenanceWindow",
            "is not set on a stack that serves: GKE may auto-upgrade a TPU pool at any hour, recreating a whole "
            "cube (every slice on it) and reloading the weights of each serving group it held",
            "set start, end and recurrence to the hours serving can lose a cube (see docs/tpu-upgrades.md)",
        )
    elif production:
        problems.add(
            "cluster.maintenanceWindow",
            "is not set on a production stack: GKE would upgrade the cluster and its pools at any hour",
            "set start, end and recurrence to the hours the stack can lose a cube",
        )


def validate_production(
    production: bool,
    network: NetworkConfig,
    cluster: ClusterConfig,
    tpu: TpuConfig,
    platform: PlatformConfig,
    serving: ServingConfig,
    node_audit: NodeAuditLoggingConfig,
    problems: Problems,
) -> None:
    """Every protection of a stack marked production is on (the images' digests: ``validate_supply_chain``), then the
    CIS GKE Benchmark controls it must meet through its config (docs/cis-benchmark.md's table "Measured against the
    CIS GKE Benchmark" lists every control and what holds it)."""
    if not production:
        return
    if serving.enabled and serving.router.install and serving.router.replicas < MIN_HA_REPLICAS:
        problems.add(
            "serving.router.replicas",
            f"{serving.router.replicas} on a production stack: while that one endpoint picker restarts (or its node "
            "drains), the Gateway fails open and sends requests to any model server, without P/D routing",
            f"use {MIN_HA_REPLICAS} or more (one leads, the others stand by)",
        )
    if not cluster.existing.enabled:
        if not cluster.deletion_protection:
            problems.add(
                "cluster.deletionProtection",
                "is false on a production stack: `pulumi destroy` or a replacing change would delete the cluster",
                "set it true (before a planned destroy, set production false with it: docs/recovery.md)",
            )
        if not tpu.protect_pools:
            problems.add(
                "tpu.protectPools",
                "is false on a production stack: a stray change could delete a TPU pool and its reservation cube",
                "set it true (before a planned destroy, set production false with it: docs/recovery.md)",
            )
        if not cluster.private_nodes:
            problems.add(
                "cluster.privateNodes",
                "is false on a production stack: every node has an external address the internet can reach (CIS GKE 5.6.5)",
                "set it true (the stack then makes Cloud NAT for the nodes' way out, network.nat)",
            )
        for i, pool in enumerate(tpu.pools):
            if pool.private_nodes is False:
                problems.add(
                    f"tpu.pools[{i}].privateNodes",
                    f"is false on a production stack: the nodes of {pool.name} have external addresses",
                    "remove it: the pool follows cluster.privateNodes (a running production stack moves its cubes "
                    "together, in the maintenance window: docs/operations.md, What a change does)",
                )
        if cluster.control_plane.ip_endpoint == "public":
            reach = (
                "only the ranges of cluster.controlPlane.authorizedNetworks reach"
                if cluster.control_plane.authorized_networks
                else "any address on the internet reaches, no authorized network limiting it (CIS GKE 5.6.3),"
            )
            problems.add(
                "cluster.controlPlane.ipEndpoint",
                f"is public on a production stack: {reach} the control plane's public IP, and public access to the "
                "control plane must be disabled (CIS GKE 5.6.4)",
                "set it off (the DNS-based endpoint with IAM serves kubectl, CI and this stack) or private (the VPC "
                "only)",
            )
        if cluster.system_pool.nodes_per_zone < MIN_PRODUCTION_SYSTEM_NODES:
            problems.add(
                "cluster.systemPool.nodesPerZone",
                f"{cluster.system_pool.nodes_per_zone} on a production stack: an upgrade or repair of that node "
                "leaves its zone without controllers",
                f"use {MIN_PRODUCTION_SYSTEM_NODES} or more",
            )
    if platform.install:
        for key, count in (
            ("platform.kueueController.replicas", platform.kueue_controller.replicas),
            ("platform.sliceController.replicas", platform.slice_controller.replicas),
        ):
            if count < MIN_HA_REPLICAS:
                problems.add(
                    key,
                    f"{count} on a production stack: while that one replica restarts, its fail-closed webhooks "
                    "refuse every workload create",
                    f"use {MIN_HA_REPLICAS} or more",
                )
    if serving.enabled and serving.hf_token:
        problems.add(
            "serving.hfToken",
            "is set on a production stack: the token would be a Kubernetes Secret of the cluster, handed to the pods "
            "as an environment variable, instead of staying in an external secret store (CIS GKE 4.4.2)",
            "keep it in Secret Manager and name its version in serving.hfTokenSecretVersion, with "
            "cluster.secretManager true (see docs/deploying.md, The prod stack); then "
            "`pulumi config rm --path serving.hfToken`",
        )
    if cluster.existing.enabled:
        return
    if not network.flow_logs.enabled:
        problems.add(
            "network.flowLogs.enabled",
            "is false on a production stack: no record of the flows to and from the nodes and pods would be kept "
            "(CIS GKE 5.6.1)",
            "set it true",
        )
    if not cluster.secrets_encryption_key:
        problems.add(
            "cluster.secretsEncryptionKey",
            "is empty on a production stack: the cluster's Secrets would be encrypted in etcd by Google's key only, "
            "not by a Cloud KMS key the project controls (CIS GKE 5.3.1)",
            "name a Cloud KMS key in the cluster's region: the stack grants the GKE service agent its "
            "Encrypter/Decrypter role on a key of this project, the preview says how for another's (see "
            "docs/deploying.md, The prod stack)",
        )
    # Held twice, written once: here under the key that fixes it; policy/gke.py holds every boot disk of the render.
    if not cluster.boot_disk_encryption_key:
        problems.add(
            "cluster.bootDiskEncryptionKey",
            "is empty on a production stack: the nodes' boot disks (the images, the logs, what pods write to their "
            "nodes) would be encrypted by Google's key only, not by a Cloud KMS key the project controls (CIS GKE 5.9.2)",
            "name a Cloud KMS key: the stack grants the Compute Engine service agent its Encrypter/Decrypter role on "
            "a key of this project, the preview says how for another's (see docs/deploying.md, The prod stack)",
        )
    if tpu.secure_boot is False:
        problems.add(
            "tpu.secureBoot",
            "is false on a production stack: the TPU nodes would boot without verifying the signatures of their boot "
            "components (CIS GKE 5.5.7)",
            "set it true",
        )
    elif not tpu.secure_boot_on:
        problems.add(
            "tpu.secureBoot",
            f"is unset on a production stack, and no source read here says GKE makes {tpu.machine_type} nodes with "
            "secure boot: the TPU pools would boot without it (CIS GKE 5.5.7)",
            "set it true (if GKE does not make these nodes with it, the create of a TPU pool fails)",
        )
    if not cluster.binary_authorization_enforced:
        problems.add(
            "cluster.binaryAuthorization",
            f"is {cluster.binary_authorization} on a production stack: the cluster would admit any image, whatever the "
            "project's Binary Authorization policy says (CIS GKE 5.1.4)",
            f"set it {BINARY_AUTHORIZATION_ENFORCED} once the organisation has set the project's policy: "
            "docs/deploying.md, The prod stack",
        )
    if not cluster.rbac_security_group:
        problems.add(
            "cluster.rbacSecurityGroup",
            "is empty on a production stack: RoleBindings could name single accounts only, never the organisation's "
            "Google Groups (CIS GKE 5.8.2)",
            f"name the organisation's {RBAC_SECURITY_GROUP_NAME}@<domain> group: docs/deploying.md, The prod stack",
        )
    if not cluster.intranode_visibility:
        problems.add(
            "cluster.intranodeVisibility",
            "is false on a production stack: traffic between pods on one node would never reach the VPC, so its flow "
            "logs and firewall rules would not see it (CIS GKE 5.6.1)",
            "set it true; on a running cluster, in the maintenance window: GKE restarts every node to apply it",
        )
    if node_audit.enabled is False:
        problems.add(
            "nodeAuditLogging.enabled",
            "is false on a production stack: the nodes' audit logging would not be set up and no record of their "
            "login attempts and binary executions would reach Cloud Logging (CIS GKE 5.7.2)",
            "remove the line (a production stack deploys it unless told otherwise) or set it true",
        )


def boot_hardening_warnings(production: bool, cluster: ClusterConfig, tpu: TpuConfig) -> list[str]:
    """What preview says of a production stack whose TPU pools boot without its hardening: each pool kept so while a
    running stack replaces its cubes one per `up` (tpu.pools[].hardenedBoot false)."""
    if not production or cluster.existing.enabled:
        return []
    return [
        f"tpu.pools[{i}].hardenedBoot: {pool.name} boots from a disk Google's key encrypts, without secure boot, on a "
        "production stack (CIS GKE 5.9.2, 5.5.7); remove the line when its cube can be replaced, one pool per `up` "
        "(docs/operations.md, What a change does)"
        for i, pool in enumerate(tpu.pools)
        if not pool.hardened_boot
    ]


# --- The supply chain: every image the stack runs, and its digest ---------------------------------


@dataclass(frozen=True)
class StackImage:
    """One image the stack deploys, as its source names it (``image``: tag, and digest once pinned), and the
    setting that pins it (``key``: where its digest goes)."""

    key: str
    image: str
    runs: str  # what runs it, for the reader

    @property
    def digest(self) -> str:
        return ImageReference.parse(self.image).digest

    @property
    def registry(self) -> str:
        return ImageReference.parse(self.image).registry

    def output(self, pull_path: PullPath) -> dict[str, str]:
        """The stack output's entry (``images``): the setting, the source (what a mirror copies, or a pull-through
        repository fetches), and what the nodes pull."""
        return {"setting": self.key, "source": self.image, "pull": pull_path.image(self.image)}

    @property
    def pin_command(self) -> str:
        """The command that pins it by the digest its registry serves for its tag now."""
        if self.key == "platform.sliceController.digest":  # Renovate reads the digest with the tag beside it
            tag = ImageReference.parse(self.image).tag
            return (
                f"pulumi config set --path platform.sliceController.tag {tag} && "
                f"pulumi config set --path {self.key} $(crane digest {self.image})"
            )
        return f"pulumi config set --path {self.key} {self.image}@$(crane digest {self.image})"


def validate_supply_chain(production: bool, images: ImagesConfig, used: list[StackImage], problems: Problems) -> None:
    """A stack that requires digests (a production one unless images.requireDigests says otherwise) pulls every
    image by digest: a tag is a pointer its registry's owner may move, and the next pull would run what it points
    at without a change under review. The stack's intent, so held here alone (the policy pack pins every image it
    deploys by image_unpinned_reason, and digests only where its own policy config asks)."""
    if not images.digests_required(production):
        return
    why = "images.requireDigests is true" if images.require_digests else "a production stack pulls by digest"
    for image in used:
        if not image.digest:
            problems.add(
                image.key,
                f"{image.image!r} ({image.runs}) has no digest, and {why}: its tag can be moved under it",
                f"pin the digest its registry serves now: {image.pin_command}",
            )


def validate_pulled_names(pull_path: PullPath, used: list[StackImage], problems: Problems) -> None:
    """Each image as the nodes pull it is a name the kubelet takes: the mirror keeps an image's whole registry in its
    path (PullPath), and a registry's port there is a ':' no path component takes (InvalidImageName)."""
    for image in used:
        pulled = pull_path.image(image.image)
        if not image_name_problem(image.image) and (problem := image_name_problem(pulled)):
            problems.add(
                image.key,
                f"{image.image!r} ({image.runs}) would be pulled as {pulled!r}, and {problem}",
                "name the image from a registry without a port, or leave images.mirror unset",
            )


def supply_chain_warnings(production: bool, images: ImagesConfig, used: list[StackImage]) -> list[str]:
    """What preview says of a production stack that turned the digest rule off: each image pulled by its tag."""
    if not production or images.require_digests is not False:
        return []
    return [
        f"{image.key}: {image.image} ({image.runs}) is pulled by its tag on a production stack "
        f"(images.requireDigests is false); pin it: {image.pin_command}"
        for image in used
        if not image.digest
    ]
