# rekey's manager image for users with a registry and a container engine.
# `make image` builds the same image without either, as bin/rekey-image.tar
# (see docs/image.md): a static manager at /rekey plus the ceph CLI and its
# libraries from Debian sid's ceph 20.2 packages, running as 65532:65532,
# no shell needed at run time.
#
#   docker build -t REGISTRY/rekey:TAG .
#
# Pin the Debian snapshot for a reproducible build:
#   --build-arg DEBIAN=debian:sid-YYYYMMDD

ARG GO_IMAGE=golang:1.26
ARG DEBIAN=debian:sid

FROM ${GO_IMAGE} AS manager
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY api/ api/
COPY cmd/ cmd/
COPY internal/ internal/
RUN CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o /out/rekey ./cmd/manager

# The ceph CLI and what it loads, installed as the test environment installs it,
# then copied out by hack/image's package closure (the same code `make image` runs).
FROM ${GO_IMAGE} AS imagetool
WORKDIR /src
COPY hack/image/ hack/image/
RUN CGO_ENABLED=0 go build -o /out/image ./hack/image

FROM ${DEBIAN} AS ceph
RUN apt-get -o Acquire::Check-Valid-Until=false update \
 && apt-get install -y --no-install-recommends ceph-common \
 && rm -rf /var/lib/apt/lists/*
COPY --from=imagetool /out/image /usr/local/bin/image
COPY --from=manager /out/rekey /out/rekey
RUN image -root / -manager /out/rekey -out /out/rekey-image.tar \
      -packages python3-rados,python3-ceph-argparse,python3-prettytable \
      -exclude debconf,adduser,perl-base,dpkg,tzdata,readline-common,media-types,netbase \
      -files /usr/bin/ceph,/lib64/ld-linux-x86-64.so.2 \
 && mkdir /rootfs && cd /out && tar -xf rekey-image.tar \
 && for l in $(python3 -c 'import json;m=json.load(open("blobs/sha256/"+json.load(open("index.json"))["manifests"][0]["digest"][7:]));print(" ".join(x["digest"][7:] for x in m["layers"]))'); do tar -xzf blobs/sha256/$l -C /rootfs; done

FROM scratch
COPY --from=ceph /rootfs/ /
USER 65532:65532
ENV PATH=/usr/local/bin:/usr/bin:/bin HOME=/tmp
ENTRYPOINT ["/rekey"]
