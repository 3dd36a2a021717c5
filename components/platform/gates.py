"""Gates: resources that create nothing, whose create or delete waits for the cluster to be ready.

Pulumi orders deletes by dependencies only; it cannot know that a TPU pool must outlive the Slices on its nodes, or a
subnet the endpoint groups GKE made in it. A gate sits between two layers in the dependency graph: what is above it
depends on it, it depends on what is below.

* ``DrainGate``: creating it waits for nothing; deleting it (after everything above is deleted) waits, bounded and
  reporting progress, until what the layer above left behind is gone.
* ``ReadyGate``: creating or updating it waits until a Service can serve (a webhook's, so that what depends on it is
  never refused by a webhook that is still starting; the llm-d router's, whose readiness Helm cannot judge); deleting
  it waits for nothing and asks the cluster nothing.

They are Pulumi dynamic resources: the engine runs them with this program's Python, from this module
(``components.platform.gates``, a path the state refers to: keep it importable). The waits themselves are
components/platform/drain.py. Their lines reach the CLI through the provider's stderr.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, fields
from typing import Any, TypeVar

import pulumi
import pulumi.dynamic

from components.platform import drain
from components.platform.config import PlatformConfig, QueuesConfig

Spec = TypeVar("Spec", drain.DrainSpec, drain.ReadySpec)


def _report(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _spec(kind: type[Spec], props: dict[str, Any]) -> Spec:
    """What a gate waits for: those of its inputs that are fields of ``kind`` (its name, its kubeconfig and a
    ReadyGate's ``release_revision`` are not), the others at their defaults."""
    names = {field.name for field in fields(kind)}
    return kind(**{key: value for key, value in props.items() if key in names})


class _GateProvider(pulumi.dynamic.ResourceProvider):
    """Creates, updates and deletes nothing in the cloud; only waits."""

    def create(self, props: dict[str, Any]) -> pulumi.dynamic.CreateResult:
        return pulumi.dynamic.CreateResult(id_=str(props["name"]), outs=props)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> pulumi.dynamic.DiffResult:
        changed = [k for k in news if k != "__provider" and olds.get(k) != news.get(k)]
        return pulumi.dynamic.DiffResult(changes=bool(changed), replaces=[], delete_before_replace=False)

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> pulumi.dynamic.UpdateResult:
        return pulumi.dynamic.UpdateResult(outs=news)


class DrainGateProvider(_GateProvider):
    def delete(self, _id: str, props: dict[str, Any]) -> None:
        spec = _spec(drain.DrainSpec, props)
        if spec.waits_for_nothing:
            return  # only orders the deletes: no cluster call, no credentials needed
        client = drain.client_from_kubeconfig(props["kubeconfig"])
        drain.wait_until_gone(client, spec, what=str(props["name"]), report=_report)


def _wait_until_ready(props: dict[str, Any]) -> None:
    spec = _spec(drain.ReadySpec, props)
    drain.wait_until_ready(drain.client_from_kubeconfig(props["kubeconfig"]), spec, report=_report)


class ReadyGateProvider(_GateProvider):
    """Waits at create, and at each update: a changed input is a changed target (another Service, or the release
    behind it upgraded: ``release_revision``), which may not serve yet. The delete is the base class's: nothing."""

    def create(self, props: dict[str, Any]) -> pulumi.dynamic.CreateResult:
        _wait_until_ready(props)
        return super().create(props)

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> pulumi.dynamic.UpdateResult:
        _wait_until_ready(news)
        return super().update(_id, olds, news)


class _Gate(pulumi.dynamic.Resource):
    """A gate's inputs: its name, the kubeconfig it asks the cluster with, and what it waits for (``waits``, read by
    its ``gate_provider``)."""

    gate_provider: type[_GateProvider]

    def __init__(self, name: str, kubeconfig: pulumi.Input[str], opts: pulumi.ResourceOptions, **waits: Any):
        props = {"name": name, "kubeconfig": pulumi.Output.secret(kubeconfig), **waits}
        super().__init__(self.gate_provider(), name, props, opts)


class DrainGate(_Gate, module="tpu-gke", name="DrainGate"):
    """Waits on delete for every slices.accelerator.gke.io object (``slices``), the admitted Kueue Workloads that have
    not finished in ``workload_namespaces`` and GKE's ServiceNetworkEndpointGroups in ``neg_namespaces`` to be gone."""

    gate_provider = DrainGateProvider


class ReadyGate(_Gate, module="tpu-gke", name="ReadyGate"):
    """Waits on create and update until the Service ``service_namespace``/``service_name`` has a ready endpoint; with
    ``webhook_configuration``, until that MutatingWebhookConfiguration carries its CA too; with ``deployment``, until
    that Deployment runs its current template (drain.ReadySpec). ``check`` is what its timeout tells to look at, and
    ``release_revision`` (the Helm release the Service comes from) is an input only so that each upgrade of the
    release updates the gate, which waits again."""

    gate_provider = ReadyGateProvider


@dataclass(frozen=True)
class ClusterGatesArgs:
    kubeconfig: pulumi.Input[str]
    tpu_pools: list[pulumi.Resource]  # outlive every Slice and admitted Workload
    # Dynamic slicing's queues (None without): its Slices, and the Workloads Kueue admits in their namespaces (where
    # the stack's TPU workloads run), hold the TPU pools
    queues: QueuesConfig | None
    slice_controller: pulumi.Resource | None  # outlives the Slices it finalizes; None: not installed by this stack
    platform: PlatformConfig  # the slice controller's namespace, and how long a drain gate waits
    subnets: list[pulumi.Resource]  # outlive the load balancers' endpoint groups
    load_balancer_namespaces: list[str]  # where the stack's Gateway and load balancer Services live


class ClusterGates(pulumi.ComponentResource):
    """The gates between the layers: what the workloads wait for, and what waits for them to be gone."""

    def __init__(self, name: str, args: ClusterGatesArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-gke:k8s:ClusterGates", name, None, opts)
        controller = [args.slice_controller] if args.slice_controller else []
        drain_timeout = args.platform.drain_timeout_minutes * 60
        self.tpu = DrainGate(
            "tpu-drain-gate",
            args.kubeconfig,
            pulumi.ResourceOptions(parent=self, depends_on=[*args.tpu_pools, *controller]),
            slices=args.queues is not None,
            workload_namespaces=list(args.queues.namespaces) if args.queues else [],
            neg_namespaces=[],
            timeout_seconds=drain_timeout,
        )
        self.load_balancers = DrainGate(
            "load-balancer-drain-gate",
            args.kubeconfig,
            pulumi.ResourceOptions(parent=self, depends_on=args.subnets),
            slices=False,
            workload_namespaces=[],
            neg_namespaces=list(args.load_balancer_namespaces),
            timeout_seconds=drain_timeout,
        )
        self.slice_webhook = None
        if args.slice_controller is not None:
            self.slice_webhook = ReadyGate(
                "slice-controller-webhook",
                args.kubeconfig,
                pulumi.ResourceOptions(parent=self, depends_on=controller),
                webhook_configuration="slice-controller-mutating-webhook-configuration",
                service_namespace=args.platform.slice_controller.namespace,
                service_name="slice-controller-webhook-service",
                timeout_seconds=600,
            )
        self.register_outputs({})

    @property
    def before_tpu_workloads(self) -> list[pulumi.Resource]:
        """What a TPU workload waits for: the drain gate (so it is deleted first) and a serving webhook."""
        return [self.tpu, *([self.slice_webhook] if self.slice_webhook else [])]
