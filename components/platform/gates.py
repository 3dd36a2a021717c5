"""Gates: resources that create nothing, whose create or delete waits for the cluster to be ready.

Pulumi orders deletes by dependencies only; it cannot know that a TPU pool must outlive the
Slices on its nodes, or a subnet the endpoint groups GKE made in it. A gate sits between two
layers in the dependency graph: what is above it depends on it, it depends on what is below.

* ``DrainGate``: creating it waits for nothing; deleting it (after everything above is deleted)
  waits, bounded and reporting progress, until what the layer above left behind is gone.
* ``ReadyGate``: creating it waits until a webhook can serve, so what depends on it is never
  refused by a webhook that is still starting; deleting it waits for nothing.

They are Pulumi dynamic resources: the engine runs them with this program's Python, from this
module (``components.platform.gates``, a path the state refers to: keep it importable). The waits
themselves are components/platform/drain.py. Their lines reach the CLI through the provider's
stderr.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi.dynamic

from components.platform import drain


def _report(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class _GateProvider(pulumi.dynamic.ResourceProvider):
    """Creates, updates and deletes nothing in the cloud; only waits."""

    def create(self, props: dict[str, Any]) -> pulumi.dynamic.CreateResult:
        self._on_create(props)
        return pulumi.dynamic.CreateResult(id_=str(props["name"]), outs=props)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> pulumi.dynamic.DiffResult:
        changed = [k for k in news if k != "__provider" and olds.get(k) != news.get(k)]
        return pulumi.dynamic.DiffResult(changes=bool(changed), replaces=[], delete_before_replace=False)

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> pulumi.dynamic.UpdateResult:
        return pulumi.dynamic.UpdateResult(outs=news)

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        self._on_delete(props)

    def _on_create(self, props: dict[str, Any]) -> None:
        pass

    def _on_delete(self, props: dict[str, Any]) -> None:
        pass


class DrainGateProvider(_GateProvider):
    def _on_delete(self, props: dict[str, Any]) -> None:
        spec = drain.DrainSpec(
            slices=bool(props["slices"]),
            workload_namespaces=tuple(props["workload_namespaces"]),
            neg_namespaces=tuple(props["neg_namespaces"]),
            timeout_seconds=float(props["timeout_seconds"]),
        )
        if spec.waits_for_nothing:
            return  # only orders the deletes: no cluster call, no credentials needed
        client = drain.client_from_kubeconfig(props["kubeconfig"])
        drain.wait_until_gone(client, spec, what=str(props["name"]), report=_report)


class ReadyGateProvider(_GateProvider):
    def _on_create(self, props: dict[str, Any]) -> None:
        client = drain.client_from_kubeconfig(props["kubeconfig"])
        spec = drain.WebhookSpec(
            configuration=str(props["webhook_configuration"]),
            service_namespace=str(props["service_namespace"]),
            service_name=str(props["service_name"]),
            timeout_seconds=float(props["timeout_seconds"]),
        )
        drain.wait_until_webhook_serves(client, spec, report=_report)


@dataclass(frozen=True)
class DrainGateArgs:
    kubeconfig: pulumi.Input[str]
    slices: bool  # wait for every slices.accelerator.gke.io object to be gone
    workload_namespaces: list[str]  # and for the admitted Kueue Workloads in these
    neg_namespaces: list[str]  # and for GKE's ServiceNetworkEndpointGroups in these
    timeout_seconds: int


class DrainGate(pulumi.dynamic.Resource, module="tpu-gke", name="DrainGate"):
    def __init__(self, name: str, args: DrainGateArgs, opts: pulumi.ResourceOptions | None = None):
        props = {
            "name": name,
            "kubeconfig": pulumi.Output.secret(args.kubeconfig),
            "slices": args.slices,
            "workload_namespaces": list(args.workload_namespaces),
            "neg_namespaces": list(args.neg_namespaces),
            "timeout_seconds": args.timeout_seconds,
        }
        super().__init__(DrainGateProvider(), name, props, opts)


@dataclass(frozen=True)
class ReadyGateArgs:
    kubeconfig: pulumi.Input[str]
    webhook_configuration: str  # a MutatingWebhookConfiguration that must carry its CA
    service_namespace: str  # and the Service behind it, which must have a ready endpoint
    service_name: str
    timeout_seconds: int


class ReadyGate(pulumi.dynamic.Resource, module="tpu-gke", name="ReadyGate"):
    def __init__(self, name: str, args: ReadyGateArgs, opts: pulumi.ResourceOptions | None = None):
        props = {
            "name": name,
            "kubeconfig": pulumi.Output.secret(args.kubeconfig),
            "webhook_configuration": args.webhook_configuration,
            "service_namespace": args.service_namespace,
            "service_name": args.service_name,
            "timeout_seconds": args.timeout_seconds,
        }
        super().__init__(ReadyGateProvider(), name, props, opts)


# --- The gates of this deployment -------------------------------------------------------

SLICE_CONTROLLER_WEBHOOK = "slice-controller-mutating-webhook-configuration"
SLICE_CONTROLLER_WEBHOOK_SERVICE = "slice-controller-webhook-service"
WEBHOOK_READY_TIMEOUT_SECONDS = 600


@dataclass(frozen=True)
class ClusterGatesArgs:
    kubeconfig: pulumi.Input[str]
    tpu_pools: list[pulumi.Resource]  # outlive every Slice and admitted Workload
    slices: bool  # dynamic slicing: Slices and admitted Workloads hold the TPU pools
    slice_controller: pulumi.Resource | None  # outlives the Slices it finalizes; None: not installed by this stack
    slice_controller_namespace: str
    subnets: list[pulumi.Resource]  # outlive the load balancers' endpoint groups
    workload_namespaces: list[str]  # where Kueue admits the stack's TPU workloads
    load_balancer_namespaces: list[str]  # where the stack's Gateway and load balancer Services live
    drain_timeout_seconds: int


class ClusterGates(pulumi.ComponentResource):
    """The gates between the layers: what the workloads wait for, and what waits for them to be gone."""

    def __init__(self, name: str, args: ClusterGatesArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-gke:k8s:ClusterGates", name, None, opts)
        below_tpu_workloads = [*args.tpu_pools, *([args.slice_controller] if args.slice_controller else [])]
        self.tpu = DrainGate(
            "tpu-drain-gate",
            DrainGateArgs(
                kubeconfig=args.kubeconfig,
                slices=args.slices,
                workload_namespaces=args.workload_namespaces,
                neg_namespaces=[],
                timeout_seconds=args.drain_timeout_seconds,
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=below_tpu_workloads),
        )
        self.load_balancers = DrainGate(
            "load-balancer-drain-gate",
            DrainGateArgs(
                kubeconfig=args.kubeconfig,
                slices=False,
                workload_namespaces=[],
                neg_namespaces=args.load_balancer_namespaces,
                timeout_seconds=args.drain_timeout_seconds,
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=args.subnets),
        )
        self.slice_webhook: ReadyGate | None = None
        if args.slice_controller is not None:
            self.slice_webhook = ReadyGate(
                "slice-controller-webhook",
                ReadyGateArgs(
                    kubeconfig=args.kubeconfig,
                    webhook_configuration=SLICE_CONTROLLER_WEBHOOK,
                    service_namespace=args.slice_controller_namespace,
                    service_name=SLICE_CONTROLLER_WEBHOOK_SERVICE,
                    timeout_seconds=WEBHOOK_READY_TIMEOUT_SECONDS,
                ),
                opts=pulumi.ResourceOptions(parent=self, depends_on=[args.slice_controller]),
            )
        self.register_outputs({})

    @property
    def before_tpu_workloads(self) -> list[pulumi.Resource]:
        """What a TPU workload waits for: the drain gate (so it is deleted first) and a serving webhook."""
        return [self.tpu, *([self.slice_webhook] if self.slice_webhook else [])]
