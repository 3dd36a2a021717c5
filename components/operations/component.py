"""The alerting of the stack: notification channels, Cloud Monitoring alert policies, and the
scrape of Kueue's metrics the pending-workload policy reads."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from components.operations import objects as alerting
from components.operations.objects import AlertingObjects
from components.resources import kubernetes_object


@dataclass(frozen=True)
class AlertingArgs:
    objects: AlertingObjects
    provider: k8s.Provider
    apis: list[pulumi.Resource]  # the Monitoring API: channels and policies need it
    kueue_ready: list[pulumi.Resource]  # the Kueue release: its metrics ClusterRole and pods
    gateway_annotations: pulumi.Output[dict[str, str] | None] | None  # None: no serving Gateway


class Alerting(pulumi.ComponentResource):
    def __init__(self, name: str, args: AlertingArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-gke:operations:Alerting", name, None, opts)
        spec = args.objects.spec
        on_project = pulumi.ResourceOptions(parent=self, depends_on=args.apis)
        channels = [
            gcp.monitoring.NotificationChannel(
                f"alert-email-{_slug(email)}",
                project=spec.project,
                type="email",
                display_name=f"{spec.cluster_name} alerts: {email}",
                labels={"email_address": email},
                opts=on_project,
            )
            for email in spec.emails
        ]
        notify: list[pulumi.Input[str]] = [*(c.name for c in channels), *spec.notification_channels]
        if args.objects.kueue_metrics is not None:
            # In the file's order, each after the ones before it: the token Secret names its
            # ServiceAccount, and Kubernetes deletes a token Secret whose account does not exist yet.
            made: list[pulumi.Resource] = list(args.kueue_ready)
            for manifest in args.objects.kueue_metrics:
                on_cluster = pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=list(made))
                made.append(kubernetes_object(f"kueue-metrics-{manifest['kind'].lower()}", manifest, on_cluster))
        self.policy_names = [policy["key"] for policy in args.objects.policies]
        for policy in args.objects.policies:
            _alert_policy(policy, spec.project, notify, on_project)
        if args.gateway_annotations is not None:
            static = alerting.gateway_errors(spec, None)
            conditions = args.gateway_annotations.apply(
                lambda annotations: alerting.gateway_errors(spec, alerting.url_map_name(annotations))["conditions"]
            )
            _alert_policy({**static, "conditions": conditions}, spec.project, notify, on_project)
            self.policy_names.append(static["key"])
        self.register_outputs({"alertPolicies": self.policy_names})


def _alert_policy(
    policy: dict[str, Any], project: str, notify: list[pulumi.Input[str]], opts: pulumi.ResourceOptions
) -> gcp.monitoring.AlertPolicy:
    fields = {key: value for key, value in policy.items() if key != "key"}
    return gcp.monitoring.AlertPolicy(
        f"alert-{policy['key']}", project=project, notification_channels=notify, opts=opts, **fields
    )


def _slug(email: str) -> str:
    """A resource name from an address: stable under reordering, so a new address adds one channel."""
    return re.sub(r"[^a-z0-9]+", "-", email.lower()).strip("-")
