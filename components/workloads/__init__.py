"""The workloads: slice checks and P/D serving on TPU7x, the Saxml cell on TPU v5e.

Nothing is re-exported here, so that the pure modules of each workload load without Pulumi.
"""
