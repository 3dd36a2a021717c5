"""The CIS GKE Benchmark v1.9.0, control by control: its status here and what holds it. The one registry of these
claims: each preview key, policy rule and checkov check declares here the controls it holds. The pack names them in
each rule's description, tools/cis_table.py writes the table of docs/security.md from it, and the tests hold every
claim (tests/test_cis_benchmark.py: the policy rules and preview keys; tests/test_security_checkov.py: the checkov
checks).

What holds a control, written as in the table: a checkov check ID (``CKV_K8S_*``, ``CKV2_K8S_*`` on the rendered
objects; ``CKV_GCP_*``, ``CKV2_GCP_*`` on the Google Cloud resources as a Terraform plan), ``policy:<rule>`` of the
pack, or ``preview:<key>`` refused at preview on a production stack. A note is Markdown, as the page shows it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

BENCHMARK = "CIS Google Kubernetes Engine (GKE) Benchmark v1.9.0"

# The statuses (docs/security.md says what each means, above the table).
HELD = "held"
HELD_IN_PRODUCTION = "held in production"
PARTLY = "partly"
PARTLY_IN_PRODUCTION = "partly in production"
PENDING = "pending"
GAP = "gap"
UNCHECKED = "unchecked"
NOT_APPLICABLE = "n/a"
STATUSES = (HELD, HELD_IN_PRODUCTION, PARTLY, PARTLY_IN_PRODUCTION, PENDING, GAP, UNCHECKED, NOT_APPLICABLE)
# What holds only on the production stacks: a preview key refuses a production stack without it.
IN_PRODUCTION = (HELD_IN_PRODUCTION, PARTLY_IN_PRODUCTION)
# A status whose "held by" names something; the others name nothing.
HOLDING = (HELD, HELD_IN_PRODUCTION, PARTLY, PARTLY_IN_PRODUCTION)

POLICY, PREVIEW = "policy:", "preview:"
CHECKOV_ID = re.compile(r"^CKV2?_(K8S|GCP)_\d+$")

# The recommendations of sections 4 and 5 of v1.9.0, as kube-bench numbers them (aquasecurity/kube-bench
# v0.15.6, commit 92e522b9, cfg/gke-1.9.0/policies.yaml and managedservices.yaml); sections 1 to 3 are
# one row, "1-3".
NUMBERS = (
    "1-3",
    *(f"4.1.{n}" for n in range(1, 11)),
    "4.2.1",
    "4.3.1",
    "4.3.2",
    "4.4.1",
    "4.4.2",
    "4.5.1",
    *(f"4.6.{n}" for n in range(1, 5)),
    *(f"5.1.{n}" for n in range(1, 5)),
    "5.2.1",
    "5.2.2",
    "5.3.1",
    "5.4.1",
    *(f"5.5.{n}" for n in range(1, 8)),
    *(f"5.6.{n}" for n in range(1, 8)),
    "5.7.1",
    "5.7.2",
    *(f"5.8.{n}" for n in range(1, 4)),
    "5.9.1",
    "5.9.2",
    *(f"5.10.{n}" for n in range(1, 5)),
)


@dataclass(frozen=True)
class Control:
    number: str
    recommendation: str
    status: str
    held_by: tuple[str, ...] = ()
    not_yet: tuple[str, ...] = ()  # checkov checks that will hold it once another change lands (pending, gap)
    note: str = ""  # why, where the status is not plainly held

    def checkov(self, items: tuple[str, ...], framework: str) -> list[str]:
        """The checkov checks of ``framework`` (K8S or GCP) among ``items``."""
        return [i for i in items if CHECKOV_ID.match(i) and f"_{framework}_" in i]

    @property
    def policies(self) -> list[str]:
        return [i.removeprefix(POLICY) for i in self.held_by if i.startswith(POLICY)]

    @property
    def preview_keys(self) -> list[str]:
        return [i.removeprefix(PREVIEW) for i in self.held_by if i.startswith(PREVIEW)]


def controls_held_by(holder: str) -> list[str]:
    """The controls ``holder`` (``policy:<rule>``, ``preview:<key>`` or a checkov check) holds, in benchmark order."""
    return [control.number for control in CONTROLS if holder in control.held_by]


CONTROLS: tuple[Control, ...] = (
    Control(
        "1-3",
        "control plane components, control plane configuration, worker node configuration files",
        NOT_APPLICABLE,
        note=(
            "GKE runs and configures the control plane and the nodes' kubelet files (3.1.1 to 3.1.4) on its node "
            "images; the program writes none of them. kube-bench checks section 3 on a running node"
        ),
    ),
    Control(
        "4.1.1",
        "cluster-admin role only used where required",
        HELD,
        held_by=("policy:rbac-no-privileged-bindings",),
        note=(
            "no binding of the program or of the slice controller chart grants cluster-admin (the pack sees the "
            "program's own objects; `tests/test_cis_benchmark.py` runs both RBAC rules on the chart's too). The "
            "charts installed from registries (JobSet, Kueue, LeaderWorkerSet, the llm-d router) are not rendered "
            "here: their RBAC is upstream's, and that holds for every 4.x row"
        ),
    ),
    Control(
        "4.1.2",
        "minimize access to secrets",
        HELD,
        held_by=("policy:rbac-least-privilege-roles",),
        note=(
            "no ClusterRole reads the Secrets of every namespace; the slice controller reads only its certificate "
            "Secret in its own namespace. checkov's graph check CKV2_K8S_5 is not used: it passes a bound role as "
            "soon as one of its rules does not touch Secrets (a role whose first rule lists every Secret and whose "
            "second creates TokenReviews passes), so it holds only roles of one rule"
        ),
    ),
    Control(
        "4.1.3",
        "minimize wildcard use in Roles and ClusterRoles",
        HELD,
        held_by=("CKV_K8S_49", "policy:rbac-least-privilege-roles"),
        note="checkov's CKV_K8S_49 reads a role's first rule only; the rule reads them all",
    ),
    Control(
        "4.1.4",
        "default service accounts not actively used",
        HELD,
        held_by=("CKV_K8S_42", "policy:pods-own-service-account"),
        note=(
            "no binding grants a default ServiceAccount anything, and every pod template names an account of its own "
            "(the rule; the slice controller chart's Deployment on its render, `tests/test_cis_benchmark.py`): the "
            "slice checks run as `slice-check`, bound to no role and with no token mounted. The registry charts' "
            "controllers and the llm-d router name their own accounts in their templates"
        ),
    ),
    Control(
        "4.1.5",
        "service account tokens only mounted where necessary",
        HELD,
        held_by=("CKV_K8S_38",),
        note=(
            "skipped, with the reason on the object, on the pods that call the API server or reach Google Cloud "
            "through Workload Identity"
        ),
    ),
    Control(
        "4.1.6",
        "avoid use of system:masters",
        HELD,
        held_by=("policy:rbac-no-privileged-bindings",),
    ),
    Control(
        "4.1.7",
        "limit bind, impersonate and escalate",
        HELD,
        held_by=("CKV_K8S_157", "CKV_K8S_158", "policy:rbac-least-privilege-roles"),
        note="impersonate is the rule's alone: checkov's CKV2_K8S_3 has CKV2_K8S_5's blind spot (4.1.2)",
    ),
    Control(
        "4.1.8",
        "avoid bindings to system:anonymous",
        HELD,
        held_by=("policy:rbac-no-privileged-bindings",),
    ),
    Control(
        "4.1.9",
        "avoid non-default bindings to system:unauthenticated",
        HELD,
        held_by=("policy:rbac-no-privileged-bindings",),
    ),
    Control(
        "4.1.10",
        "avoid non-default bindings to system:authenticated",
        HELD,
        held_by=("policy:rbac-no-privileged-bindings",),
    ),
    Control(
        "4.2.1",
        "Pod Security Standard baseline or stricter for all namespaces",
        PARTLY,
        held_by=("policy:namespaces-enforce-pod-security", "CKV_K8S_16", "CKV_K8S_17", "CKV_K8S_18", "CKV_K8S_19"),
        note=(
            "every namespace the program makes enforces `restricted` (the controllers') or `baseline` (the "
            "workloads'), pinned to the minor of `cluster.version` (see [Pod Security of the "
            "namespaces](#pod-security-of-the-namespaces)), but one: where node audit logging is on (5.7.2; on a "
            "production stack), its namespace `node-audit` enforces `privileged`, as its DaemonSet needs (a "
            "privileged setup container, the node's PID namespace, network and host paths, each of which baseline "
            "refuses), and holds nothing else. The rule refuses a namespace without the label, `privileged` anywhere "
            "else (and anything but `privileged` there), and a Helm release that would make its own namespace. "
            "`tests/test_pod_security.py` checks every pod of every stack, the registry charts' included, against "
            "its namespace's level, and each level against the strictest its pods meet. The checkov checks hold "
            "baseline's pod rules object by object, skipped with the reason on the node audit DaemonSet alone. GKE's "
            "own namespaces (`kube-system`, `gke-*`, `gmp-*`) are GKE's, and the program puts nothing in them or in "
            "`default` (4.6.1, 4.6.4); a stack that leaves node audit logging off (dev, saxml) holds this control "
            "whole"
        ),
    ),
    Control(
        "4.3.1",
        "the CNI supports NetworkPolicy",
        HELD,
        held_by=("policy:gke-cluster-hardened",),
        note=(
            "GKE Dataplane V2 (`ADVANCED_DATAPATH`) enforces NetworkPolicy. checkov's CKV_GCP_12 asks for a "
            "`network_policy` block besides Dataplane V2, which GKE does not need, so it is not used"
        ),
    ),
    Control(
        "4.3.2",
        "all namespaces have NetworkPolicies",
        HELD,
        held_by=("CKV2_K8S_6", "policy:pods-isolated-by-network-policy"),
        note=(
            "every namespace the program makes for its workloads denies ingress by default and admits, per group of "
            "pods, exactly the senders it uses (see [Network policies](#network-policies)); the slice controller's "
            "namespace has its chart's policy. checkov's CKV2_K8S_6 joins a policy to pods by labels in any "
            "namespace (a `podSelector: {}` anywhere covers every pod it scans), so the pack's rule holds each "
            "namespace apart. The namespaces of the charts installed from registries (JobSet, Kueue, "
            "LeaderWorkerSet) and GKE's own (`kube-system`, `gmp-system`) get no policy of the program's. The node "
            "audit logging's DaemonSet (prod, namespace `node-audit`) runs on the node's network, where Kubernetes "
            "leaves NetworkPolicy undefined and Dataplane V2 treats its traffic as the node's: the rule exempts such "
            "pods, and the agent accepts no connection (its health endpoint listens on the node's loopback)"
        ),
    ),
    Control(
        "4.4.1",
        "secrets as files, not environment variables",
        HELD,
        held_by=("CKV_K8S_35",),
        note=(
            "with the token in Secret Manager (`serving.hfTokenSecretVersion`, every production stack: 4.4.2) the "
            "model servers and the staging Job read it from a file (`HF_TOKEN_PATH`) and no pod skips the check. "
            "Without it (dev, saxml) they take the optional Secret `llm-d-hf-token` (`serving.hfToken`, or none) as "
            "`HF_TOKEN`, which vLLM and huggingface_hub read from the environment: skipped there, with the reason on "
            "the object"
        ),
    ),
    Control(
        "4.4.2",
        "consider external secret storage",
        HELD_IN_PRODUCTION,
        held_by=("preview:serving.hfToken",),
        note=(
            "the one secret the workloads use, the Hugging Face token, stays in Secret Manager on a production "
            "stack: preview refuses `serving.hfToken` there, and the prod stack names a secret version in "
            "`serving.hfTokenSecretVersion`, which GKE's Secret Manager add-on (`cluster.secretManager`) mounts into "
            "the model servers and the staging Job as a file, read as their own Kubernetes service accounts, the "
            "only principals granted `roles/secretmanager.secretAccessor` on the secret (`tests/test_iam_stack.py`); "
            "no Kubernetes Secret holds it. dev and saxml may still set `serving.hfToken`, a Kubernetes Secret made "
            "from the stack's encrypted config, to try a gated model without Secret Manager; their committed files "
            "hold no token (the default model is public). The program's other Secret, `kueue-metrics-scraper-token`, "
            "holds no value of the stack: the cluster mints it, a service-account token for managed Prometheus to "
            "scrape Kueue, and a PodMonitoring takes its credentials from a Secret only (prometheus-engine v0.17.2 "
            "CRD, `authorization.credentials.secret`)"
        ),
    ),
    Control(
        "4.5.1",
        "image provenance with ImagePolicyWebhook",
        NOT_APPLICABLE,
        note=(
            "GKE does not expose the API server's admission configuration; image provenance on GKE is Binary "
            "Authorization (5.1.4)"
        ),
    ),
    Control(
        "4.6.1",
        "namespaces as administrative boundaries",
        HELD,
        held_by=("policy:objects-in-own-namespaces", "CKV_K8S_21"),
        note=(
            "each concern has its own namespace (the three controllers', the slice controller's, the workload "
            "namespaces, `sax`); the rule refuses any object or Helm release of the program in a namespace "
            "Kubernetes or GKE keeps for itself (`default`, `kube-*`, `gke-*`, `gmp-*`), and checkov's CKV_K8S_21 "
            "the `default` namespace on the rendered objects"
        ),
    ),
    Control(
        "4.6.2",
        "seccomp profile RuntimeDefault",
        HELD,
        held_by=("CKV_K8S_31",),
    ),
    Control(
        "4.6.3",
        "security context on pods and containers",
        HELD,
        held_by=("CKV_K8S_29", "CKV_K8S_30"),
    ),
    Control(
        "4.6.4",
        "the default namespace not used",
        HELD,
        held_by=("CKV_K8S_21",),
    ),
    Control(
        "5.1.1",
        "image vulnerability scanning",
        NOT_APPLICABLE,
        note=(
            "the program owns no repository images are pushed to: the production stack pulls from `images.mirror`, "
            "the organisation's Artifact Registry repository, made and filled outside the stack (see [Supply "
            "chain](#supply-chain-digests-and-the-mirror)), where its owner turns on Artifact Analysis scanning; "
            "dev's and saxml's pull-through repositories only cache their upstream registries' images, which the "
            "project's owner may scan the same way (the stack enables no scanning API). checkov's CKV2_GCP_11 reads "
            "`google_project_services`, a resource the program does not use (it enables each API on its own), so it "
            "could not hold it either"
        ),
    ),
    Control(
        "5.1.2",
        "minimize user access to image repositories",
        NOT_APPLICABLE,
        note=(
            "who may push to the mirror is its owner's to grant, and nobody can push to a pull-through repository (a "
            "remote repository only caches its upstream). The stack's grants on either are the nodes' "
            "`roles/artifactregistry.reader` on each repository alone (see 5.1.3); who else may read them is the "
            "project's IAM"
        ),
    ),
    Control(
        "5.1.3",
        "cluster access to image repositories read-only",
        HELD,
        held_by=("policy:registry-access-read-only", "policy:no-broad-project-roles"),
        note=(
            "the nodes' account gets GKE's node role and `roles/artifactregistry.reader` on each repository it pulls "
            "from alone (`images.mirror`'s, or each pull-through repository), never on the project. The first rule "
            "refuses any other Artifact Registry role, on the project or on a repository (an allow-list: a role "
            "Google adds later is refused until someone reads what it does); the second refuses owner, editor and "
            "storage.admin on the project. `tests/test_iam_stack.py` holds every grant against the calls that need "
            "it ([Google Cloud identities](#google-cloud-identities-what-each-may-do)). checkov's CKV_GCP_42 cannot "
            "judge these grants: their member is the node account's email, known only after apply"
        ),
    ),
    Control(
        "5.1.4",
        "only trusted container images",
        PARTLY_IN_PRODUCTION,
        held_by=("CKV_GCP_66", "preview:cluster.binaryAuthorization"),
        note=(
            "what is held is the half the stack owns, on a production stack: its cluster enforces the project's "
            "Binary Authorization policy (`cluster.binaryAuthorization: PROJECT_SINGLETON_POLICY_ENFORCE`; the stack "
            "enables the Binary Authorization API before the cluster). The policy is the organisation's, one per "
            "project, set and kept outside the stack: the cluster enforces whatever it says, and the policy a "
            "project starts with admits every image (`evaluationMode: ALWAYS_ALLOW`, "
            "cloud.google.com/binary-authorization/docs/configuring-policy-cli), so only the organisation's policy "
            "makes the images trusted ones (see [The prod stack](deploying.md#the-prod-stack)). The other half, a "
            "policy that trusts only some images, is not held: nothing here reads or asserts the policy (pulumi-gcp "
            "10.2.0 has no data source for it, and kube-bench's remediation of 5.1.4 (aquasecurity/kube-bench "
            "a73ce378, `cfg/gke-1.9.0/managedservices.yaml`) imports a policy as well as enabling the evaluation "
            "mode), so a project still on the `ALWAYS_ALLOW` policy it started with passes every check named here. "
            "Binary Authorization evaluates a pod's `containers` and `ephemeralContainers` only (the note of its "
            "setup overview, cloud.google.com/binary-authorization/docs/setting-up), not its init containers (the "
            "P/D sidecar, the staging Job's library install, the node audit setup). dev and saxml keep it "
            "`DISABLED`: they pull their images by tag from each image's own registry, which a policy requiring "
            "digests or attestations refuses. Every image is pinned (`container-images-pinned`), a production stack "
            "requires digests unless it says otherwise (the committed prod file does, `images.requireDigests: "
            "false`, see [Supply chain](#supply-chain-digests-and-the-mirror)), and `images.mirror` serves every "
            "image from the organisation's own registry"
        ),
    ),
    Control(
        "5.2.1",
        "not the Compute Engine default service account",
        HELD,
        held_by=("policy:gke-nodes-hardened", "policy:gke-cluster-hardened"),
        note=(
            "every pool, and the cluster's short-lived default pool, runs as the cluster's own node account. "
            "checkov's CKV2_GCP_1 looks for connections to `google_project_default_service_accounts`, which the "
            "program never declares, so it passes for nothing"
        ),
    ),
    Control(
        "5.2.2",
        "dedicated service accounts and Workload Identity",
        HELD,
        held_by=("policy:gke-cluster-hardened", "CKV_GCP_69"),
    ),
    Control(
        "5.3.1",
        "Secrets encrypted with keys managed in Cloud KMS",
        HELD_IN_PRODUCTION,
        held_by=("preview:cluster.secretsEncryptionKey",),
        note=(
            "required on a production stack; the key is made beforehand, and granted to GKE's service agent by the "
            "stack when it is in the stack's project (see [The prod stack](deploying.md#the-prod-stack)). dev and "
            "saxml keep Google's default encryption only. checkov has no check of `database_encryption`"
        ),
    ),
    Control(
        "5.4.1",
        "the GKE metadata server",
        HELD,
        held_by=("CKV_GCP_69",),
        note=(
            "on every pool and on the cluster's default pool. The one pod on the node's network, the node audit "
            "agent (5.7.2), reaches the node's Compute Engine metadata server instead and writes its logs as the "
            "node's service account, as Google's example does; it has no Google grant of its own"
        ),
    ),
    Control(
        "5.5.1",
        "Container-Optimized OS with containerd",
        HELD,
        held_by=("policy:gke-nodes-hardened",),
        note=(
            "no pool sets another image, so GKE's default applies. checkov's CKV_GCP_22 answers only for pools "
            "pinned below GKE 1.24"
        ),
    ),
    Control(
        "5.5.2",
        "node auto-repair",
        HELD,
        held_by=("CKV_GCP_9",),
    ),
    Control(
        "5.5.3",
        "node auto-upgrade",
        HELD,
        held_by=("CKV_GCP_10",),
        note="inside the maintenance window (see [TPU upgrades](operations.md#tpu-upgrades))",
    ),
    Control(
        "5.5.4",
        "release channels",
        HELD,
        held_by=("CKV_GCP_70",),
    ),
    Control(
        "5.5.5",
        "Shielded GKE Nodes",
        HELD,
        held_by=("CKV_GCP_71",),
        note="the provider's default (true); the check refuses turning it off",
    ),
    Control(
        "5.5.6",
        "integrity monitoring on Shielded nodes",
        HELD,
        held_by=("CKV_GCP_72",),
        note=(
            "set with secure boot (5.5.7); the provider's default (true) where secure boot is off (the saxml stack's "
            "TPU pools, a pool with `tpu.pools[].hardenedBoot: false`)"
        ),
    ),
    Control(
        "5.5.7",
        "secure boot on Shielded nodes",
        HELD_IN_PRODUCTION,
        held_by=("CKV_GCP_68", "preview:tpu.secureBoot"),
        note=(
            "on the system pool, the cluster's default pool and the TPU pools: a production stack refuses "
            "`tpu.secureBoot` off, or unset on a machine type GKE is not known to make with it. Unset, it is on for "
            "`tpu7x-standard-4t`, which Google's cluster-toolkit makes with secure boot in a test it runs every day "
            "(GKE's and Cloud TPU's documentation read here say nothing either way): dev has it too. The saxml "
            "stack's v5e pools go without (the check fails there): no source read here says GKE makes "
            "`ct5lp-hightpu-4t` nodes with secure boot, or refuses to, so unset leaves it off there. A pool takes it "
            "only when made (`shielded_instance_config` is ForceNew): see [Node "
            "boot](#node-boot-the-key-of-the-boot-disks-and-secure-boot) for a running stack, one cube per `up`"
        ),
    ),
    Control(
        "5.6.1",
        "VPC Flow Logs and intranode visibility",
        HELD_IN_PRODUCTION,
        held_by=("CKV_GCP_26", "CKV_GCP_61", "preview:network.flowLogs.enabled", "preview:cluster.intranodeVisibility"),
        note=(
            "flow logs on the node subnet (`network.flowLogs`, on by default; the proxy-only subnet cannot have "
            "them) and intranode visibility (`cluster.intranodeVisibility`), so that the flows between pods of one "
            "node go through the VPC and its flow logs too: both required on a production stack. dev and saxml leave "
            "intranode visibility off: turning it on for a running cluster restarts its control plane and every node "
            "(gcloud's help of `--enable-intra-node-visibility`, google-cloud-sdk 578.0.0), every TPU cube among "
            "them, and their TPU pods have their hosts to themselves, so little traffic stays within a node. GKE's "
            "guide (cloud.google.com/kubernetes-engine/docs/how-to/intranode-visibility) says that with Dataplane V2 "
            "from 1.36.0-gke.3302000 it is done in eBPF rather than by the netd DaemonSet; what that guide says of "
            "existing clusters could not be read here, so whether the restart recreates the nodes and whether it "
            "waits for the maintenance window is not established: the preview warns of it on a running stack ([What "
            "a change does](operations.md#what-a-change-does))"
        ),
    ),
    Control(
        "5.6.2",
        "VPC-native clusters",
        HELD,
        held_by=("CKV_GCP_23",),
    ),
    Control(
        "5.6.3",
        "control plane authorized networks",
        HELD_IN_PRODUCTION,
        held_by=("preview:cluster.controlPlane.ipEndpoint",),
        note=(
            "a production stack has no public IP for authorized networks to restrict: preview refuses `public` there "
            "(5.6.4), so the control plane answers on its DNS-based endpoint, each request authorized by IAM, and, "
            "with `private`, on a VPC address. dev and saxml keep a public IP open to every address, so that a "
            "laptop reaches a new cluster without listing its address; `cluster.controlPlane.authorizedNetworks` "
            "limits it to listed ranges. checkov's CKV_GCP_20 is not used: it asks for an authorized-networks block "
            "on every cluster, prod's too, whose IP endpoints are off"
        ),
    ),
    Control(
        "5.6.4",
        "private endpoint, public access disabled",
        HELD_IN_PRODUCTION,
        held_by=("preview:cluster.controlPlane.ipEndpoint",),
        note=(
            "preview refuses `cluster.controlPlane.ipEndpoint: public` on a production stack, authorized networks or "
            "not; the prod stack sets `off` (the DNS-based endpoint only), `private` is the other choice. dev and "
            "saxml keep a public IP (see 5.6.3). checkov's CKV_GCP_25 is not used: it only asks for a "
            "`private_cluster_config` block, the very test of CKV_GCP_64 (5.6.5); the preview check holds the "
            "endpoint setting itself"
        ),
    ),
    Control(
        "5.6.5",
        "private nodes",
        HELD,
        held_by=("CKV_GCP_64", "preview:cluster.privateNodes"),
        note=(
            "every stack's nodes are private by default, with Cloud NAT for their way out (`network.nat`); preview "
            "refuses public nodes, or a TPU pool's `privateNodes: false`, on a production stack. CKV_GCP_64 only "
            "asks for the `private_cluster_config` block; the preview check holds the setting"
        ),
    ),
    Control(
        "5.6.6",
        "firewalling of the nodes",
        HELD,
        held_by=("CKV2_GCP_12",),
        note="the VPC's one ingress rule admits its own node, pod and proxy-only ranges",
    ),
    Control(
        "5.6.7",
        "Google-managed SSL certificates",
        NOT_APPLICABLE,
        note=(
            "the program makes no HTTPS load balancer, so it has no certificate to manage: its Gateway (class "
            "`gke-l7-rilb`, a regional internal Application Load Balancer) and the Saxml load balancer are internal "
            "and speak plain HTTP inside the VPC, and the `no-public-endpoints` rule refuses one that faces the "
            "internet. A stack that adds TLS to the internal Gateway takes a certificate from Certificate Manager, "
            "which is not the program's"
        ),
    ),
    Control(
        "5.7.1",
        "Logging and Cloud Monitoring",
        HELD,
        held_by=("CKV_GCP_1", "CKV_GCP_8"),
        note="GKE's defaults; the checks refuse `none`",
    ),
    Control(
        "5.7.2",
        "Linux auditd logging",
        HELD_IN_PRODUCTION,
        held_by=("preview:nodeAuditLogging.enabled",),
        note=(
            'GKE offers no cluster setting for it (Google\'s page "Enabling Linux auditd logs on GKE nodes" describes '
            "a DaemonSet only); the benchmark's remediation is Google's example DaemonSet "
            "(GoogleCloudPlatform/k8s-node-tools `os-audit/`). The program deploys its own, "
            "`manifests/operations/node-audit-logging.yaml` (namespace `node-audit`): on every Container-Optimized "
            "OS node, the TPU nodes included, an init container starts the node's `cloud-audit-setup` unit and "
            "Fluent Bit ships the audit records of the node's journal to Cloud Logging, log `linux-auditd` of the "
            "node (see [Node audit logs](operations.md#node-audit-logs)). On by default on a production stack, which "
            "refuses `nodeAuditLogging.enabled: false`; dev and saxml leave it off unless set (the log volume is "
            "billed), and a stack on a cluster made elsewhere never deploys it (the stack that makes the cluster "
            "does)"
        ),
    ),
    Control(
        "5.8.1",
        "client certificates disabled",
        HELD,
        held_by=("CKV_GCP_13",),
    ),
    Control(
        "5.8.2",
        "RBAC users managed with Google Groups",
        HELD_IN_PRODUCTION,
        held_by=("CKV_GCP_65", "preview:cluster.rbacSecurityGroup"),
        note=(
            "a production stack names the organisation's group `gke-security-groups@<domain>` "
            "(`cluster.rbacSecurityGroup`; the prod file names an example, `gke-security-groups@example.com`), made "
            "beforehand in its Google Workspace or Cloud Identity: RoleBindings may then name the groups nested in "
            "it, so access to the cluster follows group membership (see [The prod "
            "stack](deploying.md#the-prod-stack)). Which groups exist and what they are bound to is the "
            "organisation's: the program grants no Kubernetes role to a person or a group of people. dev and saxml "
            "leave it empty: RBAC then knows single accounts only. CKV_GCP_65 asks for a group name, not that the "
            "group exists"
        ),
    ),
    Control(
        "5.8.3",
        "legacy authorization (ABAC) disabled",
        HELD,
        held_by=("CKV_GCP_7",),
        note="the provider's default (false); the check refuses turning it on",
    ),
    Control(
        "5.9.1",
        "CMEK for persistent disks",
        NOT_APPLICABLE,
        note="the program makes no PersistentVolume",
    ),
    Control(
        "5.9.2",
        "CMEK for boot disks",
        HELD_IN_PRODUCTION,
        held_by=("preview:cluster.bootDiskEncryptionKey", "policy:boot-disks-encrypted-in-production"),
        note=(
            "required on a production stack: the key encrypts the boot disks of the system pool, the TPU pools and "
            "the cluster's first default pool; it is made beforehand, and granted to the Compute Engine service "
            "agent by the stack when it is in the stack's project (see [The prod "
            "stack](deploying.md#the-prod-stack)). dev and saxml keep Google's default encryption only. That GKE "
            "takes a key for the Hyperdisk Balanced boot disks of `tpu7x-standard-4t` nodes is not established by a "
            "source read here (see [Node boot](#node-boot-the-key-of-the-boot-disks-and-secure-boot)). checkov has "
            "no check of `boot_disk_kms_key`; the rule reads it on a production stack, and lets through only the TPU "
            "pools the stack file keeps as made before (`tpu.pools[].hardenedBoot: false`, warned of at every "
            "preview while a running stack replaces its cubes one per `up`)"
        ),
    ),
    Control(
        "5.10.1",
        "Kubernetes web UI disabled",
        NOT_APPLICABLE,
        note=(
            "GKE's dashboard add-on is gone; the provider dropped its argument in 3.0.0 "
            "(hashicorp/terraform-provider-google#4680)"
        ),
    ),
    Control(
        "5.10.2",
        "no alpha clusters for production",
        HELD,
        held_by=("CKV2_GCP_19",),
    ),
    Control(
        "5.10.3",
        "GKE Sandbox for untrusted workloads",
        NOT_APPLICABLE,
        note="the program runs only its own pinned images, no untrusted code",
    ),
    Control(
        "5.10.4",
        "Security Posture",
        HELD,
        held_by=("policy:gke-cluster-hardened",),
        note="the rule refuses `DISABLED`; the mode is GKE's default, not set by the program",
    ),
)
