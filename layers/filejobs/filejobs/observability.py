"""Names every handler logs and measures under (the template sets the same in the environment).

Given explicitly because Powertools reads its environment when a Logger or Metrics is built,
at import: a handler imported before its environment is set would otherwise log as
"service_undefined" and refuse to flush metrics.
"""

SERVICE = "filejobs"
METRICS_NAMESPACE = "filejobs"
