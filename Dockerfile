# The session-stream image: one image for the worker and for the sources that feed it.
#   docker build -t session-stream .
#   docker run --rm session-stream --help
# compose/docker-compose.yml builds it and runs Kafka, the workers, a source, Prometheus and Grafana.

# Build the project's wheel from the source tree (the context is filtered by .dockerignore).
FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY . .
RUN pip wheel --no-deps --wheel-dir /wheels .

# Install it with its dependencies (all of them ship manylinux wheels: no compiler needed).
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
COPY --from=build /wheels /tmp/wheels
RUN pip install /tmp/wheels/*.whl && rm -rf /tmp/wheels

# Never run as root. The worker's data directory (SESSION_STREAM_DATA_DIR, default
# .session-stream) is relative to the working directory, so it lands in the user's home.
RUN useradd --create-home --uid 10001 --user-group session-stream
USER session-stream
WORKDIR /home/session-stream

# In a container the stats and metrics endpoints must listen beyond loopback.
ENV SESSION_STREAM_WEB_HOST=0.0.0.0 \
    SESSION_STREAM_WEB_PORT=6066
EXPOSE 6066

ENTRYPOINT ["session-stream"]
CMD ["worker"]
