# Redmine as WebArena-style worlds ship an application: a container holding it, reset by restarting
# the container. Only benchmarks/redmine.py builds it (its "container restart" row, against statekit's
# rewind); statekit's own Redmine world runs Debian's Redmine behind AppProcess instead. The same
# Debian packages as the host's (scripts/test.sh), from the base image's mirror.
ARG BASE=statekit/base:bookworm
FROM ${BASE}
RUN echo "redmine redmine/instances/default/dbconfig-install boolean false" | debconf-set-selections \
 && apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      redmine redmine-pgsql puma >/dev/null \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin
ENV RAILS_ENV=production LANG=C.UTF-8 TZ=UTC
LABEL org.statekit.image=redmine-bench
