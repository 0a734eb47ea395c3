// Package k8s holds no code: it is the test of the Kubernetes manifests next to it (the
// kustomization of rollup serve, the Secret template, and the Prometheus Operator's
// ServiceMonitor and PrometheusRule in monitoring/). The test decodes every manifest strictly
// with the official API types (k8s.io/api, and the Prometheus Operator's monitoring/v1), so an
// unknown, misspelt or duplicate field fails without a cluster, and checks that the pieces fit
// (selectors, ports, probes, the Secret reference, the image's user) and that the
// PrometheusRule holds exactly deploy/prometheus/rules.yml.
//
// It is its own Go module (deploy/k8s/go.mod), outside go.work, so the Kubernetes and
// Prometheus Operator modules never enter the rollup module's dependency graph or its binary:
// run it with  cd deploy/k8s && GOWORK=off go test ./...  (make test and .ci/run do).
package k8s
