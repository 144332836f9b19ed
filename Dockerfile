# A pinned base: the same Python on every build (3.13 is the newest the suite runs on).
FROM python:3.13.0-slim-bookworm AS base

# PyAV's wheel bundles FFmpeg: no system codecs needed.
RUN useradd --create-home --uid 10001 mmprep
WORKDIR /app

# The dependencies first, in a layer of their own: a change to the source reuses it.
COPY pyproject.toml ./
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" \
        > /tmp/requirements.txt \
    && pip install --no-cache-dir -r /tmp/requirements.txt

# Every folder pyproject.toml packages (tests/cli/test_dockerfile.py installs exactly these paths
# and starts the service from them, so a folder missing here fails the suite), built into a
# wheel where a C compiler is (the resize kernel, processors/.../_resample.c): the image
# that runs keeps no compiler.
FROM base AS build
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
COPY README.md ./
COPY app ./app
COPY decoders ./decoders
COPY families ./families
COPY processors ./processors
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

FROM base
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-deps /wheels/*.whl && rm -r /wheels

USER mmprep
EXPOSE 8000
ENV MMPREP_HOST=0.0.0.0 MMPREP_PORT=8000
HEALTHCHECK --interval=15s --timeout=3s --start-period=10s --retries=3 \
    CMD python -c "import urllib.request, sys; sys.exit(urllib.request.urlopen('http://127.0.0.1:8000/health', timeout=2).status != 200)"
CMD ["mmprep", "serve"]
