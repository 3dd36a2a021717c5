"""The workload namespaces' default: objects.py (the default-deny-ingress policy) and component.py."""
