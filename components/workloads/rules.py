"""Rules every slice workload block (checks, serving) shares: its queue, priority, shape and names."""

from __future__ import annotations

from components import naming
from components.config_base import Problems
from components.gcp.config import TpuConfig
from components.platform.config import QueuesConfig


def validate_queued_namespace(queues: QueuesConfig, key: str, namespace: str, problems: Problems) -> None:
    """Kueue admits a workload only through the LocalQueue of its namespace."""
    if namespace not in queues.namespaces:
        problems.add(key, f"{namespace!r} has no LocalQueue", "use one of queues.namespaces, or add it there")


def validate_admitted_shape(tpu: TpuConfig, key: str, shape: str, problems: Problems) -> bool:
    """Whether ``shape`` is one the platform admits (its Kueue topology levels exist)."""
    if shape in tpu.slice_shapes:
        return True
    problems.add(
        key,
        f"{shape!r} is not one of tpu.sliceShapes {tpu.slice_shapes}",
        "use an admitted shape or add it to tpu.sliceShapes",
    )
    return False


def validate_workload_name(key: str, namespace: str, name: str, namespace_key: str, problems: Problems) -> bool:
    """A JobSet or LeaderWorkerSet name (a Kubernetes name: its field says so) whose Slice names stay readable.

    Both controllers' webhooks take only a DNS-1035 label, which a Kubernetes name (a DNS-1123 label) is once it starts
    with a letter: LeaderWorkerSet's validates metadata.name with NameIsDNS1035Label, the name of its headless Service
    (kubernetes-sigs/lws v0.10.0 pkg/webhooks/leaderworkerset_webhook.go), and JobSet's the names of the Jobs it makes,
    `<jobset>-<replicated job>-<index>`, with IsDNS1035Label (kubernetes-sigs/jobset v0.12.0
    pkg/webhooks/jobset_webhook.go). A name starting with a digit would pass the preview and be refused in the `up`."""
    if not name[:1].isalpha():
        problems.add(
            key,
            f"{name!r} starts with {name[:1]!r}: the JobSet and LeaderWorkerSet webhooks take only names that start "
            "with a letter (DNS-1035 labels), and would refuse it in the `up`",
            "start the name with a letter",
        )
        return False
    if problem := naming.slice_name_budget_problem(namespace, name):
        problems.add(key, problem, f"shorten {namespace_key} or this name")
        return False
    return True
