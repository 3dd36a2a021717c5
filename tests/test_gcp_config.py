"""The network, cluster and tpu blocks: every bad value refused under its key before any resource."""

import dataclasses
from datetime import date

import pytest

from components.config_base import Problems
from components.gcp.config import (
    ClusterConfig,
    ExistingClusterConfig,
    ImagesConfig,
    TpuConfig,
    TpuPoolConfig,
    channel_floor_problem,
    key_grant_warnings,
    key_grants,
    validate_cluster,
)
from tests.conftest import assert_bad_input, run_stack, stack_config

LONG_NAME = "a" * 41
DEV_NETWORK = stack_config("dev").network  # the tests' dev stack: the ranges a bad one overlaps

# (override of the dev stack, config key named in the error, fragment of the message)
GCP_BAD_INPUTS = [
    pytest.param(
        {"tpu.pools": [{"name": "tpu7-pool-1", "nodeCount": 16, "topology": "4x4x"}]},
        "tpu.pools[0].topology",
        "not a TPU topology",
        id="malformed-pool-topology",
    ),
    pytest.param({"tpu.sliceShapes": ["2by2"]}, "tpu.sliceShapes[0]", "not a TPU topology", id="malformed-slice-shape"),
    pytest.param(
        {"tpu.sliceShapes": ["2x2x3"]}, "tpu.sliceShapes[0]", "neither a sub-slice", id="shape-outside-allowed-set"
    ),
    pytest.param(
        {"tpu.sliceShapes": ["4x8x8"]}, "tpu.sliceShapes[0]", "needs 4 cubes", id="super-slice-beyond-capacity"
    ),
    pytest.param(
        {"tpu.pools": [{"name": "tpu7-pool-1", "nodeCount": 15}]},
        "tpu.pools[0].nodeCount",
        "set 16",
        id="node-count-not-a-cube",
    ),
    pytest.param(
        {"tpu.pools": [{"name": "tpu7-pool-1", "nodeCount": 8, "topology": "2x4x4"}]},
        "tpu.pools[0].topology",
        "whole 4x4x4 cubes",
        id="tpu7x-pool-not-a-cube",
    ),
    pytest.param(
        {"tpu.machineType": "tpu7x-standard-8t"},
        "tpu.machineType",
        "not a known TPU machine type",
        id="unknown-machine-type",
    ),
    pytest.param({"tpu.zone": "us-east5-a"}, "tpu.zone", "not a zone of region us-central1", id="zone-outside-region"),
    pytest.param(
        {"cluster.version": "1.36.0-gke.2459000"},
        "cluster.version",
        "below 1.36.0-gke.3712000, the minimum for sub-slicing",
        id="below-sub-slicing-floor",
    ),
    pytest.param(
        {"cluster.version": "1.35.1-gke.1000", "tpu.sliceShapes": ["4x4x8"]},
        "cluster.version",
        "below 1.35.2-gke.1842000, the minimum for super-slicing",
        id="below-super-slicing-floor",
    ),
    pytest.param({"cluster.version": "1.36"}, "cluster.version", "not a full GKE version", id="partial-version"),
    pytest.param(
        {"cluster.version": "1.3\u06666.0-gke.3712000"},  # an Arabic-Indic six, a digit to \d
        "cluster.version",
        "not a full GKE version",
        id="version-non-ascii-digit",
    ),
    pytest.param({"cluster.releaseChannel": "STABLE"}, "cluster.releaseChannel", "RAPID", id="slicing-off-rapid"),
    pytest.param(
        {"tpu.reservation": {"block": "block-0"}}, "tpu.reservation.name", "is required", id="reservation-without-name"
    ),
    pytest.param(
        {"tpu.reservation": {"name": "res"}}, "tpu.reservation.block", "is required", id="reservation-without-block"
    ),
    pytest.param(
        {"network.podCidr": DEV_NETWORK.node_cidr},
        "network.podCidr",
        "overlaps network.nodeCidr",
        id="pods-overlap-nodes",
    ),
    pytest.param(
        {"network.proxyOnlyCidr": "10.16.0.0/26"},
        "network.proxyOnlyCidr",
        "overlaps network.serviceCidr",
        id="proxy-overlaps-services",
    ),
    pytest.param(
        {"network.serviceCidr": DEV_NETWORK.pod_cidr},
        "network.serviceCidr",
        "overlaps network.podCidr",
        id="services-overlap-pods",
    ),
    pytest.param(
        {"network.proxyOnlyCidr": "172.16.0.0/27"},
        "network.proxyOnlyCidr",
        "smaller than /26",
        id="proxy-only-too-small",
    ),
    pytest.param(
        {"network.nodeCidr": "10.10.0.1/18"}, "network.nodeCidr", "not an IPv4 CIDR", id="cidr-with-host-bits"
    ),
    # Ranges Google Cloud refuses in a subnet range (cloud.google.com/vpc/docs/subnets, "Prohibited IPv4 subnet ranges")
    pytest.param(
        {"network.nodeCidr": "169.254.0.0/18"},
        "network.nodeCidr",
        "overlaps 169.254.0.0/16, link-local addresses",
        id="nodes-link-local",
    ),
    pytest.param(
        {"network.podCidr": "127.0.0.0/14"},
        "network.podCidr",
        "overlaps 127.0.0.0/8, the local host",
        id="pods-loopback",
    ),
    pytest.param(
        {"network.serviceCidr": "0.0.0.0/20"},
        "network.serviceCidr",
        "overlaps 0.0.0.0/8, the current network",
        id="services-current-network",
    ),
    pytest.param(
        {"network.proxyOnlyCidr": "224.0.0.0/26"},
        "network.proxyOnlyCidr",
        "overlaps 224.0.0.0/4, multicast",
        id="proxy-only-multicast",
    ),
    pytest.param(
        {"network.proxyOnlyCidr": "199.36.153.0/26"},
        "network.proxyOnlyCidr",
        "overlaps 199.36.153.4/30, restricted.googleapis.com",
        id="proxy-only-private-google-access",
    ),
    pytest.param(
        {"network.podCidr": "10.0.0.0/7"},
        "network.podCidr",
        "10.0.0.0/7 is broader than 10.0.0.0/8",
        id="pods-across-rfc-1918-and-public",
    ),
    pytest.param({"network.mtu": 9000}, "network.mtu", "outside 1300-8896", id="mtu-too-large"),
    pytest.param({"network.mtu": 1200}, "network.mtu", "outside 1300-8896", id="mtu-too-small"),
    pytest.param({"network.mtu": "jumbo"}, "network.mtu", "not an integer", id="mtu-not-a-number"),
    pytest.param({"cluster.name": LONG_NAME}, "cluster.name", "the limit is 40", id="cluster-name-too-long"),
    pytest.param(
        {"cluster.name": "Qwen_Cluster"}, "cluster.name", "not a Google Cloud name", id="cluster-name-bad-characters"
    ),
    pytest.param(
        {"network.prefix": "-qwen"}, "network.prefix", "not a network name prefix", id="network-prefix-bad-characters"
    ),
    # Names and forms declared on their fields (the stack file's schema holds them too): each refused under its key.
    pytest.param(
        {"tpu.pools": [{"name": "p" * 41, "nodeCount": 16}, {"name": "p2", "nodeCount": 16}]},
        "tpu.pools[0].name",
        "the limit is 40",
        id="pool-name-too-long",
    ),
    pytest.param(
        {"tpu.reservation": {"name": "My Reservation", "block": "block-0"}},
        "tpu.reservation.name",
        "gcloud compute reservations list",
        id="reservation-name-bad-characters",
    ),
    pytest.param(
        {"tpu.reservation": {"name": "res", "block": "Block_0"}},
        "tpu.reservation.block",
        "not a Google Cloud name",
        id="reservation-block-bad-characters",
    ),
    pytest.param(
        {"tpu.pools": [{"name": "tpu7-pool-1", "nodeCount": 16, "subBlock": "sub-"}]},
        "tpu.pools[0].subBlock",
        "sub-blocks list",
        id="sub-block-bad-characters",
    ),
    pytest.param(
        {
            "tpu.pools": [
                {"name": "tpu7-pool-1", "nodeCount": 16, "subBlock": "sub-block-0"},
                {"name": "tpu7-pool-2", "nodeCount": 16, "subBlock": "sub-block-0"},
            ]
        },
        "tpu.pools[1].subBlock",
        "taken by pool tpu7-pool-1",
        id="two-pools-on-one-sub-block",
    ),
    pytest.param(
        {"cluster.systemPool": {"machineType": "n2"}},
        "cluster.systemPool.machineType",
        "'n2' is not a machine type",
        id="system-machine-type-malformed",
    ),
    pytest.param(
        {
            "cluster.maintenanceWindow": {
                "start": "2026-01-03T04:00:00Z",
                "end": "2026-01-03T08:00:00Z",
                "recurrence": "weekly",
            }
        },
        "cluster.maintenanceWindow.recurrence",
        "'weekly' is not a recurrence rule (RRULE)",
        id="maintenance-recurrence-not-an-rrule",
    ),
    pytest.param(
        {"cluster.maintenanceWindow": {"start": "2026-01-03T04:00:00Z", "end": "2026-01-03T06:00:00Z"}},
        "cluster.maintenanceWindow.end",
        "leaves 0 hours of maintenance in some 32 days",
        id="maintenance-window-shorter-than-4-hours",
    ),
    pytest.param(
        {"cluster.maintenanceWindow": {"start": "2026-01-03T04:00:00Z", "end": "2026-01-03T08:00:00Z"}},
        "cluster.maintenanceWindow.end",
        "leaves 32 hours of maintenance in some 32 days",
        id="maintenance-window-too-little-per-32-days",
    ),
    pytest.param(
        {
            "cluster.maintenanceWindow": {
                "start": "2026-01-03T04:00:00Z",
                "end": "2026-01-03T12:00:00Z",
                "recurrence": "FREQ=FORTNIGHTLY",
            }
        },
        "cluster.maintenanceWindow.recurrence",
        "is not an RFC 5545 RRULE",
        id="maintenance-recurrence-unknown-frequency",
    ),
    pytest.param(
        {
            "cluster.maintenanceWindow": {
                "start": "2026-01-03T04:00:00Z",
                "end": "2026-01-03T08:00:00Z",
                "recurrence": "FREQ=HOURLY;INTERVAL=4",
            }
        },
        "cluster.maintenanceWindow.recurrence",
        "repeats the window HOURLY: GKE takes no FREQ of HOURLY, MINUTELY, SECONDLY",
        id="maintenance-recurrence-hourly",
    ),
    pytest.param(
        {
            "cluster.maintenanceWindow": {
                "start": "2026-01-03T04:00:00Z",
                "end": "2026-01-03T08:00:00Z",
                "recurrence": "FREQ=minutely;INTERVAL=360",
            }
        },
        "cluster.maintenanceWindow.recurrence",
        "repeats the window MINUTELY",
        id="maintenance-recurrence-minutely",
    ),
    pytest.param({"network.prefix": "q" * 60}, "network.prefix", "the limit is 43", id="network-prefix-too-long"),
    pytest.param(
        {"tpu.pools": [{"name": "TPU-Pool", "nodeCount": 16}]},
        "tpu.pools[0].name",
        "not a Google Cloud name",
        id="pool-name-bad-characters",
    ),
    pytest.param(
        {"tpu.pools": [{"name": "p", "nodeCount": 16}, {"name": "p", "nodeCount": 16}]},
        "tpu.pools[1].name",
        "used by another pool",
        id="duplicate-pool-name",
    ),
    pytest.param(
        {"tpu.pools": [{"name": "system", "nodeCount": 16}, {"name": "p", "nodeCount": 16}]},
        "tpu.pools[0].name",
        "is the system node pool's name",
        id="pool-named-like-the-system-pool",
    ),
    pytest.param(
        {"tpu.workloadPolicyName": "Policy!"}, "tpu.workloadPolicyName", "not a Google Cloud name", id="policy-name-bad"
    ),
    pytest.param(
        {"cluster.name": "a-thirty-char-cluster-name-xyz"},
        "cluster.name",
        "IAM allows 6 to 30",
        id="derived-service-account-too-long",
    ),
    pytest.param(
        {
            "cluster.maintenanceWindow": None,
            "cluster.maintenanceExclusions": [
                {"name": "freeze", "start": "2026-12-01T00:00:00Z", "end": "2026-12-10T00:00:00Z"}
            ],
        },
        "cluster.maintenanceExclusions",
        "need a maintenance window",
        id="exclusion-without-window",
    ),
    pytest.param(
        {
            "cluster.maintenanceWindow": {"start": "2026-01-03T04:00:00Z", "end": "2026-01-03T12:00:00Z"},
            "cluster.maintenanceExclusions": [
                {
                    "name": "freeze",
                    "start": "2026-12-01T00:00:00Z",
                    "end": "2027-02-01T00:00:00Z",
                    "scope": "NO_UPGRADES",
                }
            ],
        },
        "cluster.maintenanceExclusions[0].end",
        "may last 30 days",
        id="no-upgrades-exclusion-too-long",
    ),
    pytest.param(
        {
            "cluster.maintenanceWindow": {"start": "2026-01-03T04:00:00Z", "end": "2026-01-03T12:00:00Z"},
            "cluster.maintenanceExclusions": [
                {
                    "name": "freeze",
                    "start": "2026-12-01T00:00:00Z",
                    "end": "2026-12-31T05:00:00Z",
                    "scope": "NO_UPGRADES",
                }
            ],
        },
        "cluster.maintenanceExclusions[0].end",
        "may last 30 days (720 hours), this one 725 hours",
        id="no-upgrades-exclusion-hours-over",
    ),
    pytest.param(
        {
            "cluster.maintenanceWindow": {"start": "2026-01-03T04:00:00Z", "end": "2026-01-03T12:00:00Z"},
            "cluster.maintenanceExclusions": [
                {"name": "freeze", "start": "2026-11-20T00:00:00Z", "end": "2026-11-30T00:00:00Z"},
                {"name": "freeze", "start": "2026-12-18T00:00:00Z", "end": "2027-01-05T00:00:00Z"},
            ],
        },
        "cluster.maintenanceExclusions[1].name",
        "'freeze' names cluster.maintenanceExclusions[0] too",
        id="exclusions-of-one-name",
    ),
    pytest.param(
        {
            "cluster.maintenanceWindow": {"start": "2026-01-03T04:00:00Z", "end": "2026-01-03T12:00:00Z"},
            "cluster.maintenanceExclusions": [
                {
                    "name": f"freeze-{n}",
                    "start": f"2027-0{n}-01T00:00:00Z",
                    "end": f"2027-0{n}-05T00:00:00Z",
                    "scope": "NO_UPGRADES",
                }
                for n in range(1, 5)
            ],
        },
        "cluster.maintenanceExclusions[3].scope",
        "makes 4 NO_UPGRADES exclusions (at 0, 1, 2, 3): GKE takes 3 at most",
        id="four-no-upgrades-exclusions",
    ),
    pytest.param(
        {
            "cluster.maintenanceWindow": {"start": "2026-01-03T04:00:00Z", "end": "2026-01-03T12:00:00Z"},
            "cluster.maintenanceExclusions": [
                {
                    "name": f"patch-freeze-{n}",
                    "start": f"2027-01-{n:02}T00:00:00Z",
                    "end": f"2027-01-{n:02}T12:00:00Z",
                    "scope": "NO_MINOR_UPGRADES",
                }
                for n in range(1, 22)
            ],
        },
        "cluster.maintenanceExclusions",
        "lists 21 items; the limit is 20",
        id="twenty-one-exclusions",
    ),
    pytest.param(
        {"cluster.maintenanceWindow": {"start": "Saturday 04:00", "end": "2026-01-03T08:00:00Z"}},
        "cluster.maintenanceWindow.start",
        "'Saturday 04:00' is not an RFC 3339 time with a zone",
        id="maintenance-start-not-a-time",
    ),
    pytest.param(
        {"cluster.maintenanceWindow": {"start": "2026-01-03T04:00:00Z", "end": "2026-01-03T08:00:00"}},
        "cluster.maintenanceWindow.end",
        "'2026-01-03T08:00:00' is not an RFC 3339 time with a zone",
        id="maintenance-end-without-zone",
    ),
    # ISO 8601 forms Python reads but the provider's RFC 3339 (Go's time.RFC3339) refuses
    pytest.param(
        {"cluster.maintenanceWindow": {"start": "2026-01-03 04:00:00Z", "end": "2026-01-03T12:00:00Z"}},
        "cluster.maintenanceWindow.start",
        "'2026-01-03 04:00:00Z' is not an RFC 3339 time with a zone",
        id="maintenance-start-with-a-space-for-the-t",
    ),
    pytest.param(
        {"cluster.maintenanceWindow": {"start": "2026-01-03T04:00:00Z", "end": "2026-01-03T12:00Z"}},
        "cluster.maintenanceWindow.end",
        "'2026-01-03T12:00Z' is not an RFC 3339 time with a zone",
        id="maintenance-end-without-seconds",
    ),
    pytest.param(
        {
            "cluster.maintenanceWindow": {"start": "2026-01-03T04:00:00Z", "end": "2026-01-03T12:00:00Z"},
            "cluster.maintenanceExclusions": [
                {"name": "freeze", "start": "20261218T000000Z", "end": "2027-01-05T00:00:00+01:00"}
            ],
        },
        "cluster.maintenanceExclusions[0].start",
        "'20261218T000000Z' is not an RFC 3339 time with a zone",
        id="exclusion-start-in-iso-basic-form",
    ),
    pytest.param(
        {"cluster.maintenanceWindow": {"start": "2026-01-03T08:00:00Z", "end": "2026-01-03T04:00:00Z"}},
        "cluster.maintenanceWindow.end",
        "ends before it starts",
        id="maintenance-window-backwards",
    ),
    pytest.param(
        {
            "cluster.maintenanceWindow": {"start": "2026-01-03T04:00:00Z", "end": "2026-01-03T12:00:00Z"},
            "cluster.maintenanceExclusions": [
                {"name": "freeze", "start": "2026-12-10T00:00:00Z", "end": "2026-12-10T00:00:00Z"}
            ],
        },
        "cluster.maintenanceExclusions[0].end",
        "ends before it starts",
        id="exclusion-of-no-length",
    ),
    pytest.param(
        {"cluster.nodeServiceAccountId": "tpu_nodes_sa"},
        "cluster.nodeServiceAccountId",
        "may hold only lowercase letters, digits and hyphens",
        id="node-service-account-id-underscores",
    ),
    pytest.param({"tpu.pools": []}, "tpu.pools", "is empty", id="no-tpu-pool"),
    pytest.param(
        {"tpu.pools": [{"name": "tpu7-pool-1", "nodeCount": 16, "subBlock": "sub-block-0"}], "tpu.reservation": None},
        "tpu.reservation.block",
        "pools name sub-blocks but no block is set",
        id="sub-block-without-block",
    ),
    # --- Network isolation: the control plane's endpoints and the NAT of the private nodes ---
    pytest.param(
        {"cluster.controlPlane": {"authorizedNetworks": [{"cidr": "203.0.113.0/33", "name": "office"}]}},
        "cluster.controlPlane.authorizedNetworks[0].cidr",
        "not an IPv4 CIDR range",
        id="authorized-network-bad-prefix",
    ),
    pytest.param(
        {"cluster.controlPlane": {"authorizedNetworks": [{"cidr": "203.0.113.7/24", "name": "office"}]}},
        "cluster.controlPlane.authorizedNetworks[0].cidr",
        "has host bits set",
        id="authorized-network-host-bits",
    ),
    pytest.param(
        {"cluster.controlPlane": {"authorizedNetworks": [{"cidr": "office-vpn", "name": "office"}]}},
        "cluster.controlPlane.authorizedNetworks[0].cidr",
        "not an IPv4 CIDR range",
        id="authorized-network-not-a-range",
    ),
    pytest.param(
        {"cluster.controlPlane": {"authorizedNetworks": [{"cidr": "0.0.0.0/0", "name": "everyone"}]}},
        "cluster.controlPlane.authorizedNetworks[0].cidr",
        "that is no restriction",
        id="authorized-network-everything",
    ),
    pytest.param(
        {"cluster.controlPlane": {"authorizedNetworks": [{"cidr": "64.0.0.0/2", "name": "a quarter"}]}},
        "cluster.controlPlane.authorizedNetworks[0].cidr",
        "that is no restriction",
        id="authorized-network-too-wide",
    ),
    pytest.param(
        {
            "cluster.controlPlane": {
                "authorizedNetworks": [
                    {"cidr": "203.0.113.0/24", "name": "office"},
                    {"cidr": "203.0.113.0/24", "name": "office again"},
                ]
            }
        },
        "cluster.controlPlane.authorizedNetworks[1].cidr",
        "is listed at [0] already",
        id="authorized-network-twice",
    ),
    pytest.param(
        {
            "cluster.controlPlane": {
                "authorizedNetworks": [{"cidr": f"203.0.{i}.0/24", "name": f"office-{i}"} for i in range(51)]
            }
        },
        "cluster.controlPlane.authorizedNetworks",
        "lists 51 items; the limit is 50",
        id="fifty-one-authorized-networks",
    ),
    pytest.param(
        {"cluster.controlPlane": {"authorizedNetworks": [{"cidr": "203.0.113.0/24", "name": " "}]}},
        "cluster.controlPlane.authorizedNetworks[0].name",
        "is not a name for the range",
        id="authorized-network-unnamed",
    ),
    pytest.param(
        {"cluster.controlPlane": {"authorizedNetworks": [{"cidr": "203.0.113.0/24"}]}},
        "cluster.controlPlane.authorizedNetworks[0].name",
        "is required",
        id="authorized-network-without-name",
    ),
    pytest.param(
        {
            "cluster.controlPlane": {
                "ipEndpoint": "private",
                "authorizedNetworks": [{"cidr": "203.0.113.0/24", "name": "office"}],
            }
        },
        "cluster.controlPlane.authorizedNetworks",
        "only a public IP endpoint admits by authorized networks",
        id="authorized-networks-without-a-public-ip",
    ),
    pytest.param(
        {"cluster.controlPlane": {"ipEndpoint": "internal"}},
        "cluster.controlPlane.ipEndpoint",
        "'internal' is not an IP endpoint mode",
        id="ip-endpoint-unknown-mode",
    ),
    pytest.param(
        {"cluster.controlPlane": {"ipEndpoint": "off", "dnsEndpoint": False}},
        "cluster.controlPlane.ipEndpoint",
        "nothing outside Google could reach the control plane",
        id="control-plane-unreachable",
    ),
    pytest.param(
        {"cluster.privateNodes": "yes"}, "cluster.privateNodes", "is not true or false", id="private-nodes-not-a-bool"
    ),
    pytest.param(
        {"network.nat": {"logging": "VERBOSE"}},
        "network.nat.logging",
        "'VERBOSE' is not a Cloud NAT log filter",
        id="nat-log-filter-unknown",
    ),
    pytest.param(
        {"network.nat": {"minPortsPerVm": 100}},
        "network.nat.minPortsPerVm",
        "100 is not a power of two from 32 to 65536",
        id="nat-min-ports-not-a-power-of-two",
    ),
    pytest.param(
        {"network.nat": {"minPortsPerVm": 16}},
        "network.nat.minPortsPerVm",
        "16 is outside 32-65536",
        id="nat-min-ports-too-few",
    ),
    pytest.param(
        {"network.nat": {"maxPortsPerVm": 131072}},
        "network.nat.maxPortsPerVm",
        "131072 is outside 32-65536",
        id="nat-max-ports-too-many",
    ),
    pytest.param(
        {"network.nat": {"minPortsPerVm": 1024, "maxPortsPerVm": 1024}},
        "network.nat.maxPortsPerVm",
        "1024 is not above minPortsPerVm 1024",
        id="nat-max-not-above-min",
    ),
    pytest.param(
        {"network.flowLogs.sampling": 0}, "network.flowLogs.sampling", "above 0 and at most 1", id="flow-logs-none"
    ),
    pytest.param(
        {"network.flowLogs.sampling": 1.5}, "network.flowLogs.sampling", "above 0 and at most 1", id="flow-logs-150"
    ),
    pytest.param(
        {"cluster.secretsEncryptionKey": "gke-secrets"},
        "cluster.secretsEncryptionKey",
        "is not a Cloud KMS key name",
        id="kms-key-short-name",
    ),
    pytest.param(
        {
            "cluster.secretsEncryptionKey": "projects/p/locations/us-central1/keyRings/r/cryptoKeys/k/cryptoKeyVersions/1"
        },
        "cluster.secretsEncryptionKey",
        "is not a Cloud KMS key name",
        id="kms-key-version",
    ),
    pytest.param(
        {"cluster.secretsEncryptionKey": "projects/My_Project/locations/us-central1/keyRings/r/cryptoKeys/k"},
        "cluster.secretsEncryptionKey",
        "its project: 'My_Project' is not a project ID",
        id="kms-key-bad-project",
    ),
    pytest.param(
        {"cluster.secretsEncryptionKey": "projects/my-tpu-project/locations/us-central1/keyRings/r/cryptoKeys/k\n"},
        "cluster.secretsEncryptionKey",
        "is not a Cloud KMS key name",
        id="kms-key-with-a-newline",
    ),
    pytest.param(
        {"cluster.bootDiskEncryptionKey": "projects/my-tpu-project/locations/global/keyRings/r\u00e9/cryptoKeys/k"},
        "cluster.bootDiskEncryptionKey",
        "is not a Cloud KMS key name",
        id="kms-key-ring-non-ascii",
    ),
    pytest.param(
        {"cluster.secretsEncryptionKey": "projects/my-tpu-project/locations/global/keyRings/r/cryptoKeys/k"},
        "cluster.secretsEncryptionKey",
        "is in global, not in the cluster's region us-central1",
        id="kms-key-global",
    ),
    pytest.param(
        {"cluster.bootDiskEncryptionKey": "gke-boot-disks"},
        "cluster.bootDiskEncryptionKey",
        "is not a Cloud KMS key name",
        id="boot-disk-key-short-name",
    ),
    pytest.param(
        {
            "cluster.bootDiskEncryptionKey": "projects/p/locations/us-central1/keyRings/r/cryptoKeys/k/cryptoKeyVersions/2"
        },
        "cluster.bootDiskEncryptionKey",
        "is not a Cloud KMS key name",
        id="boot-disk-key-version",
    ),
    pytest.param(
        {"cluster.bootDiskEncryptionKey": "projects/My_Project/locations/us-central1/keyRings/r/cryptoKeys/k"},
        "cluster.bootDiskEncryptionKey",
        "its project: 'My_Project' is not a project ID",
        id="boot-disk-key-bad-project",
    ),
    pytest.param(
        {"cluster.bootDiskEncryptionKey": 42},
        "cluster.bootDiskEncryptionKey",
        "is not a string",
        id="boot-disk-key-int",
    ),
    pytest.param({"tpu.secureBoot": "on"}, "tpu.secureBoot", "is not true or false", id="secure-boot-not-a-bool"),
    pytest.param(
        {"tpu.pools": [{"name": "tpu7-pool-1", "nodeCount": 16, "hardenedBoot": "no"}]},
        "tpu.pools[0].hardenedBoot",
        "is not true or false",
        id="hardened-boot-not-a-bool",
    ),
]


# The cluster's CIS GKE settings of 5.1.4, 5.8.2 and 5.6.1: values GKE takes (a production stack requires them on:
# tests/test_operations_config.py).
GCP_BAD_INPUTS += [
    pytest.param(
        {"cluster.binaryAuthorization": "ENFORCE"},
        "cluster.binaryAuthorization",
        "'ENFORCE' is not a Binary Authorization evaluation mode",
        id="binauthz-unknown-mode",
    ),
    pytest.param(
        {"cluster.binaryAuthorization": "POLICY_BINDINGS"},
        "cluster.binaryAuthorization",
        "use one of DISABLED, PROJECT_SINGLETON_POLICY_ENFORCE",
        id="binauthz-continuous-validation-only",
    ),
    pytest.param(
        {"cluster.binaryAuthorization": True},
        "cluster.binaryAuthorization",
        "True is not a Binary Authorization evaluation mode",
        id="binauthz-a-bool",
    ),
    pytest.param(
        {"cluster.rbacSecurityGroup": "platform-admins@example.com"},
        "cluster.rbacSecurityGroup",
        "is not a gke-security-groups@<domain> group",
        id="rbac-group-of-another-name",
    ),
    pytest.param(
        {"cluster.rbacSecurityGroup": "gke-security-groups"},
        "cluster.rbacSecurityGroup",
        "is not a gke-security-groups@<domain> group",
        id="rbac-group-without-domain",
    ),
    pytest.param(
        {"cluster.rbacSecurityGroup": "gke-security-groups@localhost"},
        "cluster.rbacSecurityGroup",
        "is not a gke-security-groups@<domain> group",
        id="rbac-group-of-no-domain-name",
    ),
    pytest.param(
        {"cluster.rbacSecurityGroup": "GKE-Security-Groups@Example.com"},
        "cluster.rbacSecurityGroup",
        "is not a gke-security-groups@<domain> group",
        id="rbac-group-in-capitals",
    ),
    pytest.param(
        {"cluster.intranodeVisibility": "on"},
        "cluster.intranodeVisibility",
        "is not true or false",
        id="intranode-visibility-not-a-bool",
    ),
]


# images.mirror: an Artifact Registry Docker repository, nothing else.
GCP_BAD_INPUTS += [
    pytest.param({"images.mirror": "docker.io/my-org"}, "images.mirror", "not an Artifact Registry", id="not-ar"),
    pytest.param(
        {"images.mirror": "https://us-central1-docker.pkg.dev/my-project/mirror"},
        "images.mirror",
        "no scheme, no trailing path",
        id="mirror-with-scheme",
    ),
    pytest.param(
        {"images.mirror": "us-central1-docker.pkg.dev/my-project/mirror/extra"},
        "images.mirror",
        "not an Artifact Registry",
        id="mirror-with-a-path",
    ),
    pytest.param(
        {"images.mirror": "us-central1-docker.pkg.dev/My_Project/mirror"},
        "images.mirror",
        "its project: 'My_Project' is not a project ID",
        id="mirror-project",
    ),
    pytest.param(
        {"images.mirror": "us-central1-docker.pkg.dev/my-project/Mirror"},
        "images.mirror",
        "'Mirror' is not a repository id",
        id="mirror-repository",
    ),
    pytest.param(
        {"images.mirror": "us-central1-docker.pkg.dev/my-project/mirror\n"},  # a YAML block scalar's final newline
        "images.mirror",
        "is not a repository id",
        id="mirror-with-a-newline",
    ),
    pytest.param({"images.requireDigests": "yes"}, "images.requireDigests", "not true or false", id="require-yes"),
    # the mirror keeps an image's registry in its path, where a port's ':' makes a name the kubelet refuses
    pytest.param(
        {
            "images.mirror": "us-central1-docker.pkg.dev/my-project/mirror",
            "nodeAuditLogging.enabled": True,
            "nodeAuditLogging.setupImage": "registry.example:5000/busybox:1.37.0",
        },
        "nodeAuditLogging.setupImage",
        "would be pulled as 'us-central1-docker.pkg.dev/my-project/mirror/registry.example:5000/busybox:1.37.0'",
        id="mirrored-image-of-a-registry-with-a-port",
    ),
]


# Ranges too small for the dev stack's 35 nodes (two cubes of 16 TPU hosts, a system node in each of three zones):
# a node takes an address of the node range (Google Cloud keeps 4) and a /24 of the Pod range (110 Pods per node).
GCP_BAD_INPUTS += [
    pytest.param(
        {"network.podCidr": "10.12.0.0/21"},
        "network.podCidr",
        "10.12.0.0/21 has 2048 addresses, and the 35 nodes of the stack's pools take 8960 (a /24 each",
        id="pod-range-too-small-for-the-nodes",
    ),
    pytest.param(
        {"network.nodeCidr": "10.10.0.0/27"},
        "network.nodeCidr",
        "10.10.0.0/27 has 32 addresses, and the 35 nodes of the stack's pools take 39 (one each, and the 4",
        id="node-range-too-small-for-the-nodes",
    ),
]


@pytest.mark.parametrize("override, key, fragment", GCP_BAD_INPUTS)
def test_bad_input_names_its_key_and_registers_nothing(override, key, fragment):
    assert_bad_input(override, key, fragment)


# The ranges Google Cloud takes for a subnet beyond RFC 1918 (cloud.google.com/vpc/docs/subnets, "Valid IPv4 ranges"):
# shared address space, the former Class E, privately used public addresses; and a whole RFC range.
@pytest.mark.parametrize(
    "ranges",
    [
        {"network.nodeCidr": "100.64.0.0/18", "network.podCidr": "240.0.0.0/14", "network.serviceCidr": "11.0.0.0/20"},
        {"network.podCidr": "10.0.0.0/8", "network.nodeCidr": "192.168.0.0/18", "network.serviceCidr": "172.20.0.0/20"},
    ],
)
def test_subnet_ranges_google_cloud_takes_are_accepted(ranges):
    network = stack_config("dev", ranges).network
    assert [network.node_cidr, network.pod_cidr, network.service_cidr] == [
        ranges["network.nodeCidr"],
        ranges["network.podCidr"],
        ranges["network.serviceCidr"],
    ]


def test_the_ranges_the_refusals_ask_for_hold_the_nodes():
    # the fixes the refusals above name, a /18 Pod range (64 nodes' /24s) and a /26 node range (60 addresses and 4
    # kept), are taken; a range half their size is not
    ranges = {"network.podCidr": "10.12.0.0/18", "network.nodeCidr": "10.10.0.0/26"}
    network = stack_config("dev", ranges).network
    assert [network.pod_cidr, network.node_cidr] == ["10.12.0.0/18", "10.10.0.0/26"]
    for key, fix in (
        ("network.podCidr", "use a /18 or larger range, or make fewer nodes"),
        ("network.nodeCidr", "use a /26 or larger range, or make fewer nodes"),
    ):
        assert_bad_input({key: ranges[key].replace("/18", "/19").replace("/26", "/27")}, key, fix)


def test_fifty_authorized_networks_are_accepted():
    networks = [{"cidr": f"203.0.{i}.0/24", "name": f"office-{i}"} for i in range(50)]
    control_plane = stack_config(
        "dev", {"cluster.controlPlane": {"authorizedNetworks": networks}}
    ).cluster.control_plane
    assert len(control_plane.authorized_networks) == 50


def test_pools_pinned_to_sub_blocks_of_their_own_are_accepted():
    pools = [{"name": f"tpu7-pool-{i}", "nodeCount": 16, "subBlock": f"sub-block-{i}"} for i in (1, 2)]
    assert [p.sub_block for p in stack_config("dev", {"tpu.pools": pools}).tpu.pools] == ["sub-block-1", "sub-block-2"]


# GKE takes a window that leaves 48 hours or more of 4-hour stretches in every 32 days: the corrections of the rows
# above, and windows that run together into longer stretches.
@pytest.mark.parametrize(
    "start, end, recurrence",
    [
        ("2026-01-03T02:00:00Z", "2026-01-03T08:00:00Z", "FREQ=WEEKLY;BYDAY=SA,SU"),
        ("2026-01-03T04:00:00Z", "2026-01-03T08:00:00Z", "FREQ=DAILY"),
        ("2026-01-03T04:00:00Z", "2026-01-03T16:00:00Z", "FREQ=WEEKLY;INTERVAL=2;BYDAY=SA,SU"),
        ("2026-01-01T00:00:00Z", "2026-01-03T00:00:00Z", "FREQ=MONTHLY"),
        ("2026-01-03T00:00:00Z", "2026-01-03T03:00:00Z", "FREQ=DAILY;BYHOUR=0,3,6,9,12,15,18,21"),
        # RFC 3339's other forms the provider takes: a zone offset, a fraction of a second
        ("2026-01-03T03:00:00-01:00", "2026-01-03T10:00:00.5+00:00", "FREQ=WEEKLY;BYDAY=SA,SU"),
    ],
)
def test_a_window_that_leaves_gke_48_hours_in_32_days_is_accepted(start, end, recurrence):
    problems = Problems()
    window = {"start": start, "end": end, "recurrence": recurrence}
    cluster = ClusterConfig.model_validate({"maintenanceWindow": window})
    validate_cluster(cluster, TpuConfig(), problems, date(2026, 1, 1))
    assert [str(p) for p in problems.items] == []


def _exclusion(name: str, start: str, end: str, scope: str = "NO_MINOR_UPGRADES") -> dict[str, str]:
    return {"name": name, "start": start, "end": end, "scope": scope}


# The corrections of the exclusion rows above: exclusions GKE takes.
@pytest.mark.parametrize(
    "exclusions",
    [
        [
            _exclusion("freeze-1", "2026-11-20T00:00:00Z", "2026-11-30T00:00:00Z"),
            _exclusion("freeze-2", "2026-12-18T00:00:00Z", "2027-01-05T00:00:00Z"),
        ],
        [
            _exclusion(f"freeze-{n}", f"2027-0{n}-01T00:00:00Z", f"2027-0{n}-05T00:00:00Z", "NO_UPGRADES")
            for n in (1, 2, 3)
        ]
        + [_exclusion("freeze-4", "2027-04-01T00:00:00Z", "2027-04-05T00:00:00Z")],
        [
            _exclusion(f"patch-freeze-{n}", f"2027-01-{n:02}T00:00:00Z", f"2027-01-{n:02}T12:00:00Z")
            for n in range(1, 21)
        ],
    ],
)
def test_exclusions_gke_takes_are_accepted(exclusions):
    problems = Problems()
    window = {"start": "2026-01-03T04:00:00Z", "end": "2026-01-03T12:00:00Z"}
    cluster = ClusterConfig.model_validate({"maintenanceWindow": window, "maintenanceExclusions": exclusions})
    validate_cluster(cluster, TpuConfig(), problems, date(2026, 1, 1))
    assert [str(p) for p in problems.items] == []


# The same, of the saxml stack: a machine type without dynamic slicing (ct5lp-hightpu-4t), its pools static slices.
GCP_SAXML_BAD_INPUTS = [
    pytest.param(
        {"tpu.sliceShapes": ["2x2x2"]},
        "tpu.sliceShapes[0]",
        "ct5lp-hightpu-4t has no dynamic slicing",
        id="slice-shapes-on-a-static-machine",
    ),
    pytest.param(
        {"tpu.reservation": {"block": "block-0"}},
        "tpu.reservation.name",
        "a block is set without its reservation",
        id="reservation-block-without-name",
    ),
]


@pytest.mark.parametrize("override, key, fragment", GCP_SAXML_BAD_INPUTS)
def test_bad_input_of_a_static_slice_stack_names_its_key_and_registers_nothing(override, key, fragment):
    assert_bad_input(override, key, fragment, stack="saxml")


# --- GKE versions: end of standard support and the channel's own list --------------------------------


@pytest.mark.parametrize(
    "version, today, refused, channel",
    [
        ("1.36.0-gke.3712000", date(2026, 12, 3), False, "REGULAR"),
        ("1.36.0-gke.3712000", date(2027, 8, 8), False, "REGULAR"),
        ("1.36.0-gke.3712000", date(2027, 8, 9), True, "REGULAR"),  # the day standard support ends
        ("1.33.5-gke.1162000", date(2026, 8, 2), False, "REGULAR"),
        ("1.33.5-gke.1162000", date(2026, 12, 3), True, "REGULAR"),
        ("1.33.5-gke.1162000", date(2026, 12, 3), True, "STABLE"),
        # the Extended channel offers a minor in its extended support, past the end of standard support
        ("1.33.5-gke.1162000", date(2026, 12, 3), False, "EXTENDED"),
        ("1.29.1-gke.100", date(2026, 12, 3), True, "REGULAR"),  # older than the table: long past
        ("1.29.1-gke.100", date(2026, 12, 3), True, "EXTENDED"),  # past its extended support too
        ("1.38.0-gke.100", date(2030, 1, 1), False, "REGULAR"),  # newer than the table: no date known
    ],
)
def test_a_floor_past_gke_s_end_of_standard_support_is_refused(version, today, refused, channel):
    problems = Problems()
    cluster = ClusterConfig().model_copy(update={"version": version, "release_channel": channel})
    tpu = TpuConfig().model_copy(update={"machine_type": "ct5lp-hightpu-4t", "zone": "us-west4-a", "slice_shapes": []})
    validate_cluster(cluster, tpu, problems, today)
    found = [p for p in problems.items if p.key == "cluster.version" and "ended standard support" in str(p)]
    assert bool(found) == refused, [str(p) for p in problems.items]
    if refused:
        assert "set a floor of a supported minor" in str(found[0])


@pytest.mark.parametrize(
    "newest, default, fragment",
    [
        ("1.36.2-gke.100", "1.35.8-gke.1036000", None),
        ("1.36.0-gke.3712000", None, None),  # exactly the floor
        ("1.36.0-gke.2459000", None, "the newest 1.36 version the RAPID channel offers here is 1.36.0-gke.2459000"),
        (
            None,
            "1.35.8-gke.1036000",
            "the RAPID channel offers no 1.36 version here (its default is 1.35.8-gke.1036000)",
        ),
    ],
)
def test_the_floor_must_be_offered_by_the_channel(newest, default, fragment):
    problem = channel_floor_problem("1.36.0-gke.3712000", "RAPID", newest, default)
    if fragment is None:
        assert problem is None
    else:
        assert problem is not None and fragment in problem[0]


@pytest.mark.parametrize(
    "mirror, parsed",
    [
        ("us-central1-docker.pkg.dev/my-org-artifacts/tpu-gke-mirror", ("us-central1", "my-org-artifacts", "tpu-gke-mirror")),
        ("us-docker.pkg.dev/my-project/m", ("us", "my-project", "m")),
        ("northamerica-northeast1-docker.pkg.dev/p-123456/mirror-1", ("northamerica-northeast1", "p-123456", "mirror-1")),
        ("us-central1-docker.pkg.dev/p", None),
        ("gcr.io/my-project", None),
    ],
)  # fmt: skip
def test_the_mirror_names_one_artifact_registry_repository(mirror, parsed):
    repository = ImagesConfig(mirror=mirror).mirror_repository
    assert (None if repository is None else dataclasses.astuple(repository)) == parsed


@pytest.mark.parametrize("setting, production, required", [(None, False, False), (None, True, True), (False, True, False), (True, False, True)])  # fmt: skip
def test_digests_are_required_by_the_setting_or_else_by_production(setting, production, required):
    assert ImagesConfig(require_digests=setting).digests_required(production) is required


# --- Which service agent is granted which key ------------------------------------------------------

RING = "projects/p-1/locations/us-central1/keyRings/r"
SECRETS, BOOT = f"{RING}/cryptoKeys/secrets", f"{RING}/cryptoKeys/boot"
TWO_POOLS = [TpuPoolConfig(name="a", node_count=16), TpuPoolConfig(name="b", node_count=16)]


@pytest.mark.parametrize(
    "cluster, pools, expected",
    [
        pytest.param({}, TWO_POOLS, {}, id="no-key"),
        pytest.param(
            {"secrets_encryption_key": SECRETS}, TWO_POOLS, {(SECRETS, "container-engine-robot"): 1}, id="secrets"
        ),
        pytest.param(
            {"boot_disk_encryption_key": BOOT},
            TWO_POOLS,
            {(BOOT, "compute-system"): 4},  # the system pool, the cluster's first default pool, both TPU pools
            id="boot-shared-by-every-pool",
        ),
        pytest.param(
            {"boot_disk_encryption_key": BOOT},
            [TpuPoolConfig(name="a", node_count=16), TpuPoolConfig(name="b", node_count=16, hardened_boot=False)],
            {(BOOT, "compute-system"): 3},
            id="a-pool-without-it",
        ),
        pytest.param(
            {"secrets_encryption_key": SECRETS, "boot_disk_encryption_key": SECRETS},
            TWO_POOLS,
            {(SECRETS, "container-engine-robot"): 1, (SECRETS, "compute-system"): 4},
            id="one-key-two-agents",
        ),
        pytest.param(
            {"secrets_encryption_key": SECRETS, "existing": ExistingClusterConfig(name="c", location="us-central1")},
            TWO_POOLS,
            {},
            id="cluster-made-elsewhere",
        ),
    ],
)
def test_each_key_is_granted_once_to_each_agent_that_uses_it(cluster, pools, expected):
    grants = key_grants(ClusterConfig(**cluster), TpuConfig(pools=pools))
    assert {(g.key.name, g.agent.domain): len(g.uses) for g in grants} == expected
    assert len({g.name for g in grants}) == len(grants), "two grants would share a resource name"


@pytest.mark.parametrize(
    "key, project, warned",
    [
        pytest.param(BOOT, "p-1", False, id="own-project"),
        pytest.param(BOOT, "p-2", True, id="another-project"),
    ],
)
def test_only_a_key_of_another_project_is_left_to_the_operator(key, project, warned):
    grants = key_grants(ClusterConfig(boot_disk_encryption_key=key), TpuConfig(pools=TWO_POOLS))
    warnings = key_grant_warnings(grants, project)
    assert bool(warnings) == warned
    for warning in warnings:
        assert warning.startswith("cluster.bootDiskEncryptionKey: the key is in project p-1, not this stack's p-2")
        assert f"gcloud services enable compute.googleapis.com --project {project}" in warning
        assert "beta services identity create" not in warning  # Google makes no Compute Engine agent on request


def test_gke_s_agent_can_be_asked_for_before_the_grant_by_hand():
    grants = key_grants(ClusterConfig(secrets_encryption_key=SECRETS), TpuConfig(pools=TWO_POOLS))
    (warning,) = key_grant_warnings(grants, "p-2")
    assert "gcloud beta services identity create --service=container.googleapis.com --project p-2" in warning
    assert '--member "serviceAccount:service-$(gcloud projects describe p-2' in warning
    assert "@container-engine-robot.iam.gserviceaccount.com" in warning


def test_an_image_of_a_registry_with_a_port_is_pulled_through_its_remote_repository():
    """The recovery of the mirrored row above: without a mirror, pull-through proxies the registry, port and all, and
    the nodes pull a name the kubelet takes."""
    run = run_stack(
        {"nodeAuditLogging.enabled": True, "nodeAuditLogging.setupImage": "registry.example:5000/busybox:1.37.0"}
    )
    ids = {r.inputs.get("repositoryId") for r in run.of_type("gcp:artifactregistry/repository:Repository")}
    assert any(i and i.endswith("-registry-example-5000") for i in ids), ids
