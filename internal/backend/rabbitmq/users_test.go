package rabbitmq

import "testing"

func TestUserName(t *testing.T) {
	if got := UserName("nova", 12); got != "nova-g12" {
		t.Errorf("UserName(nova, 12) = %q, want nova-g12", got)
	}
}
