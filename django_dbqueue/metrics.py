"""The public path of the Prometheus view, ``django_dbqueue.metrics.metrics_view``
(the docs tell users to route it from here); the code is in
operations/metrics.py. ``runqueue --metrics-port`` serves worker/supervisor/runqueue_metrics.py's."""

from .operations.metrics import metrics_view

__all__ = ["metrics_view"]
