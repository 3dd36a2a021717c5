"""Operating a stack: the `alerts` block (Cloud Monitoring alert policies), the `dashboards` block and the
`nodeAuditLogging` block (the nodes' Linux audit records in Cloud Logging), with their rules. What a production
stack must have on, the CIS controls and the supply chain are components/hardening/rules.py's.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import Field, StringConstraints

from components import naming
from components.config_base import Block, Problems, form
from components.gcp.config import ClusterConfig

# At most 254 characters, the longest address SMTP carries (RFC 5321 4.5.3.1.3: a path of 256 octets with its angle
# brackets): the channel's display name, "<cluster> alerts: <address>", then stays within the 512 characters Cloud
# Monitoring takes (NotificationChannel.display_name, googleapis/googleapis@f8291d2b
# google/monitoring/v3/notification.proto).
Email = Annotated[
    str,
    StringConstraints(pattern=r"^[^@\s]+@[^@\s]+\.[^@\s]+$", max_length=254),
    Field(json_schema_extra=form("email address", "write name@example.com"), examples=["oncall@example.com"]),
]
# The project by its ID or its number: AlertPolicy.notification_channels takes
# projects/[PROJECT_ID_OR_NUMBER]/notificationChannels/[CHANNEL_ID] (googleapis/googleapis@f8291d2b
# google/monitoring/v3/alert.proto).
NotificationChannel = Annotated[
    str,
    StringConstraints(pattern=rf"^projects/({naming.PROJECT_ID}|[1-9][0-9]*)/notificationChannels/[0-9]+$"),
    Field(
        json_schema_extra=form(
            "notification channel name",
            "write projects/<project ID or number>/notificationChannels/<id> (gcloud beta monitoring channels list)",
        ),
        examples=["projects/my-project/notificationChannels/1"],
    ),
]


class AlertsConfig(Block):
    enabled: bool = Field(
        False,
        description="Cloud Monitoring alert policies: a TPU node not Ready, a multi-host TPU pool unavailable; with "
        "dynamic slicing an unhealthy slice or partition and a Kueue workload pending; with serving, model-server "
        "restarts and the Gateway's 5xx rate.",
    )
    emails: list[Email] = Field([], description="Addresses to notify (one email notification channel each).")
    notification_channels: list[NotificationChannel] = Field(
        [], description="Existing channels to notify as well: projects/<project>/notificationChannels/<id>."
    )
    # Cloud Monitoring writes the GKE node and container metrics up to 2 minutes late: a shorter "not Ready" duration
    # would page on the ingestion delay.
    node_not_ready_minutes: int = Field(
        10, description="A TPU node not Ready this long pages (critical).", ge=5, le=1440
    )
    pending_minutes: int = Field(
        30,
        description="The ClusterQueue holding a pending workload this long warns (Kueue 0.17 has no per-workload age).",
        ge=5,
        le=10080,
    )
    gateway_error_ratio: float = Field(
        0.05,
        description="Share of the serving Gateway's requests answered 5xx, over 5 minutes, that pages.",
        gt=0,
        lt=1,
    )
    model_server_restarts: int = Field(
        2, description="Model-server container restarts within 10 minutes that page (0 would page always).", ge=1
    )
    # The slice controller deletes a Slice not Ready after --activation-timeout (6m, manifests/charts/slice-controller)
    # and the workload is placed again; a shorter duration pages on that recovery.
    slice_unhealthy_minutes: int = Field(
        10,
        description="A TPU slice not ACTIVE, a partition not HEALTHY or a multi-host TPU pool unavailable this long pages "
        "(above the slice controller's 6-minute activation timeout, which recovers most on its own).",
        ge=8,
        le=1440,
    )
    runbook_base_url: str = Field(
        "",
        description="Where docs/runbooks/ of this repository is published (e.g. https://github.com/<org>/<repo>/blob/main/"
        "docs/runbooks): each alert links its runbook there; empty names the file in the repository.",
        pattern=r"^(https://[^\s]+)?$",
        json_schema_extra=form(
            "web address starting https://", "write the https:// address where docs/runbooks is published"
        ),
        examples=["https://github.com/example/tpu-gke/blob/main/docs/runbooks"],
    )


class DashboardsConfig(Block):
    enabled: bool = Field(
        True,
        description="Cloud Monitoring dashboards of the stack (serving, router, TPU, Kueue; Saxml on a Saxml stack) and the "
        "metric scrapes they read; stack output `dashboards` links each. None on a cluster made elsewhere "
        "(cluster.existing): the stack that makes that cluster makes them.",
    )


# The node audit logging's two images (manifests/operations/node-audit-logging.yaml says where each is listed):
# Fluent Bit, which ships the records, and BusyBox, whose chroot starts the node's audit setup, by the digest
# docker-library/repo-info records for its tag (01a7054230d50b3dccaf8d579f161c522be8c9f0 repos/busybox/remote/1.37.0.md;
# docs/supply-chain.md says why Fluent Bit has none).
NODE_AUDIT_AGENT_IMAGE = "docker.io/fluent/fluent-bit:5.1.1"
NODE_AUDIT_SETUP_IMAGE = (
    "docker.io/library/busybox:1.37.0@sha256:9db7b59979c38555a39def84a31fb98b5296952f9e3afd4f6f11f05b07adfab0"
)
# Its namespace, which holds nothing else: the one that enforces Pod Security's privileged level (components/platform/
# config.py, NODE_AGENTS_POD_SECURITY).
NODE_AUDIT_NAMESPACE = "node-audit"


class NodeAuditLoggingConfig(Block):
    enabled: bool | None = Field(
        None,
        description="On every Container-Optimized OS node, set up the node's audit logging (its systemd unit cloud-audit-setup) and "
        "ship its Linux audit records to Cloud Logging, log `linux-auditd` of resource type k8s_node (a DaemonSet in "
        "namespace node-audit; CIS GKE 5.7.2). Unset: on for a production stack, off elsewhere; a production stack "
        "refuses false. Not on a cluster made elsewhere (cluster.existing): the stack that makes that cluster deploys it.",
    )
    image: str = Field(
        NODE_AUDIT_AGENT_IMAGE,
        description="Fluent Bit image that reads the audit records from each node's journal and writes them to Cloud Logging "
        "(release tag or digest).",
    )
    setup_image: str = Field(
        NODE_AUDIT_SETUP_IMAGE,
        description="Image of the init container that runs `chroot /host systemctl start cloud-audit-setup` on each node: it needs "
        "a `chroot` (release tag or digest).",
    )


def node_audit_logging_on(node_audit: NodeAuditLoggingConfig, cluster: ClusterConfig, production: bool) -> bool:
    """Whether the stack deploys the node audit logging: as set, else on a production stack; never on a cluster made
    elsewhere, whose own stack deploys it."""
    if cluster.existing.enabled:
        return False
    return production if node_audit.enabled is None else node_audit.enabled


def validate_node_audit_logging(
    node_audit: NodeAuditLoggingConfig, cluster: ClusterConfig, production: bool, problems: Problems
) -> None:
    if cluster.existing.enabled and node_audit.enabled:
        problems.add(
            "nodeAuditLogging.enabled",
            "a cluster made elsewhere (cluster.existing) has its node audit logging deployed by the stack that makes it",
            "leave it unset, or let this stack make the cluster",
        )
    if not node_audit_logging_on(node_audit, cluster, production):
        return
    for key, image in (("image", node_audit.image), ("setupImage", node_audit.setup_image)):
        problems.require_pinned(f"nodeAuditLogging.{key}", image, "pin a release tag (x.y.z) or @sha256:<digest>")


def email_channel_name(email: str) -> str:
    """The resource name the email notification channel of ``email`` had before channels were named by their index
    (components/operations/component.py keeps it as the channel's alias, so no channel is replaced)."""
    return "alert-email-" + re.sub(r"[^a-z0-9]+", "-", email.lower()).strip("-")


def validate_alerts(alerts: AlertsConfig, cluster: ClusterConfig, production: bool, problems: Problems) -> None:
    if production and not alerts.enabled:
        problems.add(
            "alerts.enabled",
            "is false on a production stack: a failed TPU node or a stuck queue would go unnoticed",
            "set it true with alerts.emails or alerts.notificationChannels",
        )
    if not alerts.enabled:
        return
    if cluster.existing.enabled:
        problems.add(
            "alerts.enabled",
            "a cluster made elsewhere (cluster.existing) has its alerting made there too",
            "set it false, or let this stack make the cluster",
        )
    if not alerts.emails and not alerts.notification_channels:
        problems.add("alerts.emails", "is empty and so is alerts.notificationChannels: no one is notified", "add one")
