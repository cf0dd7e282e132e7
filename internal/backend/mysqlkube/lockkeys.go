package mysqlkube

import (
	"regexp"
	"strings"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/moco"
)

// statefulSetPod matches the address of a StatefulSet's pod through its
// headless Service, <sts>-<ordinal>.<service>.<namespace>.svc[.cluster.local]:<port>,
// which is how mysql.instances.statefulSet reaches its instances: such a
// host in mysql.instances.hosts is the same instance.
var statefulSetPod = regexp.MustCompile(`^([a-z0-9]([-a-z0-9]*[a-z0-9])?)-[0-9]+\.[a-z0-9]([-a-z0-9]*[a-z0-9])?\.([a-z0-9]([-a-z0-9]*[a-z0-9])?)\.svc(\.cluster\.local)?\.?:[0-9]+$`)

// lockKeys: one key per instance, "mysql:<host>:<port>"; a StatefulSet is
// "mysql:statefulset/<namespace>/<name>" (its pods, whatever the replica
// count), and a host naming one of its pods through the headless Service
// maps to the same key.
func lockKeys(cs *v1.CredentialSet) []string {
	var keys []string
	in := moco.InstancesOf(cs.Spec.MySQL)
	if in.StatefulSet != nil {
		keys = append(keys, "mysql:statefulset/"+cs.Namespace+"/"+in.StatefulSet.Name)
	}
	for _, h := range in.Hosts {
		h = strings.ToLower(h)
		if m := statefulSetPod.FindStringSubmatch(h); m != nil {
			keys = append(keys, "mysql:statefulset/"+m[4]+"/"+m[1])
			continue
		}
		keys = append(keys, "mysql:"+h)
	}
	return keys
}
