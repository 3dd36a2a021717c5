#!/usr/bin/env bash
# lab/build.sh -- build the integration lab's tools from their Go modules into a cache outside the repository:
#   $LAB_CACHE/etcd-<v>/etcd
#   $LAB_CACHE/kubernetes-<v>/{kube-apiserver,kube-controller-manager,kubectl}
#   $LAB_CACHE/pulumi-<v>/{pulumi,pulumi-language-python-exec,pulumi-resource-pulumi-python}
#   $LAB_CACHE/pulumi-kubernetes-<v>/pulumi-resource-kubernetes
# and the TPU7x twin's (docs/lab.md), built only when asked (TOOL twin, or each by name):
#   $LAB_CACHE/kube-scheduler-<v>/kube-scheduler     (wrappers/kubernetes: the lab's Kubernetes module graph)
#   $LAB_CACHE/kueue-<v>/kueue                       (wrappers/kueue)
#   $LAB_CACHE/{jobset,lws,kwok}-<v>/{jobset,lws,kwok} (wrappers/twin: one module graph for the three)
# Versions come from lab/versions.lock, module graphs from lab/wrappers/<tool>/go.{mod,sum} (generated with
# --regen, or when missing). Each output directory has a BUILDINFO file: its cache key (versions, flags, Go
# version, the wrapper's go.mod and go.sum), build times and sizes. A tool whose key matches is not rebuilt,
# so a warm run takes seconds; a cold one about 35 minutes of compiling on 2 cores, plus about 2 minutes and
# 2.8 GB of module downloads (plan on 15 GB of disk for GOMODCACHE, the lab's GOCACHE and the binaries).
#
# usage: lab/build.sh [--regen] [--no-check] [TOOL...]   TOOL = etcd kubernetes pulumi pulumi-kubernetes (the lab,
#                                                         the default), twin (all five below), kube-scheduler
#                                                         kueue jobset lws kwok
#        lab/build.sh --status [TOOL...]                  says what is built, the lab's tools and the twin's (no build,
#                                                         no network); exit 0 when every tool asked (default: the
#                                                         lab's) is built
#   --regen     regenerate the wrappers' go.mod/go.sum from versions.lock (needs the Go module proxy)
#   --no-check  skip the post-build checks (versions, plugin install into a temporary PULUMI_HOME)
# env: LAB_CACHE (default ${XDG_CACHE_HOME:-~/.cache}/tpu-gke-lab), LAB_GOCACHE (default $LAB_CACHE/go-build)
# needs: go (versions.lock GO_VERSION), /usr/bin/time, and the Go module proxy for anything not yet cached.
# exit: 0 built (or cached), 1 usage or environment error, 3 a tool failed to build (named at the end).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LOCK=$HERE/versions.lock

# Every heavy step runs at nice 15: the whole script re-executes itself under nice.
if [[ -z "${LAB_BUILD_NICED:-}" ]]; then
  export LAB_BUILD_NICED=1
  exec nice -n 15 bash "${BASH_SOURCE[0]}" "$@"
fi

REGEN=0 CHECK=1 STATUS=0 TOOLS=()
LAB_TOOLS=(etcd kubernetes pulumi pulumi-kubernetes)
TWIN_TOOLS=(kube-scheduler kueue jobset lws kwok)
for a in "$@"; do
  case "$a" in
    --regen) REGEN=1 ;;
    --no-check) CHECK=0 ;;
    --status) STATUS=1 ;;
    -h|--help) sed -n '2,29p' "${BASH_SOURCE[0]}"; exit 0 ;;
    etcd|kubernetes|pulumi|pulumi-kubernetes|kube-scheduler|kueue|jobset|lws|kwok) TOOLS+=("$a") ;;
    twin) TOOLS+=("${TWIN_TOOLS[@]}") ;;
    *) echo "unknown argument: $a (see lab/build.sh --help)" >&2; exit 1 ;;
  esac
done
ASKED=${#TOOLS[@]}
((ASKED)) || TOOLS=("${LAB_TOOLS[@]}")

log()  { printf '[lab build %s] %s\n' "$(date +%T)" "$*" >&2; }
die()  { log "ERROR: $*"; exit 1; }

# ---- versions.lock and environment --------------------------------------------------------------------
# shellcheck source=lab/lock.sh
source "$HERE/lock.sh"
read_lock "$LOCK" || die "missing $LOCK"
for k in GO_VERSION ETCD_VERSION K8S_VERSION K8S_STAGING_VERSION PULUMI_VERSION K8S_PROVIDER_VERSION K8S_PROVIDER_PSEUDO K8S_PROVIDER_SDK_VERSION \
         KUEUE_VERSION JOBSET_VERSION LWS_VERSION KWOK_VERSION; do
  [[ -n ${!k:-} ]] || die "versions.lock: $k is empty"
done

CACHE=${LAB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tpu-gke-lab}
export GOTOOLCHAIN=${GOTOOLCHAIN:-local}
export GOCACHE=${LAB_GOCACHE:-$CACHE/go-build}      # the lab's own compile cache
export GOFLAGS="-mod=readonly -buildvcs=false"       # builds never edit go.mod/go.sum
export CGO_ENABLED=0
# GOSUMDB stays at its default: where sum.golang.org itself does not resolve, the go command reaches it
# through proxy.golang.org/sumdb/, so no GONOSUMDB or -insecure is needed.
command -v go >/dev/null || die "go not found: install Go $GO_VERSION (versions.lock GO_VERSION)"
gv=$(go env GOVERSION)
[[ $gv == "go$GO_VERSION" || $GOTOOLCHAIN != local ]] || log "WARNING: $gv in use, versions.lock says go$GO_VERSION"

FAILED=() NOTES=()
regen_env() { GOFLAGS=-buildvcs=false "$@"; }   # go get / go mod tidy may edit go.mod

# mod_field MODULE@VERSION FIELD  -> downloads (cached) and prints .GoMod/.Dir of that module version
mod_field() { (cd / && GOFLAGS=-buildvcs=false go mod download -json "$1") | sed -n "s/^[[:space:]]*\"$2\": \"\(.*\)\",\{0,1\}$/\1/p"; }
go_line() { awk '$1=="go"{print $2; exit}' "$1"; }
godebug_line() { awk '$1=="godebug" && $2!="("{print $2; exit}' "$1"; }
# non-local replace directives of a go.mod, one "old=new@ver" per line
nonlocal_replaces() {
  awk '/^replace \(/{b=1;next} b&&/^\)/{b=0;next}
       /^replace /{sub(/^replace /,""); print; next} b{print}' "$1" |
  awk '$2=="=>" && $3!~/^\.\.?\// && NF>=4 {print $1"="$3"@"$4}'
}
# the cache key of a tool: its build inputs plus the wrapper's module graph
key_of() { { printf '%s\n' "$@"; cat "$WDIR/go.mod" "$WDIR/go.sum" 2>/dev/null || true; } | sha256sum | cut -c1-16; }
cached() { [[ -f $1/BUILDINFO ]] && grep -qx "key=$2" "$1/BUILDINFO"; }
# tbuild NAME OUTDIR go-build-args...  -> timed (wall, max RSS) go build
tbuild() {
  local name=$1 out=$2; shift 2
  log "go build $name"
  if ! /usr/bin/time -v -o "$out/time-$name.txt" go build "$@"; then
    log "go build $name FAILED (see above)"; return 1
  fi
  local wall rss
  wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$out/time-$name.txt")
  rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$out/time-$name.txt")
  echo "build.$name wall=$wall maxrss_kb=$rss" >> "$out/BUILDINFO.tmp"
  log "  $name: wall $wall, max RSS $((rss/1024)) MiB"
}
finish() {  # finish TMPDIR FINALDIR KEY
  local t=$1 f=$2 b
  for b in "$t"/*; do
    if [[ -f $b && -x $b ]]; then echo "size.${b##*/}=$(stat -c %s "$b")"; fi
  done >> "$t/BUILDINFO.tmp"
  { echo "key=$3"; echo "built=$(date -u +%FT%TZ)"; echo "go=$(go env GOVERSION)"; cat "$t/BUILDINFO.tmp"; } > "$t/BUILDINFO"
  rm -f "$t/BUILDINFO.tmp"; rm -rf "$f"; mv "$t" "$f"
  log "done -> $f"
}
newtmp() { local t="$CACHE/.tmp-$1"; rm -rf "$t"; mkdir -p "$t"; : > "$t/BUILDINFO.tmp"; echo "$t"; }
cold() { log "$1 is not in the cache: building it from source (cold: $2 on 2 cores)"; }

# ---- build inputs and cache keys, one function per tool (sets WDIR, OUT, LD, TAGS, KEY) -------------------
inputs_etcd() {
  WDIR=$HERE/wrappers/etcd OUT=$CACHE/etcd-$ETCD_VERSION TAGS=
  LD="-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=${ETCD_COMMIT:0:7}"
  KEY=$(key_of etcd "$ETCD_VERSION" "$ETCD_COMMIT" "$LD" "$(go env GOVERSION)")
}
inputs_kubernetes() {
  WDIR=$HERE/wrappers/kubernetes OUT=$CACHE/kubernetes-$K8S_VERSION
  local minor=${K8S_VERSION#*.} p; minor=${minor%%.*}
  LD="-s -w"
  for p in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
    LD+=" -X $p.gitVersion=v$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.buildDate=$K8S_SOURCE_TIME"
    [[ -z $K8S_COMMIT ]] || LD+=" -X $p.gitCommit=$K8S_COMMIT -X $p.gitTreeState=clean"
  done
  TAGS=selinux,notest,grpcnotrace      # the non-debug tags of hack/lib/golang.sh
  KEY=$(key_of kubernetes "$K8S_VERSION" "$LD" "$TAGS" "$(go env GOVERSION)")
}
inputs_pulumi() {
  WDIR=$HERE/wrappers/pulumi OUT=$CACHE/pulumi-$PULUMI_VERSION
  LD="-w -s -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=v$PULUMI_VERSION"
  TAGS=osusergo,grpcnotrace            # .goreleaser.yml
  KEY=$(key_of pulumi "$PULUMI_VERSION" "${PULUMI_LANGUAGE_PYTHON_PSEUDO:-}" "$LD" "$TAGS" "$(go env GOVERSION)")
}
PROV=github.com/pulumi/pulumi-kubernetes/provider/v4
inputs_pulumi_kubernetes() { inputs_provider; }
inputs_provider() {
  WDIR=$HERE/wrappers/pulumi-kubernetes OUT=$CACHE/pulumi-kubernetes-$K8S_PROVIDER_VERSION TAGS=
  LD="-s -w -X $PROV/pkg/version.Version=$K8S_PROVIDER_VERSION"
  KEY=$(key_of provider "$K8S_PROVIDER_VERSION" "$K8S_PROVIDER_PSEUDO" "$LD" "$(go env GOVERSION)")
}

# The twin's tools. kube-scheduler: the kubernetes wrapper, LD and TAGS as kube-apiserver's, a key and directory
# of its own so that adding it left the lab's kubernetes key (and its cached build) as it was.
inputs_kube_scheduler() {
  inputs_kubernetes
  OUT=$CACHE/kube-scheduler-$K8S_VERSION
  KEY=$(key_of kube-scheduler "$K8S_VERSION" "$LD" "$TAGS" "$(go env GOVERSION)")
}
# The twin's controllers, one row each: module, main package, wrapper (Kueue has its own module graph; JobSet, LWS and
# kwok share lab/wrappers/twin), and the variable its version is stamped into with -X, as each project's Makefile
# stamps it (kueue, jobset, lws: Makefile LD_FLAGS, <module>/pkg/version; kwok: hack/releases.sh, pkg/consts.Version).
# A controller whose <TOOL>_COMMIT versions.lock knows gets <module>/pkg/version.GitCommit as well. The version is
# <TOOL>_VERSION of versions.lock.
declare -A CONTROLLER=(
  [kueue]="sigs.k8s.io/kueue sigs.k8s.io/kueue/cmd/kueue kueue sigs.k8s.io/kueue/pkg/version.GitVersion"
  [jobset]="sigs.k8s.io/jobset sigs.k8s.io/jobset twin sigs.k8s.io/jobset/pkg/version.GitVersion"
  [lws]="sigs.k8s.io/lws sigs.k8s.io/lws/cmd twin sigs.k8s.io/lws/pkg/version.GitVersion"
  [kwok]="sigs.k8s.io/kwok sigs.k8s.io/kwok/cmd/kwok twin sigs.k8s.io/kwok/pkg/consts.Version"
)
controller_version() { local v=${1^^}_VERSION; echo "${!v}"; }
# inputs_controller TOOL: its WDIR, OUT, LD and KEY (a changed row or version is a new key: that tool rebuilds)
inputs_controller() {
  local tool=$1 mod pkg wrapper stamp commit=${1^^}_COMMIT ver; ver=$(controller_version "$1")
  read -r mod pkg wrapper stamp <<<"${CONTROLLER[$tool]}"
  WDIR=$HERE/wrappers/$wrapper OUT=$CACHE/$tool-$ver TAGS=
  LD="-s -w -X $stamp=v$ver"
  [[ -z ${!commit:-} ]] || LD+=" -X $mod/pkg/version.GitCommit=${!commit}"
  KEY=$(key_of "$tool" "$ver" "$LD" "$(go env GOVERSION)")
}

# ---- etcd ---------------------------------------------------------------------------------------------
gen_etcd() {
  local M; M=$(mod_field "go.etcd.io/etcd/server/v3@v$ETCD_VERSION" GoMod)
  rm -f go.mod go.sum
  regen_env go mod init lab.local/wrappers/etcd
  regen_env go mod edit -go="$(go_line "$M")"
  # server/go.mod's replaces point at ../api etc. of the same commit, whose tags its requirements name already
  regen_env go get -tool "go.etcd.io/etcd/server/v3@v$ETCD_VERSION"
  regen_env go mod tidy
}
build_etcd() {
  mkdir -p "$HERE/wrappers/etcd"; cd "$HERE/wrappers/etcd"
  if ((REGEN)) || [[ ! -s go.mod ]]; then log "generating wrappers/etcd"; gen_etcd; fi
  [[ $(go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3) == "v$ETCD_VERSION" ]] ||
    die "wrappers/etcd does not pin etcd v$ETCD_VERSION; rerun with --regen"
  inputs_etcd
  if cached "$OUT" "$KEY"; then log "etcd $ETCD_VERSION: cached in $OUT"; return; fi
  cold "etcd $ETCD_VERSION" "about 2 min"
  local T; T=$(newtmp etcd)
  /usr/bin/time -v -o "$T/time-download.txt" go mod download
  tbuild etcd "$T" -trimpath -ldflags "$LD" -o "$T/etcd" go.etcd.io/etcd/server/v3 || { FAILED+=("etcd"); return; }
  finish "$T" "$OUT" "$KEY"
}

# ---- kube-apiserver, kube-controller-manager, kubectl ----------------------------------------------------
gen_kubernetes() {
  local M; M=$(mod_field "k8s.io/kubernetes@v$K8S_VERSION" GoMod)
  rm -f go.mod go.sum
  regen_env go mod init lab.local/wrappers/kubernetes
  regen_env go mod edit -go="$(go_line "$M")"
  local gd; gd=$(godebug_line "$M"); [[ -z $gd ]] || regen_env go mod edit -godebug="$gd"
  # Every k8s.io/* module k8s.io/kubernetes requires at the placeholder v0.0.0 is a staging module it replaces
  # with ./staging/src/k8s.io/...: pin each to the published v0.N.P. Staging modules it replaces but does
  # not require (sample-cli-plugin, sample-controller) get no replace: their v0.N.P may not be served.
  local m n=0
  for m in $(awk '/^require \(/{r=1;next} r&&/^\)/{r=0} r&&$1~/^k8s\.io\//&&$2=="v0.0.0"{print $1}' "$M"); do
    grep -q "^[[:space:]]*$m => ./staging/" "$M" || die "$m is required at v0.0.0 but not replaced to staging"
    regen_env go mod edit -replace="$m=$m@v$K8S_STAGING_VERSION"; n=$((n+1))
  done
  log "wrappers/kubernetes: $n staging replaces -> v$K8S_STAGING_VERSION"
  # kube-scheduler (the twin's) joined after the committed wrapper was generated: that wrapper builds it already
  # (every module its packages need is in the graph: go build -mod=readonly succeeds), and the next regen, with a
  # Kubernetes bump, records it as a tool so that go mod tidy keeps its modules
  regen_env go get -tool "k8s.io/kubernetes/cmd/kube-apiserver@v$K8S_VERSION" \
    "k8s.io/kubernetes/cmd/kube-controller-manager@v$K8S_VERSION" "k8s.io/kubernetes/cmd/kubectl@v$K8S_VERSION" \
    "k8s.io/kubernetes/cmd/kube-scheduler@v$K8S_VERSION"
  regen_env go mod tidy
}
build_kubernetes() {
  mkdir -p "$HERE/wrappers/kubernetes"; cd "$HERE/wrappers/kubernetes"
  if ((REGEN)) || [[ ! -s go.mod ]]; then log "generating wrappers/kubernetes"; gen_kubernetes; fi
  [[ $(go list -m -f '{{.Version}}' k8s.io/kubernetes) == "v$K8S_VERSION" ]] ||
    die "wrappers/kubernetes does not pin k8s.io/kubernetes v$K8S_VERSION; rerun with --regen"
  local ev; ev=$(go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)
  [[ $ev == "v$ETCD_VERSION" ]] || log "WARNING: kubernetes v$K8S_VERSION builds against etcd $ev, versions.lock has $ETCD_VERSION"
  inputs_kubernetes
  if cached "$OUT" "$KEY"; then log "kubernetes $K8S_VERSION: cached in $OUT"; return; fi
  cold "kubernetes $K8S_VERSION" "about 11 min"
  local T c; T=$(newtmp kubernetes)
  /usr/bin/time -v -o "$T/time-download.txt" go mod download
  for c in kube-apiserver kube-controller-manager kubectl; do
    tbuild "$c" "$T" -trimpath -tags "$TAGS" -ldflags "$LD" -o "$T/$c" "k8s.io/kubernetes/cmd/$c" ||
      { FAILED+=("kubernetes/$c"); return; }
  done
  finish "$T" "$OUT" "$KEY"
}

# kube-scheduler (the twin's): the same wrapper; its packages are in the module graph kube-apiserver's need
build_kube_scheduler() {
  mkdir -p "$HERE/wrappers/kubernetes"; cd "$HERE/wrappers/kubernetes"
  if ((REGEN)) || [[ ! -s go.mod ]]; then log "generating wrappers/kubernetes"; gen_kubernetes; fi
  [[ $(go list -m -f '{{.Version}}' k8s.io/kubernetes) == "v$K8S_VERSION" ]] ||
    die "wrappers/kubernetes does not pin k8s.io/kubernetes v$K8S_VERSION; rerun with --regen"
  inputs_kube_scheduler
  if cached "$OUT" "$KEY"; then log "kube-scheduler $K8S_VERSION: cached in $OUT"; return; fi
  cold "kube-scheduler $K8S_VERSION" "about 3 min, seconds with kube-apiserver built"
  local T; T=$(newtmp kube-scheduler)
  /usr/bin/time -v -o "$T/time-download.txt" go mod download
  tbuild kube-scheduler "$T" -trimpath -tags "$TAGS" -ldflags "$LD" -o "$T/kube-scheduler" k8s.io/kubernetes/cmd/kube-scheduler ||
    { FAILED+=("kube-scheduler"); return; }
  finish "$T" "$OUT" "$KEY"
}

# ---- the twin's controllers: Kueue (its own wrapper), JobSet, LeaderWorkerSet and kwok (one wrapper) ---------
# gen_controllers WRAPPER: the wrapper of the CONTROLLER rows that name it, at the highest go line of their modules
gen_controllers() {
  local wanted=$1 t mod pkg wrapper stamp ver M go=0 g tools=()
  rm -f go.mod go.sum
  regen_env go mod init "lab.local/wrappers/$wanted"
  for t in "${!CONTROLLER[@]}"; do
    read -r mod pkg wrapper stamp <<<"${CONTROLLER[$t]}"
    [[ $wrapper == "$wanted" ]] || continue
    ver=$(controller_version "$t"); tools+=("$pkg@v$ver")
    M=$(mod_field "$mod@v$ver" GoMod)
    [[ -z $(nonlocal_replaces "$M") ]] || die "$mod@v$ver has replace directives: copy them as gen_pulumi does"
    g=$(go_line "$M"); [[ $go == 0 ]] || [[ $(printf '%s\n%s\n' "$go" "$g" | sort -V | tail -1) == "$g" ]] && go=$g
  done
  regen_env go mod edit -go="$go"
  # 'go install m@v' fails for jobset and lws: the proxy refuses their version lists (docs/lab.md); a wrapper asks
  # for the exact versions only
  regen_env go get -tool "${tools[@]}"
  regen_env go mod tidy
}
# build_controller TOOL: a row of CONTROLLER; its wrapper is generated when missing or with --regen
build_controller() {
  local tool=$1 mod pkg wrapper stamp ver; ver=$(controller_version "$tool")
  read -r mod pkg wrapper stamp <<<"${CONTROLLER[$tool]}"
  mkdir -p "$HERE/wrappers/$wrapper"; cd "$HERE/wrappers/$wrapper"
  if ((REGEN)) && [[ ${REGENERATED:-} != *" $wrapper "* ]] || [[ ! -s go.mod ]]; then
    log "generating wrappers/$wrapper"; gen_controllers "$wrapper"; REGENERATED+=" $wrapper "
  fi
  [[ $(go list -m -f '{{.Version}}' "$mod") == "v$ver" ]] ||
    die "wrappers/$wrapper does not pin $mod v$ver; rerun with --regen"
  inputs_controller "$tool"
  if cached "$OUT" "$KEY"; then log "$tool $ver: cached in $OUT"; return; fi
  # measured 2026-12-04, an empty compile cache, niced, load about 3.5: kueue 3:00, then jobset 1:17, lws 0:05 and
  # kwok 0:14 (the three share their dependencies' compile)
  case $tool in kueue) cold "$tool $ver" "about 3 min" ;; jobset) cold "$tool $ver" "about 1.5 min" ;; *) cold "$tool $ver" "under a minute after jobset" ;; esac
  local T; T=$(newtmp "$tool")
  /usr/bin/time -v -o "$T/time-download.txt" go mod download
  tbuild "$tool" "$T" -trimpath -ldflags "$LD" -o "$T/$tool" "$pkg" || { FAILED+=("$tool"); return; }
  echo "source=$mod@v$ver graph: $(go list -m -f '{{.Path}}@{{.Version}}' k8s.io/api sigs.k8s.io/controller-runtime | tr '\n' ' ')" >> "$T/BUILDINFO.tmp"
  finish "$T" "$OUT" "$KEY"
}
REGENERATED=" "

# ---- Pulumi CLI (and the Python language host, once the proxy serves it) ------------------------------------
PY_HOST=github.com/pulumi/pulumi/sdk/python/cmd/pulumi-language-python/v3
gen_pulumi() {
  local M r; M=$(mod_field "github.com/pulumi/pulumi/pkg/v3@v$PULUMI_VERSION" GoMod)
  rm -f go.mod go.sum
  regen_env go mod init lab.local/wrappers/pulumi
  regen_env go mod edit -go="$(go_line "$M")"
  # a dependency's replaces are ignored: copy pkg/go.mod's non-local ones (the clipboard fork) into the wrapper
  for r in $(nonlocal_replaces "$M"); do regen_env go mod edit -replace="$r"; done
  regen_env go get -tool "github.com/pulumi/pulumi/pkg/v3/cmd/pulumi@v$PULUMI_VERSION"
  [[ -z ${PULUMI_LANGUAGE_PYTHON_PSEUDO:-} ]] || regen_env go get -tool "$PY_HOST@$PULUMI_LANGUAGE_PYTHON_PSEUDO"
  # the host's go.mod pins an older pkg/v3: pin pkg and sdk to the release explicitly
  regen_env go get "github.com/pulumi/pulumi/pkg/v3@v$PULUMI_VERSION" "github.com/pulumi/pulumi/sdk/v3@v$PULUMI_VERSION"
  regen_env go mod tidy
}
build_pulumi() {
  mkdir -p "$HERE/wrappers/pulumi"; cd "$HERE/wrappers/pulumi"
  local want_host=0; [[ -z ${PULUMI_LANGUAGE_PYTHON_PSEUDO:-} ]] || want_host=1
  if ((REGEN)) || [[ ! -s go.mod ]] || { ((want_host)) && ! grep -q "$PY_HOST" go.mod; }; then
    log "generating wrappers/pulumi"; gen_pulumi
  fi
  local m
  for m in pkg sdk; do
    [[ $(go list -m -f '{{.Version}}' "github.com/pulumi/pulumi/$m/v3") == "v$PULUMI_VERSION" ]] ||
      die "wrappers/pulumi does not pin $m/v3 v$PULUMI_VERSION; rerun with --regen"
  done
  [[ $PULUMI_VERSION == "${PULUMI_SDK_PIN:-$PULUMI_VERSION}" ]] ||
    NOTES+=("Pulumi CLI v$PULUMI_VERSION, Python SDK pin $PULUMI_SDK_PIN: pkg/v3 v$PULUMI_SDK_PIN is not served, the CLI is the nearest newer one")
  inputs_pulumi
  if cached "$OUT" "$KEY"; then
    log "pulumi $PULUMI_VERSION: cached in $OUT"
  else
    cold "pulumi $PULUMI_VERSION" "about 7 min"
    local T; T=$(newtmp pulumi)
    /usr/bin/time -v -o "$T/time-download.txt" go mod download
    tbuild pulumi "$T" -trimpath -tags "$TAGS" -ldflags "$LD" -o "$T/pulumi" github.com/pulumi/pulumi/pkg/v3/cmd/pulumi ||
      { FAILED+=("pulumi"); return; }
    if ((want_host)); then
      tbuild pulumi-language-python "$T" -trimpath -tags "$TAGS" -ldflags "$LD" -o "$T/pulumi-language-python" "$PY_HOST" ||
        FAILED+=("pulumi-language-python")
    fi
    # the host's exec shim and the dynamic-provider script ship in the sdk/v3 module zip (read-only files there)
    local SDK; SDK=$(go list -m -f '{{.Dir}}' github.com/pulumi/pulumi/sdk/v3)
    install -m 0755 "$SDK/python/cmd/pulumi-language-python-exec" "$SDK/python/dist/pulumi-resource-pulumi-python" "$T/"
    echo "language_host=${PULUMI_LANGUAGE_PYTHON_PSEUDO:-NOT-BUILT}" >> "$T/BUILDINFO.tmp"
    finish "$T" "$OUT" "$KEY"
  fi
  if [[ ! -x $OUT/pulumi-language-python ]]; then
    NOTES+=("pulumi-language-python is not built: the proxy refuses $PY_HOST at every version (403), so" \
            "  'pulumi preview' in the project directory and 'pulumi preview --policy-pack' cannot run here. make itest" \
            "  does not need it: it runs the program through the Automation API's inline program.")
  fi
}

# ---- pulumi-resource-kubernetes ------------------------------------------------------------------------
gen_provider() {  # inside a writable copy of the module: upstream go.mod/go.sum minus its local replaces
  local r
  for r in $(awk '/^replace \(/{b=1;next} b&&/^\)/{b=0;next} /^replace /{sub(/^replace /,"");print;next} b{print}' go.mod |
             awk '$2=="=>" && $3~/^\.\.?\// {print $1}'); do
    regen_env go mod edit -dropreplace="$r"
  done
  # provider code imports sdk/v4 (pkg/helm, pkg/provider/yaml/v2, pkg/provider/helm/v4, pkg/gen), which upstream
  # takes from ../sdk of the same commit; without that replace, require the sdk/v4 tag of the same release
  regen_env go get "github.com/pulumi/pulumi-kubernetes/sdk/v4@v$K8S_PROVIDER_SDK_VERSION"
  regen_env go mod tidy
}
build_provider() {
  local WD=$HERE/wrappers/pulumi-kubernetes; mkdir -p "$WD"
  [[ ${K8S_PROVIDER_WANTED:-$K8S_PROVIDER_VERSION} == "$K8S_PROVIDER_VERSION" ]] ||
    NOTES+=("pulumi-resource-kubernetes $K8S_PROVIDER_VERSION is built, not the project's pin $K8S_PROVIDER_WANTED (not served);" \
            "  the lab venv uses pulumi-kubernetes==$K8S_PROVIDER_VERSION to match (lab/requirements.txt)")
  if ((!REGEN)) && [[ -s $WD/go.mod ]]; then
    inputs_provider
    if cached "$OUT" "$KEY"; then log "pulumi-resource-kubernetes $K8S_PROVIDER_VERSION: cached in $OUT"; return; fi
  fi
  local D; D=$(mod_field "$PROV@$K8S_PROVIDER_PSEUDO" Dir)
  [[ -d $D ]] || { FAILED+=("pulumi-resource-kubernetes ($PROV@$K8S_PROVIDER_PSEUDO not downloadable)"); return; }
  # go:embed needs the generated schema-embed.json and terraform-mapping-embed.json next to main.go, and the
  # module cache is read-only: generate and build in a writable copy, with the wrapper's go.mod/go.sum laid over
  local S=$CACHE/src/pulumi-kubernetes-$K8S_PROVIDER_PSEUDO
  rm -rf "$S"; mkdir -p "$(dirname "$S")"; cp -r "$D" "$S"; chmod -R u+w "$S"
  cd "$S"
  if ((REGEN)) || [[ ! -s $WD/go.mod ]]; then
    log "generating wrappers/pulumi-kubernetes"; gen_provider; cp go.mod go.sum "$WD/"
  else
    cp "$WD/go.mod" "$WD/go.sum" .
  fi
  [[ $(go list -m -f '{{.Version}}' github.com/pulumi/pulumi-kubernetes/sdk/v4) == "v$K8S_PROVIDER_SDK_VERSION" ]] ||
    die "wrappers/pulumi-kubernetes does not pin sdk/v4 v$K8S_PROVIDER_SDK_VERSION; rerun with --regen"
  inputs_provider
  if cached "$OUT" "$KEY"; then log "pulumi-resource-kubernetes $K8S_PROVIDER_VERSION: cached in $OUT"; cd "$WD"; rm -rf "$S"; return; fi
  cold "pulumi-resource-kubernetes $K8S_PROVIDER_VERSION" "about 15 min"
  local T; T=$(newtmp pulumi-kubernetes)
  /usr/bin/time -v -o "$T/time-download.txt" go mod download
  log "go generate (VERSION=$K8S_PROVIDER_VERSION)"
  if ! VERSION=$K8S_PROVIDER_VERSION /usr/bin/time -v -o "$T/time-generate.txt" go generate ./cmd/pulumi-resource-kubernetes; then
    FAILED+=("pulumi-resource-kubernetes (go generate)"); return
  fi
  echo "generate wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$T/time-generate.txt") maxrss_kb=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$T/time-generate.txt")" >> "$T/BUILDINFO.tmp"
  tbuild pulumi-resource-kubernetes "$T" -trimpath -ldflags "$LD" -o "$T/pulumi-resource-kubernetes" ./cmd/pulumi-resource-kubernetes ||
    { FAILED+=("pulumi-resource-kubernetes"); return; }
  echo "source=$PROV@$K8S_PROVIDER_PSEUDO commit=$K8S_PROVIDER_COMMIT sdk/v4=v$K8S_PROVIDER_SDK_VERSION wanted=${K8S_PROVIDER_WANTED:-}" >> "$T/BUILDINFO.tmp"
  cd "$WD"; rm -rf "$S"
  finish "$T" "$OUT" "$KEY"
}

# ---- checks -------------------------------------------------------------------------------------------
run_checks() {
  local E=$CACHE/etcd-$ETCD_VERSION K=$CACHE/kubernetes-$K8S_VERSION P=$CACHE/pulumi-$PULUMI_VERSION
  local R=$CACHE/pulumi-kubernetes-$K8S_PROVIDER_VERSION
  [[ ! -x $E/etcd ]] || log "check: $("$E/etcd" --version | head -1)"
  if [[ -x $K/kube-apiserver ]]; then
    log "check: $("$K/kube-apiserver" --version) / kube-controller-manager $("$K/kube-controller-manager" --version)"
    log "check: kubectl $("$K/kubectl" version --client -o json | tr -d ' \n' | sed 's/.*"gitVersion":"\([^"]*\)".*/\1/')"
  fi
  if [[ -x $P/pulumi ]]; then
    local H; H=$(mktemp -d /tmp/lab-pulumi-home.XXXXXX)
    local pv; pv=$(PULUMI_HOME=$H PULUMI_SKIP_UPDATE_CHECK=true "$P/pulumi" version)
    log "check: pulumi version -> $pv"; [[ $pv == "v$PULUMI_VERSION" ]] || FAILED+=("pulumi version reports $pv")
    if [[ -x $R/pulumi-resource-kubernetes ]]; then
      PULUMI_HOME=$H PULUMI_SKIP_UPDATE_CHECK=true PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true \
        "$P/pulumi" plugin install resource kubernetes "$K8S_PROVIDER_VERSION" --file "$R/pulumi-resource-kubernetes" >&2
      local ls; ls=$(PULUMI_HOME=$H PULUMI_SKIP_UPDATE_CHECK=true "$P/pulumi" plugin ls)
      log "check: pulumi plugin ls -> $(echo "$ls" | awk '$1=="kubernetes"{print $1, $2, $3}')"
      echo "$ls" | awk -v v="$K8S_PROVIDER_VERSION" '$1=="kubernetes" && $2=="resource" && $3==v {f=1} END{exit !f}' ||
        FAILED+=("pulumi plugin ls does not list resource kubernetes $K8S_PROVIDER_VERSION")
    fi
    rm -rf "$H"
  fi
  # the lab venv's Python SDK must ask the engine for exactly the provider version built here
  local pin; pin=$(sed -n 's/^pulumi-kubernetes==\([^[:space:]]*\).*/\1/p' "$HERE/requirements.txt" 2>/dev/null || true)
  if [[ -n $pin && $pin != "$K8S_PROVIDER_VERSION" ]]; then
    FAILED+=("lab/requirements.txt pins pulumi-kubernetes==$pin, the provider built is $K8S_PROVIDER_VERSION")
  fi
}

status() {
  local t missing=0 shown=("${TOOLS[@]}")
  # asked for nothing: the lab's tools decide the exit status, the twin's are shown beside them
  ((ASKED)) || shown+=("${TWIN_TOOLS[@]}")
  for t in "${shown[@]}"; do
    if [[ -n ${CONTROLLER[$t]:-} ]]; then inputs_controller "$t"; else "inputs_${t//-/_}"; fi
    if [[ -s $WDIR/go.mod ]] && cached "$OUT" "$KEY"; then echo "$t: built ($OUT)"
    else
      echo "$t: NOT BUILT (would go to $OUT)"
      [[ " ${TOOLS[*]} " != *" $t "* ]] || missing=1
    fi
  done
  return $missing
}
if ((STATUS)); then status; exit $?; fi

mkdir -p "$CACHE"
command -v /usr/bin/time >/dev/null || [[ -x /usr/bin/time ]] || die "/usr/bin/time missing (apt-get install -y time)"
START=$(date +%s)
for t in "${TOOLS[@]}"; do
  case $t in
    etcd) build_etcd ;;
    kubernetes) build_kubernetes ;;
    pulumi) build_pulumi ;;
    pulumi-kubernetes) build_provider ;;
    kube-scheduler) build_kube_scheduler ;;
    kueue|jobset|lws|kwok) build_controller "$t" ;;
  esac
done
((CHECK)) && run_checks
log "total wall: $(( $(date +%s) - START ))s; cache: $CACHE"
if ((${#NOTES[@]})); then log "NOTES:"; for n in "${NOTES[@]}"; do log "  $n"; done; fi
if ((${#FAILED[@]})); then
  log "NOT BUILT / FAILED:"; for f in "${FAILED[@]}"; do log "  - $f"; done
  exit 3
fi
exit 0
