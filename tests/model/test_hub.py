"""`--model` as a Hugging Face Hub id (`vllm serve Qwen/Qwen3-VL-8B-Instruct`), resolved from
the local cache as vLLM resolves it (app/mmprep/model/hub.py). Each test lays out a real cache
of its own, as huggingface_hub lays one out (models--org--name/snapshots/<sha>/ holding a model
folder, refs/<branch> holding the sha); no network: the cache is read offline."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import httpx
import openai
import pytest
from huggingface_hub import constants

from mmprep.core.config import Settings
from mmprep.service import Service, SettingsError
from tests.support.cli import MMPREP
from tests.support.model_folder import make_model_folder
from tests.support.servers import AppProcess, LiveServer

REPO = "mmprep-test/Tiny-VL"
MAIN, DEV = "1" * 40, "2" * 40


def hub_cache(root: Path) -> Path:
    """A cache holding REPO at two commits: main (a Qwen2-VL folder) and the branch dev (a
    Qwen2.5-VL one)."""
    repo = root / f"models--{REPO.replace('/', '--')}"
    for sha, family in ((MAIN, "qwen2_vl"), (DEV, "qwen2_5_vl")):
        make_model_folder(family, repo / "snapshots" / sha)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(MAIN)
    (repo / "refs" / "dev").write_text(DEV)
    return root


@pytest.fixture
def offline_cache(tmp_path, monkeypatch):
    """huggingface_hub pointed at a cache of the test's own, offline (what HF_HUB_CACHE and
    HF_HUB_OFFLINE=1 set when it is imported)."""
    cache = hub_cache(tmp_path / "hub")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    return cache


def model_type(service) -> str:
    return json.loads((Path(service.settings.model) / "config.json").read_text())["model_type"]


def test_a_hub_id_is_served_from_its_snapshot_under_its_own_name(offline_cache):
    with LiveServer(model=REPO) as server:
        settings = server.service.settings
        assert settings.model == offline_cache / f"models--{REPO.replace('/', '--')}" / "snapshots" / MAIN
        assert model_type(server.service) == "qwen2_vl"
        # as vllm serve: served, and its multimodal hashes keyed, by the id as given
        assert (settings.served_model_name, settings.upstream_model_id) == ([REPO], REPO)
        client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0)
        assert [model.id for model in client.models.list()] == [REPO]
        answer = client.chat.completions.create(model=REPO, messages=[{"role": "user", "content": "hi"}])
        assert json.loads(answer.choices[0].message.content)["prompt"]["tokens"] > 0
        tokens = httpx.post(f"{server.url}/tokenize", json={"model": REPO, "prompt": "hi"}, timeout=30)
        assert tokens.status_code == 200 and tokens.json()["count"] > 0


@pytest.mark.parametrize(
    ("revision", "family"), [("dev", "qwen2_5_vl"), (DEV, "qwen2_5_vl"), ("main", "qwen2_vl")]
)
def test_revision_picks_the_snapshot_by_branch_or_commit(offline_cache, revision, family):
    with LiveServer(model=REPO, revision=revision) as server:
        assert model_type(server.service) == family
        assert server.service.settings.served_model_name == [REPO]


@pytest.mark.parametrize(
    ("model", "revision", "said"),
    [
        ("mmprep-test/Absent-VL", None, "mmprep-test/Absent-VL"),
        (REPO, "no-such-branch", "at revision no-such-branch"),
        (REPO, "3" * 40, "at revision " + "3" * 40),
    ],
)
def test_an_id_not_in_the_cache_is_refused_naming_it_and_the_cache(offline_cache, model, revision, said):
    with pytest.raises(SettingsError) as refused:
        Service(Settings(model=model, revision=revision))
    message = str(refused.value)
    assert refused.value.setting == "model"
    assert said in message and str(offline_cache) in message and "HF_HUB_OFFLINE=1" in message
    assert f"hf download {model}" in message


def test_revision_is_for_a_hub_id(tmp_path):
    folder = make_model_folder("qwen2_vl", tmp_path / "model")
    with pytest.raises(SettingsError, match="--revision main only applies to a Hugging Face Hub id"):
        Service(Settings(model=folder, revision="main"))
    with pytest.raises(ValueError, match="--revision only applies with --model"):
        Settings(revision="main")
    with pytest.raises(SettingsError, match="neither a folder nor a Hugging Face Hub id"):
        Service(Settings(model=tmp_path / "no" / "such" / "folder", revision="main"))


@pytest.mark.slow
def test_vllm_serves_command_line_with_a_hub_id_runs_offline_from_hf_home(tmp_path, monkeypatch):
    """`python -m mmprep serve ORG/NAME --revision dev` as a vllm serve command line, the cache
    found through HF_HOME (its hub/ folder) with HF_HUB_OFFLINE=1, as huggingface_hub reads them
    when it is imported; an id not there stops the start naming it and the cache's path."""
    hub_cache(tmp_path / "home" / "hub")
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)  # it would win over HF_HOME
    env = {"HF_HOME": str(tmp_path / "home"), "HF_HUB_OFFLINE": "1"}
    with AppProcess("serve", REPO, "--revision", "dev", env=env) as server:
        client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0)
        assert [model.id for model in client.models.list()] == [REPO]
        answer = client.chat.completions.create(model=REPO, messages=[{"role": "user", "content": "hi"}])
        assert json.loads(answer.choices[0].message.content)["prompt"]["tokens"] > 0
    refused = subprocess.run(
        [*MMPREP, "serve", "mmprep-test/Absent-VL", "--port", "0"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert refused.returncode == 2, refused.stderr
    assert "mmprep-test/Absent-VL" in refused.stderr and str(tmp_path / "home" / "hub") in refused.stderr
