#!/usr/bin/env bash
# The repository's static checks, as CI runs them: ruff's lint rules, ruff's formatting, and
# mypy (strict on decoders/, families/ and processors/; pyproject.toml says what it checks and why).
# Every check runs even when an earlier one fails; the exit status is non-zero if any did.
#
#   bash scripts/lint.sh                          # check only: nothing is changed
#   bash scripts/lint.sh --fix                    # first let ruff fix what it can and format, then check
#   bash scripts/lint.sh decoders app/mmprep/api         # only these folders or files
#
# It runs in .venv-lint, a Python 3.13 virtualenv locked to .ci/lint.txt (every package mypy
# reads types from, at one version: that file says why), made on the first run and brought
# up to date whenever the lock changes. Environment: PYTHON (default: the 3.13 that
# scripts/python313.sh finds) makes it; VENV (default .venv-lint) names another one.
set -uo pipefail
cd "$(dirname "$0")/.."
venv=${VENV:-.venv-lint}
python="$venv/bin/python"

if [ ! -x "$python" ] || [ .ci/lint.txt -nt "$venv/.locked" ]; then
    if ! maker=${PYTHON:-$(bash scripts/python313.sh)}; then
        echo "scripts/lint.sh: making $venv needs Python 3.13: set PYTHON to one" >&2
        exit 2
    fi
    echo "== $venv from .ci/lint.txt ($("$maker" --version))"
    { [ -x "$python" ] || "$maker" -m venv "$venv"; } &&
        "$python" -m pip install --quiet --upgrade pip &&
        "$python" -m pip install --quiet -r .ci/lint.txt &&
        "$python" -m pip install --quiet --no-deps -e . &&
        touch "$venv/.locked" || exit 2
fi

fix=
if [ "${1:-}" = "--fix" ]; then
    fix=1
    shift
fi
paths=("$@")
if [ ${#paths[@]} -eq 0 ]; then
    paths=(.)
fi
if [ -n "$fix" ]; then
    "$python" -m ruff check --fix --quiet "${paths[@]}" || true
    "$python" -m ruff format --quiet "${paths[@]}"
fi

failed=()
run() {  # run NAME COMMAND...: the command's output, and its name kept if it failed
    local name=$1
    shift
    echo "== $name"
    "$@" || failed+=("$name")
}
run "ruff check" "$python" -m ruff check "${paths[@]}"
run "ruff format" "$python" -m ruff format --check "${paths[@]}"
if [ "${paths[*]}" = "." ]; then
    run "mypy" "$python" -m mypy  # the files pyproject.toml names
else
    run "mypy" "$python" -m mypy "${paths[@]}"
fi

if [ ${#failed[@]} -gt 0 ]; then
    echo "scripts/lint.sh: failed: ${failed[*]}" >&2
    exit 1
fi
echo "scripts/lint.sh: all checks passed"
