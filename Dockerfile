# hermes: the shared runner image (`hermes serve`).
#
# Two stages. The first compiles a static binary with the Go toolchain of
# BUILDER_IMAGE; the second copies it, CA certificates and an empty, writable
# HERMES_HOME onto BASE_IMAGE (scratch by default), so the final image is the
# binary and little else, and runs as an unprivileged numeric user.
#
#   docker build -t hermes:dev --build-arg VERSION=$(git describe --always) .
#
# Both bases are build arguments so that a machine with no image registry can
# pass locally made stand-ins (scripts/ci/docker-image.sh does). The builder
# needs: go on PATH, /bin/sh, and a module proxy (GOPROXY) that can serve
# go.sum's modules; /etc/ssl/certs/ca-certificates.crt is copied if present.
#
# The image has no shell and no bash: it is meant for the docker backend
# (terminal.env: docker), where every job runs in its own container. For the
# local backend pass a BASE_IMAGE that has bash, e.g. debian:bookworm-slim.
#
# No "# syntax=" line and no RUN --mount: the file builds with BuildKit and
# with the classic builder alike.

ARG BUILDER_IMAGE=golang:1.26-bookworm
ARG BASE_IMAGE=scratch

FROM ${BUILDER_IMAGE} AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOTOOLCHAIN=local
# Modules first, in their own layer: it is reused until go.mod/go.sum change.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG COMMIT=""
ARG BUILD_DATE=""
RUN go build -trimpath -buildvcs=false \
        -ldflags "-s -w -X main.version=${VERSION} -X main.commit=${COMMIT} -X main.buildDate=${BUILD_DATE}" \
        -o /out/ ./cmd/hermes ./cmd/hermes-core \
    && /out/hermes --version
# The final stage may be scratch, which has no mkdir: lay out its directories
# here. /tmp must exist for os.TempDir; HERMES_HOME must be writable by the
# runtime user (a volume usually covers it, see charts/hermes).
RUN mkdir -p /rootfs/etc/ssl/certs /rootfs/tmp /home-skel \
    && chmod 1777 /rootfs/tmp \
    && if [ -f /etc/ssl/certs/ca-certificates.crt ]; then \
           cp /etc/ssl/certs/ca-certificates.crt /rootfs/etc/ssl/certs/; \
       fi

FROM ${BASE_IMAGE}
ARG VERSION=dev
LABEL org.opencontainers.image.title="hermes" \
      org.opencontainers.image.description="Container-native job runner for AI agents (shared runner: hermes serve)" \
      org.opencontainers.image.version="${VERSION}"
COPY --from=build /rootfs/ /
COPY --from=build --chown=65532:65532 /home-skel/ /var/lib/hermes/
COPY --from=build /out/hermes /out/hermes-core /
ENV HERMES_HOME=/var/lib/hermes \
    HOME=/var/lib/hermes
USER 65532:65532
WORKDIR /var/lib/hermes
EXPOSE 7070
ENTRYPOINT ["/hermes"]
CMD ["serve", "--listen", "0.0.0.0:7070"]
