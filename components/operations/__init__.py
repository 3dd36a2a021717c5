"""Operating the stack in production: the guard rails of a production stack, the TPU upgrade
policy of a serving stack, and the alert policies an operator watches.

Nothing is re-exported here, so that the pure modules of this package load without Pulumi.
"""
