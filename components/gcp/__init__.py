"""The Google Cloud layer: APIs, the VPC, the GKE cluster and the TPU capacity.

Nothing is re-exported here: importing ``components.gcp.config`` must not load Pulumi (the components
live in their own modules, imported by name from ``__main__.py``).
"""
