#!/usr/bin/env bash
# Checks the Helm chart (charts/hermes):
#   1. installs helm $HERMES_HELM_VERSION with `go install` unless that
#      version is already in $(go env GOPATH)/bin (built once per machine);
#   2. `helm lint --strict` with the default values and every ci/*.yaml;
#   3. `helm template` of each, decoded strictly with the Kubernetes API
#      types by tools/chartcheck (unknown kinds and fields fail);
#   4. the chart tests of test/helm (options rendered and linted, values
#      described, the schema against the runner's rules);
#   5. go vet, gofmt and `go test` of tools/chartcheck, a module of its own
#      that scripts/test.sh does not reach: the decoder's tests, the chart's
#      invariants (non-root, read-only root, probes, tokens) per values
#      file, and values that must be rejected.
#
# helm is built with the ldflags of helm's own Makefile that matter here:
# its version, and the Kubernetes version `helm template` assumes (without
# them it assumes 1.20 and the chart's kubeVersion >=1.29 fails).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

helm_version="${HERMES_HELM_VERSION:-v3.21.4}"
# The Kubernetes minor version of the client-go that helm release uses.
kube_minor="${HERMES_HELM_KUBE_MINOR:-36}"
chart="$HERMES_ROOT/charts/hermes"
chartcheck_dir="$HERMES_ROOT/tools/chartcheck"
gobin="$(go env GOPATH)/bin"
helm="$gobin/helm"

elapsed() { echo "$((SECONDS - $1))s"; }

install_helm() {
	if [ -x "$helm" ] && [ "$("$helm" version --template '{{.Version}}' 2>/dev/null)" = "$helm_version" ]; then
		log "helm $helm_version already in $gobin"
		return 0
	fi
	local t0=$SECONDS pkg=helm.sh/helm/v3
	log "go install $pkg/cmd/helm@$helm_version (first time on this machine: a few minutes)"
	GOBIN="$gobin" go install -ldflags "-s -w \
		-X $pkg/internal/version.version=$helm_version \
		-X $pkg/pkg/lint/rules.k8sVersionMajor=1 -X $pkg/pkg/lint/rules.k8sVersionMinor=$kube_minor \
		-X $pkg/pkg/chartutil.k8sVersionMajor=1 -X $pkg/pkg/chartutil.k8sVersionMinor=$kube_minor" \
		"$pkg/cmd/helm@$helm_version" >"$HERMES_CI_STATE_DIR/helm-install.log" 2>&1 ||
		{ tail -n 30 "$HERMES_CI_STATE_DIR/helm-install.log" >&2; die "go install helm failed"; }
	[ "$("$helm" version --template '{{.Version}}')" = "$helm_version" ] ||
		die "installed helm reports $("$helm" version --template '{{.Version}}'), want $helm_version"
	log "installed helm $helm_version in $(elapsed "$t0")"
}

main() {
	local t0=$SECONDS out chartcheck values name
	with_lock helm install_helm
	out="$(mktemp -d)"
	# shellcheck disable=SC2064 # expand now: $out is local.
	trap "rm -rf '$out'" EXIT

	log "building tools/chartcheck"
	(cd "$chartcheck_dir" && go build -o "$out/chartcheck" ./cmd/chartcheck) || die "tools/chartcheck does not build"
	chartcheck="$out/chartcheck"

	local -a files=("")
	for values in "$chart"/ci/*.yaml; do
		[ -e "$values" ] && files+=("$values")
	done
	for values in "${files[@]}"; do
		name="${values:+ci/$(basename "$values")}"
		name="${name:-default values}"
		local -a vargs=()
		[ -n "$values" ] && vargs=(--values "$values")
		"$helm" lint --strict --quiet "$chart" "${vargs[@]}" >"$out/lint.log" 2>&1 ||
			{ cat "$out/lint.log" >&2; die "helm lint failed for $name"; }
		"$helm" template hermes "$chart" --namespace hermes "${vargs[@]}" >"$out/rendered.yaml" 2>"$out/template.log" ||
			{ cat "$out/template.log" >&2; die "helm template failed for $name"; }
		"$chartcheck" "$out/rendered.yaml" >"$out/check.log" 2>&1 ||
			{ cat "$out/check.log" >&2; die "strict decoding failed for $name"; }
		log "$name: lint clean; $(sed -E 's/^[^:]*: //' "$out/check.log")"
	done

	# test/helm's chart tests (each option rendered and linted, every
	# value described, the schema held to the runner's own rules) also run
	# in scripts/test.sh; here they run with the helm just installed.
	log "chart tests of test/helm"
	(cd "$HERMES_ROOT" && HERMES_TEST_HELM="$helm" go test -count=1 \
		-run 'TestChartOptions|TestCIValuesAreTheRunners|TestSchemaDescribesEveryValue|TestValuesYAMLDescribed|TestSchemaAgreesWithRunner' \
		./test/helm/) || die "test/helm chart tests failed"

	log "go vet, gofmt and go test in tools/chartcheck"
	(cd "$chartcheck_dir" && go vet ./...) || die "go vet failed in tools/chartcheck"
	local unformatted
	unformatted="$(cd "$chartcheck_dir" && gofmt -l .)"
	[ -z "$unformatted" ] || die "gofmt needed in tools/chartcheck: $unformatted"
	(cd "$chartcheck_dir" && HELM="$helm" go test -count=1 ./...) || die "tools/chartcheck tests failed"
	log "helm chart checks passed in $(elapsed "$t0")"
}

main "$@"
