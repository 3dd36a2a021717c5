"""The workloads: slice checks and P/D serving on TPU7x, the Saxml cell on TPU v5e."""

from components.workloads.saxml.component import SaxmlCell
from components.workloads.serving.component import ModelServing, serving_endpoint
from components.workloads.slice_checks.component import SliceChecks

__all__ = ["ModelServing", "SaxmlCell", "SliceChecks", "serving_endpoint"]
