# syntax=docker/dockerfile:1
# One image for the Python side of docker-compose.yml: the four services (`surveil serve NAME`),
# the kafka-init job (`python -m surveil.runtime.topic_admin create`) and the operator commands
# (`surveil ledger`, `surveil reconcile`, `surveil replay`, `surveil simulate`).
#
#   docker compose build          builds it as ${SURVEIL_IMAGE}:${SURVEIL_VERSION} (see .env)
#   docker build -t surveil .     the same by hand
#
# Only pyproject.toml, README.md and services/ are sent to the builder (.dockerignore).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore

# The dependencies first, from pyproject.toml alone: a change of code then rebuilds from the
# next layer on, not the minute of wheels.
COPY pyproject.toml /tmp/src/pyproject.toml
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('/tmp/src/pyproject.toml', 'rb'))['project']['dependencies']))" \
        > /tmp/requirements.txt \
 && pip install -r /tmp/requirements.txt

COPY README.md /tmp/src/README.md
COPY services /tmp/src/services
RUN pip install --no-deps /tmp/src \
 && pip check \
 && rm -rf /tmp/src /tmp/requirements.txt \
 && useradd --system --user-group --uid 10001 --home-dir /var/lib/surveil --create-home \
        --shell /usr/sbin/nologin surveil

# Not root. Its home holds faust's data directory (FAUST_DATADIR): the anomaly-detection tables
# live in memory and in their Kafka changelogs, so nothing there has to outlive the container.
USER surveil
WORKDIR /var/lib/surveil
ENV FAUST_DATADIR=/var/lib/surveil/faust

ENTRYPOINT ["surveil"]
CMD ["--help"]
