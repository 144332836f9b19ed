"""Every `vllm serve` flag, from vLLM's own parser, and what `mmprep serve` does with each.

Two steps, each writing a file that is committed (vLLM is not a dependency of mmprep):

    # 1. vLLM's flags, read from the parser `vllm serve` builds (in a venv with vLLM, e.g.
    #    scripts/vllm_venv.sh's; no GPU needed):
    .venv-vllm-render/bin/python scripts/vllm_serve_flags.py dump
    #    -> app/mmprep/core/vllm_serve_flags.json: each flag's option strings, group, and whether it
    #       takes a value
    # 2. the table, from that file and mmprep's own reading of it (app/mmprep/vllm_flags.py):
    .venv/bin/python scripts/vllm_serve_flags.py table
    #    -> docs/vllm-flags.md

tests/cli/test_vllm_flags.py checks that the table is what step 2 writes now, and that the
command line does what each row says.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FLAGS_JSON = ROOT / "app" / "mmprep" / "core" / "vllm_serve_flags.json"
TABLE = ROOT / "docs" / "vllm-flags.md"


def dump() -> None:
    """vLLM's `vllm serve` parser, flag by flag (run with vLLM importable)."""
    import vllm
    import vllm.platforms

    # The parser's defaults ask the platform for its device; on a machine without an
    # accelerator vLLM finds none, so the CPU platform stands in (the flags do not depend on it).
    from vllm.platforms.cpu import CpuPlatform

    vllm.platforms._current_platform = CpuPlatform()
    from vllm.entrypoints.common.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = make_arg_parser(FlexibleArgumentParser())
    flags = []
    for group in parser._action_groups:
        for action in group._group_actions:
            if not action.option_strings or "-h" in action.option_strings:
                continue
            longs = [option for option in action.option_strings if option.startswith("--")]
            flags.append(
                {
                    "flags": longs,
                    "short": [option for option in action.option_strings if not option.startswith("--")],
                    "group": "serve" if group.title == "options" else group.title,
                    "value": action.nargs != 0,
                }
            )
    rows = ",\n".join(" " + json.dumps(flag) for flag in flags)  # one flag a line: diffs read well
    FLAGS_JSON.write_text(f'{{"vllm": "{vllm.__version__}", "flags": [\n{rows}\n]}}\n')
    print(f"{len(flags)} flags of vllm serve {vllm.__version__} -> {FLAGS_JSON.relative_to(ROOT)}")


def table() -> None:
    """docs/vllm-flags.md from the dump and app/mmprep/vllm_flags.py."""
    from mmprep.vllm_flags import flag_table

    TABLE.write_text(flag_table())
    print(f"-> {TABLE.relative_to(ROOT)}")


if __name__ == "__main__":
    {"dump": dump, "table": table}[sys.argv[1] if len(sys.argv) > 1 else "table"]()
