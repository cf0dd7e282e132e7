package controller

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/naming"
)

// TestSetOfSecret: a Secret rekey wrote wakes its set only when the set is
// one this manager watches (in its cache): a second manager, limited to
// other sets, never reconciles this one because of its Secrets. And only a
// Secret with the set's UID: a Secret a tenant annotated with another
// namespace's set wakes nothing.
func TestSetOfSecret(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := v1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	watched := fakeclient.NewClientBuilder().WithScheme(scheme).
		WithObjects(&v1.CredentialSet{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "db", UID: "uid-db"}}).Build()
	secret := func(annot, uid string) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "rekey-system", Name: "s", Annotations: map[string]string{}}}
		if annot != "" {
			s.Annotations[naming.CredentialSetAnnot] = annot
		}
		if uid != "" {
			s.Annotations[naming.CredentialSetUIDAnnot] = uid
		}
		return s
	}
	for _, tc := range []struct {
		annot, uid string
		want       int
	}{
		{"app/db", "uid-db", 1},
		{"app/db", "", 0},          // a tenant's Secret naming the set
		{"app/db", "uid-other", 0}, // another set's Secret, renamed
		{"app/other", "uid-db", 0}, // not watched by this manager (or deleted)
		{"", "uid-db", 0},
		{"app/", "uid-db", 0},
		{"db", "uid-db", 0},
	} {
		got := setOfSecret(watched)(context.Background(), secret(tc.annot, tc.uid))
		if len(got) != tc.want {
			t.Errorf("annotation %q: %d requests, want %d", tc.annot, len(got), tc.want)
			continue
		}
		if tc.want == 1 && (got[0].Namespace != "app" || got[0].Name != "db") {
			t.Errorf("annotation %q: request %v, want app/db", tc.annot, got[0].NamespacedName)
		}
	}
}
