package ceph

import (
	"fmt"
	"net"
	"strings"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// Two sets on one cluster must not rotate the same entity: each would take
// the other's generations for its own priors or orphans and delete them,
// and an in-place rotation by one would leave the other holding a dead key.
// The ownership records in the mon refuse the second set once it acts; the
// spec check below refuses it before it runs a single command, with the
// field to change.

// Clash tells whether spec b would rotate an entity spec a rotates, and
// describes the first such entity of b ("" when none). Under Overlapping an
// entity also owns its generations (client.csi owns client.csi.3), so an
// entity of the other set that names one of them clashes too. Specs on
// different clusters never clash.
func Clash(a, b *v1.CephSpec) string {
	if a == nil || b == nil || !SameCluster(a.Monitors, b.Monitors) {
		return ""
	}
	for _, eb := range b.Entities {
		for _, ea := range a.Entities {
			switch {
			case ea.Name == eb.Name:
				return eb.Name
			case a.RotationStrategy() == v1.CephOverlapping:
				if g, ok := generationOf(ea.Name, eb.Name); ok && g > 0 {
					return fmt.Sprintf("%s (generation %d of %s, which the other set rotates with strategy Overlapping)", eb.Name, g, ea.Name)
				}
			}
			if b.RotationStrategy() == v1.CephOverlapping {
				if g, ok := generationOf(eb.Name, ea.Name); ok && g > 0 {
					return fmt.Sprintf("%s (its generation %d is %s, an entity the other set rotates)", eb.Name, g, ea.Name)
				}
			}
		}
	}
	return ""
}

// AdminClash tells whether spec b and spec a on one cluster would break
// each other's admin: one rotates the entity the other runs ceph commands
// as without rotating it itself, so the other's keyring Secret keeps a key
// the rotation killed. It says, for b, what to change ("" when nothing
// clashes). Two sets that both rotate one admin clash as entities (Clash).
func AdminClash(a, b *v1.CephSpec) string {
	if a == nil || b == nil || !SameCluster(a.Monitors, b.Monitors) {
		return ""
	}
	if admin := a.AdminEntity(); rotates(b, admin) && !rotates(a, admin) {
		return fmt.Sprintf("this set rotates %s, which the other set runs ceph commands as (admin.entity): its admin keyring would stop working at the first rotation. Remove %s from spec.ceph.entities", admin, admin)
	}
	if admin := b.AdminEntity(); rotates(a, admin) && !rotates(b, admin) {
		return fmt.Sprintf("the other set rotates %s, which this set runs ceph commands as (admin.entity): this set's admin keyring would stop working at that set's first rotation. Use another admin entity in spec.ceph.admin", admin)
	}
	return ""
}

// rotates: s rotates entity name.
func rotates(s *v1.CephSpec, name string) bool {
	for _, e := range s.Entities {
		if e.Name == name {
			return true
		}
	}
	return false
}

// SameCluster tells whether two monitor lists name a common monitor. An
// address without a port stands for both default ports (the CLI tries
// msgr2's 3300 and msgr1's 6789); v2: and v1: without a port stand for
// their own. Two clusters on one host with their own ports stay apart.
func SameCluster(a, b []string) bool {
	seen := map[string]bool{}
	for _, m := range a {
		for _, e := range monEndpoints(m) {
			seen[e] = true
		}
	}
	for _, m := range b {
		for _, e := range monEndpoints(m) {
			if seen[e] {
				return true
			}
		}
	}
	return false
}

// monEndpoints is the host:port pairs a mon_host entry may reach, the host
// in lower case.
func monEndpoints(m string) []string {
	ports := []string{"3300", "6789"}
	switch {
	case strings.HasPrefix(m, "v2:"):
		m, ports = m[3:], []string{"3300"}
	case strings.HasPrefix(m, "v1:"):
		m, ports = m[3:], []string{"6789"}
	}
	host := m
	if h, p, err := net.SplitHostPort(m); err == nil {
		host, ports = h, []string{p}
	}
	host = strings.ToLower(strings.Trim(host, "[]"))
	out := make([]string, len(ports))
	for i, p := range ports {
		out[i] = net.JoinHostPort(host, p)
	}
	return out
}
