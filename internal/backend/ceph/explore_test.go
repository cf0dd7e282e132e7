package ceph

import (
	"os"
	"testing"
	"time"

	"rekey.io/rekey/internal/testenv"
)

func TestExplore(t *testing.T) {
	if os.Getenv("EXPLORE") == "" {
		t.Skip()
	}
	c := testenv.CephForTest(t)
	os.WriteFile("/tmp/explore.env", []byte("CLI="+c.CLIPath+"\nDIR="+c.Dir.Host+"\nKR="+c.AdminKeyring.Host+"\nMON="+c.MonAddr+"\nCONF="+c.Conf.Host+"\n"), 0o644)
	time.Sleep(40 * time.Minute)
}
