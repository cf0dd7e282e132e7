// Package engine is rekey's backend-agnostic rotation engine: the state
// machine (Idle → Rotating → Distributed → Idle) as pure
// decisions, the source Secret layout, the rollout gate, and the interface
// each backend implements. Nothing here performs I/O; the controller
// package carries decisions out against Kubernetes and the backend.
package engine
