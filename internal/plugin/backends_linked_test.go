package plugin

// The plugin knows backends only through the registry: its tests link
// every backend rekey ships, as the kubectl-rekey binary does.
import _ "rekey.io/rekey/internal/backend/all"
