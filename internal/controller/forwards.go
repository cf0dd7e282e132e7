package controller

import (
	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/cephkube"
)

// Keys of ceph-csi's formats, the entity a target serves and the rotator
// Secret's name are Ceph knowledge that lives in cephkube. These forwards
// remain only because internal/plugin still imports them from here; the
// controller does not use them, and they go once the plugin reads cephkube.
const (
	CephCSIUserID   = cephkube.CSIUserID
	CephCSIUserKey  = cephkube.CSIUserKey
	CephCSIAdminID  = cephkube.CSIAdminID
	CephCSIAdminKey = cephkube.CSIAdminKey
)

// CephCSIEntity forwards to cephkube.CSIEntity.
func CephCSIEntity(cs *v1.CredentialSet, t v1.SecretTarget) (string, error) {
	return cephkube.CSIEntity(cs, t)
}

// RotatorSecretName forwards to cephkube.RotatorSecretName.
func RotatorSecretName(adminSecret string) string { return cephkube.RotatorSecretName(adminSecret) }
