package postgres

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
)

const canary = "CANARY-d41d8cd9"

// TestErrorsInRekeysWords: a server's message never reaches an error that
// leaves the backend; its SQLSTATE does, with rekey's words for it.
func TestErrorsInRekeysWords(t *testing.T) {
	for _, tc := range []struct {
		err  *pgconn.PgError
		want string
	}{
		{&pgconn.PgError{Code: "28P01", Message: "password authentication failed " + canary}, "PostgreSQL error 28P01 (password authentication failed)"},
		{&pgconn.PgError{Code: "42501", Message: canary}, "PostgreSQL error 42501 (a privilege the statement needs is missing)"},
		{&pgconn.PgError{Code: "XX000", Message: canary}, "PostgreSQL error XX000"},
		{&pgconn.PgError{Code: canary, Message: canary}, "PostgreSQL error unknown"},
	} {
		b := &Backend{}
		got := safe(b.fail("db:5432", "create role", tc.err)).Error()
		if strings.Contains(got, canary) || !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want %q and no server text", tc.err.Code, got, tc.want)
		}
	}
	if got := printableDetail("owner of table public.orders\n" + canary + "<script>\x1b[31m"); strings.ContainsAny(got, "<>\x1b\n") {
		t.Errorf("printableDetail kept control or markup characters: %q", got)
	}
	if got := safe(errors.New("rekey's own words")).Error(); got != "rekey's own words" {
		t.Errorf("rekey's own error was changed: %q", got)
	}
}

// TestBannerNotReflected: an address that answers with something other
// than PostgreSQL (a banner, an HTTP service) yields rekey's words only,
// whatever it sent.
func TestBannerNotReflected(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			// An ErrorResponse as PostgreSQL would send it, with the canary as
			// its message, then a banner.
			msg := "SFATAL\x00C28P01\x00M" + canary + "\x00\x00"
			frame := append([]byte{'E', 0, 0, 0, byte(4 + len(msg))}, msg...)
			_, _ = c.Write(append(frame, []byte("HTTP/1.1 200 OK "+canary+"\r\n")...))
			c.Close()
		}
	}()
	spec := &v1.PostgresSpec{Hosts: []string{ln.Addr().String()}, TLS: "Disable", Login: v1.PostgresLogin{Base: "app", Group: "app_owner"}}
	b, err := New(spec, "00000000-0000-0000-0000-000000000001", "admin", "admin-password-"+canary, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for name, call := range map[string]func() error{
		"Precheck": func() error { return b.Precheck(ctx, engine.Secrets{}) },
		"Verify":   func() error { return b.Verify(ctx, engine.Secrets{KeyUsername: "app_g1", KeyPassword: "pw-" + canary}) },
	} {
		err := call()
		if err == nil {
			t.Errorf("%s against a banner succeeded", name)
			continue
		}
		if strings.Contains(err.Error(), canary) || strings.Contains(err.Error(), "HTTP") {
			t.Errorf("%s: the error repeats what the address sent: %v", name, err)
		}
	}
}
