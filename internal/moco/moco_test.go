package moco

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
)

func TestNamesOf(t *testing.T) {
	n := NamesOf("shop", "db")
	want := Names{StatefulSet: "moco-db", Service: "moco-db", UserSecret: "moco-db", MyCnfSecret: "moco-my-cnf-db",
		ControllerSecret: "mysql-shop.db", BackupCronJob: "moco-backup-db"}
	if n != want {
		t.Fatalf("NamesOf = %+v, want %+v", n, want)
	}
}

func TestMyCnfData(t *testing.T) {
	pw := map[string]string{}
	for _, k := range Keys {
		pw[k.Key] = k.User + "-pw"
	}
	got := MyCnfData(pw)
	want := map[string]string{
		"moco-admin-my.cnf":    "[client]\nuser=\"moco-admin\"\npassword=\"moco-admin-pw\"\n",
		"moco-exporter-my.cnf": "[client]\nuser=\"moco-exporter\"\npassword=\"moco-exporter-pw\"\nsocket=\"/run/mysqld.sock\"\n",
		"moco-backup-my.cnf":   "[client]\nuser=\"moco-backup\"\npassword=\"moco-backup-pw\"\n",
		"moco-readonly-my.cnf": "[client]\nuser=\"moco-readonly\"\npassword=\"moco-readonly-pw\"\n",
		"moco-writable-my.cnf": "[client]\nuser=\"moco-writable\"\npassword=\"moco-writable-pw\"\n",
	}
	if len(got) != len(want) {
		t.Fatalf("%d entries, want %d", len(got), len(want))
	}
	for k, v := range want {
		if string(got[k]) != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if u := UserSecretData(pw); len(u) != 8 || string(u["WRITABLE_PASSWORD"]) != "moco-writable-pw" {
		t.Fatalf("UserSecretData = %v", u)
	}
}

func TestPasswords(t *testing.T) {
	data := map[string][]byte{}
	for _, k := range Keys {
		data[k.Key] = []byte("x")
	}
	if got, missing := Passwords(data); len(got) != 8 || missing != nil {
		t.Fatalf("all present: %d, missing %v", len(got), missing)
	}
	delete(data, "AGENT_PASSWORD")
	data["ADMIN_PASSWORD"] = nil
	if _, missing := Passwords(data); strings.Join(missing, ",") != "ADMIN_PASSWORD,AGENT_PASSWORD" {
		t.Fatalf("missing = %v", missing)
	}
}

func TestDerivedSpec(t *testing.T) {
	spec := &v1.MySQLSpec{MOCO: &v1.MOCOSpec{ClusterName: "db"}, TLS: "Required", TLSServerName: "x"}
	d := DerivedSpec(spec)
	if d.Instances.StatefulSet == nil || *d.Instances.StatefulSet != (v1.StatefulSetInstances{Name: "moco-db", ServiceName: "moco-db", Port: 3306}) {
		t.Fatalf("instances %+v", d.Instances)
	}
	if d.Admin.User != "moco-admin" || d.Admin.PasswordSecretRef != nil || d.Preset != "moco" || d.TLSServerName != "x" {
		t.Fatalf("derived %+v", d)
	}
	if spec.Preset != "" || spec.Instances.StatefulSet != nil {
		t.Fatal("the set's own spec was changed")
	}
}

func TestHealth(t *testing.T) {
	c := func(typ, st string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: metav1.ConditionStatus(st), Reason: "R"}
	}
	for _, tc := range []struct {
		name  string
		conds []metav1.Condition
		want  string // "" fit, else a fragment of the refusal
	}{
		{"healthy", []metav1.Condition{c("Healthy", "True"), c("Available", "True")}, ""},
		{"healthy, all active", []metav1.Condition{c("Healthy", "True"), c("Available", "True"), c("ReconciliationActive", "True"), c("ClusteringActive", "True")}, ""},
		{"no conditions yet", nil, "has not reported the condition Healthy"},
		{"degraded", []metav1.Condition{c("Healthy", "False"), c("Available", "True")}, "Healthy=False"},
		{"unavailable", []metav1.Condition{c("Healthy", "True"), c("Available", "False")}, "Available=False"},
		{"unknown", []metav1.Condition{c("Healthy", "Unknown"), c("Available", "True")}, "Healthy=Unknown"},
		{"clustering stopped", []metav1.Condition{c("Healthy", "True"), c("Available", "True"), c("ClusteringActive", "False")}, "kubectl moco start"},
		{"reconciliation stopped", []metav1.Condition{c("Healthy", "True"), c("Available", "True"), c("ReconciliationActive", "False")}, "ReconciliationActive is False"},
	} {
		got := Health(tc.conds)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: Health = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestOwnRotation(t *testing.T) {
	v036 := []string{"backup", "cloned", "conditions", "currentPrimaryIndex", "errantReplicaList", "errantReplicas", "reconcileInfo", "restoredTime", "syncedReplicas"}
	for _, tc := range []struct {
		name              string
		crd, status       []string
		cluster, template map[string]string
		want              string
	}{
		{"MOCO v0.36.0", v036, []string{"conditions"}, nil, nil, ""},
		{"CRD with its own rotation", append(v036, "systemUserRotation"), nil, nil, nil, "CRD has status.systemUserRotation"},
		{"status with its own rotation", v036, []string{"systemUserRotation"}, nil, nil, "status has systemUserRotation"},
		{"rotate annotation", v036, nil, map[string]string{"moco.cybozu.com/password-rotate": "x"}, nil, "annotated moco.cybozu.com/password-rotate"},
		{"discard annotation", v036, nil, map[string]string{"moco.cybozu.com/password-discard": "x"}, nil, "password-discard"},
		{"restart annotation on pods", v036, nil, nil, map[string]string{"moco.cybozu.com/password-rotation-restart": "x"}, "password-rotation-restart"},
		{"other annotations", v036, nil, map[string]string{"moco.cybozu.com/other": "x"}, map[string]string{"rekey.io/restart": "x"}, ""},
	} {
		got := OwnRotation(tc.crd, tc.status, tc.cluster, tc.template)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: OwnRotation = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestControllerSecretProblem(t *testing.T) {
	good := map[string]string{LabelCreatedBy: "moco", LabelInstance: "db", LabelInstanceNamespace: "shop", LabelName: "mysql"}
	ann := map[string]string{SecretVersionAnnotation: "1"}
	if p := ControllerSecretProblem(good, ann, "shop", "db"); p != "" {
		t.Fatalf("MOCO's own Secret refused: %s", p)
	}
	for _, tc := range []struct {
		name      string
		ns, cl    string
		ann       map[string]string
		wantMatch string
	}{
		{"another namespace's cluster", "other", "db", ann, "instance-namespace"},
		{"another cluster", "shop", "db2", ann, "app.kubernetes.io/instance is"},
		{"no secret-version", "shop", "db", nil, "secret-version"},
	} {
		if p := ControllerSecretProblem(good, tc.ann, tc.ns, tc.cl); !strings.Contains(p, tc.wantMatch) {
			t.Errorf("%s: %q does not mention %q", tc.name, p, tc.wantMatch)
		}
	}
	if p := ControllerSecretProblem(map[string]string{}, ann, "shop", "db"); !strings.Contains(p, "created-by") {
		t.Errorf("unlabelled Secret: %q", p)
	}
}

// The replication user must be one of the rotated users, under the key
// MOCO reads its SOURCE_PASSWORD from.
func TestReplicationUserIsRotated(t *testing.T) {
	for _, k := range Keys {
		if k.User == ReplicationUser {
			if k.Key != "REPLICATION_PASSWORD" {
				t.Fatalf("%s is stored under %s, MOCO reads REPLICATION_PASSWORD", ReplicationUser, k.Key)
			}
			return
		}
	}
	t.Fatalf("%s is not among the rotated users", ReplicationUser)
}
