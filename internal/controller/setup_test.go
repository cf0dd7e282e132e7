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
// other sets, never reconciles this one because of its Secrets.
func TestSetOfSecret(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := v1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	watched := fakeclient.NewClientBuilder().WithScheme(scheme).
		WithObjects(&v1.CredentialSet{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "db"}}).Build()
	secret := func(annot string) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "rekey-system", Name: "s"}}
		if annot != "" {
			s.Annotations = map[string]string{naming.CredentialSetAnnot: annot}
		}
		return s
	}
	for _, tc := range []struct {
		annot string
		want  int
	}{
		{"app/db", 1},
		{"app/other", 0}, // not watched by this manager (or deleted)
		{"", 0},
		{"app/", 0},
		{"db", 0},
	} {
		got := setOfSecret(watched)(context.Background(), secret(tc.annot))
		if len(got) != tc.want {
			t.Errorf("annotation %q: %d requests, want %d", tc.annot, len(got), tc.want)
			continue
		}
		if tc.want == 1 && (got[0].Namespace != "app" || got[0].Name != "db") {
			t.Errorf("annotation %q: request %v, want app/db", tc.annot, got[0].NamespacedName)
		}
	}
}
