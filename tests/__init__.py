"""mmprep's tests, one folder per room of the source: tests/X tests app/mmprep/X (tests/api/openai
its openai/, and so on) or the library X/; tests/cli and tests/service test cli.py and
service.py; tests/vllm_real compares mmprep with a real vLLM. What an area's tests share is in
its helpers.py (tests/helpers.py for the whole suite), imported by its full name from the
repository's root; fixtures are in conftest.py files."""
