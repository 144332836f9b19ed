FROM python:3.13-slim

# PyAV's wheel bundles FFmpeg: no system codecs needed.
RUN useradd --create-home --uid 10001 mmprep
WORKDIR /app
COPY pyproject.toml README.md ./
COPY decoders ./decoders
COPY app ./app
RUN pip install --no-cache-dir .

USER mmprep
EXPOSE 8000
ENV MMPREP_HOST=0.0.0.0 MMPREP_PORT=8000
HEALTHCHECK --interval=15s --timeout=3s --start-period=10s --retries=3 \
    CMD python -c "import urllib.request, sys; sys.exit(urllib.request.urlopen('http://127.0.0.1:8000/health', timeout=2).status != 200)"
CMD ["mmprep", "serve"]
