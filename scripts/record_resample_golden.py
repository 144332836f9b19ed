"""Record tests/data/audio/torchaudio_resample.npz: torchaudio's Resample (vLLM 0.33's default
AudioResampler method) on a fixed waveform, for each rate pair a test checks the numpy port
(decoders/mmprep/decoders/audio.py sinc_resample) against, without torchaudio in CI.

Needs torchaudio importable beside torch (`pip install --no-deps --target DIR torchaudio==2.11.0`
and DIR on PYTHONPATH: its Resample is plain torch). Run from the repository root, with
PYTHONPATH=app:decoders:processors:families."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository's root: tests.support

from tests.support.audio import RESAMPLE_PAIRS, resample_input

OUT = Path("tests/data/audio/torchaudio_resample.npz")


def main() -> int:
    import torch
    import torchaudio

    torch.set_num_threads(1)  # as vLLM's resample_audio_torchaudio runs it
    arrays = {}
    with torch.no_grad(), torch.backends.mkldnn.flags(enabled=False):
        for orig, new in RESAMPLE_PAIRS:
            source = resample_input(orig)
            arrays[f"{orig}_{new}"] = torchaudio.transforms.Resample(orig, new)(
                torch.from_numpy(source)
            ).numpy()
    np.savez_compressed(OUT, **arrays)
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes), torchaudio {torchaudio.__version__}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
