"""The protections a stack asks for across its blocks: production, CIS GKE controls, supply chain."""
