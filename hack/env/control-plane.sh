#!/usr/bin/env bash
# Builds the Kubernetes control plane the tests run (kube-apiserver,
# kube-controller-manager, kube-scheduler, etcd, kwok) from the pinned Go
# modules in hack/tools/*, into a cache folder outside the clone. Does nothing
# when the binaries for the pinned versions are already there.
source "$(dirname "$0")/lib.sh"

stamp=$BIN_DIR/.complete
if [[ -f $stamp ]]; then
  log "control plane binaries present: $BIN_DIR"
  exit 0
fi
mkdir -p "$BIN_DIR.tmp"
export GONOSUMDB='k8s.io/*' GOFLAGS=-mod=mod
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION"
ldflags+=" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(echo "$KUBE_VERSION" | cut -d. -f2)"

log "building etcd $ETCD_VERSION"
(cd "$REPO_ROOT/hack/tools/etcd" && go build -ldflags "-s -w" -o "$BIN_DIR.tmp/etcd" go.etcd.io/etcd/server/v3)
log "building kwok $KWOK_VERSION"
(cd "$REPO_ROOT/hack/tools/kwok" && go build -ldflags "-s -w" -o "$BIN_DIR.tmp/kwok" sigs.k8s.io/kwok/cmd/kwok)
kwokdir=$(cd "$REPO_ROOT/hack/tools/kwok" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
mkdir -p "$BIN_DIR.tmp/kwok-stages"
for s in node/fast node/heartbeat pod/fast; do
  for f in "$kwokdir/kustomize/stage/$s"/*.yaml; do
    [[ $(basename "$f") == kustomization.yaml ]] && continue
    cp "$f" "$BIN_DIR.tmp/kwok-stages/$(echo "$s" | tr / -)-$(basename "$f")"
  done
done
log "building kube-apiserver, kube-controller-manager, kube-scheduler $KUBE_VERSION (about 15 minutes on 2 cores the first time)"
(cd "$REPO_ROOT/hack/tools/kube" && go build -ldflags "$ldflags" -o "$BIN_DIR.tmp/" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler)
chmod 0644 "$BIN_DIR.tmp/kwok-stages"/*
rm -rf "$BIN_DIR" && mv "$BIN_DIR.tmp" "$BIN_DIR"
"$BIN_DIR/kube-apiserver" --version >&2
touch "$stamp"
log "control plane ready: $BIN_DIR"
