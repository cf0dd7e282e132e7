package explorer

import "rekey.io/rekey/internal/backend/mysql"

// The model's health gate is the MySQL backend's own decision.
func init() {
	healthGate = func(discard bool, ins []*Instance) error {
		var ms []mysql.Member
		for _, in := range ins {
			ms = append(ms, mysql.Member{Name: in.Name, ReadOnly: in.RO, Source: in.From, Stopped: in.Stopped})
		}
		if rf := mysql.DecideHealth(discard, ms); rf != nil {
			return rf
		}
		return nil
	}
}
