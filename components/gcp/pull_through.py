"""The pull-through repositories: an Artifact Registry remote repository per registry outside Google the stack's
images come from (images.pullThrough), so that private nodes never pull from a rate-limited registry through Cloud
NAT's shared addresses. Each caches what it serves: the registry sees one pull per image, not one per node.

Docker Hub is the remote repositories' preset upstream (`public_repository: DOCKER_HUB`); any other registry is named
by its URL (`common_repository.uri`, "URI to the registry, e.g. https://registry-1.docker.io": pulumi-gcp 10.2.0
artifactregistry.Repository; GitHub's Container Registry is among the upstreams Artifact Registry's "Create remote
repositories" page lists, docs.cloud.google.com/artifact-registry/docs/repositories/remote-repo). Artifact Registry
checks the upstream (and its credentials) when it creates the repository, so an upstream it cannot use fails the `up`
there, before any pod pulls.

Docker Hub credentials, when set, are a Docker ID and a Secret Manager secret version: Artifact Registry's service
agent (components/gcp/service_agents.py) reads the secret, so it gets roles/secretmanager.secretAccessor on that
secret alone, before the repository is created (Artifact Registry's "Configure authentication to remote repository
upstreams").

Lifecycle (hashicorp/terraform-provider-google-beta v7.45.0, which pulumi-gcp 10.2.0 wraps,
google-beta/services/artifactregistry/resource_artifact_registry_repository.go): `format`, `repository_id`,
`location`, `mode` and the upstream under `remote_repository_config` are ForceNew, so a change replaces the repository:
a new, empty cache. Its id stays the same, which Artifact Registry holds once per project and location, so the old one
is deleted first (delete_before_replace). The upstream credentials are not: the update sends them under their own
update mask, the repository and its cache stay ("artifactregistry: Remove Immutable from upstream_credentials", first
in v7.38.0; the ForceNew of `remote_repository_config` holds its count of one only, as the SDK diffs every nested
field by its own schema: terraform-plugin-sdk v2 helper/schema/schema.go diffList). Deleting a repository deletes its
IAM policy with it: the nodes' read grant (components/gcp/cluster.py) is replaced with it (replace_with).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from components.config_base import secret_of_version
from components.gcp.config import ARTIFACT_REGISTRY_SERVICE_AGENT, PullThroughConfig, RemoteRepository
from components.gcp.review import read_secret_version
from components.gcp.service_agents import ServiceAgents
from components.resources import children_of, secret_reader, waiting_for


@dataclass(frozen=True)
class PullThroughArgs:
    cluster_name: str  # named in each repository's description
    repositories: list[RemoteRepository]
    pull_through: PullThroughConfig  # Docker Hub's account, if any (none: Docker Hub is pulled anonymously)
    # With the credentials: the service agents, among them Artifact Registry's, which reads the password (its IAM
    # member, and what a grant to it waits for: ServiceAgents.member and .ready)
    agents: ServiceAgents | None
    # With the credentials: the Secret Manager API's enablement, which the preview's read of the password's version
    # waits for
    secret_manager_api: list[pulumi.Resource]


class PullThrough(pulumi.ComponentResource):
    def __init__(self, name: str, args: PullThroughArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-gke:gcp:PullThrough", name, None, opts)
        child = children_of(self, opts)
        settings = args.pull_through
        self.repositories: dict[RemoteRepository, gcp.artifactregistry.Repository] = {}  # each -> the one made
        for repository in args.repositories:
            upstream: gcp.artifactregistry.RepositoryRemoteRepositoryConfigArgsDict = {
                "description": f"{repository.registry}, pulled through for the nodes of {args.cluster_name}"
            }
            # What the repository waits for: with Docker Hub's credentials, the agent's read of the password (the one
            # Docker Hub repository: one per registry)
            waits: list[pulumi.Resource] = []
            if repository.docker_hub:
                upstream["docker_repository"] = {"public_repository": "DOCKER_HUB"}
                if settings.docker_hub_credentials:
                    upstream["upstream_credentials"] = {
                        "username_password_credentials": {
                            "username": settings.docker_hub_username,
                            "password_secret_version": settings.docker_hub_password_secret_version,
                        }
                    }
                    assert args.agents is not None, "Docker Hub's password is read by Artifact Registry's agent"
                    version_read = [
                        read_secret_version(
                            "images.pullThrough.dockerHubPasswordSecretVersion",
                            settings.docker_hub_password_secret_version,
                            api,
                            self,
                        )
                        for api in args.secret_manager_api
                    ]
                    # It outlives the stack, as the agents' key grants do (components/gcp/service_agents.py): the
                    # provider's delete removes the member whoever added it, and the agent is the whole project's, so
                    # another remote repository signing in with the same secret would lose its upstream.
                    waits.append(
                        secret_reader(
                            "artifact-registry-agent-docker-hub-password",
                            secret_of_version(settings.docker_hub_password_secret_version),
                            args.agents.member(ARTIFACT_REGISTRY_SERVICE_AGENT),
                            waiting_for(
                                pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(retain_on_delete=True)),
                                *args.agents.ready[ARTIFACT_REGISTRY_SERVICE_AGENT],
                                *version_read,
                            ),
                        )
                    )
            else:
                upstream["common_repository"] = {"uri": repository.upstream}
            self.repositories[repository] = gcp.artifactregistry.Repository(
                f"pull-through-{repository.name}",
                project=repository.project,
                location=repository.location,
                repository_id=repository.repository_id,
                format="DOCKER",
                mode="REMOTE_REPOSITORY",
                description=f"Pull-through cache of {repository.registry} (images.pullThrough of {args.cluster_name})",
                remote_repository_config=upstream,
                opts=pulumi.ResourceOptions.merge(
                    child, pulumi.ResourceOptions(delete_before_replace=True, depends_on=waits)
                ),
            )
        self.register_outputs({"repositories": [r.repository_id for r in args.repositories]})
