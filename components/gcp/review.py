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
            say_review([], [], [Problem(key, f"{what} does not exist", missing)])
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


def kms_key_review(setting: str, key: KmsKey, purpose: str, primary: str) -> list[Problem]:
    """What the preview refuses of the Cloud KMS key ``key`` that ``setting`` names, once read: one GKE or Compute
    Engine could not encrypt with (its ``purpose``, and its ``primary`` version's state, "" for none). Both wrap their
    data keys with Cloud KMS's Encrypt, which only an ENCRYPT_DECRYPT key serves, with its primary version, which must
    be ENABLED to be used (googleapis/googleapis google/cloud/kms/v1/resources.proto, CryptoKeyPurpose,
    CryptoKey.primary and CryptoKeyVersionState; service.proto EncryptRequest.name)."""
    if purpose != "ENCRYPT_DECRYPT":  # a key's purpose never changes
        what = f"has the purpose {purpose}: GKE and Compute Engine encrypt only with an ENCRYPT_DECRYPT key"
        fix = (
            f"name a key made with `gcloud kms keys create <key> --keyring {key.ring} {key.where} --purpose encryption`"
        )
    elif primary != "ENABLED":
        what = f"has {f'a {primary} primary version' if primary else 'no primary version'}: nothing encrypts with it"
        versions = f"gcloud kms keys versions create --key {key.key} --keyring {key.ring} {key.where} --primary"
        fix = f"make an enabled version its primary (`{versions}`)"
    else:
        return []
    return [Problem(setting, f"Cloud KMS key {key.name} {what}", fix)]


def read_kms_key(grant: KeyGrant, after: pulumi.Resource, parent: pulumi.Resource) -> pulumi.Output[pulumi.Resource]:
    """Read the Cloud KMS key of ``grant``: refused where it is missing or unreadable (refused_if_unread: the data
    source answers Cloud KMS's 404 for a missing key or key ring as '<key> not found', hashicorp/terraform-provider-
    google-beta v7.45.0 google-beta/services/kms/data_source_google_kms_crypto_key.go), and where kms_key_review
    refuses it. Answers ``after`` once read, for the grant to wait for (it reads the key's policy first, and Cloud KMS
    answers that read of a missing key with its 404). The read GETs the key's metadata (cloudkms.cryptoKeys.get) and
    waits for no API: Cloud KMS's is on in the key's project, where the key was made."""
    key = grant.key
    make_it = (
        f"make it (`gcloud kms keys create {key.key} --keyring {key.ring} {key.where} --purpose encryption`, after "
        f"`gcloud kms keyrings create {key.ring} {key.where}` if the key ring is missing too), or name a key that exists"
    )
    found = refused_if_unread(
        gcp.kms.get_kms_crypto_key_output(
            key_ring=key.name.partition("/cryptoKeys/")[0], name=key.key, opts=pulumi.InvokeOutputOptions(parent=parent)
        ),
        "gcp:kms/getKMSCryptoKey:getKMSCryptoKey",
        grant.setting,
        f"Cloud KMS key {key.name}",
        make_it,
    )

    def review(read: Any) -> pulumi.Resource:
        primary = read.primaries[0].state if read.primaries else ""
        say_review([], [], kms_key_review(grant.setting, key, read.purpose, primary))
        return after

    return found.apply(review)


def read_mirror(
    mirror: MirrorRepository, after: pulumi.Resource, parent: pulumi.Resource
) -> pulumi.Output[pulumi.Resource]:
    """Read the image mirror (images.mirror), refused where it is missing or unreadable (refused_if_unread: the data
    source answers Artifact Registry's 404 as '<name> not found', hashicorp/terraform-provider-google-beta v7.45.0
    google-beta/services/artifactregistry/data_source_artifact_registry_repository.go); answers ``after`` once read,
    for the nodes' read grant on it to wait for (the grant reads its policy first, and Artifact Registry answers that
    read of a missing repository with its 404). The read GETs the repository (artifactregistry.repositories.get) and
    waits for no API: Artifact Registry's is on in the mirror's project, where the mirror was made and filled (and
    this stack enables nothing in another project)."""
    found = refused_if_unread(
        gcp.artifactregistry.get_repository_output(
            project=mirror.project,
            location=mirror.location,
            repository_id=mirror.repository,
            opts=pulumi.InvokeOutputOptions(parent=parent),
        ),
        "gcp:artifactregistry/getRepository:getRepository",
        "images.mirror",
        f"Artifact Registry repository {mirror.name}",
        f"make it (`gcloud artifacts repositories create {mirror.repository} --repository-format=docker --location "
        f"{mirror.location} --project {mirror.project}`) and fill it (the `crane copy` commands of `make images`), or "
        "name a repository that exists",
    )
    return found.apply(lambda _: after)
