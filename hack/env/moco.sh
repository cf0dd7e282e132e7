#!/usr/bin/env bash
# MOCO (pinned MOCO_VERSION) for the MOCO end-to-end tests, into the cache:
# its CustomResourceDefinitions and webhook configuration, taken from its Go
# module as the Go module proxy serves it, and moco-harness, built from
# hack/tools/moco (a module of its own), which runs MOCO's MySQLCluster
# reconciler, partition controller and admission webhooks from that module.
source "$(dirname "$0")/lib.sh"

harness=$REPO_ROOT/hack/tools/moco
# moco-harness is rebuilt whenever its sources change: a cached build of
# older sources would run another harness than the tests expect.
source_hash=$(cat "$harness"/go.mod "$harness"/go.sum "$harness"/*.go | sha256sum | cut -d' ' -f1)
if [[ -f $MOCO_DIR/crd/moco.cybozu.com_mysqlclusters.yaml && -f $MOCO_DIR/webhook/manifests.yaml && -x $MOCO_DIR/bin/moco-harness &&
      $(cat "$MOCO_DIR/bin/source-hash" 2>/dev/null) == "$source_hash" ]]; then
  log "MOCO $MOCO_VERSION CRDs and moco-harness present"
  exit 0
fi
if ! grep -q "github.com/cybozu-go/moco $MOCO_VERSION\$" "$harness/go.mod"; then
  log "hack/tools/moco/go.mod does not require MOCO $MOCO_VERSION (versions.env): update it (go get github.com/cybozu-go/moco@$MOCO_VERSION there)"
  exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Outside any module, so that nothing is added to a go.mod.
dir=$(cd "$work" && GOFLAGS=-mod=mod go mod download -json "github.com/cybozu-go/moco@$MOCO_VERSION" |
  sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
if [[ -z $dir || ! -f $dir/config/crd/bases/moco.cybozu.com_mysqlclusters.yaml || ! -f $dir/config/webhook/manifests.yaml ]]; then
  log "MOCO $MOCO_VERSION: no CRDs or webhook configuration in the downloaded module ($dir)"
  exit 1
fi
rm -rf "$MOCO_DIR.tmp"
mkdir -p "$MOCO_DIR.tmp/crd" "$MOCO_DIR.tmp/webhook" "$MOCO_DIR.tmp/bin"
cp "$dir"/config/crd/bases/*.yaml "$MOCO_DIR.tmp/crd/"
cp "$dir"/config/webhook/manifests.yaml "$MOCO_DIR.tmp/webhook/"
log "building moco-harness with MOCO $MOCO_VERSION (a few minutes the first time)"
(cd "$harness" && go build -o "$MOCO_DIR.tmp/bin/moco-harness" .)
echo "$source_hash" > "$MOCO_DIR.tmp/bin/source-hash"
rm -rf "$MOCO_DIR" && mv "$MOCO_DIR.tmp" "$MOCO_DIR"
log "MOCO $MOCO_VERSION CRDs, webhook configuration and moco-harness in $MOCO_DIR"
