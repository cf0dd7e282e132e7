package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/cybozu-go/moco/pkg/password"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// secretsCheck is what `moco-harness check-secrets` prints: how MOCO's
// own password code reads the 3 Secrets of one cluster. Passwords appear
// only as fingerprints (the first 12 hex digits of their SHA-256), which
// a test compares with the fingerprints of the passwords it expects.
type secretsCheck struct {
	// Readers: per reader of a Secret, user → fingerprint, as MOCO's
	// password.NewMySQLPasswordFromSecret parses it ("controller": MOCO's
	// reconciler, from the controller Secret; "user": MOCO's clustering
	// loop, moco-agent and mysqld's init (envFrom), backup Jobs and
	// kubectl moco, from the user Secret).
	Readers map[string]map[string]string `json:"readers"`
	// Errors: a Secret MOCO's code refused to parse, and why.
	Errors map[string]string `json:"errors,omitempty"`
	// UserIsToSecret: the user Secret holds, byte for byte, what MOCO's
	// ToSecret makes of the controller Secret's passwords (what its
	// reconciler writes there).
	UserIsToSecret bool `json:"userIsToSecret"`
	// MyCnfIsToMyCnfSecret: the my.cnf Secret holds, byte for byte, what
	// MOCO's ToMyCnfSecret makes of them (each [client] entry).
	MyCnfIsToMyCnfSecret bool `json:"myCnfIsToMyCnfSecret"`
}

func checkSecrets(args []string) error {
	fs := flag.NewFlagSet("check-secrets", flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig of the API server")
	ns := fs.String("namespace", "", "the MySQLCluster's namespace")
	name := fs.String("cluster", "", "the MySQLCluster's name")
	systemNS := fs.String("system-namespace", "moco-system", "MOCO's namespace")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return err
	}
	ctx := context.Background()
	get := func(ns, name string) (*corev1.Secret, error) {
		s := &corev1.Secret{}
		return s, c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, s)
	}
	// The names MOCO gives them (MySQLCluster.ControllerSecretName,
	// UserSecretName, MyCnfSecretName).
	ctrlSecret, err := get(*systemNS, fmt.Sprintf("mysql-%s.%s", *ns, *name))
	if err != nil {
		return err
	}
	userSecret, err := get(*ns, "moco-"+*name)
	if err != nil {
		return err
	}
	cnfSecret, err := get(*ns, "moco-my-cnf-"+*name)
	if err != nil {
		return err
	}
	out := secretsCheck{Readers: map[string]map[string]string{}, Errors: map[string]string{}}
	parsed := map[string]*password.MySQLPassword{}
	for reader, s := range map[string]*corev1.Secret{"controller": ctrlSecret, "user": userSecret} {
		pwd, err := password.NewMySQLPasswordFromSecret(s)
		if err != nil {
			out.Errors[reader] = err.Error()
			continue
		}
		parsed[reader] = pwd
		out.Readers[reader] = fingerprints(pwd)
	}
	if pwd := parsed["controller"]; pwd != nil {
		out.UserIsToSecret = contains(userSecret.Data, pwd.ToSecret().Data)
		out.MyCnfIsToMyCnfSecret = contains(cnfSecret.Data, pwd.ToMyCnfSecret().Data)
	}
	return json.NewEncoder(os.Stdout).Encode(out)
}

// contains: every key of want is in got with the same bytes (MOCO
// writes its keys; a Secret may hold others).
func contains(got, want map[string][]byte) bool {
	for k, v := range want {
		if g, ok := got[k]; !ok || !bytes.Equal(g, v) {
			return false
		}
	}
	return true
}

func fingerprints(p *password.MySQLPassword) map[string]string {
	fp := func(s string) string {
		sum := sha256.Sum256([]byte(s))
		return hex.EncodeToString(sum[:])[:12]
	}
	return map[string]string{
		"moco-admin": fp(p.Admin()), "moco-agent": fp(p.Agent()), "moco-repl": fp(p.Replicator()),
		"moco-clone-donor": fp(p.Donor()), "moco-exporter": fp(p.Exporter()), "moco-backup": fp(p.Backup()),
		"moco-readonly": fp(p.ReadOnly()), "moco-writable": fp(p.Writable()),
	}
}
