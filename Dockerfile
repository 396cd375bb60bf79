# One image for every Suanli process (`suanli serve scheduling|metering|billing`, `suanli agent`);
# docker-compose.yml picks the process with the command. Build: `docker build -t suanli:dev .`
#
# The project is installed as a normal package: the wheel holds all three floors of the `suanli`
# namespace (libs/, services/, apps/), the committed gRPC stubs and, as package data, the schemas and
# deploy/ files the services read (suanli.data). /app stays in the image only for the files that
# docker-compose.yml names on service command lines (/app/deploy/...).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# signing/ and public/ are where docker-compose.yml mounts auth-init's named volumes: a new volume takes
# the owner and mode of the directory it is mounted on, so they must exist here, owned by suanli.
RUN groupadd --system --gid 10001 suanli \
    && useradd --system --uid 10001 --gid suanli --home-dir /var/lib/suanli --create-home suanli \
    && install -d -o suanli -g suanli -m 0700 /var/lib/suanli/signing \
    && install -d -o suanli -g suanli -m 0755 /var/lib/suanli/public

WORKDIR /app
COPY . /app

# Installed as root, run as suanli: nothing the process imports or reads is writable by it.
RUN pip install . \
    && rm -rf build \
    && suanli --help >/dev/null

USER suanli
# Writable working directory for whatever a process keeps on disk (faust's <app>-data directory).
WORKDIR /var/lib/suanli

ENTRYPOINT ["suanli"]
CMD ["--help"]
