# syntax=docker/dockerfile:1
#
# perfscope's container image: the static binary and async-profiler's
# library for the image's architecture, on an empty image. Nothing else:
# no shell, no package manager, no libc (the binary is static, the library
# is loaded by the target JVM from its own /tmp, never by perfscope).
#
#   docker buildx build --platform linux/amd64,linux/arm64 -t perfscope .
#
# Run lines (least privilege, measured): README, "Running in a container
# or on Kubernetes"; `perfscope doctor --recipe NAME` inside the container
# says what is missing.
#
# Base images are pinned by version, not yet by digest: the machines this
# image is built and tested on reach no registry (the tests build the
# `local` target below), so no digest here could be checked against what
# the registry serves, and an unchecked digest is a guess. Where a registry
# is reachable, pin both: `docker buildx imagetools inspect
# golang:1.26.8-bookworm` prints the index digest; write
# GO_IMAGE=golang:1.26.8-bookworm@sha256:… (and the same for Maven). Only
# build tools come from them: the image itself is `scratch`.
ARG GO_IMAGE=golang:1.26.8-bookworm
ARG MAVEN_IMAGE=maven:3.9.11-eclipse-temurin-21

# `local`: the same image from a tree scripts/dist.sh laid out on the host
# (where no base image can be pulled, and in perfscope's own tests):
#   bash scripts/dist.sh amd64 && docker build --target local -f Dockerfile dist
# It comes first and uses no other stage, so a build of it pulls nothing.
FROM scratch AS local
ARG TARGETARCH=amd64
COPY linux-${TARGETARCH}/ /
ENTRYPOINT ["/usr/local/bin/perfscope"]
CMD ["doctor"]

# async-profiler's libraries for both architectures, through Maven (the
# user's mirrors apply), checked against the digests jvm/asprof pins.
FROM --platform=$BUILDPLATFORM ${MAVEN_IMAGE} AS asprof
ARG ASPROF_VERSION=4.1
ARG ASPROF_JAR_SHA256=5535baa56133628cfffe2f05ca9bfef1fae3d5abe49835447262b1c6da4a9582
ARG ASPROF_X64_SHA256=8d16556469adc3fe6661f0c023bfc2081342c930796b1d68ae1cd8248bef4c28
ARG ASPROF_ARM64_SHA256=b2f7fa5a7caaf6ebf1f5e4c46af40d6fe7b623ed5421a4f9be7d45a08537a9e7
RUN mvn -B -q dependency:get -Dartifact=tools.profiler:async-profiler:${ASPROF_VERSION} -Dtransitive=false \
 && jar=/root/.m2/repository/tools/profiler/async-profiler/${ASPROF_VERSION}/async-profiler-${ASPROF_VERSION}.jar \
 && echo "${ASPROF_JAR_SHA256}  ${jar}" | sha256sum -c - \
 && mkdir -p /x && cd /x && jar xf "${jar}" linux-x64/libasyncProfiler.so linux-arm64/libasyncProfiler.so \
 && echo "${ASPROF_X64_SHA256}  linux-x64/libasyncProfiler.so" | sha256sum -c - \
 && echo "${ASPROF_ARM64_SHA256}  linux-arm64/libasyncProfiler.so" | sha256sum -c - \
 && for a in amd64:linux-x64 arm64:linux-arm64; do \
      d=/out/${a%%:*}/usr/local/lib/perfscope/async-profiler/${ASPROF_VERSION}/${a#*:}; \
      mkdir -p "$d" && install -m 0644 "/x/${a#*:}/libasyncProfiler.so" "$d/"; \
    done

# The static binary, cross-compiled on the build machine's architecture.
# The BPF objects are committed, so no clang is needed here.
FROM --platform=$BUILDPLATFORM ${GO_IMAGE} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG TARGETARCH
RUN CGO_ENABLED=0 GOOS=linux GOARCH=${TARGETARCH} go build -trimpath \
      -ldflags "-s -w -X github.com/perfscope/perfscope/internal/cli.version=${VERSION}" \
      -o /out/usr/local/bin/perfscope ./cmd/perfscope

# The image (the default target).
FROM scratch AS image
ARG TARGETARCH
COPY --from=build /out/ /
COPY --from=asprof /out/${TARGETARCH}/ /
ENTRYPOINT ["/usr/local/bin/perfscope"]
CMD ["doctor"]
