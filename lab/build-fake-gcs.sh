#!/usr/bin/env bash
# lab/build-fake-gcs.sh -- build fake-gcs-server from its Go module, at the version of lab/fake-gcs-server.lock,
# into $LAB_CACHE/fake-gcs-server-<version>/fake-gcs-server (the lab's cache, as lab/build.sh does for its tools).
# A BUILDINFO file holds the cache key (module, version, sum, flags, Go version): a matching build is reused, so a
# warm run takes milliseconds; cold, about 3 minutes of compiling on 2 cores plus the module downloads.
#
# usage: lab/build-fake-gcs.sh            build when missing, then print the binary's path on stdout
#        lab/build-fake-gcs.sh --status   exit 0 when built (no build, no network)
# env: LAB_CACHE (default ${XDG_CACHE_HOME:-~/.cache}/tpu-gke-lab), LAB_GOCACHE (default $LAB_CACHE/go-build)
# exit: 0 built (or cached), 1 usage or environment error, 3 the build failed.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LOCK=$HERE/fake-gcs-server.lock
if [[ -z "${LAB_BUILD_NICED:-}" ]]; then   # the compile runs at nice 15, like lab/build.sh
  export LAB_BUILD_NICED=1
  exec nice -n 15 bash "${BASH_SOURCE[0]}" "$@"
fi
log() { printf '[fake-gcs build %s] %s\n' "$(date +%T)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

STATUS=0
for a in "$@"; do
  case "$a" in
    --status) STATUS=1 ;;
    -h|--help) sed -n '2,11p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) die "unknown argument: $a (see lab/build-fake-gcs.sh --help)" ;;
  esac
done

# shellcheck source=lab/lock.sh
source "$HERE/lock.sh"
read_lock "$LOCK" || die "missing $LOCK"
for k in FAKE_GCS_SERVER_MODULE FAKE_GCS_SERVER_VERSION FAKE_GCS_SERVER_MODULE_SUM; do
  [[ -n ${!k:-} ]] || die "fake-gcs-server.lock: $k is empty"
done

if ! command -v go >/dev/null && [[ -x /usr/local/go/bin/go ]]; then PATH=/usr/local/go/bin:$PATH; fi
command -v go >/dev/null || die "go not found: install Go 1.26 or later"
CACHE=${LAB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tpu-gke-lab}
OUT=$CACHE/fake-gcs-server-$FAKE_GCS_SERVER_VERSION
BIN=$OUT/fake-gcs-server
export GOTOOLCHAIN=local GOFLAGS="-mod=readonly -buildvcs=false" CGO_ENABLED=0
export GOCACHE=${LAB_GOCACHE:-$CACHE/go-build}
LD="-s -w"
KEY=$(printf '%s\n' "$FAKE_GCS_SERVER_MODULE" "$FAKE_GCS_SERVER_VERSION" "$FAKE_GCS_SERVER_MODULE_SUM" "$LD" \
  "$(go env GOVERSION)" | sha256sum | cut -c1-16)
built() { [[ -x $BIN && -f $OUT/BUILDINFO ]] && grep -qx "key=$KEY" "$OUT/BUILDINFO"; }

if ((STATUS)); then
  if built; then echo "fake-gcs-server: built ($BIN)"; exit 0; fi
  echo "fake-gcs-server: NOT BUILT (would go to $BIN; run lab/build-fake-gcs.sh)"; exit 1
fi
if built; then log "fake-gcs-server $FAKE_GCS_SERVER_VERSION: cached in $OUT"; echo "$BIN"; exit 0; fi

log "fake-gcs-server $FAKE_GCS_SERVER_VERSION is not in the cache: building it (cold: about 3 minutes on 2 cores)"
MOD="$FAKE_GCS_SERVER_MODULE@v$FAKE_GCS_SERVER_VERSION"
sum=$(cd / && go mod download -json "$MOD" | sed -n 's/^[[:space:]]*"Sum": "\(.*\)",\{0,1\}$/\1/p') ||
  { log "go mod download $MOD FAILED"; exit 3; }
[[ $sum == "$FAKE_GCS_SERVER_MODULE_SUM" ]] ||
  { log "$MOD: module sum $sum, the lock says $FAKE_GCS_SERVER_MODULE_SUM"; exit 3; }
T=$CACHE/.tmp-fake-gcs-server; rm -rf "$T"; mkdir -p "$T"
start=$(date +%s)
# `go install MOD@VERSION` builds the module with its own go.mod and go.sum (no replace directives in it).
if ! (cd / && GOBIN=$T go install -trimpath -ldflags "$LD" "$MOD"); then
  log "go install $MOD FAILED (see above)"; rm -rf "$T"; exit 3
fi
{ echo "key=$KEY"; echo "built=$(date -u +%FT%TZ)"; echo "go=$(go env GOVERSION)"; echo "module=$MOD sum=$sum"
  echo "build_seconds=$(( $(date +%s) - start ))"; echo "size=$(stat -c %s "$T/fake-gcs-server")"; } > "$T/BUILDINFO"
rm -rf "$OUT"; mkdir -p "$CACHE"; mv "$T" "$OUT"
log "done -> $BIN"
echo "$BIN"
