// Package all registers every backend rekey ships: importing it is what
// makes them available to the controller. A new backend is one more line.
package all

import (
	_ "rekey.io/rekey/internal/backend/cephkube"
	_ "rekey.io/rekey/internal/backend/mysqlkube"
	_ "rekey.io/rekey/internal/backend/postgreskube"
	_ "rekey.io/rekey/internal/backend/rabbitkube"
)
