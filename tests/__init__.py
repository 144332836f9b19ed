"""mmprep's tests, one folder per room of the source: tests/X tests app/mmprep/X (tests/api/openai
its openai/, and so on) or the library X/; tests/cli and tests/service test cli.py and
service.py; tests/vllm_real compares mmprep with a real vLLM. What tests (and the benchmarks
and scripts) share is tests/support, a module per thing it holds, imported by its full name
from the repository's root; fixtures are in conftest.py files."""
