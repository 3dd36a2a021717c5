"""The in-cluster platform: controllers by Helm and the Kueue queueing of dynamic slicing."""

from components.platform.gates import ClusterGates
from components.platform.queues import KueueQueues
from components.platform.releases import ClusterPlatform

__all__ = ["ClusterGates", "ClusterPlatform", "KueueQueues"]
