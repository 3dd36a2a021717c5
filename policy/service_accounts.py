"""No pod runs as its namespace's ``default`` ServiceAccount (the CIS controls held: policy/cis.yaml).

Kubernetes runs a pod whose template names no account as the ``default`` ServiceAccount of its namespace, which
every such pod then shares, with whatever is ever granted to it. Each pod template the stack declares (a Pod,
Deployment, Job, JobSet, LeaderWorkerSet, ... at any depth) names an account of its own. The pods of the charts
installed from registries are the charts' (their templates are not in the preview); the local slice controller
chart's are checked on its render (tests/test_cis_benchmark.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from components.config_base import walk
from policy.resources import UnknownValue, is_unknown, kubernetes_objects

DEFAULT_ACCOUNT = "default"


def pod_specs(body: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(path, pod spec) of every pod template in an object, itself included when it is a Pod: a mapping that
    lists containers."""
    for path, value in walk(body):
        if isinstance(value, Mapping) and isinstance(value.get("containers"), Sequence):
            yield ".".join(path), value


def service_account_problems(resource_type: str, name: str, props: Mapping[str, Any]) -> list[str]:
    problems = []
    for obj in kubernetes_objects(resource_type, name, props):
        for where, spec in pod_specs(obj.body):
            # serviceAccount is the field's deprecated alias; serviceAccountName wins when both are set.
            account = spec.get("serviceAccountName") or spec.get("serviceAccount")
            if is_unknown(account):
                raise UnknownValue(name, f"{where}.serviceAccountName")
            if not account or account == DEFAULT_ACCOUNT:
                named = f"serviceAccountName {account!r}" if account else "no serviceAccountName"
                problems.append(
                    f"{obj.described} {where} has {named}, so its pods run as the namespace's default "
                    "ServiceAccount: give them an account of their own (CIS GKE 4.1.4)"
                )
    return problems
