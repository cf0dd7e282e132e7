#!/usr/bin/env bash
# Builds helm and kustomize from the pinned Go modules in hack/tools/, into
# the cache, for the tests that render the chart and build config/.
source "$(dirname "$0")/lib.sh"

if [[ -f $TOOLS_DIR/.complete ]]; then
  log "helm and kustomize present: $TOOLS_DIR"
  exit 0
fi
mkdir -p "$TOOLS_DIR.tmp"
export GOFLAGS=-mod=mod
log "building helm $HELM_VERSION and kustomize $KUSTOMIZE_VERSION"
(cd "$REPO_ROOT/hack/tools/helm" && go build -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" -o "$TOOLS_DIR.tmp/helm" helm.sh/helm/v3/cmd/helm)
(cd "$REPO_ROOT/hack/tools/kustomize" && go build -ldflags "-s -w" -o "$TOOLS_DIR.tmp/kustomize" sigs.k8s.io/kustomize/kustomize/v5)
rm -rf "$TOOLS_DIR" && mv "$TOOLS_DIR.tmp" "$TOOLS_DIR"
touch "$TOOLS_DIR/.complete"
log "helm and kustomize ready: $TOOLS_DIR"
