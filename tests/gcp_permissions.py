"""The rules of Google Cloud that tests/test_iam_stack.py holds every stack's grants against.

Three kinds of facts, each with its source: which Google API calls each program that runs in the cluster with a
Google identity makes (read in its code and its libraries at the versions it runs), which permission each call needs
(Google's per-method tables), and which permissions each role the stacks grant carries (Google's role definitions).
The programs are found in a render by what their manifests say (a command, an environment variable, a volume), not
by a list of the stacks' names, so a stack file of the user's own is checked the same way.

Calls and conditions: Cloud Storage evaluates an IAM condition against the resource a call names: the bucket,
``projects/_/buckets/<bucket>``, for a bucket-level call (get the bucket, list its objects), and
``projects/_/buckets/<bucket>/objects/<name>`` for an object (IAM "Resource attributes for IAM Conditions",
cloud.google.com/iam/docs/conditions-resource-attributes, read 2026-12-04). The conditions are evaluated by cel-python
(a CEL implementation of the language's specification), not by a pattern written here: a condition of any other
form is evaluated as IAM would read it, or fails loudly.

A call that stands for many objects (every file of a snapshot) names one of them; ``under`` says which prefix it stands
for, and the write check reads that.

Programs that call Google Cloud as no identity of the stack, so nothing here: tools/verify.py (HTTP to the Gateway,
the stack outputs through the pulumi CLI); tools/bench.py's own steps (kubectl, and `gcloud storage cp` of the
reports as whoever runs it); the drift workflow (.github/workflows/drift.yaml: `pulumi preview --refresh` in GitHub
Actions as CI's account, vars.GCP_SERVICE_ACCOUNT, whose roles are granted outside the stack). A published Saxml
model's checkpoint in another bucket is read by the model servers as sax-iam-sa, granted by that bucket's owner
(docs/saxml.md). Pods whose identity holds no grant (the controllers, the router, the slice checks) are not read:
a Google call of theirs would be refused, which this model cannot see.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import celpy
import yaml

# --- What each role the stacks grant carries ---------------------------------------------------------------------
#
# The IAM API's own definitions of the predefined roles (roles.get: each role's `includedPermissions`), as the
# darkbitio/gcp-iam-role-permissions snapshot of them holds them: commit 8ab2a6ff8d7e977c4feb6b60a377883d45560050
# (fetched 2026-08-22), files roles/<role>. Google publishes the same definitions on
# cloud.google.com/iam/docs/roles-permissions/<service>; the secretAccessor list was checked against Secret Manager's
# "Access control with IAM" page (read 2026-12-04), and objectViewer's object permissions against the Cloud Storage
# Java client's StorageRoles.objectViewer() (storage.objects.list, .get). A role the stacks grant that is not here
# fails the test until its table is added from such a source.
ROLE_PERMISSIONS: dict[str, frozenset[str]] = {
    "roles/storage.bucketViewer": frozenset({"storage.buckets.get", "storage.buckets.list"}),
    "roles/storage.objectViewer": frozenset(
        {
            "resourcemanager.projects.get",
            "resourcemanager.projects.list",
            "storage.folders.get",
            "storage.folders.list",
            "storage.managedFolders.get",
            "storage.managedFolders.list",
            "storage.objects.get",
            "storage.objects.list",
        }
    ),
    "roles/storage.objectUser": frozenset(
        {
            "monitoring.timeSeries.create",
            "orgpolicy.policy.get",
            "resourcemanager.projects.get",
            "resourcemanager.projects.list",
            "storage.folders.create",
            "storage.folders.delete",
            "storage.folders.get",
            "storage.folders.list",
            "storage.folders.rename",
            "storage.managedFolders.create",
            "storage.managedFolders.delete",
            "storage.managedFolders.get",
            "storage.managedFolders.list",
            "storage.multipartUploads.abort",
            "storage.multipartUploads.create",
            "storage.multipartUploads.list",
            "storage.multipartUploads.listParts",
            "storage.objects.create",
            "storage.objects.createContext",
            "storage.objects.delete",
            "storage.objects.deleteContext",
            "storage.objects.get",
            "storage.objects.list",
            "storage.objects.move",
            "storage.objects.restore",
            "storage.objects.update",
            "storage.objects.updateContext",
        }
    ),
    "roles/secretmanager.secretAccessor": frozenset(
        {"resourcemanager.projects.get", "resourcemanager.projects.list", "secretmanager.versions.access"}
    ),
    "roles/iam.workloadIdentityUser": frozenset(
        {
            "iam.serviceAccounts.get",
            "iam.serviceAccounts.getAccessToken",
            "iam.serviceAccounts.getOpenIdToken",
            "iam.serviceAccounts.list",
        }
    ),
    "roles/artifactregistry.reader": frozenset(
        {
            "artifactregistry.attachments.get",
            "artifactregistry.attachments.list",
            "artifactregistry.dockerimages.get",
            "artifactregistry.dockerimages.list",
            "artifactregistry.files.download",
            "artifactregistry.files.get",
            "artifactregistry.files.list",
            "artifactregistry.locations.get",
            "artifactregistry.locations.list",
            "artifactregistry.mavenartifacts.get",
            "artifactregistry.mavenartifacts.list",
            "artifactregistry.npmpackages.get",
            "artifactregistry.npmpackages.list",
            "artifactregistry.packages.get",
            "artifactregistry.packages.list",
            "artifactregistry.projectconfigs.get",
            "artifactregistry.projectsettings.get",
            "artifactregistry.pythonpackages.get",
            "artifactregistry.pythonpackages.list",
            "artifactregistry.repositories.downloadArtifacts",
            "artifactregistry.repositories.exportArtifacts",
            "artifactregistry.repositories.get",
            "artifactregistry.repositories.list",
            "artifactregistry.repositories.listEffectiveTags",
            "artifactregistry.repositories.listTagBindings",
            "artifactregistry.repositories.readViaVirtualRepository",
            "artifactregistry.rules.get",
            "artifactregistry.rules.list",
            "artifactregistry.tags.get",
            "artifactregistry.tags.list",
            "artifactregistry.versions.get",
            "artifactregistry.versions.list",
            "resourcemanager.projects.get",
        }
    ),
    "roles/cloudkms.cryptoKeyEncrypterDecrypter": frozenset(
        {
            "cloudkms.cryptoKeyVersions.useToDecrypt",
            "cloudkms.cryptoKeyVersions.useToEncrypt",
            "cloudkms.locations.get",
            "cloudkms.locations.list",
            "resourcemanager.projects.get",
        }
    ),
    "roles/container.defaultNodeServiceAccount": frozenset(
        {
            "autoscaling.sites.writeMetrics",
            "logging.logEntries.create",
            "monitoring.metricDescriptors.create",
            "monitoring.metricDescriptors.list",
            "monitoring.timeSeries.create",
            "monitoring.timeSeries.list",
        }
    ),
}

# --- The permissions each API method needs ----------------------------------------------------------------------


@dataclass(frozen=True)
class Method:
    permissions: tuple[str, ...]  # every one is needed (IAM checks each against the whole allow policy)
    source: str


_GCS_JSON = "Cloud Storage 'IAM permissions for JSON methods', cloud.google.com/storage/docs/access-control/iam-json"
METHODS: dict[str, Method] = {
    # (read 2026-12-04)
    "storage.buckets.get": Method(("storage.buckets.get",), f"{_GCS_JSON}: Buckets get"),
    "storage.objects.get": Method(("storage.objects.get",), f"{_GCS_JSON}: Objects get (metadata or media)"),
    "storage.objects.list": Method(("storage.objects.list",), f"{_GCS_JSON}: Objects list"),
    "storage.objects.insert": Method(("storage.objects.create",), f"{_GCS_JSON}: Objects insert, a new object"),
    # "storage.objects.delete ... if you're overwriting an existing object" (the page's footnote to insert)
    "storage.objects.insert (replacing an object)": Method(
        ("storage.objects.create", "storage.objects.delete"), f"{_GCS_JSON}: Objects insert, footnote on overwrites"
    ),
    "storage.objects.delete": Method(("storage.objects.delete",), f"{_GCS_JSON}: Objects delete"),
    # The Storage Control API's GetStorageLayout "requires storage.objects.list" (Cloud Storage "Get the storage
    # layout of a bucket", cloud.google.com/storage/docs/getting-storage-layout, last updated 2025-07-02).
    "storage.control.getStorageLayout": Method(
        ("storage.objects.list",), "cloud.google.com/storage/docs/getting-storage-layout"
    ),
    "secretmanager.versions.access": Method(
        ("secretmanager.versions.access",),
        "Secret Manager 'Access control with IAM', cloud.google.com/secret-manager/docs/access-control (read 2026-12-04)",
    ),
    # GKE's metadata server (or the Secret Manager provider) trades the pod's federated token for the Google service
    # account's: IAM Credentials generateAccessToken, which needs iam.serviceAccounts.getAccessToken on that account,
    # the permission roles/iam.workloadIdentityUser carries for this (GKE "Authenticate to Google Cloud APIs from GKE
    # workloads", link Kubernetes ServiceAccounts to IAM, cloud.google.com/kubernetes-engine/docs/how-to/
    # workload-identity, read 2026-12-04).
    "iamcredentials.generateAccessToken": Method(
        ("iam.serviceAccounts.getAccessToken",), "cloud.google.com/kubernetes-engine/docs/how-to/workload-identity"
    ),
    "logging.entries.write": Method(
        ("logging.logEntries.create",), "Cloud Logging access control, cloud.google.com/logging/docs/access-control"
    ),
    "monitoring.timeSeries.create": Method(
        ("monitoring.timeSeries.create",), "Cloud Monitoring access control, cloud.google.com/monitoring/access-control"
    ),
    # A service agent wraps and unwraps its data keys with the customer's key: Encrypt and Decrypt of the CryptoKey,
    # which check useToEncrypt and useToDecrypt on it (Cloud KMS "Permissions and roles",
    # cloud.google.com/kms/docs/reference/permissions-and-roles, read 2026-12-04).
    "cloudkms.cryptoKeys.encrypt": Method(
        ("cloudkms.cryptoKeyVersions.useToEncrypt",), "cloud.google.com/kms/docs/reference/permissions-and-roles"
    ),
    "cloudkms.cryptoKeys.decrypt": Method(
        ("cloudkms.cryptoKeyVersions.useToDecrypt",), "cloud.google.com/kms/docs/reference/permissions-and-roles"
    ),
    # A docker pull from Artifact Registry reads the repository's artifacts (Artifact Registry "Access control with
    # IAM", cloud.google.com/artifact-registry/docs/access-control, read 2026-12-04: the reader role, download).
    "artifactregistry.docker.pull": Method(
        ("artifactregistry.repositories.downloadArtifacts",), "cloud.google.com/artifact-registry/docs/access-control"
    ),
}

# --- Calls, grants and how IAM judges one against the other ----------------------------------------------------


@dataclass(frozen=True)
class Call:
    program: str  # what makes it, as the docs name the program
    principal: str  # the IAM member it is made as
    method: str  # a key of METHODS
    resource: str  # the resource's full name, as IAM conditions see it (resource.name)
    reached_from: tuple[str, ...]  # where an allow policy reaches it: "bucket B", "project P", "secret ...", ...
    source: str  # where the call is made: file:line at the version that runs
    under: str = ""  # the call stands for every object whose name starts with this (the resource is one of them)

    @property
    def permissions(self) -> tuple[str, ...]:
        return METHODS[self.method].permissions

    def covers(self, resource: str) -> bool:
        """Whether this call is made on ``resource``: its own, or one of the objects it stands for."""
        return resource == self.resource or (bool(self.under) and resource.startswith(self.under))

    def __str__(self) -> str:
        return f"{self.program}: {self.method} on {self.resource} as {self.principal} ({self.source})"


@dataclass(frozen=True)
class Grant:
    on: str  # "project <id>", "bucket <name>", "service account <email>", "secret projects/<p>/secrets/<s>", ...
    role: str
    principal: str
    condition: str | None  # the IAM condition's CEL expression
    name: str = field(default="", compare=False)  # the Pulumi resource that makes it

    def __str__(self) -> str:
        when = f" if {self.condition}" if self.condition else ""
        return f"{self.role} on {self.on} to {self.principal}{when} ({self.name})"


_CEL = celpy.Environment()


def condition_holds(expression: str, resource: str) -> bool:
    """An IAM condition on a call's resource, evaluated by a CEL implementation. Only ``resource.name`` is bound
    (what the stacks' conditions read); any other attribute is an evaluation error, raised."""
    program = _CEL.program(_CEL.compile(expression))
    try:
        result = program.evaluate({"resource": celpy.json_to_cel({"name": resource})})
    except celpy.CELEvalError as error:
        raise ValueError(f"cannot evaluate the condition {expression!r} on {resource}: {error.args[0]}") from None
    if not isinstance(result, celpy.celtypes.BoolType):
        raise ValueError(f"the condition {expression!r} is not a boolean on {resource}: {result!r}")
    return bool(result)


def allows(grant: Grant, principal: str, permission: str, resource: str, reached_from: Iterable[str]) -> bool:
    """Whether ``grant`` lets ``principal`` use ``permission`` on ``resource``: the grant is on a resource whose policy
    reaches it, its role carries the permission, and its condition holds for the resource. A role without a table is
    a KeyError: its permissions are not guessed."""
    return (
        grant.principal == principal
        and grant.on in reached_from
        and permission in ROLE_PERMISSIONS[grant.role]
        and (grant.condition is None or condition_holds(grant.condition, resource))
    )


def missing(call: Call, grants: Iterable[Grant]) -> list[str]:
    """The permissions of ``call`` no grant gives it (empty: Google Cloud lets the call through)."""
    grants = list(grants)
    return [
        permission
        for permission in call.permissions
        if not any(allows(g, call.principal, permission, call.resource, call.reached_from) for g in grants)
    ]


def needed_by(grant: Grant, calls: Iterable[Call]) -> list[Call]:
    """The calls ``grant`` lets through (with any permission of theirs)."""
    return [
        call
        for call in calls
        if any(
            allows(grant, call.principal, permission, call.resource, call.reached_from)
            for permission in call.permissions
        )
    ]


# --- The cluster as a render declares it ---------------------------------------------------------------------------

# GKE's identifiers for a Kubernetes service account (GKE "About Workload Identity Federation for GKE",
# cloud.google.com/kubernetes-engine/docs/concepts/workload-identity, read 2026-12-04): the principal a resource's
# policy names for direct access, and the member a Google service account's policy names so the account may act as it.
WORKLOAD_PRINCIPAL = "principal://iam.googleapis.com/projects/{number}/locations/global/workloadIdentityPools/{pool}/subject/ns/{ns}/sa/{sa}"
WORKLOAD_MEMBER = "serviceAccount:{pool}[{ns}/{sa}]"
GOOGLE_ACCOUNT_ANNOTATION = "iam.gke.io/gcp-service-account"


@dataclass(frozen=True)
class Cluster:
    project: str
    project_number: str  # what getProject answers (the mocks' placeholder offline)
    workload_pool: str
    node_account: str | None  # the nodes' IAM member; None on a cluster made elsewhere
    secrets_keys: tuple[str, ...] = ()  # the Cloud KMS key of the cluster's Secrets (databaseEncryption), if any
    boot_keys: tuple[str, ...] = ()  # the Cloud KMS keys of its pools' boot disks (nodeConfig.bootDiskKmsKey)


@dataclass(frozen=True)
class Pod:
    owner: str  # "<Kind> <namespace>/<name> <where in it>"
    namespace: str
    spec: Mapping[str, Any]
    obj: Mapping[str, Any]  # the object that declares it

    @property
    def containers(self) -> list[Mapping[str, Any]]:
        return [*self.spec.get("initContainers", []), *self.spec.get("containers", [])]

    @property
    def service_account(self) -> str:
        return str(self.spec.get("serviceAccountName") or "default")


def pod_templates(value: Any, where: str = "") -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(where, spec) of every pod template in an object (a mapping whose spec lists containers)."""
    if isinstance(value, Mapping):
        spec = value.get("spec")
        if isinstance(spec, Mapping) and isinstance(spec.get("containers"), list):
            yield where or "(the pod)", spec
        for key, child in value.items():
            yield from pod_templates(child, f"{where}.{key}" if where else str(key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from pod_templates(child, f"{where}[{index}]")


def pods_of(objects: Iterable[Mapping[str, Any]]) -> list[Pod]:
    pods = []
    for obj in objects:
        metadata = obj.get("metadata") or {}
        for where, spec in pod_templates(obj):
            owner = f"{obj['kind']} {metadata.get('namespace')}/{metadata.get('name')} {where}"
            pods.append(Pod(owner, str(metadata.get("namespace")), spec, obj))
    return pods


@dataclass(frozen=True)
class Render:
    """What the programs are read from: the Kubernetes objects (the stack's, and the benchmark's that `make bench`
    applies), the images the nodes pull, and the cluster."""

    objects: list[Mapping[str, Any]]
    images: list[str]
    cluster: Cluster
    # the Secret Manager versions of the remote repositories' upstream credentials (images.pullThrough)
    upstream_secrets: tuple[str, ...] = ()

    def one(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        for obj in self.objects:
            metadata = obj.get("metadata") or {}
            if obj.get("kind") == kind and metadata.get("name") == name and metadata.get("namespace") == namespace:
                return obj
        return None

    def identity(self, pod: Pod) -> tuple[str, list[Call]]:
        """The IAM member a pod's calls are made as, and the call that makes it so when there is one.

        On the node's network a pod reaches the node's own metadata server and acts as the node's account (GKE
        "About Workload Identity Federation for GKE": Workload Identity is not available to hostNetwork pods). Else
        GKE's metadata server answers as its Kubernetes service account: its principal, or the Google service account
        the Kubernetes one is annotated with, which the metadata server first trades the pod's identity for."""
        if pod.spec.get("hostNetwork"):
            return self.cluster.node_account or "the nodes' account (a cluster made elsewhere)", []
        names = {"pool": self.cluster.workload_pool, "ns": pod.namespace, "sa": pod.service_account}
        account = self.one("ServiceAccount", pod.namespace, pod.service_account) or {}
        google = ((account.get("metadata") or {}).get("annotations") or {}).get(GOOGLE_ACCOUNT_ANNOTATION)
        if not google:
            return WORKLOAD_PRINCIPAL.format(number=self.cluster.project_number, **names), []
        exchange = Call(
            "GKE metadata server, for the pod's Google service account",
            WORKLOAD_MEMBER.format(**names),
            "iamcredentials.generateAccessToken",
            f"projects/-/serviceAccounts/{google}",
            (f"service account {google}", f"project {google.split('@')[1].split('.')[0]}"),
            "GoogleCloudPlatform/secrets-store-csi-driver-provider-gcp v1.15.0 auth/auth.go:187-205 (the same "
            "exchange GKE's metadata server makes)",
        )
        return f"serviceAccount:{google}", [exchange]


def bucket_object(bucket: str, name: str) -> str:
    return f"projects/_/buckets/{bucket}/objects/{name}"


def bucket_resource(bucket: str) -> str:
    return f"projects/_/buckets/{bucket}"


def gs_split(uri: str) -> tuple[str, str]:
    """gs://bucket/some/prefix -> (bucket, "some/prefix") without a trailing slash."""
    bucket, _, prefix = uri.removeprefix("gs://").partition("/")
    return bucket, prefix.strip("/")


def env_of(container: Mapping[str, Any]) -> dict[str, str]:
    return {e["name"]: str(e["value"]) for e in container.get("env", []) if "value" in e}


def flag(container: Mapping[str, Any], name: str) -> str | None:
    for arg in [*container.get("command", []), *container.get("args", [])]:
        if str(arg).startswith(f"{name}="):
            return str(arg).split("=", 1)[1]
    return None


# --- The programs -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Program:
    name: str
    calls: Callable[[Render, Pod, str], list[Call]]  # (render, pod, the pod's principal) -> its calls; [] if not it


class Calls:
    """Builds one program's calls on one bucket, as one principal."""

    def __init__(self, program: str, principal: str, bucket: str) -> None:
        self.program, self.principal, self.bucket, self.made = program, principal, bucket, list[Call]()

    def on_bucket(self, method: str, source: str) -> Calls:
        self.made.append(
            Call(self.program, self.principal, method, bucket_resource(self.bucket), (f"bucket {self.bucket}",), source)
        )
        return self

    def on_object(self, method: str, name: str, source: str, under: str = "") -> Calls:
        self.made.append(
            Call(
                self.program,
                self.principal,
                method,
                bucket_object(self.bucket, name),
                (f"bucket {self.bucket}",),
                source,
                bucket_object(self.bucket, under) if under else "",
            )
        )
        return self


# A file every snapshot holds (the model loaders read it first), standing for all of its files in the calls.
A_SNAPSHOT_FILE = "config.json"

_STAGING = "manifests/serving/stage_weights.py"
_GCS = "google-cloud-storage 3.17.1 google/cloud/storage"


def weights_staging(render: Render, pod: Pod, principal: str) -> list[Call]:
    """The weights-staging program (manifests/serving/stage_weights.py on the hash-pinned libraries of
    manifests/serving/stage-weights-requirements.txt: google-cloud-storage 3.17.1). ``Client().bucket()`` makes no
    call (stage_weights.py:369); the bucket is never read, only its objects under the snapshot's directory."""
    container = next(
        (c for c in pod.containers if any(str(a).endswith("stage_weights.py") for a in c.get("command", []))), None
    )
    if container is None:
        return []
    bucket, prefix = gs_split(env_of(container)["DESTINATION"])
    files, marker = f"{prefix}/{A_SNAPSHOT_FILE}", f"{prefix}/.staged-complete"
    calls = Calls("weights staging", principal, bucket)
    calls.on_object("storage.objects.get", marker, f"{_STAGING}:419 get_blob ({_GCS}/bucket.py:1312, Blob.reload)")
    calls.on_bucket("storage.objects.list", f"{_STAGING}:520 list_blobs(prefix) ({_GCS}/client.py:1362)")
    # each file is uploaded again when stale, so an upload may replace an object: insert and delete
    calls.on_object(
        "storage.objects.insert (replacing an object)",
        files,
        f"{_STAGING}:504 upload_from_file ({_GCS}/blob.py:2877, resumable or multipart insert)",
        under=f"{prefix}/",
    )
    calls.on_object("storage.objects.get", marker, f"{_STAGING}:544 download_as_text ({_GCS}/blob.py:1689)")
    calls.on_object("storage.objects.delete", marker, f"{_STAGING}:553 exists, then delete ({_GCS}/blob.py:680, 788)")
    calls.on_object(
        "storage.objects.insert (replacing an object)",
        marker,
        f"{_STAGING}:576 upload_from_string ({_GCS}/blob.py:3235)",
    )
    return calls.made


_RUNAI = "runai-model-streamer-gcs 0.15.4 runai_model_streamer_gcs/files/files.py"
_GCSFS = "gcsfs 2026.1.0 gcsfs/core.py"
# JAX names each compiled program <key>-cache in the cache directory (jax 0.9.2 jax/_src/lru_cache.py:35).
A_CACHE_ENTRY = "a-compiled-program-cache"


def model_servers(render: Render, pod: Pod, principal: str) -> list[Call]:
    """vLLM on TPU (the serving image, vllm/vllm-tpu:nightly-20260430-18ed615-5b39b26: tpu-inference 18ed615's
    docker/Dockerfile, which installs its requirements.txt: runai-model-streamer[s3,gcs]==0.15.4, gcsfs==2026.1.0,
    jax==0.9.2; etils and google-cloud-storage unpinned there, read at etils 1.14.0, the release of the image's date).

    Weights: ``--load-format=runai_streamer`` with a ``gs://`` model. vLLM pulls the config and tokenizer and lists
    the safetensors (vllm 0.20.0 vllm/config/model.py:794, model_loader/runai_streamer_loader.py:69; the workers of a
    group do the same, tpu-inference 18ed615 executors/ray_distributed_executor.py:408-419) through the Run:ai
    streamer's Cloud Storage package, which gets the bucket first; the shards are streamed by its C++ reader
    (ReadObject, libstreamergcs.so).

    XLA cache: tpu-inference hands VLLM_XLA_CACHE_PATH to JAX as jax_compilation_cache_dir
    (tpu_inference/runner/compilation_manager.py:53). JAX's cache (jax/_src/lru_cache.py) opens it through
    etils.epath, which takes gcsfs for gs:// when TensorFlow is absent (etils 1.14.0 epath/gpath.py:112-120;
    tpu-inference's requirement files name no TensorFlow); eviction is off (jax_compilation_cache_max_size -1,
    jax/_src/config.py:1551), so no lock file. mkdir is a no-op in fsspec (fsspec 2026.1.0 asyn.py:911); exists()
    reads the object, then lists the prefix (gcsfs core.py:1046, 1058); a miss compiles and writes the entry."""
    made: list[Call] = []
    serving = [c for c in pod.containers if flag(c, "--model")] or [leader for leader in [render_leader(pod)] if leader]
    for container in serving[:1]:
        model = flag(container, "--model") or ""
        if flag(container, "--load-format") == "runai_streamer" and model.startswith("gs://"):
            bucket, prefix = gs_split(model)
            calls = Calls("model servers: Run:ai model streamer", principal, bucket)
            calls.on_bucket("storage.buckets.get", f"{_RUNAI}:66 gcs.get_bucket ({_GCS}/client.py:978 Bucket.reload)")
            calls.on_bucket("storage.objects.list", f"{_RUNAI}:72 bucket.list_blobs(prefix, delimiter)")
            calls.on_object(
                "storage.objects.get",
                f"{prefix}/{A_SNAPSHOT_FILE}",
                f"{_RUNAI}:48 download_to_filename; the shards by libstreamergcs.so ReadObject",
                under=f"{prefix}/",
            )
            made += calls.made
    caches = {env_of(c).get("VLLM_XLA_CACHE_PATH", "") for c in pod.containers}
    for cache in sorted(c for c in caches if c.startswith("gs://")):
        bucket, prefix = gs_split(cache)
        entry = f"{prefix}/{A_CACHE_ENTRY}"
        calls = Calls("model servers: JAX compilation cache", principal, bucket)
        calls.on_object("storage.objects.get", entry, f"jax 0.9.2 lru_cache.py:102 exists ({_GCSFS}:1046, 573)")
        calls.on_bucket("storage.objects.list", f"jax 0.9.2 lru_cache.py:102 exists, on a miss ({_GCSFS}:1058)")
        calls.on_object("storage.objects.get", entry, "jax 0.9.2 lru_cache.py:108 read_bytes", under=f"{prefix}/")
        # two hosts compiling the same program may both write it: the second replaces the first
        calls.on_object(
            "storage.objects.insert (replacing an object)",
            entry,
            f"jax 0.9.2 lru_cache.py:152 write_bytes ({_GCSFS}:2035 simple upload, 2134 resumable)",
            under=f"{prefix}/",
        )
        made += calls.made
    return made


def render_leader(pod: Pod) -> Mapping[str, Any] | None:
    """The leader's serving container of a LeaderWorkerSet: where a group's model flags are (its workers get them
    through Ray); None for any other object."""
    if pod.obj.get("kind") != "LeaderWorkerSet":
        return None
    leader = pod.obj["spec"]["leaderWorkerTemplate"].get("leaderTemplate") or {}
    for container in (leader.get("spec") or {}).get("containers", []):
        if flag(container, "--model"):
            return container  # type: ignore[no-any-return]
    return None


_INFERENCE_PERF = "inference-perf 0.7.0 inference_perf/client/filestorage/gcs.py"
# the run's summary report, the object the client checks for and then writes (make bench-test sees the real
# inference-perf write it: tests/bench/test_bench_lab.py)
SUMMARY_REPORT = "summary_lifecycle_metrics.json"


def benchmark(render: Render, pod: Pod, principal: str) -> list[Call]:
    """inference-perf 0.7.0 (quay.io/inference-perf/inference-perf:v0.7.0; its Cloud Storage client is
    google-cloud-storage, read at 3.17.1 as pip resolves the wheel's >=3.1.0 today, and at 3.12.0, the version
    inference-perf's pdm.lock held in its last commit read, 7de5ef2e 2026-08-19: the same calls). main_cli builds
    the client before the run (inference_perf/main.py:177); it looks the bucket up, a Forbidden re-raised
    (google-cloud-storage client.py:1008 lookup_bucket -> get_bucket -> Bucket.reload, :978, :1064). Each report is
    checked, then written, never replaced."""
    made: list[Call] = []
    for container in pod.containers:
        if list(container.get("command", [])) != ["inference-perf"]:
            continue
        config = inference_perf_config(render, pod, container)
        storage = (config.get("storage") or {}).get("google_cloud_storage")
        if not storage:
            continue
        bucket, path = storage["bucket_name"], str(storage.get("path") or "").strip("/")
        report = f"{path}/{storage.get('report_file_prefix') or ''}{SUMMARY_REPORT}"
        calls = Calls("benchmark: inference-perf", principal, bucket)
        calls.on_bucket("storage.buckets.get", f"{_INFERENCE_PERF}:33 lookup_bucket")
        calls.on_object("storage.objects.get", report, f"{_INFERENCE_PERF}:47 blob.exists")
        calls.on_object("storage.objects.insert", report, f"{_INFERENCE_PERF}:52 upload_from_string", under=f"{path}/")
        made += calls.made
    return made


def inference_perf_config(render: Render, pod: Pod, container: Mapping[str, Any]) -> dict[str, Any]:
    """The config file inference-perf is given (--config_file), read from the ConfigMap mounted there."""
    args = list(container.get("args", []))
    path = args[args.index("--config_file") + 1]
    for mount in container.get("volumeMounts", []):
        if path.startswith(mount["mountPath"].rstrip("/") + "/"):
            volume = next(v for v in pod.spec.get("volumes", []) if v["name"] == mount["name"])
            config_map = render.one("ConfigMap", pod.namespace, volume["configMap"]["name"]) or {}
            text = config_map["data"][path.removeprefix(mount["mountPath"].rstrip("/") + "/")]
            return dict(yaml.safe_load(text) or {})
    raise AssertionError(f"{pod.owner}: no volume holds {path}")


_SAX = "google/saxml v1.1.0 (70f314c7) saxml"
_CLOUD_GO = f"{_SAX}/common/platform/cloud.go"
# The Sax cell the admin server image serves unless SAX_CELL is set (saxml/tools/docker/Dockerfile.admin:41).
ADMIN_IMAGE_CELL = "/sax/test"


def saxml_admin(render: Render, pod: Pod, principal: str) -> list[Call]:
    """The Saxml admin server image: its entrypoint runs admin_config, then admin_server, on gs://$GSBUCKET/sax-root
    and sax-fs-root (saxml/tools/docker/Dockerfile.admin:46-56). Each file a Cloud Storage object through the Go
    client (cloud.go: ReadFile NewReader :204, WriteFile NewWriter :228, FileExists and DirExists Attrs :261, :385,
    CreateDir writes <dir>/METADATA :335). Every write replaces the object it writes (the state every 10 s)."""
    made: list[Call] = []
    for container in pod.containers:
        env = env_of(container)
        if "GSBUCKET" not in env:
            continue
        cell = env.get("SAX_CELL", ADMIN_IMAGE_CELL).strip("/")
        root, fs_root = f"sax-root/{cell}", f"sax-fs-root/{cell}"
        calls = Calls("Saxml admin server", principal, env["GSBUCKET"])
        calls.on_object("storage.objects.get", f"{root}/METADATA", f"{_SAX}/bin/admin_config.go:51 DirExists")
        for name, where in (
            (f"{root}/METADATA", "bin/admin_config.go:54 CreateDir"),
            (f"{root}/config.proto", "common/config.go:100 Save"),
            (f"{fs_root}/METADATA", "admin/admin.go:314 CreateDir"),
            (f"{root}/location.proto", "common/addr.go:106 SetAddr"),
            (f"{fs_root}/state.proto", "common/state.go:46 Write"),
        ):
            calls.on_object("storage.objects.insert (replacing an object)", name, f"{_SAX}/{where} ({_CLOUD_GO})")
        calls.on_object("storage.objects.get", f"{root}/config.proto", f"{_SAX}/common/config.go:53 Load, :71 Watch")
        calls.on_object(
            "storage.objects.get", f"{fs_root}/state.proto", f"{_SAX}/common/state.go:54 FileExists, :65 Read"
        )
        made += calls.made
    return made


def saxml_readers(render: Render, pod: Pod, principal: str) -> list[Call]:
    """The Saxml model servers (--sax_cell) and the HTTP server: they read the admin server's address, and nothing
    else of the bucket. A model server joins its cell (common/location.go:83 cell.Exists -> DirExists, :109 Watch of
    location.proto, :163 FetchAddr); a client (the HTTP server) fetches the address (client/go/admin.go:96 ->
    common/addr.go:54-64). The HTTP server's image (sax-http) is not built from google/saxml: it is read as a Sax
    client of the cell its model servers serve, or the admin server's default."""
    made: list[Call] = []
    for container in pod.containers:
        env = env_of(container)
        if not env.get("SAX_ROOT", "").startswith("gs://"):
            continue
        bucket, root = gs_split(env["SAX_ROOT"])
        own = flag(container, "--sax_cell")
        cells = [own] if own else sax_cells(render) or [ADMIN_IMAGE_CELL]
        for cell in cells:
            calls = Calls("Saxml model server" if own else "Saxml HTTP server", principal, bucket)
            base = f"{root}/{cell.strip('/')}"
            calls.on_object(
                "storage.objects.get", f"{base}/METADATA", f"{_SAX}/common/cell.go:57 DirExists ({_CLOUD_GO}:385)"
            )
            calls.on_object(
                "storage.objects.get",
                f"{base}/location.proto",
                f"{_SAX}/common/addr.go:64 ReadCachedFile ({_CLOUD_GO}:204)",
            )
            made += calls.made
    return made


def sax_cells(render: Render) -> list[str]:
    """The cells the render's Saxml model servers join."""
    return sorted({cell for pod in pods_of(render.objects) for c in pod.containers if (cell := flag(c, "--sax_cell"))})


_FLUENT_BIT = "fluent/fluent-bit v5.1.1 plugins/out_stackdriver"


def stackdriver_agent(render: Render, pod: Pod, principal: str) -> list[Call]:
    """A Fluent Bit agent with a `stackdriver` output (node audit logging, manifests/operations/node-audit-logging.yaml):
    it writes its records with Cloud Logging's entries.write as whatever account its metadata server gives it."""
    mounted = [v["configMap"]["name"] for v in pod.spec.get("volumes", []) if "configMap" in v]
    for name in mounted:
        data = (render.one("ConfigMap", pod.namespace, name) or {}).get("data") or {}
        if any(re.search(r"^\s*Name\s+stackdriver\s*$", str(text), re.MULTILINE) for text in data.values()):
            project = render.cluster.project
            return [
                Call(
                    "node audit logging: Fluent Bit",
                    principal,
                    "logging.entries.write",
                    f"projects/{project}",
                    (f"project {project}",),
                    f"{_FLUENT_BIT} (POST logging.googleapis.com/v2/entries:write)",
                )
            ]
    return []


def secret_manager_volumes(render: Render, pod: Pod, principal: str) -> list[Call]:
    """GKE's Secret Manager add-on mounts each secret of a `secrets-store-gke.csi.k8s.io` volume's
    SecretProviderClass as the pod's own identity: AccessSecretVersion on each resourceName
    (GoogleCloudPlatform/secrets-store-csi-driver-provider-gcp v1.15.0 auth/auth.go:174-184, the pod's federated
    token used directly without a Google service account; server/secretfetcher.go:20)."""
    made: list[Call] = []
    for volume in pod.spec.get("volumes", []):
        csi = volume.get("csi") or {}
        if csi.get("driver") != "secrets-store-gke.csi.k8s.io":
            continue
        provider_class = render.one(
            "SecretProviderClass", pod.namespace, csi["volumeAttributes"]["secretProviderClass"]
        )
        assert provider_class is not None, f"{pod.owner} mounts a SecretProviderClass the render does not declare"
        for secret in yaml.safe_load(provider_class["spec"]["parameters"]["secrets"]):
            name = secret["resourceName"]
            project, secret_id = name.split("/")[1], name.split("/")[3]
            made.append(
                Call(
                    "GKE Secret Manager add-on, for the pod",
                    principal,
                    "secretmanager.versions.access",
                    name,
                    (f"secret projects/{project}/secrets/{secret_id}", f"project {project}"),
                    "secrets-store-csi-driver-provider-gcp v1.15.0 server/secretfetcher.go:20",
                )
            )
    return made


_GCSFUSE = "GoogleCloudPlatform/gcsfuse"


def cloud_storage_fuse_volumes(render: Render, pod: Pod, principal: str) -> list[Call]:
    """GKE's Cloud Storage FUSE CSI driver runs gcsfuse in the pod's sidecar, as the pod's identity (the version is
    GKE's, not the stack's). At mount it asks the bucket's layout (GetStorageLayout, blocking since gcsfuse 2.9.0:
    gcsfuse issue 3111; the only-dir passed as its prefix since pull request 4980, 2026-08) and no longer the bucket
    itself (pull request 986, v0.42.2: objects.list and objects.get suffice); then it lists and reads the objects
    under its only-dir. A read-only volume writes nothing."""
    made: list[Call] = []
    for volume in pod.spec.get("volumes", []):
        csi = volume.get("csi") or {}
        if csi.get("driver") != "gcsfuse.csi.storage.gke.io":
            continue
        attributes = csi.get("volumeAttributes") or {}
        options = dict(
            o.split("=", 1) if "=" in o else (o, "") for o in str(attributes.get("mountOptions", "")).split(",") if o
        )
        prefix = options.get("only-dir", "").strip("/")
        calls = Calls("Cloud Storage FUSE (GKE's CSI driver), for the pod", principal, attributes["bucketName"])
        calls.on_bucket("storage.control.getStorageLayout", f"{_GCSFUSE} pull requests 1898, 4980 (mount)")
        calls.on_bucket("storage.objects.list", f"{_GCSFUSE} pull request 986 (mount), directory listings")
        calls.on_object(
            "storage.objects.get",
            f"{prefix}/{A_SNAPSHOT_FILE}" if prefix else A_SNAPSHOT_FILE,
            f"{_GCSFUSE}: file reads",
            under=f"{prefix}/" if prefix else "",
        )
        if not csi.get("readOnly"):
            raise AssertionError(f"{pod.owner}: a writable Cloud Storage FUSE volume is not modelled yet")
        made += calls.made
    return made


PROGRAMS: tuple[Program, ...] = (
    Program("weights staging", weights_staging),
    Program("model servers", model_servers),
    Program("benchmark", benchmark),
    Program("Saxml admin server", saxml_admin),
    Program("Saxml model and HTTP servers", saxml_readers),
    Program("Fluent Bit to Cloud Logging", stackdriver_agent),
    Program("Secret Manager volumes", secret_manager_volumes),
    Program("Cloud Storage FUSE volumes", cloud_storage_fuse_volumes),
)

# --- The nodes' own account ----------------------------------------------------------------------------------------

# GKE's node agents write the nodes' system and application logs and metrics as the node's account (GKE "Configure
# GKE node service accounts", cloud.google.com/kubernetes-engine/security/configure-node-service-accounts, and
# "Troubleshoot service accounts in GKE", read 2026-12-04: "Send system and application logs from nodes to Cloud
# Logging. Send system and application metrics from nodes to Cloud Monitoring").
_NODE_AGENTS = "cloud.google.com/kubernetes-engine/security/configure-node-service-accounts"
# Artifact Registry hosts: <location>-docker.pkg.dev/<project>/<repository>/<image>.
REGISTRY = re.compile(r"^(?P<location>[a-z0-9-]+)-docker\.pkg\.dev/(?P<project>[^/]+)/(?P<repository>[^/]+)/")
# Google's public image projects: GKE's Saxml tutorial runs us-docker.pkg.dev/cloud-tpu-images/inference/sax-* on
# nodes whose account holds no role in that project, and Cloud TPU's docs pull its JAX AI images without credentials
# (cloud.google.com/kubernetes-engine/docs/tutorials/serve-gemma-tpu-saxml, read 2026-12-04).
PUBLIC_IMAGE_PROJECTS = frozenset({"cloud-tpu-images"})


def node_calls(render: Render) -> list[Call]:
    """What GKE's nodes do as their own account: the agents' logs and metrics, and each image pull from a private
    Artifact Registry repository."""
    node = render.cluster.node_account
    if node is None:
        return []
    project = render.cluster.project
    calls = [
        Call(
            "GKE node agents",
            node,
            "logging.entries.write",
            f"projects/{project}",
            (f"project {project}",),
            _NODE_AGENTS,
        ),
        Call(
            "GKE node agents",
            node,
            "monitoring.timeSeries.create",
            f"projects/{project}",
            (f"project {project}",),
            _NODE_AGENTS,
        ),
    ]
    for image in sorted(set(render.images)):
        match = REGISTRY.match(image)
        if match is None or match["project"] in PUBLIC_IMAGE_PROJECTS:
            continue
        repository = f"projects/{match['project']}/locations/{match['location']}/repositories/{match['repository']}"
        calls.append(
            Call(
                "kubelet image pull",
                node,
                "artifactregistry.docker.pull",
                repository,
                (
                    f"repository {match['project']}/{match['location']}/{match['repository']}",
                    f"project {match['project']}",
                ),
                f"the image {image}",
            )
        )
    return calls


# --- The service agents that use the customer's keys ------------------------------------------------------------

# Google's service agents of a project (IAM "Service agents", cloud.google.com/iam/docs/service-agents, read
# 2026-12-04): GKE's encrypts the cluster's Secrets with the key of its databaseEncryption (GKE "Encrypt secrets at the
# application layer", which grants it the key), Compute Engine's each boot disk made with a boot disk key (GKE "Use
# customer-managed encryption keys", which grants it the key).
GKE_SERVICE_AGENT = "serviceAccount:service-{number}@container-engine-robot.iam.gserviceaccount.com"
COMPUTE_SERVICE_AGENT = "serviceAccount:service-{number}@compute-system.iam.gserviceaccount.com"


def service_agent_calls(render: Render) -> list[Call]:
    """Each service agent's Encrypt and Decrypt on each key the cluster is made with."""
    number = render.cluster.project_number
    uses = [(GKE_SERVICE_AGENT, "GKE: the cluster's Secrets", key) for key in render.cluster.secrets_keys]
    uses += [(COMPUTE_SERVICE_AGENT, "Compute Engine: the nodes' boot disks", key) for key in render.cluster.boot_keys]
    calls = []
    for agent, program, key in uses:
        reached = (f"key {key}", f"project {key.split('/')[1]}")
        for method in ("cloudkms.cryptoKeys.encrypt", "cloudkms.cryptoKeys.decrypt"):
            calls.append(
                Call(program, agent.format(number=number), method, key, reached, "the cluster's and pools' key inputs")
            )
    return calls


# Artifact Registry's agent reads a remote repository's upstream password from Secret Manager at each pull it sends
# upstream (Artifact Registry "Configure remote repository authentication to Docker Hub", cloud.google.com/
# artifact-registry/docs/repositories/configure-remote-auth-dockerhub, read 2026-12-04: the agent
# service-PROJECT_NUMBER@gcp-sa-artifactregistry.iam.gserviceaccount.com is granted the Secret Accessor role on the
# secret).
ARTIFACT_REGISTRY_AGENT = "serviceAccount:service-{number}@gcp-sa-artifactregistry.iam.gserviceaccount.com"


def remote_repository_calls(render: Render) -> list[Call]:
    calls = []
    for version in render.upstream_secrets:
        project, secret = version.split("/")[1], version.split("/")[3]
        calls.append(
            Call(
                "Artifact Registry: a remote repository's upstream credentials",
                ARTIFACT_REGISTRY_AGENT.format(number=render.cluster.project_number),
                "secretmanager.versions.access",
                version,
                (f"secret projects/{project}/secrets/{secret}", f"project {project}"),
                "cloud.google.com/artifact-registry/docs/repositories/configure-remote-auth-dockerhub",
            )
        )
    return calls


# --- Everything a render's programs ask of Google Cloud -----------------------------------------------------------


@dataclass(frozen=True)
class Claimed:
    pod: Pod
    principal: str
    programs: tuple[str, ...]


def program_calls(render: Render) -> tuple[list[Call], list[Claimed]]:
    """Every call of every program of the render, and which programs each pod runs."""
    calls, claimed = [*node_calls(render), *service_agent_calls(render), *remote_repository_calls(render)], []
    for pod in pods_of(render.objects):
        principal, exchange = render.identity(pod)
        names = []
        for program in PROGRAMS:
            made = program.calls(render, pod, principal)
            if made:
                names.append(program.name)
                calls += made
        if names:
            calls += exchange
        claimed.append(Claimed(pod, principal, tuple(names)))
    return list(dict.fromkeys(calls)), claimed
