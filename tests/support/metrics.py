"""One value of the Prometheus text a server publishes at /metrics, read by the
exposition's own parser: tests check what an operator's scraper sees, never the client
library's private state."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families


def metric(text: str | bytes, name: str, **labels: str) -> float:
    """The sample `name` (as written in the text: `mmprep_requests_total`, not the counter's
    `mmprep_requests`) with exactly these labels. A labelled counter nothing has counted yet
    is not in the text at all: 0.0. A name the text does not declare is a KeyError, so a
    misspelt metric fails the test instead of reading as zero."""
    if isinstance(text, bytes):
        text = text.decode()
    declared = False
    for family in text_string_to_metric_families(text):
        if name != family.name and not name.startswith(family.name + "_"):
            continue
        declared = True
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return sample.value
    if not declared:
        raise KeyError(f"no metric {name!r} in the text")
    return 0.0
