#!/usr/bin/env bash
# Issue 22, last step: the tests into folders that mirror the rooms of the code. Run once,
# from the repository root, after every branch that edits tests/ is merged; then commit.
# (Written by the `suite` helper, not run by it; tried on a scratch copy, see its report.)
#
# What stays in tests/ itself: conftest.py (pytest loads it for every folder below, and the
# tests import it by name: `from conftest import MEDIA`), the shared helper modules the tests
# import by name (engines.py, derender_fixtures.py, render_cases.py, vllm_like.py), data/,
# fixtures/, and test_architecture.py (about the whole tree). fuzz_media.py goes with
# test_fuzz.py into tests/decoders: it is run as a script, and a script in tests/ itself has
# tests/ first on its sys.path, where tests/decoders is a namespace package `decoders` that
# wins over the editable install's (`python tests/fuzz_media.py` then fails: "cannot import
# name 'MediaError' from 'decoders' (unknown location)"). Inside pytest the checkout's root
# comes first on sys.path (pythonpath "."), so the real decoders and processors packages win.
#
# Folder names: no folder may be named like a package a test asks for and may not have.
# tests/ is on sys.path (pyproject's pythonpath, and pytest's own prepend import mode for
# conftest.py), so a folder tests/vllm is a namespace package `vllm`:
# importlib.util.find_spec("vllm") stops being None and the skip for "vLLM is not
# installed" (test_vllm_generate.py, test_vllm_protocol.py) no longer skips; a tests/ray
# does the same to pytest.importorskip("ray") on the 3.11 run of .ci/run, which has no ray
# extra. Hence tests/vllm_api and tests/rayserve (app/rayserve is that room's name anyway),
# and no tests/transformers or tests/torch. No folder gets a conftest.py or an __init__.py
# of its own: the test modules' names stay unique and top-level, as now.
set -euo pipefail
cd "$(dirname "$0")"

move() {  # move FOLDER FILE...: git mv each tests/FILE to tests/FOLDER/FILE
    local folder=$1
    shift
    mkdir -p "tests/$folder"
    for name in "$@"; do
        git mv "tests/$name" "tests/$folder/$name"
        MOVED+=("$name:$folder")
    done
}
MOVED=()

move decoders   test_decode_video.py test_decode_image.py test_sampling.py test_gpu.py test_fuzz.py fuzz_media.py
move processors test_processors.py test_processors_golden.py test_processors_live.py
move media      test_ssrf.py
move service    test_service.py test_service_errors.py test_service_processor.py test_bad_input.py \
                test_connections.py test_huge_body.py test_load.py test_decode_cache.py
move render     test_render.py test_render_live.py test_render_tokenizer.py test_model_folder.py
move derender   test_derender.py test_derender_server.py test_derender_vllm.py
move vllm_api   test_vllm_generate.py test_vllm_parity.py test_vllm_protocol.py test_upstream.py
move workers    test_wire.py test_workers.py test_transformers_engine.py
move bench      test_bench.py test_bench_decode.py test_bench_load.py
move rayserve   test_ray.py
move preview    test_preview.py test_preview_page.py
move cli        test_cli.py test_dockerfile.py

# Paths each moved file computed from its own place: one folder deeper now.
fix() {  # fix FILE OLD NEW: replace the one line OLD, or stop
    grep -qF -- "$2" "$1" || { echo "sweep-move.sh: $1 no longer has: $2" >&2; exit 1; }
    python3 - "$1" "$2" "$3" <<'EOF'
import sys
path, old, new = sys.argv[1:]
text = open(path).read()
assert text.count(old) == 1, (path, old)
open(path, "w").write(text.replace(old, new))
EOF
}
fix tests/processors/test_processors_golden.py 'GOLDENS = Path(__file__).parent / "data"' \
                                               'GOLDENS = Path(__file__).parents[1] / "data"'
fix tests/render/test_render.py '(Path(__file__).parent / "data" / "render"' \
                                '(Path(__file__).parents[1] / "data" / "render"'
fix tests/vllm_api/test_vllm_protocol.py 'GOLDENS = Path(__file__).parent / "data"' \
                                         'GOLDENS = Path(__file__).parents[1] / "data"'
fix tests/decoders/fuzz_media.py 'MEDIA = Path(__file__).resolve().parent / "data"' \
                                 'MEDIA = Path(__file__).resolve().parents[1] / "data"'
fix tests/service/test_load.py 'LOAD = Path(__file__).resolve().parent.parent / "benchmarks"' \
                               'LOAD = Path(__file__).resolve().parents[2] / "benchmarks"'
fix tests/cli/test_dockerfile.py 'REPO = Path(__file__).resolve().parents[1]' \
                                 'REPO = Path(__file__).resolve().parents[2]'
# the worker processes import tests/engines.py (--engine-class engines:SlowEngine)
fix tests/workers/test_workers.py 'TESTS = Path(__file__).parent  # where' \
                                  'TESTS = Path(__file__).parents[1]  # where'

# The docs, docstrings and comments that name a test file by its path.
for entry in "${MOVED[@]}"; do
    name=${entry%%:*} folder=${entry##*:}
    { git grep -lF "tests/$name" -- . ':!sweep-move.sh' || true; } | while read -r file; do
        sed -i "s#tests/$name#tests/$folder/$name#g" "$file"
    done
done

echo "moved ${#MOVED[@]} files. Check: python -m pytest --collect-only -q | tail -1 gives the count it"
echo "gave before, and python -m pytest -m 'not slow' -q passes; then git rm sweep-move.sh and commit."
