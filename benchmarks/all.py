"""Every speed figure in docs/benchmarks.md from one run: the decoder, then the service, then the
hand-off to a worker, each script against its own baselines.

    python benchmarks/all.py            # about 15 minutes on 2 cores (the first run also encodes the clips)
    python benchmarks/all.py --quick    # a smoke run
"""

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    quick = ["--quick"] if "--quick" in sys.argv[1:] else []
    runs = [
        ["decode_speed.py", *quick],
        ["service_speed.py", *quick],
        ["handoff.py", *(["--repeats", "5"] if quick else [])],
    ]
    for script, *args in runs:
        print(f"\n== {script} {' '.join(args)}", flush=True)
        status = subprocess.call([sys.executable, str(HERE / script), *args])
        if status:
            return status
    return 0


if __name__ == "__main__":
    sys.exit(main())
