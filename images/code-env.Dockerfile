# The code environment's sandbox image: the base image's Python 3.11 and the runner, nothing else.
# Built offline (no pulls, no package downloads) from the local statekit/base:bookworm; the adapter
# pins the resulting image id and records it in every episode's metadata.
ARG BASE=statekit/base:bookworm
FROM ${BASE}
# An unprivileged user for the model's code; its home is the per-container tmpfs at /tmp.
RUN echo 'sandbox:x:10001:10001:statekit sandbox:/tmp:/usr/sbin/nologin' >> /etc/passwd \
 && echo 'sandbox:x:10001:' >> /etc/group \
 && mkdir -p /opt/statekit
COPY runner.py /opt/statekit/runner.py
# Precompiled: the runner starts on every run, and compiling it each time would dominate small runs.
RUN python3 -c "import py_compile; py_compile.compile('/opt/statekit/runner.py', cfile='/opt/statekit/runner.pyc', doraise=True)"
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONHASHSEED=0 TZ=UTC LANG=C.UTF-8
LABEL org.statekit.image=code-env
CMD ["sleep", "infinity"]
