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
    """A JobSet or LeaderWorkerSet name (a Kubernetes name: its field says so) whose Slice names stay readable."""
    if problem := naming.slice_name_budget_problem(namespace, name):
        problems.add(key, problem, f"shorten {namespace_key} or this name")
        return False
    return True
