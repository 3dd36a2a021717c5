"""The service agents of the stack's project, and their grants on the customer-managed keys the cluster uses.

GKE encrypts the cluster's Secrets with cluster.secretsEncryptionKey as its service agent, and Compute Engine the
nodes' boot disks with cluster.bootDiskEncryptionKey as its own (components/gcp/config.py: ServiceAgent,
key_grants). A create that uses a key its agent may not use fails minutes into `up`, and a service agent exists only
once its API is enabled (or it is asked for): so, for a key in the stack's own project, the stack has the agent made
after that enablement, grants it the key, and the cluster and every pool that uses the key wait for the grant. A key
in another project is not the stack's to grant (the preview says the command: config.key_grant_warnings).

The agent's address is written from the project number (config.ServiceAgent), for every agent alike: an agent made
by generateServiceIdentity may come back without its address (the provider sets `email` only when the answer has
one: hashicorp/terraform-provider-google-beta v7.45.0 google-beta/services/resourcemanager/
resource_project_service_identity.go), and Compute Engine's is not made that way at all. The same shape as
GoogleCloudPlatform/cloud-foundation-fabric@11c1d248 modules/project (service-agents.tf, cmek.tf): the agents'
addresses from the project number, google_project_service_identity for the primary ones after the APIs' enablement,
then google_kms_crypto_key_iam_member per key and agent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from components.gcp.config import KMS_ENCRYPTER_DECRYPTER, KeyGrant, ServiceAgent


@dataclass(frozen=True)
class ServiceAgentsArgs:
    project: str
    grants: list[KeyGrant]  # the keys of the stack's project, each (key, agent) once
    apis: Mapping[str, pulumi.Resource]  # each agent's API -> its enablement, which makes the agent
    resource_manager_api: pulumi.Resource  # the project number is read through it


class ServiceAgents(pulumi.ComponentResource):
    """The service agents the keys are granted to, and the grants.

    Each grant outlives the stack (``retain_on_delete``): deleting a CryptoKeyIAMMember removes its member from the
    key's policy whoever added it (v7.45.0 google-beta/tpgiamresource/resource_iam_member.go, resourceIamMemberDelete
    subtracts the member from the binding), and the member is the project's agent, which anything else of the project
    encrypted with the key (another cluster, a disk, a snapshot) uses too; and an emptied cluster.secretsEncryptionKey
    sends GKE nothing (database_encryption is Optional and Computed, resource_container_cluster.go), so the cluster
    keeps its Secrets encrypted with the key and would lose them with the grant. Revoking is the operator's, once
    nothing uses the key (docs/deploying.md).
    """

    def __init__(self, name: str, args: ServiceAgentsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-gke:gcp:ServiceAgents", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        # Its own wait: a parent's dependencies are not an invoke's (project_services.py).
        self.project_number = gcp.organizations.get_project_output(
            project_id=args.project,
            opts=pulumi.InvokeOutputOptions(parent=self, depends_on=[args.resource_manager_api]),
        ).number
        self.identities: list[gcp.projects.ServiceIdentity] = []
        ready: dict[ServiceAgent, list[pulumi.Resource]] = {}
        for agent in dict.fromkeys(grant.agent for grant in args.grants):
            enabled = args.apis[agent.service]
            if not agent.made_on_request:
                ready[agent] = [enabled]
                continue
            # After the enablement, never before: an agent made on request before its API is enabled is not granted
            # the role the enablement gives it (cloud.google.com/iam/docs/create-service-agents: "service agents
            # that are created at a user's request aren't automatically granted roles"). Its create and delete do
            # nothing more than ask (the provider's read and delete are no-ops).
            identity = gcp.projects.ServiceIdentity(
                f"{agent.service.split('.')[0]}-service-agent",
                project=args.project,
                service=agent.service,
                opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[enabled])),
            )
            self.identities.append(identity)
            ready[agent] = [identity]
        self._grants: dict[tuple[str, ServiceAgent], gcp.kms.CryptoKeyIAMMember] = {}
        for grant in args.grants:
            agent = grant.agent
            self._grants[(grant.key.name, agent)] = gcp.kms.CryptoKeyIAMMember(
                grant.name,
                crypto_key_id=grant.key.name,
                role=KMS_ENCRYPTER_DECRYPTER,
                member=self.project_number.apply(agent.member),
                opts=pulumi.ResourceOptions.merge(
                    child, pulumi.ResourceOptions(depends_on=ready[agent], retain_on_delete=True)
                ),
            )
        self.register_outputs({"grants": [grant.name for grant in args.grants]})

    def grant(self, key: str, agent: ServiceAgent) -> list[pulumi.Resource]:
        """What a user of ``key`` through ``agent`` waits for: the grant, or nothing where the stack makes none."""
        made = self._grants.get((key, agent))
        return [made] if made is not None else []


def key_grant(agents: ServiceAgents | None, key: str, agent: ServiceAgent) -> list[pulumi.Resource]:
    """``agents.grant``, for a stack that may make no agents at all."""
    return agents.grant(key, agent) if agents is not None else []
