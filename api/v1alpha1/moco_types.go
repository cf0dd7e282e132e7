package v1alpha1

// MOCOSpec ties a CredentialSet to a MySQLCluster managed by MOCO.
type MOCOSpec struct {
	// ClusterName is the MySQLCluster, in the CredentialSet's namespace.
	// Its StatefulSet moco-<clusterName> must be listed in
	// spec.consumers: MOCO's agents read their passwords when they start.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	ClusterName string `json:"clusterName"`
}
