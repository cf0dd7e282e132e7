#!/usr/bin/env bash
# Installs Debian's runc on the host: test/deployed runs the manager's image
# with it as the kubelet's runtime would (an OCI bundle, read-only root, the
# chart's volumes and user). Debian's podman and crun do not run here (see
# docs/image.md); runc does once the bundle drops process.rlimits.
source "$(dirname "$0")/lib.sh"

if command -v runc >/dev/null; then
  log "runc present: $(runc --version | head -1)"
  exit 0
fi
if [[ $(id -u) != 0 ]]; then log "installing runc needs root"; exit 1; fi
export DEBIAN_FRONTEND=noninteractive
apt-get -o Acquire::Retries=5 install -y --no-install-recommends runc >&2 || {
  apt-get -o Acquire::Retries=5 update >&2
  apt-get -o Acquire::Retries=5 install -y --no-install-recommends runc >&2
}
log "runc installed: $(runc --version | head -1)"
