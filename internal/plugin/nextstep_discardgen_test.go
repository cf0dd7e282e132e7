package plugin

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// A set that discards declaratively is told which discardGeneration
// discards the active rotation, and that it is under way once set.
func TestNextStepDiscardGeneration(t *testing.T) {
	now := time.Unix(1700000000, 0)
	rolled := metav1.NewTime(now.Add(-time.Minute))
	spec := func(discard int64) v1.CredentialSetSpec {
		s := v1.CredentialSetSpec{RabbitMQ: &v1.RabbitMQSpec{User: v1.RabbitMQUser{Base: "nova"}},
			Rotation: v1.RotationSpec{Policy: v1.PolicyKeyGeneration, KeyGeneration: ptr.To(int64(5))}}
		if discard > 0 {
			s.Rotation.DiscardGeneration = ptr.To(discard)
		}
		return s
	}
	distributed := v1.CredentialSetStatus{Phase: v1.PhaseDistributed, RotationID: "keygeneration-5", RotateApplied: true,
		KeyGeneration: 4, TargetGeneration: 5, RolledOutAt: &rolled}
	cases := []struct {
		name string
		spec v1.CredentialSetSpec
		st   v1.CredentialSetStatus
		want string
	}{
		{"not used: as before", spec(0), distributed,
			"verify, then kubectl rekey discard nova (the old user goes once every consumer of this set moved)"},
		{"used, still at the last generation: offers the one to set", spec(4), distributed,
			"verify, then kubectl rekey discard nova or set spec.rotation.discardGeneration to 5 (the old user goes once every consumer of this set moved)"},
		{"set to the rotation's generation: under way", spec(5), distributed,
			"wait: spec.rotation.discardGeneration 5 asks for the discard; the operator retires the old credentials"},
		{"set, consumers not rolled out yet", spec(5), func() v1.CredentialSetStatus {
			s := distributed
			s.RolledOutAt = nil
			s.ConsumersUpdated = "0/1"
			return s
		}(),
			"wait for consumers to roll out (0/1)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			spec := c.spec
			if c.st.RolledOutAt == nil {
				spec.Consumers = []v1.ConsumerRef{{Kind: v1.KindDeployment, Name: "api"}}
			}
			cs := &v1.CredentialSet{ObjectMeta: metav1.ObjectMeta{Name: "nova"}, Spec: spec, Status: c.st}
			if got := nextStep(cs, now); got != c.want {
				t.Fatalf("next step\n got %q\nwant %q", got, c.want)
			}
		})
	}
}
