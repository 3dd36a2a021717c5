"""The slice_checks workload: config.py, objects.py and component.py."""
