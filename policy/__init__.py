"""The project's CrossGuard policy pack: mandatory guard rails over what a preview would deploy.

The rules are pure functions over plain resource data (``resources``, then one module per
concern), so tests call them on the offline render without an engine; ``pack`` wraps them for the
``pulumi_policy`` SDK and ``__main__`` serves the pack when the Pulumi CLI starts it.
"""

# The pack's name as the CLI reports it (here, so that code without the pulumi_policy SDK can read it).
PACK_NAME = "tpu-gke-guardrails"
