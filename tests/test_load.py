"""A few hundred mixed requests at concurrency 64 against a live `mmprep serve`
(benchmarks/load.py runs the same mix for longer)."""

from load import serve_and_load


def test_under_load_every_request_is_answered_as_it_should_be():
    summary = serve_and_load(requests=300, concurrency=64, seed=3)
    assert summary["answered"] == 300  # nothing lost: no timeouts, no dropped connections
    assert summary["as_expected"] == 300, summary["wrong"]  # valid: 200; bad input: its 4xx
    assert summary["server_errors"] == 0
    assert {"200", "400", "404"} <= set(summary["statuses"])
    assert summary["rss_after_mib"] - summary["rss_before_mib"] < 64, summary  # memory comes back
