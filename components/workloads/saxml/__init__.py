"""The saxml workload: config.py (block and rules), objects.py and component.py."""
