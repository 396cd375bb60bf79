# One image for every Suanli process (`suanli serve scheduling|metering|billing`, `suanli agent`);
# docker-compose.yml picks the process with the command. Build: `docker build -t suanli:dev .`
#
# The project is installed editable from /app on purpose: `suanli/__init__.py` joins services/suanli
# from the source tree to the `suanli` package, and deploy/, schemas/ are read from the same tree
# (suanli.REPO_ROOT), so a plain wheel install would lose the services.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

RUN groupadd --system --gid 10001 suanli \
    && useradd --system --uid 10001 --gid suanli --home-dir /var/lib/suanli --create-home suanli

WORKDIR /app
COPY . /app

# The gRPC stubs are generated here, as root, so the running (non-root) process never has to write
# into /app: the source tree stays read-only to it.
RUN pip install -e . \
    && python -m suanli.api.build \
    && suanli --help >/dev/null

USER suanli
# Writable working directory for whatever a process keeps on disk (faust's <app>-data directory).
WORKDIR /var/lib/suanli

ENTRYPOINT ["suanli"]
CMD ["--help"]
