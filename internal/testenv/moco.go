package testenv

import "path/filepath"

// MOCOCRDs is the folder holding MOCO's CustomResourceDefinitions at the
// pinned MOCO_VERSION, taken from its Go module by hack/env/moco.sh.
func (e *Env) MOCOCRDs() (dir, version string, err error) {
	version = e.Versions["MOCO_VERSION"]
	dir = filepath.Join(e.Cache, "moco-"+version, "crd")
	return dir, version, e.requireFile(filepath.Join(dir, "moco.cybozu.com_mysqlclusters.yaml"), "MOCO's CRDs")
}
