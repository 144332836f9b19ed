#!/usr/bin/env bash
# Print the path of a Python 3.13 (python3.13 on the PATH if it runs, else the newest 3.13
# under pyenv's root); exit 1, saying so, if there is none. .ci/run and scripts/lint.sh use it.
if python3.13 --version >/dev/null 2>&1; then  # (a pyenv shim on the PATH may not run)
    command -v python3.13
    exit 0
fi
root=$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")
found=$(ls -d "$root"/versions/3.13.*/bin/python3 2>/dev/null | sort -V | tail -n 1)
if [ -z "$found" ]; then
    echo "no Python 3.13: neither python3.13 on the PATH nor one under $root/versions" >&2
    exit 1
fi
echo "$found"
