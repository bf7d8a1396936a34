# gpu-admission webhook image: non-root, gunicorn entry point, read-only root filesystem friendly.
# The build stage compiles the engine (policies/) with mypyc: the same Python source, as C
# extension modules, about half the instructions a review (tools/compile_engine.py, docs/benchmarks.md).
# (setuptools 70.1 and later build wheels on their own; mypy carries mypyc, which type-checks
# as CI does, with PyYAML's stubs.)
FROM python:3.11 AS build
WORKDIR /src
COPY pyproject.toml setup.py README.md constraints.txt ./
COPY tools/__init__.py tools/compile_engine.py ./tools/
COPY policies ./policies
COPY webhook ./webhook
COPY certs ./certs
RUN pip install --no-cache-dir -c constraints.txt 'setuptools>=70.1' mypy types-PyYAML \
 && GPU_ADMISSION_COMPILE=1 pip install --no-cache-dir --no-build-isolation --prefix=/install -c constraints.txt . \
 && python -c "import sys; sys.path.insert(0, '/install/lib/python3.11/site-packages'); import policies.engine as e; assert e.COMPILED"

FROM python:3.11-slim
COPY --from=build /install /usr/local
RUN useradd --uid 10001 --no-create-home --shell /usr/sbin/nologin gpu-admission
USER 10001:10001
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PROMETHEUS_MULTIPROC_DIR=/tmp/metrics
EXPOSE 8443
ENTRYPOINT ["/bin/sh", "-c", "mkdir -p \"$PROMETHEUS_MULTIPROC_DIR\" && exec \"$@\"", "--"]
CMD ["gunicorn", "-c", "python:webhook.serving.gunicorn_conf", "webhook.wsgi:app"]
