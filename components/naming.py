"""Naming rules and budgets for the Google Cloud names this program derives: each derived name computed here once,
so validation and the components agree on it, and a name that GCP would reject fails at preview, not mid-apply."""

from __future__ import annotations

import contextlib
import ipaddress
import re

# Length limits of the APIs (RFC 1035 labels for compute, tighter for GKE and IAM).
COMPUTE_NAME_MAX = 63
GKE_NAME_MAX = 40  # of a cluster and of a node pool
SERVICE_ACCOUNT_ID_MIN = 6
SERVICE_ACCOUNT_ID_MAX = 30
SLICE_NAME_MAX = 49  # accelerator.gke.io Slice names
SLICE_NAME_HASH_SUFFIX = 6  # "-" + 5 hex characters
SYSTEM_POOL_NAME = "system"  # the GKE node pool of the controllers; no TPU pool may take its name


# The GCP resource naming rule (RFC 1035 labels): declared on the fields of the names a stack file sets
# (components/gcp/config.py), so the schema holds it too, and on network.prefix for the names derived from it.
GCP_NAME = "[a-z]([-a-z0-9]*[a-z0-9])?"


def service_account_id_problem(account_id: str) -> str | None:
    if not SERVICE_ACCOUNT_ID_MIN <= len(account_id) <= SERVICE_ACCOUNT_ID_MAX:
        return (
            f"service account id {account_id!r} is {len(account_id)} characters; "
            f"IAM allows {SERVICE_ACCOUNT_ID_MIN} to {SERVICE_ACCOUNT_ID_MAX}"
        )
    # IAM's CreateServiceAccountRequest.accountId: 6-30 characters matching [a-z]([-a-z0-9]*[a-z0-9]) (IAM API
    # reference, googleapis.dev/dotnet/Google.Apis.Iam.v1/latest/api/Google.Apis.Iam.v1.Data.CreateServiceAccountRequest.html).
    # fullmatch: re.match's `$` also matches before a final newline, so "sax-reader\n" (a YAML `|` scalar) passed.
    if not re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])", account_id):
        return (
            f"service account id {account_id!r} may hold only lowercase letters, digits and hyphens, starting with a "
            "letter and ending with a letter or digit"
        )
    return None


PROJECT_ID = "[a-z][a-z0-9-]{4,28}[a-z0-9]"
PROJECT_ID_FORM = "6 to 30 lowercase letters, digits or hyphens, starting with a letter"


def project_id_problem(project: str) -> str | None:
    """Why the project ID ``project``, read from inside another setting's value, is none, or None."""
    if re.fullmatch(PROJECT_ID, project):
        return None
    return f"{project!r} is not a project ID: {PROJECT_ID_FORM}"


def bucket_name_problem(name: str) -> str | None:
    """Why ``name`` is no Cloud Storage bucket name we can create, or None."""
    # Cloud Storage's bucket names (cloud.google.com/storage/docs/buckets#naming). fullmatch, not re.match's `$`,
    # which also matches before a final newline: "sax-state\n" passed.
    if not re.fullmatch(r"[a-z0-9][a-z0-9._-]{1,61}[a-z0-9]", name):
        return "3 to 63 lowercase letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
    if name.startswith("goog") or "google" in name:
        return "names may not start with 'goog' or contain 'google'"
    with contextlib.suppress(ValueError):  # the same page: no "IP address in dotted-decimal notation"
        ipaddress.IPv4Address(name)
        return "names may not be an IP address in dotted-decimal notation"
    return None


def network_names(prefix: str) -> dict[str, str]:
    """The VPC, subnets, firewall rules, Cloud Router and NAT names of the reference deployment."""
    return {
        "network": f"{prefix}-main",
        "nodeSubnet": f"{prefix}-tpu",
        "proxyOnlySubnet": f"{prefix}-proxy",
        "internalFirewall": f"{prefix}-allow-internal",
        "controlPlaneFirewall": f"{prefix}-allow-control-plane",
        "router": f"{prefix}-router",
        "nat": f"{prefix}-nat",
    }


def secondary_range_names(prefix: str) -> dict[str, str]:
    return {"pods": f"{prefix}-pods", "services": f"{prefix}-services"}


def node_service_account_id(cluster_name: str) -> str:
    return f"{cluster_name}-nodes"


def slice_name_budget_problem(namespace: str, workload_name: str, limit: int = SLICE_NAME_MAX) -> str | None:
    """Why Slice names for ``workload_name`` (a JobSet or LeaderWorkerSet) in ``namespace`` break the budget, or None.

    Kueue's slice controller derives each Slice name from the namespace and the workload name, followed by the pod
    set and the slice index, and keeps it within ``limit`` by cutting the name and appending a 5-character hash. The
    derivation is the controller's and may change; this is a conservative budget on our side,
    ``len(namespace) + 1 + len(workload_name) + 6 <= limit`` (a hyphen between them, ``-`` plus the index or hash),
    within which ``<namespace>-<workload>`` survives whole in every Slice name, saying which workload holds it.
    """
    used = len(namespace) + 1 + len(workload_name) + SLICE_NAME_HASH_SUFFIX
    if used <= limit:
        return None
    room = limit - SLICE_NAME_HASH_SUFFIX - 1 - len(namespace)
    return (
        f"slice names for workload {workload_name!r} in namespace {namespace!r} need "
        f"{len(namespace)} + 1 + {len(workload_name)} + {SLICE_NAME_HASH_SUFFIX} = {used} characters; "
        f"the budget is {limit} (shorten the namespace or keep the workload name within {max(room, 0)} characters)"
    )


# Stack outputs the operator's tools read (tools/verify.py, bench.py, sax.py, render.py): one name for the export and
# for its reader.
MODEL_NAME_OUTPUT = "modelName"
BASE_URL_OUTPUT = "openaiBaseUrl"
SAX_ADDRESS_OUTPUT = "saxHttpAddress"
ADMISSION_PLAN_OUTPUT = "admissionPlan"
