# gpu-admission webhook image: non-root, gunicorn entry point, read-only root filesystem friendly.
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md constraints.txt ./
COPY policies ./policies
COPY webhook ./webhook
COPY certs ./certs
RUN pip install --no-cache-dir --prefix=/install -c constraints.txt .

FROM python:3.11-slim
COPY --from=build /install /usr/local
RUN useradd --uid 10001 --no-create-home --shell /usr/sbin/nologin gpu-admission
USER 10001:10001
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PROMETHEUS_MULTIPROC_DIR=/tmp/metrics
EXPOSE 8443
ENTRYPOINT ["/bin/sh", "-c", "mkdir -p \"$PROMETHEUS_MULTIPROC_DIR\" && exec \"$@\"", "--"]
CMD ["gunicorn", "-c", "python:webhook.serving.gunicorn_conf", "webhook.wsgi:app"]
