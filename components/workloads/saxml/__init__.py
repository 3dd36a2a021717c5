"""The saxml workload: config.py, rules.py, objects.py and component.py."""
