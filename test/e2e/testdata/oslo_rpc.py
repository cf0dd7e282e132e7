"""One OpenStack service process for rekey's e2e: an oslo.messaging RPC
server and an RPC client in one process, as a nova-compute is both.

It reads its transport_url once, at start, from an oslo.config file (the
01-nova.conf key of rekey's distributed Secret), exactly as a service does,
and keeps it until it is stopped. The client calls its own server
continuously, through the broker. On SIGTERM it stops and prints one JSON line with
its counts. Nothing it prints holds a secret.

usage: python3 oslo_rpc.py CONFIG_FILE TOPIC SERVER_NAME
"""
import json
import logging
import signal
import sys
import threading
import time

from oslo_config import cfg
import oslo_messaging as om


class Echo(object):
    target = om.Target(version='1.0')

    def echo(self, ctxt, n):
        return n


def main():
    conf_file, topic, name = sys.argv[1:4]
    logging.basicConfig(level=logging.WARNING)
    conf = cfg.CONF  # as services do (oslo.messaging 14 registers its
    # metrics options on the global CONF only)
    conf(['--config-file', conf_file], project='rekey-oslo')
    transport = om.get_rpc_transport(conf)  # parses [DEFAULT] transport_url
    url = om.TransportURL.parse(conf)
    secrets = {h.password for h in url.hosts if h.password}
    server = om.get_rpc_server(transport, om.Target(topic=topic, server=name),
                               [Echo()], executor='threading')
    server.start()
    # The client calls its own server (topic.server): a call a stopping
    # process had taken off the shared topic queue would be lost with it,
    # which is oslo's shutdown, not a credential, and not what is measured.
    # get_rpc_client came with oslo.messaging 14.1; the pinned 14.0 (Debian
    # bookworm's) builds the client itself, as services of that release do.
    new_client = getattr(om, 'get_rpc_client', om.RPCClient)
    client = new_client(transport, om.Target(topic=topic, server=name), timeout=10)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    calls = failed = 0
    first_error = ''
    ready = False
    n = 0
    while not stop.is_set():
        n += 1
        calls += 1
        try:
            if client.call({}, 'echo', n=n) != n:
                raise ValueError('wrong answer')
            if not ready:
                ready = True
                print(json.dumps({'ready': True, 'user': url.hosts[0].username,
                                  'hosts': len(url.hosts),
                                  'vhost': url.virtual_host}), flush=True)
        except Exception as e:  # every failed call counts
            failed += 1
            if not first_error:
                msg = '%s: %s' % (type(e).__name__, e)
                for s in secrets:
                    msg = msg.replace(s, '<redacted>')
                first_error = msg[:300]
                print(first_error, file=sys.stderr, flush=True)
        stop.wait(0.05)
    server.stop()
    server.wait()
    transport.cleanup()
    print(json.dumps({'calls': calls, 'failed': failed, 'first_error': first_error}), flush=True)


if __name__ == '__main__':
    main()
