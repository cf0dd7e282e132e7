package mysql

import (
	"strings"
	"testing"

	"rekey.io/rekey/internal/reason"
)

const (
	uuidP = "3e11fa47-71ca-11e1-9e33-c80aa9429562" // the primary
	uuidR = "5a2b0c11-0000-11ef-8000-000000000001" // a replica
	uuidU = "9f00aa00-1111-11ef-8000-00000000000f" // upstream of an intermediate primary
)

func TestGTIDSetMinus(t *testing.T) {
	for _, tc := range []struct{ a, b, want string }{
		{"", "", ""},
		{uuidP + ":1-10", uuidP + ":1-10", ""},
		{uuidP + ":1-10", uuidP + ":1-4", uuidP + ":5-10"},
		{uuidP + ":1-10", uuidP + ":3-4:8", uuidP + ":1-2:5-7:9-10"},
		{uuidP + ":1-10,\n" + uuidR + ":1-2", uuidP + ":1-10", uuidR + ":1-2"},
		// Case, whitespace, unmerged and unsorted intervals as a user may type them.
		{strings.ToUpper(uuidR) + ":5:1-3:4", uuidR + ":1-2", uuidR + ":3-5"},
		// Tagged GTIDs (MySQL 8.3 on): a tag's numbers are its own.
		{uuidR + ":1-3:ops:1-2", uuidR + ":1-3", uuidR + ":ops:1-2"},
		{uuidR + ":1-3:ops:1-2", uuidR + ":1-3:ops:1-2", ""},
		{uuidR + ":ops:1-5", uuidR + ":OPS:2-4", uuidR + ":ops:1:5"},
	} {
		a, err := parseGTIDSet(tc.a)
		if err != nil {
			t.Fatalf("%q: %v", tc.a, err)
		}
		b, err := parseGTIDSet(tc.b)
		if err != nil {
			t.Fatalf("%q: %v", tc.b, err)
		}
		if got := a.minus(b).String(0); got != tc.want {
			t.Errorf("%q minus %q = %q, want %q", tc.a, tc.b, got, tc.want)
		}
	}
	for _, bad := range []string{"not-a-uuid:1-3", uuidP + ":3-1", uuidP + ":x", uuidP + "::1"} {
		if _, err := parseGTIDSet(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// The errant check as decideHealth makes it: names the instance, its
// errant GTIDs and what a DBA runs.
func TestDecideHealthErrant(t *testing.T) {
	gtids := func(o observation, set, uuid string) observation {
		return with(o, func(o *observation) { o.GTIDExecuted, o.ServerUUID = set, uuid })
	}
	p := gtids(primary("db-0"), uuidP+":1-100", uuidP)
	r1 := func(set string) observation { return gtids(replicaOf("db-1", "db-0"), set, uuidR) }
	fix := func(o *observation) { o.Channels[0].SourceUUID = uuidP }
	r2 := gtids(with(replicaOf("db-2", "db-0"), fix), uuidP+":1-90", "6b000000-0000-11ef-8000-000000000002")
	for _, tc := range []struct {
		name string
		obs  []observation
		want []string // nil: healthy
		not  []string
	}{
		{name: "replicas behind the primary", obs: []observation{p, with(r1(uuidP+":1-99"), fix), r2}},
		{name: "GTIDs off everywhere", obs: []observation{gtids(p, "", uuidP), with(r1(""), fix), r2}},
		// Read after the primary, a replica may have applied what the
		// primary committed since: its own transactions are never errant.
		{name: "a replica ahead of the primary's set as read, by the primary's transactions", obs: []observation{p, with(r1(uuidP+":1-105"), fix), r2}},
		{name: "a transaction written on the replica",
			obs:  []observation{p, with(r1(uuidP+":1-100,\n"+uuidR+":1-2"), fix), r2},
			want: []string{"db-1 holds transactions the primary db-0 does not (errant GTIDs " + uuidR + ":1-2)", "written on db-1 itself", "SET GTID_NEXT='" + uuidR + ":1'; BEGIN; COMMIT; SET GTID_NEXT='AUTOMATIC'", "rebuild db-1 from the primary"},
			not:  []string{"db-2 holds"}},
		{name: "marked executed on the primary by the DBA: accepted",
			obs: []observation{gtids(p, uuidP+":1-100,"+uuidR+":1-2", uuidP), with(r1(uuidP+":1-100,"+uuidR+":1-2"), fix), r2}},
		{name: "a tagged transaction written on the replica",
			obs:  []observation{p, with(r1(uuidP+":1-100,"+uuidR+":dba:7"), fix), r2},
			want: []string{"errant GTIDs " + uuidR + ":dba:7", "SET GTID_NEXT='" + uuidR + ":dba:7'"}},
		{name: "the old primary's unreplicated commits after a failover",
			obs: []observation{gtids(primary("db-1"), uuidR+":1-5,"+uuidP+":1-100", uuidR),
				gtids(with(replicaOf("db-0", "db-1"), func(o *observation) { o.Channels[0].SourceUUID = uuidR }), uuidR+":1-5,"+uuidP+":1-102", uuidP)},
			want: []string{"db-0 holds transactions the primary db-1 does not (errant GTIDs " + uuidP + ":101-102)"}},
		{name: "an intermediate primary's upstream transactions, all on the primary",
			obs: []observation{gtids(with(p, func(o *observation) {
				o.ReadOnly, o.SuperReadOnly, o.Channels = true, true, []channel{running(uuidU)}
			}), uuidU+":1-500,"+uuidP+":1-3", uuidP), with(r1(uuidU+":1-480,"+uuidP+":1-3"), fix)}},
		{name: "an errant replica whose SQL thread also stopped: both said",
			obs: []observation{p, with(r1(uuidP+":1-100,"+uuidR+":1"), func(o *observation) {
				fix(o)
				o.Channels[0].SQLRunning, o.Channels[0].SQLErrno = "No", "1062"
			}), r2},
			want: []string{"on db-1, replication from", "SQL thread is stopped", "db-1 holds transactions"}},
		{name: "a replica being cloned is not compared",
			obs:  []observation{p, with(r1(uuidR+":1-9"), func(o *observation) { fix(o); o.Clone = cloneInProgress }), r2},
			want: []string{"CLONE is in progress on db-1"}, not: []string{"holds transactions"}},
		{name: "a set rekey cannot read",
			obs:  []observation{p, with(r1("garbage"), fix), r2},
			want: []string{"cannot compare the executed transactions of db-1"}},
		{name: "many errant sources: three named, the rest counted",
			obs:  []observation{p, with(r1(uuidR+":1,"+uuidU+":1,6b000000-0000-11ef-8000-000000000002:1,7c000000-0000-11ef-8000-000000000003:1"), fix), r2},
			want: []string{"and transactions of 1 more sources"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rf := decideHealth("the rotation", tc.obs)
			if tc.want == nil {
				if rf != nil {
					t.Fatalf("refused: %s", rf.Message)
				}
				if s := errantSuspect(tc.obs); s != "" {
					t.Fatalf("suspects %s's set as stale", s)
				}
				return
			}
			if rf == nil {
				t.Fatal("let through")
			}
			t.Log(rf.Message)
			if rf.Reason != string(reason.ClusterUnhealthy) {
				t.Fatalf("reason %s", rf.Reason)
			}
			for _, w := range append(tc.want, "the rotation does not start", "holds no transaction the primary lacks") {
				if !strings.Contains(rf.Message, w) {
					t.Errorf("message does not say %q", w)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(rf.Message, n) {
					t.Errorf("message says %q", n)
				}
			}
		})
	}
}

// errantSuspect names the primary to read again exactly when a replica
// holds something the primary's set, as read, lacks.
func TestErrantSuspect(t *testing.T) {
	p := with(primary("db-0"), func(o *observation) { o.ServerUUID, o.GTIDExecuted = uuidP, uuidP+":1-10" })
	r := func(set string) observation {
		return with(replicaOf("db-1", "db-0"), func(o *observation) {
			o.ServerUUID, o.GTIDExecuted, o.Channels[0].SourceUUID = uuidR, set, uuidP
		})
	}
	for _, tc := range []struct {
		name string
		obs  []observation
		want string
	}{
		{"nothing errant", []observation{p, r(uuidP + ":1-9")}, ""},
		{"errant", []observation{p, r(uuidP + ":1-9," + uuidR + ":1")}, "db-0"},
		{"an upstream transaction the primary committed after it was read", []observation{p, r(uuidP + ":1-9," + uuidU + ":1")}, "db-0"},
		{"no primary: nothing to compare with", []observation{with(p, func(o *observation) { o.ReadOnly = true }), r(uuidR + ":1")}, ""},
		{"a lone instance", []observation{p}, ""},
	} {
		if got := errantSuspect(tc.obs); got != tc.want {
			t.Errorf("%s: suspect %q, want %q", tc.name, got, tc.want)
		}
	}
}
