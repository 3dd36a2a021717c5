"""The service agents of the stack's project the stack grants something, and their grants on the customer-managed
keys the cluster uses (Artifact Registry's agent is granted its secret by the pull-through repositories).

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

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from components.gcp.config import KMS_ENCRYPTER_DECRYPTER, KeyGrant, ServiceAgent
from components.gcp.project_services import ProjectServices
from components.gcp.review import read_kms_key
from components.resources import waiting_for


@dataclass(frozen=True)
class ServiceAgentsArgs:
    project: str
    # The APIs' enablements, one making each agent, and the project number every agent's address is written from (read
    # once for the stack: ProjectServices.project_number)
    services: ProjectServices
    agents: list[ServiceAgent]  # each agent the stack grants something (an agent of two grants twice: made once)
    key_grants: list[KeyGrant]  # the keys of the stack's project, each (key, agent) once


class ServiceAgents(pulumi.ComponentResource):
    """The service agents the stack grants something (a key, a secret), and their grants on the keys.

    Each key grant outlives the stack (``retain_on_delete``): deleting a CryptoKeyIAMMember removes its member from
    the key's policy whoever added it (v7.45.0 google-beta/tpgiamresource/resource_iam_member.go,
    resourceIamMemberDelete subtracts the member from the binding), and the member is the project's agent, which
    anything else of the project encrypted with the key (another cluster, a disk, a snapshot) uses too; and an
    emptied cluster.secretsEncryptionKey sends GKE nothing (database_encryption is Optional and Computed,
    resource_container_cluster.go), so the cluster keeps its Secrets encrypted with the key and would lose them with
    the grant. Revoking is the operator's, once nothing uses the key (docs/deploying.md).
    """

    def __init__(self, name: str, args: ServiceAgentsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-gke:gcp:ServiceAgents", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.project_number = args.services.project_number
        # What a grant to each agent waits for: the agent made, or its API's enablement that makes it.
        self.ready: dict[ServiceAgent, list[pulumi.Resource]] = {}
        for agent in dict.fromkeys(args.agents):
            enabled = args.services.api(agent.service)
            if not agent.made_on_request:
                self.ready[agent] = [enabled]  # the enablement makes the agent
                continue
            # After the enablement, never before: an agent made on request before its API is enabled is not granted
            # the role the enablement gives it (cloud.google.com/iam/docs/create-service-agents: "service agents
            # that are created at a user's request aren't automatically granted roles"). Its create and delete do
            # nothing more than ask (the provider's read and delete are no-ops).
            self.ready[agent] = [
                gcp.projects.ServiceIdentity(
                    f"{agent.service.split('.')[0]}-service-agent",
                    project=args.project,
                    service=agent.service,
                    opts=waiting_for(child, enabled),
                )
            ]
        self.grants: dict[tuple[str, ServiceAgent], gcp.kms.CryptoKeyIAMMember] = {}
        for grant in args.key_grants:
            ready = self.ready[grant.agent]
            # after the preview's read of the key, which refuses a key the grant would fail on
            read = read_kms_key(grant, ready[0], self)
            self.grants[(grant.key.name, grant.agent)] = gcp.kms.CryptoKeyIAMMember(
                grant.name,
                crypto_key_id=grant.key.name,
                role=KMS_ENCRYPTER_DECRYPTER,
                member=self.member(grant.agent),
                opts=pulumi.ResourceOptions(parent=self, depends_on=[*ready, read], retain_on_delete=True),
            )
        self.register_outputs({"grants": [grant.name for grant in args.key_grants]})

    def member(self, agent: ServiceAgent) -> pulumi.Output[str]:
        """The agent as an IAM member, written from the project number (see the module's docstring)."""
        return self.project_number.apply(agent.member)


def key_grant(agents: ServiceAgents | None, key: str, agent: ServiceAgent) -> list[pulumi.Resource]:
    """What a user of ``key`` through ``agent`` waits for: the grant, or nothing where the stack makes none (or no
    agents at all)."""
    made = agents.grants.get((key, agent)) if agents is not None else None
    return [made] if made is not None else []
