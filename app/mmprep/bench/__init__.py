"""Benchmarks for users choosing a preprocessing layer: `mmprep bench` (chat requests with
video and images against any OpenAI-compatible server) and `mmprep bench-decode`
(decode_video against the usual loaders, in one process).

    config.py      the flags of both commands
    synthetic.py   camera-like footage, encoded with PyAV's bundled encoders
    inputs.py      the media each request carries (files, URLs, data URLs, padding)
    fileserver.py  the loopback file server local media goes out from
    client.py      one chat request, timed (SSE parsed here), and its record
    load.py        when requests start: concurrency, Poisson arrivals, limits
    metrics.py     a run's figures from its records
    report.py      tables, JSON results, chart
    runner.py      `mmprep bench` end to end
    decode.py      `mmprep bench-decode`

app/mmprep/cli.py imports only the flags (config.py, synthetic.py) up front; the rest loads when
a benchmark runs, so `mmprep serve` never loads the client, rich or the file server (which the
tests serve their fixtures from too, with tests/support/media_store.py's misbehaviours).
"""
