#!/usr/bin/env bash
# Build the local base image statekit/base:bookworm without any Docker registry:
# mmdebstrap a minimal Debian root from the apt mirror, then `docker import` it (mmdebstrap rather
# than debootstrap: it installs with apt and dpkg in one go; 37 s against 96 s in CI's set-up).
# Idempotent: the image carries a label with the sha256 of the recipe below;
# if an image with the same hash exists, nothing is rebuilt.
# Needs a running engine: run scripts/docker-engine.sh first.
set -euo pipefail

# dockerd/mmdebstrap live in /usr/sbin, which a minimal CI PATH may lack.
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"

IMAGE=statekit/base:bookworm
SUITE=bookworm
VARIANT=minbase
PACKAGES=python3,python3-venv,python3-pip,ca-certificates,postgresql-15
MIRROR=${STATEKIT_DEBIAN_MIRROR:-http://deb.debian.org/debian}
IMG_PATH=/usr/lib/postgresql/15/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
LABEL_KEY=org.statekit.recipe-sha256

say() { echo "build-base-image: $*"; }
die() { echo "build-base-image: ERROR: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "must run as root (mmdebstrap's root mode needs it)"

# The recipe: everything that decides the image's content. Changing any of it
# changes the hash and so forces a rebuild. The mirror is left out on purpose:
# a different mirror of the same suite gives the same image.
RECIPE="tool=mmdebstrap suite=$SUITE variant=$VARIANT packages=$PACKAGES slim=doc,man,locale,pgcluster"
RECIPE="$RECIPE env=LANG=C.UTF-8,PATH=$IMG_PATH"
RECIPE_HASH=$(printf '%s' "$RECIPE" | sha256sum | cut -d' ' -f1)

docker info >/dev/null 2>&1 \
    || die "Docker engine is not answering ('docker info' failed); run scripts/docker-engine.sh first"

# Up to date? Compare the label of the existing image with our recipe hash.
current=$(docker image inspect "$IMAGE" \
    --format "{{ index .Config.Labels \"$LABEL_KEY\" }}" 2>/dev/null || true)
if [ "$current" = "$RECIPE_HASH" ]; then
    say "base image up to date ($IMAGE, recipe $RECIPE_HASH)"
    docker image inspect "$IMAGE" --format '{{.Id}}'
    exit 0
fi
# Remember a previous build so it can be removed instead of left dangling.
old_id=$(docker image inspect "$IMAGE" --format '{{.Id}}' 2>/dev/null || true)
[ -n "$old_id" ] && say "recipe changed (image label: '${current}', want $RECIPE_HASH); rebuilding"

if ! command -v mmdebstrap >/dev/null 2>&1; then
    say "installing mmdebstrap"
    export DEBIAN_FRONTEND=noninteractive
    # Quiet on success (apt/needrestart chatter); show the output on failure.
    apt_log=$(mktemp)
    { apt-get update -qq && apt-get install -y -qq mmdebstrap; } >"$apt_log" 2>&1 \
        || { tail -n 30 "$apt_log" >&2; rm -f "$apt_log"; die "installing mmdebstrap with apt-get failed"; }
    rm -f "$apt_log"
fi

# Build root under /var/tmp (on disk, not a size-limited tmpfs).
DIR=$(mktemp -d /var/tmp/statekit-base.XXXXXX)
cleanup() {
    # mmdebstrap mounts /proc, /sys etc. inside the target while it installs and
    # may leave them mounted on failure; unmount (deepest first) before deleting
    # so rm can't reach into the host's /proc or /sys.
    { grep -o " $DIR/[^ ]*" /proc/mounts 2>/dev/null || true; } | sort -r | while read -r m; do
        umount -l "$m" 2>/dev/null || true
    done
    rm -rf --one-file-system "$DIR"
    rm -f "$DIR.mmdebstrap.log"
}
trap cleanup EXIT

start=$(date +%s)
say "mmdebstrap $SUITE ($VARIANT) into $DIR from $MIRROR"
if ! mmdebstrap --mode=root --variant="$VARIANT" --include="$PACKAGES" "$SUITE" "$DIR" "$MIRROR" \
        >"$DIR.mmdebstrap.log" 2>&1; then
    tail -n 30 "$DIR.mmdebstrap.log" >&2 || true
    die "mmdebstrap failed (see output above)"
fi

# Keep the image small: drop downloaded .debs, apt's package lists and binary
# caches (a container runs `apt-get update` before installing anyway), logs.
rm -rf "$DIR"/var/cache/apt/archives/*.deb \
       "$DIR"/var/cache/apt/archives/partial/* \
       "$DIR"/var/cache/apt/*.bin \
       "$DIR"/var/lib/apt/lists/* \
       "$DIR"/var/log/*.log "$DIR"/var/log/apt/* \
       "$DIR"/tmp/* "$DIR"/var/tmp/*
# Like Debian's "slim" images: no man pages, docs (copyright files kept) or
# message translations; saves ~70 MiB and nothing here reads them.
rm -rf "$DIR"/usr/share/man/* "$DIR"/usr/share/info/* "$DIR"/usr/share/locale/*
find "$DIR"/usr/share/doc -mindepth 1 ! -name copyright ! -type d -delete
find "$DIR"/usr/share/doc -mindepth 1 -type d -empty -delete
# postgresql-common's postinst made a default cluster (15/main, 38 MiB) that debootstrap's install
# never did: statekit initdbs its own, so the image ships none.
rm -rf "$DIR"/etc/postgresql/* "$DIR"/var/lib/postgresql/* "$DIR"/var/log/postgresql/*
# Docker bind-mounts its own resolv.conf/hostname/hosts; don't ship the host's.
: >"$DIR/etc/resolv.conf"

# Import; --change sets the image config that a Dockerfile would.
say "importing into $IMAGE"
tar --numeric-owner -C "$DIR" -c . | docker import \
    --change "ENV LANG=C.UTF-8" \
    --change "ENV PATH=$IMG_PATH" \
    --change "LABEL $LABEL_KEY=$RECIPE_HASH" \
    --change "LABEL org.statekit.recipe=\"$RECIPE\"" \
    --change 'CMD ["/bin/bash"]' \
    --message "statekit base: mmdebstrap $SUITE $VARIANT +$PACKAGES" \
    - "$IMAGE" >/dev/null || die "docker import failed"

end=$(date +%s)
new_id=$(docker image inspect "$IMAGE" --format '{{.Id}}')
if [ -n "$old_id" ] && [ "$old_id" != "$new_id" ]; then
    docker image rm "$old_id" >/dev/null 2>&1 || say "note: old image $old_id still in use, left in place"
fi
size=$(docker image inspect "$IMAGE" --format '{{.Size}}')
say "built $IMAGE in $((end - start))s, size $((size / 1024 / 1024)) MiB, recipe $RECIPE_HASH"
echo "$new_id"
