"""How the preview says what a review of the running stack or of a cloud read found (the lifecycle review, the TPU
reservation's, the existing weights bucket's, the secret versions', the Cloud KMS keys', the image mirror's). Not in
components/resources.py: it words the refusals as the config's problems, and the shared helpers import none of each
other; this is the lowest layer that may."""

from __future__ import annotations

from typing import Any, TypeVar

import pulumi
import pulumi_gcp as gcp

from components.config_base import ConfigError, Problem, secret_of_version
from components.gcp.config import DEPLOYER_READS, KeyGrant, KmsKey, MirrorRepository
from components.resources import ReadAnswer, answer_of

T = TypeVar("T")


def say_review(report: list[str], warnings: list[str], refused: list[Problem]) -> None:
    """The review's report as information, its warnings loudly, and what it refuses as a config error that stops the
    preview (a RunError, which the engine prints as its message, with no traceback)."""
    for line in report:
        pulumi.log.info(line)
    for warning in warnings:
        pulumi.log.warn(warning)
    if refused:
        raise pulumi.RunError(str(ConfigError(refused)))


def say_unread(what: str, api: str, before: str) -> None:
    """Say that the read of ``what`` is unknown at this preview (ReadAnswer.unknown): the preview's engine declines a
    read that waits for ``api``, which this `up` enables, and the `up` reads it ``before`` what needs it."""
    pulumi.log.info(
        f"{what}: not read yet: the read waits for the {api}, which this `up` enables; the `up` reads it before "
        f"{before}, and so does the next preview"
    )


def refused_if_unread(read: pulumi.Output[T], token: str, key: str, what: str, missing: str = "") -> pulumi.Output[T]:
    """``read``, the invoke ``token``'s answer, failing the preview as a refusal under ``key`` where the provider fails
    the read (Google Cloud's 403 where the deployer lacks a permission of the read, which Resource Manager's does not
    even name): ``what`` could not be read, and the permissions DEPLOYER_READS gives the read to grant. Where the read
    found nothing (the provider's data sources answer Google Cloud's 404 as '<name> not found'), ``what`` does not
    exist and ``missing`` is the fix, for a read that names one thing. Unhandled, the invoke's failure ends the program
    with its exception and a traceback."""

    def checked(answer: ReadAnswer[T]) -> pulumi.Output[T]:
        if missing and answer.error.endswith(" not found"):
            say_review([], [], [Problem(key, f"{what} does not exist ({answer.error})", missing)])
        elif answer.error:
            permissions, on, _ = DEPLOYER_READS[token]
            fix = f"grant the deployer {', '.join(permissions)} on {on}"
            say_review([], [], [Problem(key, f"{what} could not be read ({answer.error})", fix)])
        return read

    return answer_of(read).apply(checked)


def secret_version_review(key: str, version: str, error: str, destroy_time: str) -> list[Problem]:
    """What the preview refuses of the Secret Manager secret version ``version`` that ``key`` names, from its metadata
    (getSecretVersion's ``error``, or the version's ``destroy_time``): one its reader (GKE's Secret Manager add-on, or
    Artifact Registry's agent) would fail to read once the stack is up."""
    secret = secret_of_version(version)
    if "Error 404" in error:
        what = "does not exist (no such secret, no such version, or a secret with no version yet)"
        secret_id, project = secret.rpartition("/")[2], secret.split("/")[1]
        fix = (
            f"make the secret if it is missing (`gcloud secrets create {secret_id} --project {project}`), add the "
            f"version (`gcloud secrets versions add {secret_id} --data-file=- --project {project}`) and name it"
        )
    elif error:
        what = f"could not be read ({error})"
        fix = f"grant the deployer roles/secretmanager.viewer on {secret} (its metadata only, never its data)"
    elif destroy_time:
        what = f"was destroyed at {destroy_time}: its data is gone for good"
        fix = "add a new version and name it"
    else:
        return []
    return [Problem(key, f"secret version {version} {what}", fix)]


def read_secret_version(
    key: str, version: str, api: pulumi.Resource, parent: pulumi.Resource
) -> pulumi.Output[pulumi.Resource]:
    """Read ``version``'s metadata and refuse what secret_version_review refuses; answers ``api`` once read, for the
    grants on the secret to wait for (a grant on a secret that does not exist fails the `up` there). Metadata only:
    getSecretVersion with fetchSecretData false sends the GET of the version and not its :access (magic-modules
    f54f369 mmv1/third_party/terraform/services/secretmanager/data_source_secret_manager_secret_version.go), so it
    needs secretmanager.versions.get (roles/secretmanager.viewer), not the secretAccessor role, and the token or
    password never reaches the program. A DISABLED version is not refused: that data source sets `enabled` true
    whatever the version's state, and only a destroyed one has a destroyTime (googleapis/googleapis 02838cf
    google/cloud/secretmanager/v1/resources.proto, SecretVersion.destroy_time). Unknown on a new project's first
    preview, where the read waits for the Secret Manager API this `up` enables."""
    secret, _, number = version.partition("/versions/")
    read = answer_of(
        gcp.secretmanager.get_secret_version_output(
            project=secret.split("/")[1],
            secret=secret,
            version=number,
            fetch_secret_data=False,
            opts=pulumi.InvokeOutputOptions(parent=parent, depends_on=[api]),
        )
    )

    def review(answer: ReadAnswer[Any]) -> pulumi.Resource:
        if answer.unknown:
            say_unread(key, "Secret Manager API", "the grants on its secret")
        else:
            found = answer.value
            say_review([], [], secret_version_review(key, version, answer.error, (found and found.destroy_time) or ""))
        return api

    return read.apply(review)


def kms_key_review(setting: str, key: KmsKey, error: str, purpose: str, primary: str) -> list[Problem]:
    """What the preview refuses of the Cloud KMS key ``key`` that ``setting`` names, from getKMSCryptoKey's
    ``error``: one the stack's grant of it would fail on, halfway through the `up`. The data source fails the read
    with '<key> not found' on Cloud KMS's 404 (a missing key or key ring), and with the GET's own error otherwise
    (hashicorp/terraform-provider-google-beta v7.45.0 google-beta/services/kms/data_source_google_kms_crypto_key.go;
    resource_kms_crypto_key.go, resourceKMSCryptoKeyRead through HandleNotFoundError). A key read is refused too
    where GKE or Compute Engine could not encrypt with it (its ``purpose``, and its ``primary`` version's state, ""
    for none): both wrap their data keys with Cloud KMS's Encrypt, which only an ENCRYPT_DECRYPT key serves, with its
    primary version, which must be ENABLED to be used (googleapis/googleapis google/cloud/kms/v1/resources.proto,
    CryptoKeyPurpose, CryptoKey.primary and CryptoKeyVersionState; service.proto EncryptRequest.name)."""
    where = f"--location {key.location} --project {key.project}"
    if f"{key.name} not found" in error:
        what = "does not exist"
        fix = (
            f"make it (`gcloud kms keys create {key.key} --keyring {key.ring} {where} --purpose encryption`, after "
            f"`gcloud kms keyrings create {key.ring} {where}` if the key ring is missing too), or name a key that exists"
        )
    elif error:
        what = f"could not be read ({error})"
        # the stack's grant of the key reads and sets its policy, as roles/cloudkms.admin may, which holds this too
        (permission,), _, _ = DEPLOYER_READS["gcp:kms/getKMSCryptoKey:getKMSCryptoKey"]
        fix = f"grant the deployer {permission} on {key.name} (roles/cloudkms.admin holds it)"
    elif purpose != "ENCRYPT_DECRYPT":  # a key's purpose never changes
        what = f"has the purpose {purpose}: GKE and Compute Engine encrypt only with an ENCRYPT_DECRYPT key"
        fix = f"name a key made with `gcloud kms keys create <key> --keyring {key.ring} {where} --purpose encryption`"
    elif primary != "ENABLED":
        what = f"has {f'a {primary} primary version' if primary else 'no primary version'}: nothing encrypts with it"
        versions = f"gcloud kms keys versions create --key {key.key} --keyring {key.ring} {where} --primary"
        fix = f"make an enabled version its primary (`{versions}`)"
    else:
        return []
    return [Problem(setting, f"Cloud KMS key {key.name} {what}", fix)]


def read_kms_key(grant: KeyGrant, after: pulumi.Resource, parent: pulumi.Resource) -> pulumi.Output[pulumi.Resource]:
    """Read the Cloud KMS key of ``grant`` and refuse what kms_key_review refuses; answers ``after`` once read, for
    the grant to wait for (it reads the key's policy first, and Cloud KMS answers that read of a missing key with its
    404). The read GETs the key's metadata (cloudkms.cryptoKeys.get) and waits for no API: Cloud KMS's is on in the
    key's project, where the key was made."""
    ring = grant.key.name.partition("/cryptoKeys/")[0]
    opts = pulumi.InvokeOutputOptions(parent=parent)
    read = answer_of(gcp.kms.get_kms_crypto_key_output(key_ring=ring, name=grant.key.key, opts=opts))

    def review(answer: ReadAnswer[Any]) -> pulumi.Resource:
        found = answer.value
        purpose = found.purpose if found else ""
        primary = found.primaries[0].state if found and found.primaries else ""
        say_review([], [], kms_key_review(grant.setting, grant.key, answer.error, purpose, primary))
        return after

    return read.apply(review)


def mirror_review(mirror: MirrorRepository, error: str) -> list[Problem]:
    """What the preview refuses of the image mirror (images.mirror), from getRepository's ``error``: one the stack's
    grant of read on it would fail on, halfway through the `up`. The data source fails the read with '<name> not
    found' on Artifact Registry's 404, and with the GET's own error otherwise (hashicorp/terraform-provider-google-beta
    v7.45.0 google-beta/services/artifactregistry/data_source_artifact_registry_repository.go;
    resource_artifact_registry_repository.go, resourceArtifactRegistryRepositoryRead through HandleNotFoundError)."""
    if f"{mirror.name} not found" in error:
        what = "does not exist"
        fix = (
            f"make it (`gcloud artifacts repositories create {mirror.repository} --repository-format=docker "
            f"--location {mirror.location} --project {mirror.project}`) and fill it (the `crane copy` commands of "
            "`make images`), or name a repository that exists"
        )
    elif error:
        what = f"could not be read ({error})"
        # the stack's grant of read on it reads and sets its policy, as roles/artifactregistry.admin may
        (permission,), _, _ = DEPLOYER_READS["gcp:artifactregistry/getRepository:getRepository"]
        fix = f"grant the deployer {permission} on {mirror.name} (roles/artifactregistry.admin holds it)"
    else:
        return []
    return [Problem("images.mirror", f"Artifact Registry repository {mirror.name} {what}", fix)]


def read_mirror(
    mirror: MirrorRepository, after: pulumi.Resource, parent: pulumi.Resource
) -> pulumi.Output[pulumi.Resource]:
    """Read the image mirror and refuse what mirror_review refuses; answers ``after`` once read, for the nodes' read
    grant on it to wait for (the grant reads its policy first, and Artifact Registry answers that read of a missing
    repository with its 404). The read GETs the repository (artifactregistry.repositories.get) and waits for no API:
    Artifact Registry's is on in the mirror's project, where the mirror was made and filled (and this stack enables
    nothing in another project)."""
    opts = pulumi.InvokeOutputOptions(parent=parent)
    read = answer_of(
        gcp.artifactregistry.get_repository_output(
            project=mirror.project, location=mirror.location, repository_id=mirror.repository, opts=opts
        )
    )

    def review(answer: ReadAnswer[Any]) -> pulumi.Resource:
        say_review([], [], mirror_review(mirror, answer.error))
        return after

    return read.apply(review)
