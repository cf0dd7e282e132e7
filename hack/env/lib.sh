# Shared settings for the environment scripts. Every version the tests rely on
# is pinned here; the scripts rebuild or reinstall when a pin changes.
# shellcheck shell=bash
set -euo pipefail

REKEY_CACHE=${REKEY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rekey}
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

# shellcheck source=versions.env
source "$REPO_ROOT/hack/env/versions.env"
SID_MIRROR=${SID_MIRROR:-http://deb.debian.org/debian}
SID_PACKAGES="mysql-server-core mysql-client ceph-mon ceph-base ceph-common"

BIN_DIR=$REKEY_CACHE/bin/kube-$KUBE_VERSION-etcd-$ETCD_VERSION-kwok-$KWOK_VERSION
SID_DIR=$REKEY_CACHE/sid

log() { printf '[env] %s\n' "$*" >&2; }
TOOLS_DIR=$REKEY_CACHE/bin/tools-helm-$HELM_VERSION-kustomize-$KUSTOMIZE_VERSION
PROMTOOL_DIR=$REKEY_CACHE/bin/promtool-$PROMETHEUS_SERIES
MOCO_DIR=$REKEY_CACHE/moco-$MOCO_VERSION
