package mysql

import "rekey.io/rekey/internal/engine"

// Member is one instance of a modelled cluster (the state-space explorer,
// internal/explorer): its role as the health gate reads it, so that a
// model asks the gate's own decision instead of deriving one of its own.
type Member struct {
	Name     string
	ReadOnly bool
	// Source is the member it replicates from ("": none). Stopped: that
	// channel's threads are both stopped without an error, what STOP
	// REPLICA and RESET REPLICA leave on a new primary.
	Source  string
	Stopped bool
}

// DecideHealth is decideHealth on members, every one of which answered:
// nil when the rotation (discard false) or the discard may start.
func DecideHealth(discard bool, members []Member) *engine.Refusal {
	obs := make([]observation, 0, len(members))
	for _, m := range members {
		o := observation{Name: m.Name, ServerUUID: m.Name + "-uuid", ReadOnly: m.ReadOnly, SuperReadOnly: m.ReadOnly}
		if m.Source != "" {
			state := "Yes"
			if m.Stopped {
				state = "No"
			}
			o.Channels = []channel{{Source: m.Source + ":3306", SourceUUID: m.Source + "-uuid", IORunning: state, SQLRunning: state}}
		}
		obs = append(obs, o)
	}
	phase := rotationPhase
	if discard {
		phase = discardPhase
	}
	return decideHealth(phase, obs)
}
