"""Operating the stack: alert policies, dashboards, node audit logging and the serving benchmark.

Nothing is re-exported here, so that the pure modules of this package load without Pulumi.
"""
