#!/usr/bin/env bash
# Takes promtool from Debian's prometheus package (pinned PROMETHEUS_SERIES)
# into the cache, without installing the package (no server on the host):
# the chart's alert rules are checked and unit-tested with it.
source "$(dirname "$0")/lib.sh"

dest=$PROMTOOL_DIR/promtool
version() { "$dest" --version 2>/dev/null | sed -n 's/^promtool, version \([^ ]*\).*/\1/p'; }
if v=$(version) && [[ $v == "$PROMETHEUS_SERIES"* ]]; then
  log "promtool present: $v"
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
# apt-get download needs no lock on dpkg and runs as any user; the package
# lists may be missing or stale on a fresh machine.
apt-get -o Acquire::Retries=5 download prometheus >&2 || {
  apt-get -o Acquire::Retries=5 update >&2
  apt-get -o Acquire::Retries=5 download prometheus >&2
}
dpkg-deb -x prometheus_*.deb root
mkdir -p "$PROMTOOL_DIR.tmp"
cp root/usr/bin/promtool "$PROMTOOL_DIR.tmp/"
rm -rf "$PROMTOOL_DIR" && mv "$PROMTOOL_DIR.tmp" "$PROMTOOL_DIR"
v=$(version) || { log "promtool from Debian's prometheus package does not run"; exit 1; }
if [[ $v != "$PROMETHEUS_SERIES"* ]]; then
  log "promtool $v is not the pinned $PROMETHEUS_SERIES* (hack/env/versions.env)"
  exit 1
fi
log "promtool installed: $v"
