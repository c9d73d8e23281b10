#!/usr/bin/env bash
# uv-install.sh VENV ARGS...: install ARGS into VENV with uv (pip's resolver takes minutes on statekit's
# dev set; uv a few seconds), uv itself installed into VENV first: by VENV's pip, or, in a venv made
# without pip (side-venv.sh), by .venv's uv. uv does not read pip's
# configuration, so what this machine configured for pip (its files and PIP_* variables: index URLs,
# find-links, constraints, certificate) is handed to uv, with pip's rule of taking the best version
# on any index. Output is shown only when it fails. Used by venv.sh and side-venv.sh.
set -euo pipefail
venv="$1"
shift
log=$(mktemp)
trap 'rm -f "$log"' EXIT
fail() { grep -v '^WARNING: Location' "$log" >&2 || true; echo "installing $* into $venv failed (output above)" >&2; exit 1; }
pip="$venv/bin/python"  # whose pip reads the settings below (the same files and variables in any venv)
"$pip" -m pip --version >/dev/null 2>&1 || pip=.venv/bin/python
# `pip config list` prints each setting as key='value' (Python's repr: a value on several lines
# shows \n). Read in pip's order of precedence, lowest first (the files' [global], their [install],
# then the PIP_* variables, shown as :env:), so the last one read wins, as it does for pip.
settings=$("$pip" -m pip config list 2>/dev/null || true)
while IFS= read -r line; do
  key=${line%%=*} value=${line#*=}
  value=${value#\'} value=${value%\'}
  value=$(printf '%s' "${value//\\n/ }" | xargs)  # one line, items separated by single spaces
  case "${key##*.}" in
    index-url) export UV_INDEX_URL="$value" ;;
    extra-index-url) export UV_EXTRA_INDEX_URL="$value" ;;
    find-links) export UV_FIND_LINKS="${value// /,}" ;;
    constraint) export UV_CONSTRAINT="$value" ;;
    cert) export SSL_CERT_FILE="$value" ;;
    no-index) case "$value" in 1|true|yes|on) export UV_NO_INDEX=1 ;; esac ;;
  esac
done < <(for section in global install :env:; do grep "^$section\." <<<"$settings" || true; done)
export UV_INDEX_STRATEGY=unsafe-best-match
if [ "$pip" = "$venv/bin/python" ]; then
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "uv==0.13.9" >"$log" 2>&1 || fail uv
else
  .venv/bin/uv pip install -q --python "$venv/bin/python" "uv==0.13.9" >"$log" 2>&1 || fail uv
fi
# Bytecode is compiled at install (pip's default; this machine sets PYTHONDONTWRITEBYTECODE, so no
# import would cache it), unless STATEKIT_UV_COMPILE=0: the test command lets imports write it
# instead, compiling only what runs (all of a venv took 23 s and 43 CPU-seconds for the dev set).
compile=(--compile-bytecode)
[ "${STATEKIT_UV_COMPILE:-1}" = 0 ] && compile=()
install() { "$venv/bin/uv" pip install -q "${compile[@]}" --python "$venv/bin/python" "$@" >"$log" 2>&1; }
rc=0
install "$@" || rc=$?
if [ "$rc" -gt 128 ]; then  # uv itself died by a signal (it segfaulted once in a CI run): once more
  echo "uv died by signal $((rc - 128)) installing into $venv: once more" >&2
  rc=0
  install "$@" || rc=$?
fi
[ "$rc" = 0 ] || fail "$@"
