"""The Google Cloud layer: APIs, the VPC, the GKE cluster and the TPU capacity."""

from components.gcp.cluster import Cluster
from components.gcp.existing_cluster import ExistingCluster
from components.gcp.network import Network
from components.gcp.project_services import ProjectServices
from components.gcp.tpu_capacity import TpuCapacity

__all__ = ["Cluster", "ExistingCluster", "Network", "ProjectServices", "TpuCapacity"]
