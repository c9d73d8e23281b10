# The claims environment image: the application, its embedded PostgreSQL and the statekit harness.
# Everything the app talks to lives inside; the build is offline: wheels come from a wheelhouse built
# on the host from images/claims-requirements.txt (exact pins), the base image from mmdebstrap.
ARG BASE=statekit/base:bookworm
FROM ${BASE}
COPY wheelhouse /tmp/wheelhouse
RUN python3 -m venv /opt/venv \
 && /opt/venv/bin/pip install --no-index --find-links /tmp/wheelhouse -r /tmp/wheelhouse/requirements.txt \
 && rm -rf /tmp/wheelhouse /root/.cache
COPY src /app
ENV PATH=/opt/venv/bin:/usr/lib/postgresql/15/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONPATH=/app \
    PYTHONHASHSEED=0 \
    PYTHONDONTWRITEBYTECODE=1 \
    TZ=UTC \
    STATEKIT_PG_LINGER=0 \
    STATEKIT_HOME=/var/lib/statekit
WORKDIR /app
# statekit.container_mode.serve_command("statekit_examples.adapters.claims_app:ClaimsAdapter"): one episode per container,
# served in the serving process (--workers 0, no worker pool), on the socket in the host-mounted
# directory. The adapter is named by its path: the source is on PYTHONPATH, not installed, so the
# statekit_adapters entry points that register "claims_app" do not exist in the image.
ENTRYPOINT ["python", "-m", "statekit.cli", "serve", "statekit_examples.adapters.claims_app:ClaimsAdapter", "--workers", "0", "--uds", "/run/statekit/harness.sock"]
