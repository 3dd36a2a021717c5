"""The in-cluster platform: controllers by Helm and the Kueue queueing of dynamic slicing.

Nothing is re-exported here, so that the pure modules of this package load without Pulumi.
"""
