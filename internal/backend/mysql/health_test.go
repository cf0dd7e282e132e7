package mysql

import (
	"strings"
	"testing"

	"rekey.io/rekey/internal/reason"
)

// Replication as SHOW REPLICA STATUS shows it, for the table below.
func running(from string) channel {
	return channel{Source: "10.0.0.1:3306", SourceUUID: from, IORunning: "Yes", SQLRunning: "Yes", IOErrno: "0", SQLErrno: "0"}
}

func primary(name string) observation {
	return observation{Name: name, ServerUUID: name + "-uuid"}
}

func replicaOf(name, source string) observation {
	return observation{Name: name, ServerUUID: name + "-uuid", ReadOnly: true, SuperReadOnly: true, Channels: []channel{running(source + "-uuid")}}
}

func with(o observation, f func(*observation)) observation {
	o.Channels = append([]channel(nil), o.Channels...)
	f(&o)
	return o
}

func TestDecideHealth(t *testing.T) {
	p, r1, r2 := primary("db-0"), replicaOf("db-1", "db-0"), replicaOf("db-2", "db-0")
	for _, tc := range []struct {
		name string
		obs  []observation
		want []string // nil: healthy; else parts of the refusal's message
		not  []string // never in the message
	}{
		{name: "primary and two replicas", obs: []observation{p, r1, r2}},
		{name: "a lone primary", obs: []observation{p}},
		{name: "a lone read-only instance is its own primary", obs: []observation{with(p, func(o *observation) { o.ReadOnly, o.SuperReadOnly = true, true })}},
		{name: "after a switchover: db-1 primary, the others replicate from it",
			obs: []observation{replicaOf("db-0", "db-1"), with(primary("db-1"), func(*observation) {}), replicaOf("db-2", "db-1")}},
		{name: "after MOCO's switchover: the new primary keeps its reset channel, both threads stopped",
			obs: []observation{replicaOf("db-0", "db-1"), with(replicaOf("db-1", "db-0"), func(o *observation) {
				o.ReadOnly, o.SuperReadOnly = false, false
				o.Channels[0].IORunning, o.Channels[0].SQLRunning = "No", "No"
			}), replicaOf("db-2", "db-1")}},
		{name: "a writable instance's stopped channel with an error",
			obs: []observation{with(p, func(o *observation) {
				o.Channels = []channel{{Source: "db-9:3306", IORunning: "No", SQLRunning: "No", IOErrno: "1045"}}
			}), r1, r2},
			want: []string{"db-0", "IO thread is stopped", "error 1045"}},
		{name: "a writable instance with a stopped channel beside the primary",
			obs: []observation{p, r1, with(replicaOf("db-2", "db-0"), func(o *observation) {
				o.ReadOnly, o.SuperReadOnly = false, false
				o.Channels[0].IORunning, o.Channels[0].SQLRunning = "No", "No"
			})},
			want: []string{"db-0, db-2 are all writable"}},
		{name: "an intermediate primary replicating from outside the set",
			obs: []observation{with(p, func(o *observation) {
				o.ReadOnly, o.SuperReadOnly, o.Channels = true, true, []channel{running("upstream-uuid")}
			}), r1, r2}},
		{name: "a finished clone is not a clone in progress",
			obs: []observation{p, with(r1, func(o *observation) { o.Clone = "Completed" }), r2}},
		{name: "SQL thread stopped",
			obs:  []observation{p, with(r1, func(o *observation) { o.Channels[0].SQLRunning = "No" }), r2},
			want: []string{"db-1", "SQL thread is stopped"}, not: []string{"db-2", "IO thread"}},
		{name: "IO thread stopped",
			obs:  []observation{p, r1, with(r2, func(o *observation) { o.Channels[0].IORunning = "No" })},
			want: []string{"db-2", "IO thread is stopped"}},
		{name: "IO thread reconnecting, with its error",
			obs: []observation{p, with(r1, func(o *observation) {
				o.Channels[0].IORunning, o.Channels[0].IOErrno = "Connecting", "2003"
				o.Channels[0].IOError = "Error connecting to source 'repl@db-0:3306'. Message: Can't connect"
			}), r2},
			want: []string{"db-1", "IO thread is still connecting", "error 2003: cannot connect to the source"}, not: []string{"Can't connect", "repl@db-0"}},
		{name: "an applier error never quotes its statement",
			obs: []observation{p, with(r1, func(o *observation) {
				o.Channels[0].SQLRunning, o.Channels[0].SQLErrno = "No", "1396"
				o.Channels[0].SQLError = "Error 'Operation ALTER USER failed' on query. Default database: ''. Query: 'ALTER USER 'app'@'%' IDENTIFIED BY 's3cretS3cret''"
			}), r2},
			want: []string{"db-1", "SQL thread is stopped", "error 1396: a user statement failed"}, not: []string{"s3cretS3cret", "IDENTIFIED", "Operation ALTER USER failed"}},
		{name: "a named channel", obs: []observation{p, with(r1, func(o *observation) {
			o.Channels[0].Name, o.Channels[0].SQLRunning = "upstream", "No"
		}), r2}, want: []string{"replication channel upstream"}},
		{name: "a clone in progress",
			obs:  []observation{p, r1, with(r2, func(o *observation) { o.Clone = cloneInProgress })},
			want: []string{"CLONE is in progress on db-2"}},
		{name: "a replica that replicates from nothing",
			obs:  []observation{p, r1, with(r2, func(o *observation) { o.Channels = nil })},
			want: []string{"db-2 is not a replica of the primary db-0"}, not: []string{"db-1"}},
		{name: "a replica of a replica",
			obs:  []observation{p, r1, replicaOf("db-2", "db-1")},
			want: []string{"db-2 replicates from db-1, not from the primary db-0"}},
		{name: "a replica of a server outside the set",
			obs:  []observation{p, r1, replicaOf("db-2", "elsewhere")},
			want: []string{"db-2 replicates from 10.0.0.1:3306 (not an instance of this set), not from the primary db-0"}},
		{name: "two writable instances",
			obs:  []observation{p, with(r1, func(o *observation) { o.ReadOnly, o.SuperReadOnly, o.Channels = false, false, nil }), r2},
			want: []string{"db-0, db-1 are all writable"}},
		{name: "a switchover under way: the primary made read-only, the replicas still replicate from it",
			obs:  []observation{with(p, func(o *observation) { o.ReadOnly, o.SuperReadOnly = true, true }), r1, r2},
			want: []string{"no instance is writable", "db-0", "switchover"}, not: []string{"db-1", "db-2"}},
		{name: "no primary: every instance read-only, two replicate from nobody",
			obs: []observation{with(p, func(o *observation) { o.ReadOnly = true }),
				with(r1, func(o *observation) { o.Channels = nil }), r2},
			want: []string{"no instance is the primary", "db-0, db-1"}},
		{name: "the primary replicates from a member",
			obs:  []observation{with(p, func(o *observation) { o.Channels = []channel{running("db-1-uuid")} }), r1, r2},
			want: []string{"the primary db-0 replicates from db-1"}},
		{name: "the same server listed twice",
			obs:  []observation{p, r1, with(r1, func(o *observation) { o.Name = "db-1-again" })},
			want: []string{"db-1 and db-1-again are the same server"}},
		{name: "a replica whose IO thread runs but has not identified its source yet",
			obs:  []observation{p, r1, with(r2, func(o *observation) { o.Channels[0].SourceUUID = "" })},
			want: []string{"db-2 replicates from 10.0.0.1:3306 (just connected, not identified yet)"}, not: []string{"not an instance of this set"}},
		{name: "a replica whose IO thread never connected is reported once",
			obs: []observation{p, r1, with(r2, func(o *observation) {
				o.Channels[0].IORunning, o.Channels[0].SourceUUID = "Connecting", ""
			})},
			want: []string{"db-2", "IO thread is still connecting"}, not: []string{"not from the primary"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rf := decideHealth("the rotation", tc.obs)
			if tc.want == nil {
				if rf != nil {
					t.Fatalf("refused a healthy cluster: %s", rf.Message)
				}
				return
			}
			if rf == nil {
				t.Fatal("an unhealthy cluster was let through")
			}
			t.Log(rf.Message)
			if rf.Reason != string(reason.ClusterUnhealthy) {
				t.Fatalf("reason %s, want %s", rf.Reason, reason.ClusterUnhealthy)
			}
			for _, w := range append(tc.want, "the rotation does not start", "Nothing was changed", "checks again by itself") {
				if !strings.Contains(rf.Message, w) {
					t.Errorf("message does not say %q: %s", w, rf.Message)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(rf.Message, n) {
					t.Errorf("message says %q: %s", n, rf.Message)
				}
			}
			if strings.Contains(strings.ToLower(rf.Message), "seed") {
				t.Errorf("message mentions seed documents: %s", rf.Message)
			}
		})
	}
}

func TestRestoreSuperReadOnly(t *testing.T) {
	replica := role{readOnly: true, superReadOnly: false, replica: true} // as rekey's session holds it
	for _, tc := range []struct {
		name        string
		lifted      bool
		opened, now role
		want        bool
	}{
		{"not lifted by this session", false, role{}, role{readOnly: true}, false},
		{"a replica, still a replica", true, role{readOnly: true, superReadOnly: true, replica: true}, replica, true},
		{"a replica a crashed rekey left lifted", true, replica, replica, true},
		{"already restored by the cluster manager", true, replica, role{readOnly: true, superReadOnly: true, replica: true}, false},
		{"promoted meanwhile (read_only turned off)", true, replica, role{readOnly: false, replica: false}, false},
		{"promoted, channel still configured", true, replica, role{readOnly: false, replica: true}, false},
		{"being promoted: replication removed, not yet writable", true, replica, role{readOnly: true, replica: false}, false},
		{"a read-only primary, unchanged", true, role{readOnly: true, superReadOnly: true}, role{readOnly: true}, true},
		{"a read-only primary demoted to a replica meanwhile", true, role{readOnly: true, superReadOnly: true}, replica, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := restoreSuperReadOnly(tc.lifted, tc.opened, tc.now); got != tc.want {
				t.Fatalf("restore = %v, want %v", got, tc.want)
			}
		})
	}
}
