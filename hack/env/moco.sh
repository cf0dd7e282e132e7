#!/usr/bin/env bash
# Takes MOCO's CustomResourceDefinitions (pinned MOCO_VERSION) from its Go
# module, as the Go module proxy serves it, into the cache: the MOCO
# end-to-end test installs MOCO's real MySQLCluster CRD in its API server.
# Only the CRD manifests are kept; no MOCO code is built or run.
source "$(dirname "$0")/lib.sh"

if [[ -f $MOCO_DIR/crd/moco.cybozu.com_mysqlclusters.yaml ]]; then
  log "MOCO $MOCO_VERSION CRDs present"
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Outside any module, so that nothing is added to a go.mod.
dir=$(cd "$work" && GOFLAGS=-mod=mod go mod download -json "github.com/cybozu-go/moco@$MOCO_VERSION" |
  sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
if [[ -z $dir || ! -f $dir/config/crd/bases/moco.cybozu.com_mysqlclusters.yaml ]]; then
  log "MOCO $MOCO_VERSION: no CRDs in the downloaded module ($dir)"
  exit 1
fi
mkdir -p "$MOCO_DIR.tmp/crd"
cp "$dir"/config/crd/bases/*.yaml "$MOCO_DIR.tmp/crd/"
rm -rf "$MOCO_DIR" && mv "$MOCO_DIR.tmp" "$MOCO_DIR"
log "MOCO $MOCO_VERSION CRDs installed in $MOCO_DIR/crd"
