# perfscope in a container: a static binary on an empty image.
# Run with the host's kernel view, e.g.:
#   docker run --rm --pid=host --net=host --cap-add SYS_ADMIN \
#     --security-opt seccomp=unconfined -v /sys:/sys perfscope softirq
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
# The BPF objects are committed, so no clang is needed here.
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X github.com/perfscope/perfscope/internal/cli.version=${VERSION}" \
      -o /out/perfscope ./cmd/perfscope

FROM scratch
COPY --from=build /out/perfscope /perfscope
ENTRYPOINT ["/perfscope"]
