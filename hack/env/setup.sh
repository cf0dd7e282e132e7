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

# Three jobs side by side: oslo.messaging (the host's apt is free once
# rabbitmq-server is in; mostly downloads), the sid chroot (network) and the
# builds (CPU). The first to fail stops the builds: a sid mirror that moved
# past the pinned MySQL or Ceph is then reported in minutes, not after the
# 15-minute Kubernetes build. Each job gets its own process group (set -m)
# so that stopping the builds stops their go processes; Ctrl-C, which now
# reaches this script alone, stops all three.
set -m
"$dir/oslo.sh" &
oslo=$!
"$dir/sid-chroot.sh" &
sid=$!
{ "$dir/control-plane.sh" && "$dir/tools.sh" && "$dir/moco.sh"; } &
build=$!
trap 'kill -- -$oslo -$sid -$build 2>/dev/null; exit 130' INT TERM
failed=()
for _ in 1 2 3; do
  wait -n -p job && continue
  case $job in
    "$oslo") failed+=(oslo.sh) ;;
    "$sid") failed+=(sid-chroot.sh) ;;
    "$build") failed+=("the builds (control-plane.sh, tools.sh, moco.sh)") ;;
  esac
  if [[ $job != "$build" ]] && kill -- -"$build" 2>/dev/null; then
    log "stopped the builds: ${failed[0]} failed (its messages are above)"
  fi
done
set +m
if ((${#failed[@]})); then
  log "environment not ready: ${failed[0]} failed (its messages are above)"
  exit 1
fi
# After oslo.sh: both use the host's apt (an update takes its lists lock).
"$dir/promtool.sh"
log "environment ready in $REKEY_CACHE"
