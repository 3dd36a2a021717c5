"""What the slice controller registers, read from its source at the commit the chart pins (AI-Hypercomputer/xpk
250d4b3, slice/config/webhook/manifests.yaml): the oracle the local chart's test holds the chart to, and what the
twin's stand-in registers for the JobSets and LeaderWorkerSets it answers."""

from __future__ import annotations

# webhook name -> (apiGroup, apiVersion, resource, path)
WEBHOOKS = {
    "mjob.kb.io": ("batch", "v1", "jobs", "/mutate-batch-v1-job"),
    "mjobset.kb.io": ("jobset.x-k8s.io", "v1alpha2", "jobsets", "/mutate-jobset-x-k8s-io-v1alpha2-jobset"),
    "mleaderworkerset.kb.io": (
        "leaderworkerset.x-k8s.io",
        "v1",
        "leaderworkersets",
        "/mutate-leaderworkerset-x-k8s-io-v1-leaderworkerset",
    ),
    "mstatefulset.slice-controller.kb.io": ("apps", "v1", "statefulsets", "/mutate-apps-v1-statefulset"),
}
