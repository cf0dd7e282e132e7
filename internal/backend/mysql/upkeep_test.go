package mysql

import "testing"

func TestDecideIdle(t *testing.T) {
	m := func(gen int64, dual bool) *genMark { return &genMark{Gen: gen, Dual: dual} }
	for _, tc := range []struct {
		name string
		a    account
		gen  int64
		want idleStep
	}{
		{"missing: rebuilt empty", account{}, 3, idleCreate},
		{"creation interrupted", account{exists: true, creating: true}, 3, idleCreate},
		{"current, one password", account{exists: true, mark: m(3, false)}, 3, idleNone},
		{"unmarked, one password (adopted, never rotated)", account{exists: true}, 3, idleNone},
		{"older generation: back from a scale-in", account{exists: true, mark: m(2, false)}, 3, idleReset},
		{"older generation, two passwords: away during an earlier discard", account{exists: true, dual: true, mark: m(2, true)}, 3, idleReset},
		{"the completed rotation's two passwords: missed its discard", account{exists: true, dual: true, mark: m(3, true)}, 3, idleReset},
		{"completed rotation's mark, secondary already gone", account{exists: true, mark: m(3, true)}, 3, idleReset},
		{"a secondary nobody marked", account{exists: true, dual: true}, 3, idleForeign},
		{"current mark, secondary added by hand", account{exists: true, dual: true, mark: m(3, false)}, 3, idleForeign},
		{"newer mark with two passwords: a status restored from an older backup", account{exists: true, dual: true, mark: m(4, true)}, 3, idleForeign},
		{"newer mark, one password: restored status", account{exists: true, mark: m(4, false)}, 3, idleNone},
		{"half a swap", account{exists: true, dual: true, swapping: true, mark: m(2, false)}, 3, idleForeign},
		{"generation unknown: nothing stale", account{exists: true, dual: true, mark: m(2, true)}, 0, idleForeign},
	} {
		if got := decideIdle(tc.a, tc.gen); got != tc.want {
			t.Errorf("%s: decideIdle = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestStaleMark(t *testing.T) {
	for _, tc := range []struct {
		m    *genMark
		gen  int64
		want bool
	}{
		{nil, 3, false},
		{&genMark{Gen: 2}, 3, true},
		{&genMark{Gen: 3}, 3, false},
		{&genMark{Gen: 3, Dual: true}, 3, true},
		{&genMark{Gen: 4, Dual: true}, 3, false},
		{&genMark{Gen: 2}, 0, false},
	} {
		if got := staleMark(tc.m, tc.gen); got != tc.want {
			t.Errorf("staleMark(%+v, %d) = %v, want %v", tc.m, tc.gen, got, tc.want)
		}
	}
	if parseMark(`{"gen": 4, "dual": true}`) == nil || parseMark("") != nil || parseMark("null") != nil {
		t.Error("parseMark")
	}
}
