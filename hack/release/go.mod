// Release module: hack/release builds what a release publishes (make release,
// docs/image.md). Its own module: go-containerregistry, which assembles the
// images, is a build tool, not a dependency of the manager or the plugin.
module rekey.io/hack/release

go 1.26.0

require github.com/google/go-containerregistry v0.22.1

require (
	github.com/klauspost/compress v1.19.2 // indirect
	github.com/opencontainers/go-digest v1.0.0 // indirect
	github.com/opencontainers/image-spec v1.1.1 // indirect
	golang.org/x/sync v0.22.0 // indirect
)
