#!/usr/bin/env bash
# The repository's static checks, as CI runs them: ruff's lint rules, ruff's formatting, and
# mypy (strict on decoders/ and processors/; pyproject.toml says what it checks and why).
# Every check runs even when an earlier one fails; the exit status is non-zero if any did.
#
#   bash scripts/lint.sh                          # check only: nothing is changed
#   bash scripts/lint.sh --fix                    # first let ruff fix what it can and format, then check
#   bash scripts/lint.sh decoders processors      # only these folders (what .ci/run checks
#                                                 # until app/ and tests/ are swept clean)
#
# Environment: VENV (default .venv), a virtualenv with the project installed with the extras
# the code imports and the lint extra (pip install -e '.[test,ray,lint]'): mypy reads the
# installed packages' types from it.
set -uo pipefail
cd "$(dirname "$0")/.."
venv=${VENV:-.venv}
python="$venv/bin/python"
if ! "$python" -m ruff --version >/dev/null 2>&1 || ! "$python" -m mypy --version >/dev/null 2>&1; then
    echo "scripts/lint.sh: ruff and mypy are not installed in $venv: pip install -e '.[test,ray,lint]'" >&2
    exit 2
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
    run "mypy" "$python" scripts/typecheck.py  # the files pyproject.toml names
else
    run "mypy" "$python" scripts/typecheck.py "${paths[@]}"
fi

if [ ${#failed[@]} -gt 0 ]; then
    echo "scripts/lint.sh: failed: ${failed[*]}" >&2
    exit 1
fi
echo "scripts/lint.sh: all checks passed"
