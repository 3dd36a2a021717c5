#!/usr/bin/env bash
# lab/controlplane.sh -- etcd, kube-apiserver and kube-controller-manager on 127.0.0.1 for the integration lab,
# from the binaries lab/build.sh puts in the cache. make itest runs it in a temporary directory and always stops it.
#
# usage: LAB_RUN=<dir> lab/controlplane.sh start|stop [--clean | COMPONENT]|status|env|restart
#   start   generate the PKI into $LAB_RUN/pki (openssl, once per run dir), start etcd, kube-apiserver and
#           kube-controller-manager, wait for etcd /health, apiserver /readyz, KCM /healthz and the default
#           ServiceAccount (made by KCM); write $LAB_RUN/kubeconfig (file references) and
#           $LAB_RUN/kubeconfig.inline (the same credentials inline, as a stack config value can carry them)
#   stop    stop the three processes by their pid files (TERM, then KILL after 20 s), newest first;
#           --clean also deletes $LAB_RUN; a COMPONENT (etcd, kube-apiserver, kube-controller-manager) stops
#           that one alone, as a fault for the lab to inject; `start` brings it back (what runs is left alone)
#   status  pids, memory, liveness and readiness
#   env     print 'export KUBECONFIG=...' (eval "$(lab/controlplane.sh env)")
# env:
#   LAB_RUN    run dir: pki/, etcd data, logs/, *.pid, kubeconfigs      (default /tmp/tpu-gke-lab-cp)
#   LAB_CACHE  binaries built by lab/build.sh                           (default ${XDG_CACHE_HOME:-~/.cache}/tpu-gke-lab)
#   ETCD_PORT (12379) ETCD_PEER_PORT (12380) APISERVER_PORT (16443) KCM_PORT (20257)
#   READY_TIMEOUT seconds per component (default 120)
# Everything listens on 127.0.0.1 only. Service ClusterIPs come from 127.100.0.0/24 and webhooks are routed to
# Service endpoints (--enable-aggregator-routing): no kubelet runs, so there are none, and the apiserver never
# dials a webhook Service; if it did, the address would be on this host's loopback.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LOCK=$HERE/versions.lock
# shellcheck source=lab/lock.sh
source "$HERE/lock.sh"
read_lock "$LOCK"

CACHE=${LAB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tpu-gke-lab}
RUN=${LAB_RUN:-/tmp/tpu-gke-lab-cp}
ETCD_BIN=$CACHE/etcd-$ETCD_VERSION/etcd
KBIN=$CACHE/kubernetes-$K8S_VERSION
ETCD_PORT=${ETCD_PORT:-12379} ETCD_PEER_PORT=${ETCD_PEER_PORT:-12380}
APISERVER_PORT=${APISERVER_PORT:-16443} KCM_PORT=${KCM_PORT:-20257}
READY_TIMEOUT=${READY_TIMEOUT:-120}
SERVICE_CIDR=${SERVICE_CIDR:-127.100.0.0/24} SERVICE_IP=${SERVICE_IP:-127.100.0.1}
PKI=$RUN/pki LOGS=$RUN/logs
COMPONENTS=(etcd kube-apiserver kube-controller-manager)

log() { printf '[lab cp %s] %s\n' "$(date +%T)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# ---- PKI ----------------------------------------------------------------------------------------------
gen_pki() {
  [[ -s $PKI/.done ]] && return
  command -v openssl >/dev/null || die "openssl missing (apt-get install -y openssl)"
  mkdir -p "$PKI"; chmod 700 "$PKI"
  local o=(-days 3650 -sha256)
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$PKI/ca.key" -out "$PKI/ca.crt" "${o[@]}" \
    -subj "/CN=tpu-gke-lab-ca" -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" 2>/dev/null
  # leaf NAME SUBJ EXTS
  leaf() {
    openssl req -newkey rsa:2048 -nodes -keyout "$PKI/$1.key" -out "$PKI/$1.csr" -subj "$2" 2>/dev/null
    printf '%s\n' "$3" > "$PKI/$1.ext"
    openssl x509 -req -in "$PKI/$1.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
      -out "$PKI/$1.crt" "${o[@]}" -extfile "$PKI/$1.ext" 2>/dev/null
    rm -f "$PKI/$1.csr" "$PKI/$1.ext"
  }
  leaf apiserver "/CN=kube-apiserver" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,IP:$SERVICE_IP,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  local client="basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth"
  leaf admin "/O=system:masters/CN=lab-admin" "$client"                    # cluster-admin via system:masters
  leaf kcm "/CN=system:kube-controller-manager" "$client"                  # bootstrap RBAC binds this user
  # front-proxy CA + client: the apiserver publishes requestheader-client-ca in kube-system/
  # extension-apiserver-authentication; without it KCM's delegated authn logs "missing content for CA bundle"
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$PKI/front-proxy-ca.key" -out "$PKI/front-proxy-ca.crt" "${o[@]}" \
    -subj "/CN=tpu-gke-lab-front-proxy-ca" -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -keyout "$PKI/front-proxy-client.key" -out "$PKI/front-proxy-client.csr" \
    -subj "/CN=front-proxy-client" 2>/dev/null
  printf '%s\n' "$client" > "$PKI/fp.ext"
  openssl x509 -req -in "$PKI/front-proxy-client.csr" -CA "$PKI/front-proxy-ca.crt" -CAkey "$PKI/front-proxy-ca.key" \
    -CAcreateserial -out "$PKI/front-proxy-client.crt" "${o[@]}" -extfile "$PKI/fp.ext" 2>/dev/null
  rm -f "$PKI/front-proxy-client.csr" "$PKI/fp.ext"
  openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null
  openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
  chmod 600 "$PKI"/*.key
  date -u +%FT%TZ > "$PKI/.done"
  log "PKI generated in $PKI"
}

kubeconfig() {  # kubeconfig FILE USER
  cat > "$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: lab
  cluster:
    server: https://127.0.0.1:$APISERVER_PORT
    certificate-authority: $PKI/ca.crt
users:
- name: $2
  user:
    client-certificate: $PKI/$2.crt
    client-key: $PKI/$2.key
contexts:
- name: lab
  context: {cluster: lab, user: $2}
current-context: lab
EOF
}
inline_kubeconfig() {  # inline_kubeconfig FILE USER: the same, with the CA, certificate and key inline
  local b64=(base64 -w0)
  cat > "$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: lab
  cluster:
    server: https://127.0.0.1:$APISERVER_PORT
    certificate-authority-data: $("${b64[@]}" "$PKI/ca.crt")
users:
- name: $2
  user:
    client-certificate-data: $("${b64[@]}" "$PKI/$2.crt")
    client-key-data: $("${b64[@]}" "$PKI/$2.key")
contexts:
- name: lab
  context: {cluster: lab, user: $2}
current-context: lab
EOF
  chmod 600 "$1"
}

# ---- process helpers ----------------------------------------------------------------------------------
pid_of() {  # prints the pid if its pid file names a live process of that binary
  local f=$RUN/$1.pid p
  [[ -s $f ]] || return 1
  p=$(<"$f")
  [[ -r /proc/$p/cmdline ]] && tr '\0' ' ' < "/proc/$p/cmdline" | grep -q -- "/$1 " && echo "$p"
}
launch() {  # launch NAME BIN ARGS...
  local name=$1 bin=$2; shift 2
  [[ -x $bin ]] || die "$bin not found: run lab/build.sh first"
  if pid_of "$name" >/dev/null; then log "$name already running (pid $(pid_of "$name"))"; return; fi
  nohup "$bin" "$@" >> "$LOGS/$name.log" 2>&1 < /dev/null &
  echo $! > "$RUN/$name.pid"
  log "started $name pid $!"
}
wait_for() {  # wait_for NAME CMD...   (CMD must succeed)
  local name=$1 t0=$SECONDS; shift
  until "$@" >/dev/null 2>&1; do
    pid_of "$name" >/dev/null || { tail -n 30 "$LOGS/$name.log" >&2; die "$name exited (log: $LOGS/$name.log)"; }
    (( SECONDS - t0 < READY_TIMEOUT )) || { tail -n 30 "$LOGS/$name.log" >&2; die "$name not ready after ${READY_TIMEOUT}s"; }
    sleep 1
  done
  log "$name ready after $((SECONDS - t0))s"
}
ACURL=(curl -sf --max-time 5 --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key")
etcd_ok()   { curl -sf --max-time 3 "http://127.0.0.1:$ETCD_PORT/health" | grep -q '"health":"true"'; }
api_ready() { [[ $("${ACURL[@]}" "https://127.0.0.1:$APISERVER_PORT/readyz") == ok ]]; }
kcm_ok()    { [[ $(curl -sfk --max-time 3 "https://127.0.0.1:$KCM_PORT/healthz") == ok ]]; }
sa_ok()     { "$KBIN/kubectl" --kubeconfig "$RUN/kubeconfig" get serviceaccount default -n default; }

# ---- subcommands --------------------------------------------------------------------------------------
start() {
  mkdir -p "$RUN" "$LOGS"; chmod 700 "$RUN"
  gen_pki
  kubeconfig "$RUN/kubeconfig" admin
  kubeconfig "$RUN/kcm.kubeconfig" kcm
  inline_kubeconfig "$RUN/kubeconfig.inline" admin
  launch etcd "$ETCD_BIN" --name lab --data-dir "$RUN/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "lab=http://127.0.0.1:$ETCD_PEER_PORT" --unsafe-no-fsync=true --log-level=warn
  wait_for etcd etcd_ok
  launch kube-apiserver "$KBIN/kube-apiserver" \
    --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
    --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$APISERVER_PORT" \
    --cert-dir="$PKI/apiserver-generated" \
    --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
    --client-ca-file="$PKI/ca.crt" --authorization-mode=RBAC \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
    --service-cluster-ip-range="$SERVICE_CIDR" --allow-privileged=true --profiling=false \
    --requestheader-client-ca-file="$PKI/front-proxy-ca.crt" --requestheader-allowed-names=front-proxy-client \
    --requestheader-username-headers=X-Remote-User --requestheader-group-headers=X-Remote-Group \
    --requestheader-extra-headers-prefix=X-Remote-Extra- \
    --proxy-client-cert-file="$PKI/front-proxy-client.crt" --proxy-client-key-file="$PKI/front-proxy-client.key" \
    --enable-aggregator-routing=true --endpoint-reconciler-type=none --v=1
  wait_for kube-apiserver api_ready
  launch kube-controller-manager "$KBIN/kube-controller-manager" \
    --kubeconfig="$RUN/kcm.kubeconfig" --authentication-kubeconfig="$RUN/kcm.kubeconfig" \
    --authorization-kubeconfig="$RUN/kcm.kubeconfig" \
    --leader-elect=false --controllers='*' --use-service-account-credentials=true \
    --service-account-private-key-file="$PKI/sa.key" --root-ca-file="$PKI/ca.crt" \
    --service-cluster-ip-range="$SERVICE_CIDR" \
    --bind-address=127.0.0.1 --secure-port="$KCM_PORT" --profiling=false --v=1
  wait_for kube-controller-manager kcm_ok
  wait_for kube-controller-manager sa_ok
  log "control plane up: export KUBECONFIG=$RUN/kubeconfig"
}
stop() {
  local i name p only=
  if [[ -n ${1:-} && ${1:-} != --clean ]]; then
    [[ " ${COMPONENTS[*]} " == *" $1 "* ]] || die "stop: unknown component $1 (one of: ${COMPONENTS[*]})"
    only=$1
  fi
  for ((i=${#COMPONENTS[@]}-1; i>=0; i--)); do
    name=${COMPONENTS[i]}
    [[ -z $only || $name == "$only" ]] || continue
    if p=$(pid_of "$name"); then
      kill -TERM "$p"
      for _ in $(seq 1 20); do [[ -d /proc/$p ]] || break; sleep 1; done
      if [[ -d /proc/$p ]]; then log "$name pid $p ignored TERM, sending KILL"; kill -KILL "$p"; fi
      log "stopped $name (pid $p)"
    fi
    rm -f "$RUN/$name.pid"
  done
  if [[ ${1:-} == --clean ]]; then rm -rf "$RUN"; log "removed $RUN"; fi
}
status() {
  local name p rc=0
  for name in "${COMPONENTS[@]}"; do
    if p=$(pid_of "$name"); then
      printf '%-24s running pid %-7s rss %s\n' "$name" "$p" "$(awk '/VmRSS/{print $2" "$3}' /proc/$p/status)"
    else
      printf '%-24s stopped\n' "$name"; rc=1
    fi
  done
  etcd_ok && echo "etcd /health: ok" || { echo "etcd /health: FAIL"; rc=1; }
  api_ready && echo "apiserver /readyz: ok" || { echo "apiserver /readyz: FAIL"; rc=1; }
  kcm_ok && echo "kcm /healthz: ok" || { echo "kcm /healthz: FAIL"; rc=1; }
  return $rc
}

case ${1:-} in
  start) start ;;
  stop) shift; stop "$@" ;;
  restart) stop; start ;;
  status) status ;;
  env) echo "export KUBECONFIG=$RUN/kubeconfig" ;;
  *) sed -n '2,22p' "${BASH_SOURCE[0]}"; exit 2 ;;
esac
