#!/usr/bin/env bash
# Prepares everything the tests need, building or installing only what is
# missing: the control plane binaries and the sid chroot are prepared side by
# side (one is CPU-bound, the other mostly network-bound).
source "$(dirname "$0")/lib.sh"
dir=$(dirname "$0")
mkdir -p "$REKEY_CACHE"
"$dir/preflight.sh"
"$dir/rabbitmq.sh"
"$dir/postgres.sh"
"$dir/runc.sh"
# The host's apt is free once rabbitmq-server is in: oslo.messaging (mostly
# downloads) installs beside the Kubernetes build.
"$dir/oslo.sh" &
oslo=$!
"$dir/sid-chroot.sh" &
sid=$!
"$dir/control-plane.sh"
"$dir/tools.sh"
"$dir/moco.sh"
wait "$sid"
wait "$oslo"
# After oslo.sh: both use the host's apt (an update takes its lists lock).
"$dir/promtool.sh"
log "environment ready in $REKEY_CACHE"
