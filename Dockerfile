# syntax=docker/dockerfile:1
#
# The actorlog container images (owned by the Kubernetes deployment, issue 9; k8s/README.md says
# how to build and push them; tests/k8s/test_dockerfile.py checks this file statically).
#
#   docker build --target broker -t REGISTRY/actorlog:TAG .          # brokers, snapshot exporter, CLI
#   docker build --target rollup -t REGISTRY/actorlog-rollup:TAG .   # + a Java runtime for PySpark
#
# Stages:
#   build   a virtual environment in /opt/venv with actorlog installed by pip from this repository
#           (dependencies first, in their own layer, so a code change does not re-download PySpark);
#   broker  python:3.11-slim + that venv, non-root (uid 10001), ENTRYPOINT `actorlog`;
#   rollup  broker + Debian's default Java runtime (17 on bookworm; PySpark 4 needs 17 or 21) + tini,
#           ENTRYPOINT Apache Spark's Kubernetes entrypoint, so one image serves both the CronJob
#           (`actorlog rollup`, Spark local mode: the entrypoint passes any other command through) and
#           the Spark operator's driver and executor pods (`driver ...` / `executor ...`). SPARK_HOME is
#           the pip-installed pyspark, which ships spark-submit and the spark-kubernetes jars.
#
# The base image is pinned to Debian bookworm: its default-jre-headless is OpenJDK 17 and provides
# /usr/lib/jvm/default-java on every architecture (so JAVA_HOME needs no per-arch path).

ARG PYTHON_IMAGE=python:3.11-slim-bookworm
# Only /opt/entrypoint.sh is taken from Apache's image (the official `spark` image on Docker Hub).
ARG SPARK_IMAGE=spark:4.0.0

FROM ${SPARK_IMAGE} AS spark-dist

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/venv/bin:$PATH
RUN python -m venv /opt/venv && pip install --upgrade pip setuptools wheel
WORKDIR /src
# 1. Dependencies only: the project metadata with empty packages, installed then uninstalled. The
#    stub tree is removed afterwards so that no stale build/ output can shadow the real sources.
COPY pyproject.toml README.md ./
RUN mkdir runtime actors ops \
 && touch runtime/__init__.py actors/__init__.py ops/__init__.py \
 && pip install . \
 && pip uninstall --yes actorlog \
 && rm -rf runtime actors ops build ./*.egg-info
# 2. The code.
COPY runtime ./runtime
COPY actors ./actors
COPY ops ./ops
RUN pip install --no-deps . \
 && actorlog --help >/dev/null \
 && python -c "import ops.broker_main, ops.cli.snapshots"

FROM ${PYTHON_IMAGE} AS broker
LABEL org.opencontainers.image.title="actorlog" \
      org.opencontainers.image.description="Kafka's ZooKeeper-era replication rebuilt in Python as asyncio actors" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1
RUN groupadd --system --gid 10001 actorlog \
 && useradd --system --uid 10001 --gid actorlog --home-dir /var/lib/actorlog --create-home \
      --shell /usr/sbin/nologin actorlog
COPY --from=build /opt/venv /opt/venv
USER 10001:10001
WORKDIR /var/lib/actorlog
# The broker's HTTP listener and its Kafka listener for Kafka's clients
# (listeners=HTTP://0.0.0.0:9092,KAFKA://0.0.0.0:19092 in k8s/base/server.properties).
EXPOSE 9092 19092
ENTRYPOINT ["actorlog"]
CMD ["--help"]

FROM broker AS rollup
USER root
# man1 must exist for the JRE's postinst in slim images; procps gives Spark's scripts `ps`.
RUN mkdir -p /usr/share/man/man1 \
 && apt-get update \
 && apt-get install --yes --no-install-recommends default-jre-headless tini procps \
 && rm -rf /var/lib/apt/lists/*
COPY --from=spark-dist /opt/entrypoint.sh /opt/spark-entrypoint.sh
ENV JAVA_HOME=/usr/lib/jvm/default-java \
    SPARK_HOME=/opt/venv/lib/python3.11/site-packages/pyspark \
    PYSPARK_PYTHON=/opt/venv/bin/python \
    PYSPARK_DRIVER_PYTHON=/opt/venv/bin/python
RUN chmod 0755 /opt/spark-entrypoint.sh \
 && test -x "$SPARK_HOME/bin/spark-submit" \
 && java -version
USER 10001:10001
ENTRYPOINT ["/opt/spark-entrypoint.sh"]
CMD ["actorlog", "rollup", "--help"]
