#!/usr/bin/env bash
# Everything the test suite needs, on a fresh machine, then the suite: the README's test
# command, and what .ci/run runs for each Python it tests.
#
#   bash scripts/test.sh                      # python3, ./.venv, every extra the tests use
#   bash scripts/test.sh -m "not slow" -x     # arguments go to pytest
#
# Environment: PYTHON (default python3), VENV (default .venv), EXTRAS (default test,ray),
# PACKAGES (more requirements, e.g. torch==2.14.1), PIP_CONSTRAINT (pip's own: .ci/run pins
# the oldest declared versions with it).
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
venv=${VENV:-.venv}
extras=${EXTRAS:-test,ray}

# The /preview page is tested in a real browser: Debian's Chromium (Playwright's own browser
# downloads are not used, and cannot be: they come from outside the package registries).
if ! command -v chromium >/dev/null 2>&1; then
    if [ "$(id -u)" != 0 ]; then
        echo "scripts/test.sh: the preview page's test needs Chromium: sudo apt-get install chromium" >&2
        exit 1
    fi
    echo "== installing chromium"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi

echo "== $("$python" --version) in $venv, extras [$extras]${PIP_CONSTRAINT:+, pinned by $PIP_CONSTRAINT}"
[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip
# shellcheck disable=SC2086 # PACKAGES is a list of requirements
"$venv/bin/python" -m pip install --quiet -e ".[$extras]" ${PACKAGES:-}
"$venv/bin/python" -c 'import av, numpy; print("PyAV", av.__version__, "FFmpeg", av.ffmpeg_version_info, "numpy", numpy.__version__)'
# Two workers, a file each at a time (its module's servers made once): CI's 2 cores, busy
# while the other waits on a server. `-n 0` after it runs the suite in one process.
exec "$venv/bin/python" -m pytest -q -n 2 --dist loadfile "$@"
