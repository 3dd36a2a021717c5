"""Maps the validated stack config onto the in-cluster components' typed args."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from components import kueue_objects
from components.platform import PlatformArgs
from components.queues import QueuesArgs
from components.stack_config import StackConfig


def platform_args(config: StackConfig, provider: k8s.Provider) -> PlatformArgs:
    platform = config.platform
    return PlatformArgs(
        provider=provider,
        jobset=platform.jobset,
        kueue=platform.kueue if config.dynamic_slicing else None,
        kueue_controller=platform.kueue_controller,
        leader_worker_set=platform.leader_worker_set if config.dynamic_slicing else None,
        slice_controller=platform.slice_controller if config.dynamic_slicing else None,
    )


def queues_args(config: StackConfig, provider: k8s.Provider, kueue_release: pulumi.Resource) -> QueuesArgs:
    return QueuesArgs(
        provider=provider,
        kueue_release=kueue_release,
        namespaces=list(config.queues.namespaces),
        queue_objects=kueue_objects.queue_objects(config),
        priority_class_objects=kueue_objects.priority_class_objects(config),
    )
