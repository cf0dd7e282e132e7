// Package testenv starts the real servers rekey's tests run against — a
// MySQL cluster, a one-mon Ceph cluster, a RabbitMQ node and a Kubernetes
// control plane — on loopback ports of their own, and stops exactly what it
// started. The binaries come from the cache prepared by hack/env/setup.sh
// (make env); nothing here downloads or builds.
//
// Servers run as child processes that die with the test binary (Pdeathsig),
// so an interrupted test run leaves nothing behind.
package testenv
