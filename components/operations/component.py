"""What an operator watches: notification channels, Cloud Monitoring alert policies and dashboards, and
the metric scrapes they read (Kueue's, vLLM's)."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from components.gcp.config import ClusterConfig
from components.operations import objects as alerting
from components.operations.config import AlertsConfig, email_channel_name
from components.operations.objects import MonitoringObjects
from components.resources import kubernetes_object

# The component was `Alerting` ("alerting") before it made dashboards: the alias keeps the URNs of what it
# made then (channels, policies, the Kueue scrape), so that change replaces nothing.
PREVIOUS_NAME = pulumi.Alias(name="alerting", type_="tpu-gke:operations:Alerting")


@dataclass(frozen=True)
class MonitoringArgs:
    alerts: AlertsConfig  # whom the policies notify
    cluster: ClusterConfig  # names the notification channels
    project: str
    objects: MonitoringObjects
    provider: k8s.Provider
    apis: list[pulumi.Resource]  # the Monitoring API: channels, policies and dashboards need it
    kueue_ready: list[pulumi.Resource]  # the Kueue release: its metrics ClusterRole and pods
    namespaces_ready: list[pulumi.Resource]  # the workload namespaces (the vLLM scrapes live in serving's)
    gateway_annotations: pulumi.Output[dict[str, str] | None] | None  # None: no serving Gateway


class Monitoring(pulumi.ComponentResource):
    def __init__(self, name: str, args: MonitoringArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(
            "tpu-gke:operations:Monitoring",
            name,
            None,
            pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(aliases=[PREVIOUS_NAME])),
        )
        objects = args.objects
        on_project = pulumi.ResourceOptions(parent=self, depends_on=args.apis)
        if objects.kueue_metrics is not None:
            # In the file's order, each after the ones before it: the token Secret names its
            # ServiceAccount, and Kubernetes deletes a token Secret whose account does not exist yet.
            made: list[pulumi.Resource] = list(args.kueue_ready)
            for manifest in objects.kueue_metrics:
                on_cluster = pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=list(made))
                made.append(kubernetes_object(f"kueue-metrics-{manifest['kind'].lower()}", manifest, on_cluster))
        if objects.model_server_metrics is not None:
            in_namespace = pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=args.namespaces_ready)
            for manifest in objects.model_server_metrics:
                kubernetes_object(f"metrics-{manifest['metadata']['name']}", manifest, in_namespace)
        self.policy_names: list[str] = [policy["key"] for policy in objects.alerts or []]
        if objects.alerts is not None:
            alerts = args.alerts
            # A channel is named by its entry's index: a resource name is in the URN, the state and the preview in
            # plain text, never secret (pulumi.com/docs/iac/concepts/resources/names), and the address may be (the
            # `alerts` block set with `pulumi config set --secret`); the address goes in as a secret, encrypted in
            # the state (pulumi.com/docs/iac/concepts/secrets). A channel was named by its address before
            # (email_channel_name): an alias renames it in place, once per old name, as the engine refuses two
            # resources aliasing one (pulumi/pulumi@1b59498 pkg/resource/deploy/step_generator.go, getOldResource).
            first: dict[str, int] = {}
            for index, email in enumerate(alerts.emails):
                first.setdefault(email_channel_name(email), index)
            channels = [
                gcp.monitoring.NotificationChannel(
                    f"alert-email-{index}",
                    project=args.project,
                    type="email",
                    display_name=pulumi.Output.secret(f"{args.cluster.name} alerts: {email}"),
                    labels={"email_address": pulumi.Output.secret(email)},
                    opts=pulumi.ResourceOptions.merge(
                        on_project,
                        pulumi.ResourceOptions(
                            aliases=[pulumi.Alias(name=old) for old, at in first.items() if at == index]
                        ),
                    ),
                )
                for index, email in enumerate(alerts.emails)
            ]
            notify: list[pulumi.Input[str]] = [*(c.name for c in channels), *alerts.notification_channels]
            for policy in objects.alerts:
                fields = {key: value for key, value in policy.items() if key != "key"}
                if policy["key"] == alerting.GATEWAY_KEY:  # of any GKE Gateway until the Gateway names its URL map
                    assert args.gateway_annotations is not None, "a serving stack has a Gateway"
                    fields["conditions"] = args.gateway_annotations.apply(
                        lambda annotations: alerting.gateway_conditions(
                            alerts, objects.gateway_class, alerting.url_map_name(annotations)
                        )
                    )
                gcp.monitoring.AlertPolicy(
                    f"alert-{policy['key']}",
                    project=args.project,
                    notification_channels=notify,
                    opts=on_project,
                    **fields,
                )
        self.dashboard_urls: dict[str, pulumi.Output[str]] = {}
        for board in objects.dashboards:
            made_board = gcp.monitoring.Dashboard(
                f"dashboard-{board.key}",
                project=args.project,
                dashboard_json=json.dumps(board.body, sort_keys=True),
                opts=on_project,
            )
            self.dashboard_urls[board.key] = made_board.id.apply(
                # the console's page of a dashboard, from the resource's id (projects/<number>/dashboards/<id>)
                lambda dashboard_id: (
                    "https://console.cloud.google.com/monitoring/dashboards/builder/"
                    f"{dashboard_id.rsplit('/', 1)[-1]}?project={args.project}"
                )
            )
        self.register_outputs({"alertPolicies": self.policy_names, "dashboards": self.dashboard_urls})
