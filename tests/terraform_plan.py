"""The render's Google Cloud resources as a Terraform plan, so checkov's terraform_plan checks read them.

pulumi-gcp is Terraform's Google provider bridged into Pulumi (pulumi/pulumi-terraform-bridge): a
resource's inputs are the provider's arguments, in camelCase, with a block of at most one element as an
object and a repeatable block under a plural name. Terraform's plan JSON (`terraform show -json`) holds
the same arguments under the resource's Terraform type, in snake_case, blocks as lists. checkov's
terraform_plan runner reads `planned_values` and wraps every value in a list itself
(checkov/terraform/plan_parser.py, `_hclify`), so a block given as an object reads as one given as a
one-element list. What must be exact is the names: the Terraform type of each Pulumi type, and the
repeatable blocks whose Pulumi name is a plural of their Terraform name.

A value known only after apply (the render's ``[unknown]``, such as the node service account's email)
is left out of the planned values and marked in `after_unknown`, as Terraform's plan leaves it. What a
plan would add on top, the provider's defaults for arguments the program leaves out, is not here: a
check that reads an argument the program does not set sees nothing (so it passes a check that forbids
a value and fails one that expects a value). Each check the CIS table of docs/cis-benchmark.md relies on is held by a
broken copy that makes it fail (tests/test_security_checkov.py), which a wrong name here would not.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from harness.mock_engine import SECRET, UNKNOWN

FORMAT_VERSION = "1.2"
# checkov takes a JSON file for a plan when it has this key (checkov/terraform/plan_utils.py); no
# Terraform made this one, and the value says so.
TERRAFORM_VERSION = "none: written from a Pulumi render by tests/terraform_plan.py"
# The Terraform type of each Pulumi type translated, as pulumi-gcp's bridge metadata records them
# (pulumi/pulumi-gcp@01316f36 provider/cmd/pulumi-resource-gcp/bridge-metadata.json, "current").
TERRAFORM_TYPES = {
    "gcp:container/cluster:Cluster": "google_container_cluster",
    "gcp:container/nodePool:NodePool": "google_container_node_pool",
    "gcp:compute/network:Network": "google_compute_network",
    "gcp:compute/subnetwork:Subnetwork": "google_compute_subnetwork",
    "gcp:compute/firewall:Firewall": "google_compute_firewall",
    "gcp:projects/iAMMember:IAMMember": "google_project_iam_member",
    "gcp:projects/service:Service": "google_project_service",
}
# Repeatable blocks the bridge names in the plural, by their Pulumi name: the Terraform name
# (hashicorp/terraform-provider-google v7.45.0: google/services/compute/resource_compute_subnetwork.go
# `secondary_ip_range`, resource_compute_firewall.go `allow` and `deny`,
# google/services/container/resource_container_cluster.go `maintenance_exclusion`). Any other list of
# objects in a translated resource is refused until its Terraform name is written here.
PLURAL_BLOCKS = {
    "secondaryIpRanges": "secondary_ip_range",
    "allows": "allow",
    "denies": "deny",
    "maintenanceExclusions": "maintenance_exclusion",
}
# Lists of objects whose Pulumi name is the Terraform name in camelCase already.
SAME_NAME_LISTS = frozenset({"cidrBlocks"})
PROVIDER = "registry.terraform.io/hashicorp/google"


def snake(name: str) -> str:
    return PLURAL_BLOCKS.get(name) or re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def _is_unknown(value: Any) -> bool:
    return value == UNKNOWN


def _values(value: Any, where: str) -> Any:
    """Inputs as Terraform plans them: snake_case names, unknown values left out."""
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            if _is_unknown(item):
                continue
            blocks = isinstance(item, list) and any(isinstance(i, Mapping) for i in item)
            if blocks and key not in PLURAL_BLOCKS and key not in SAME_NAME_LISTS:
                raise ValueError(
                    f"{where}.{key}: a list of blocks whose Terraform name is not known; look it up in the "
                    "provider's schema and add it to PLURAL_BLOCKS (or SAME_NAME_LISTS) in tests/terraform_plan.py"
                )
            out[snake(key)] = _values(item, f"{where}.{key}")
        return out
    if isinstance(value, list):
        return [_values(item, f"{where}[{i}]") for i, item in enumerate(value) if not _is_unknown(item)]
    return value


def _unknowns(value: Any) -> Any:
    """`after_unknown`: true where the value is not known until apply, the same shape as the inputs."""
    if isinstance(value, Mapping):
        marks = {snake(k): (True if _is_unknown(v) else _unknowns(v)) for k, v in value.items()}
        return {k: v for k, v in marks.items() if v not in ({}, [], False)}
    if isinstance(value, list):
        marks = [True if _is_unknown(v) else _unknowns(v) for v in value]
        return marks if any(m not in ({}, [], False) for m in marks) else []
    return False


def address_name(name: str) -> str:
    """A Pulumi resource name as a Terraform resource name (letters, digits, ``_`` and ``-`` are allowed)."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", name)


def plan(resources: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """A plan JSON creating every translatable resource of a render's ``resources.json`` entries."""
    planned, changes = [], []
    for resource in resources:
        terraform_type = TERRAFORM_TYPES.get(resource["type"])
        if terraform_type is None:
            continue
        inputs = resource["inputs"]
        if SECRET in str(inputs):
            raise ValueError(f"{resource['name']}: a secret input cannot be planned offline")
        name = address_name(resource["name"])
        address = f"{terraform_type}.{name}"
        values = _values(inputs, resource["name"])
        common = {"address": address, "mode": "managed", "type": terraform_type, "name": name}
        planned.append({**common, "provider_name": PROVIDER, "values": values})
        changes.append(
            {
                **common,
                "provider_name": PROVIDER,
                "change": {"actions": ["create"], "before": None, "after": values, "after_unknown": _unknowns(inputs)},
            }
        )
    return {
        "format_version": FORMAT_VERSION,
        "terraform_version": TERRAFORM_VERSION,
        "planned_values": {"root_module": {"resources": planned}},
        "resource_changes": changes,
    }
