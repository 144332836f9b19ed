"""The probes and read-outs that do no work: the served models, liveness, readiness, the
version, the load and the metrics."""
