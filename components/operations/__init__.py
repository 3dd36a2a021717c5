"""Operating the stack in production: the guard rails of a production stack, the TPU upgrade
policy of a serving stack, and the alert policies an operator watches."""

from components.operations.component import Alerting

__all__ = ["Alerting"]
