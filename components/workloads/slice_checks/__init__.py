"""The slice_checks workload: config.py, rules.py, objects.py and component.py."""
