#!/usr/bin/env bash
# Installs Debian's python3-oslo.messaging on the host, for Debian's own
# /usr/bin/python3: the tests run a real oslo.messaging RPC client and server
# against rekey's transport_url and parse it with TransportURL.parse. Checks
# the pinned series (OSLO_MESSAGING_SERIES); the tests check it again.
source "$(dirname "$0")/lib.sh"

py=/usr/bin/python3
version() { "$py" -c 'import importlib.metadata as m, oslo_messaging; print(m.version("oslo.messaging"))' 2>/dev/null; }
if v=$(version) && [[ $v == "$OSLO_MESSAGING_SERIES"* ]]; then
  log "python3-oslo.messaging present: $v"
  exit 0
fi
if [[ $(id -u) != 0 ]]; then log "installing python3-oslo.messaging needs root"; exit 1; fi
export DEBIAN_FRONTEND=noninteractive
# --no-install-recommends: the library and its Python dependencies only.
apt-get -o Acquire::Retries=5 install -y --no-install-recommends python3 python3-oslo.messaging >&2 || {
  apt-get -o Acquire::Retries=5 update >&2
  apt-get -o Acquire::Retries=5 install -y --no-install-recommends python3 python3-oslo.messaging >&2
}
v=$(version) || { log "python3-oslo.messaging installed, but $py cannot import oslo_messaging"; exit 1; }
if [[ $v != "$OSLO_MESSAGING_SERIES"* ]]; then
  log "python3-oslo.messaging $v is not the pinned $OSLO_MESSAGING_SERIES* (hack/env/versions.env)"
  exit 1
fi
log "python3-oslo.messaging installed: $v"
