package cli

import (
	"encoding/json"
	"slices"
	"testing"

	"sigs.k8s.io/yaml"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// The outputs kubectl users expect of kubectl's own commands: -o and -A.

func TestOutputFormats(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	kc := in(t, ns)
	newSet(t, ns, "orders")
	newSet(t, ns, "payments")
	st := idleAt(3)
	st.LastRotationID = "r-prev"
	status(t, ns, "orders", st)
	want := getSet(t, ns, "orders")

	check := func(format string, got *v1.CredentialSet) {
		t.Helper()
		if got.APIVersion != "rekey.io/v1alpha1" || got.Kind != "CredentialSet" {
			t.Errorf("-o %s: apiVersion %q kind %q", format, got.APIVersion, got.Kind)
		}
		if got.Namespace != ns || got.Name != "orders" || got.UID != want.UID || got.ResourceVersion != want.ResourceVersion {
			t.Errorf("-o %s: object %s/%s uid %s rv %s, want %s/orders uid %s rv %s", format, got.Namespace, got.Name, got.UID, got.ResourceVersion, ns, want.UID, want.ResourceVersion)
		}
		if got.Status.KeyGeneration != 3 || got.Status.LastRotationID != "r-prev" || got.Status.Phase != v1.PhaseIdle {
			t.Errorf("-o %s: status %+v", format, got.Status)
		}
		if got.Spec.MySQL == nil || len(got.Spec.MySQL.Users) != 2 || got.Spec.MySQL.Users[1].Host != "10.%" {
			t.Errorf("-o %s: spec.mysql %+v", format, got.Spec.MySQL)
		}
	}
	r := kc.ok(t, "status", "orders", "-o", "json")
	var fromJSON v1.CredentialSet
	if err := json.Unmarshal([]byte(r.stdout), &fromJSON); err != nil {
		t.Fatalf("-o json does not parse: %v\n%s", err, r)
	}
	check("json", &fromJSON)
	r = kc.ok(t, "status", "orders", "--output=yaml")
	var fromYAML v1.CredentialSet
	if err := yaml.UnmarshalStrict([]byte(r.stdout), &fromYAML); err != nil {
		t.Fatalf("-o yaml does not parse: %v\n%s", err, r)
	}
	check("yaml", &fromYAML)

	// Without NAME: the list, as kubectl get -o json prints it.
	r = kc.ok(t, "status", "-o", "json")
	var list v1.CredentialSetList
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
		t.Fatalf("-o json (list) does not parse: %v\n%s", err, r)
	}
	var names []string
	for _, cs := range list.Items {
		names = append(names, cs.Namespace+"/"+cs.Name)
	}
	if !slices.Equal(names, []string{ns + "/orders", ns + "/payments"}) {
		t.Errorf("-o json lists %v", names)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"status", "orders", "-o", "jsonpath={.status.keyGeneration}"}, "3"},
		{[]string{"status", "orders", "-o", "jsonpath={.spec.mysql.users[*].name}"}, "orders billing"},
		{[]string{"status", "-o", "jsonpath={.items[*].metadata.name}"}, "orders payments"},
		{[]string{"status", "-o", "name"}, "credentialset.rekey.io/orders\ncredentialset.rekey.io/payments\n"},
		{[]string{"status", "orders", "-o", "go-template={{.status.lastRotationID}}"}, "r-prev"},
	} {
		if r := kc.ok(t, c.args...); r.stdout != c.want || r.stderr != "" {
			t.Errorf("%v: stdout %q stderr %q, want stdout %q", c.args, r.stdout, r.stderr, c.want)
		}
	}

	// -o wide: the table with the backend, discard policy and last rotation.
	r = kc.ok(t, "status", "-o", "wide")
	rows := cells(r.stdout)
	if len(rows) != 3 || !slices.Equal(rows[0][len(rows[0])-3:], []string{"BACKEND", "DISCARD", "LAST ROTATION"}) {
		t.Fatalf("-o wide header:\n%s", r.stdout)
	}
	if got := rows[1][len(rows[1])-3:]; rows[1][0] != "orders" || !slices.Equal(got, []string{"MySQL", "Manual", "r-prev"}) {
		t.Errorf("-o wide row for orders ends %v, want [MySQL Manual r-prev]:\n%s", got, r.stdout)
	}

	kc.fails(t, `unknown output format "xml": use wide, `, "status", "-o", "xml")
	kc.fails(t, "error parsing jsonpath", "status", "-o", "jsonpath={.status[")
}

func TestAllNamespaces(t *testing.T) {
	t.Parallel()
	a, b := namespace(t), namespace(t)
	newSet(t, a, "orders")
	newSet(t, b, "orders")
	newSet(t, b, "ledger")
	status(t, a, "orders", idleAt(2))
	status(t, b, "orders", distributedAt(7, "r-b"))
	kc := in(t, a)

	for _, flag := range []string{"-A", "--all-namespaces"} {
		r := kc.ok(t, "status", flag)
		rows := cells(r.stdout)
		if len(rows) == 0 || rows[0][0] != "NAMESPACE" || rows[0][1] != "NAME" {
			t.Fatalf("status %s header:\n%s", flag, r.stdout)
		}
		found := map[string]string{} // ns/name -> phase
		for _, row := range rows[1:] {
			if row[0] == a || row[0] == b {
				found[row[0]+"/"+row[1]] = row[2]
			}
		}
		want := map[string]string{a + "/orders": "Idle", b + "/orders": "Distributed", b + "/ledger": "-"}
		for k, v := range want {
			if found[k] != v {
				t.Errorf("status %s: %s has phase %q, want %q:\n%s", flag, k, found[k], v, r.stdout)
			}
		}
		if len(found) != len(want) {
			t.Errorf("status %s: rows of %s and %s: %v, want %v", flag, a, b, found, want)
		}
	}

	r := kc.ok(t, "status", "-A", "-o", "json")
	var list v1.CredentialSetList
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
		t.Fatalf("-A -o json does not parse: %v\n%s", err, r)
	}
	gens := map[string]int64{}
	for _, cs := range list.Items {
		gens[cs.Namespace+"/"+cs.Name] = cs.Status.KeyGeneration
	}
	if gens[a+"/orders"] != 2 || gens[b+"/orders"] != 7 {
		t.Errorf("-A -o json: generations %v", gens)
	}
	kc.fails(t, "a CredentialSet cannot be named across all namespaces", "status", "-A", "orders")
}

// TestShowOutput: show -o prints the credential as an object, kind
// Credential, that json, yaml and jsonpath read back.
func TestShowOutput(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	kc := in(t, ns)
	pws := newSet(t, ns, "orders")
	status(t, ns, "orders", distributedAt(2, "r-9"))

	want := map[string]any{
		"apiVersion": "rekey.io/v1alpha1", "kind": "Credential",
		"metadata": map[string]any{"name": "orders", "namespace": ns},
		"backend":  "MySQL", "identity": "user billing@10.%", "rotationID": "r-9",
		"secret": map[string]any{"namespace": ns, "name": "orders-db"},
		"values": map[string]any{"MYSQL_USER": "billing", "MYSQL_PASSWORD": pws["BILLING_PASSWORD"]},
	}
	r := kc.ok(t, "show", "orders", "--user", "billing", "-o", "json")
	var got map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("show -o json does not parse: %v\n%s", err, r)
	}
	if g, w := mustJSON(t, got), mustJSON(t, want); g != w {
		t.Errorf("show -o json:\n got %s\nwant %s", g, w)
	}
	r = kc.ok(t, "show", "orders", "--user", "billing", "-o", "yaml")
	got = nil
	if err := yaml.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("show -o yaml does not parse: %v\n%s", err, r)
	}
	if g, w := mustJSON(t, got), mustJSON(t, want); g != w {
		t.Errorf("show -o yaml:\n got %s\nwant %s", g, w)
	}
	r = kc.ok(t, "show", "orders", "--user", "orders", "-o", "jsonpath={.values.MYSQL_PASSWORD}")
	if r.stdout != pws["ORDERS_PASSWORD"] {
		t.Errorf("show -o jsonpath: %q, want the orders password", r.stdout)
	}
	kc.fails(t, "--format and -o both choose the output: use one", "show", "orders", "--user", "orders", "--format", "env", "-o", "json")
	kc.fails(t, `unknown output format "wide"`, "show", "orders", "--user", "orders", "-o", "wide")
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
