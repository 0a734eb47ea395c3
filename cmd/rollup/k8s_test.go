package main

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/gameops/rollup/internal/settings"
)

// The Kubernetes check, rollup's side: deploy/k8s/manifests_test.go (its own module) decodes
// the manifests strictly with the Kubernetes types; this test parses the Deployment's rollup
// command with serve's own parser, as the compose check does for the compose services, so a
// renamed flag or a misspelt ROLLUP_* variable (which serve would silently ignore) fails here.

const k8sDeploymentPath = "../../deploy/k8s/deployment.yaml"

// k8sDeployment is the part of a Deployment this test reads; the strict decoding is
// deploy/k8s's.
type k8sDeployment struct {
	Spec struct {
		Template struct {
			Spec struct {
				Containers []struct {
					Command []string `yaml:"command"`
					Args    []string `yaml:"args"`
					Env     []struct {
						Name      string `yaml:"name"`
						Value     string `yaml:"value"`
						ValueFrom *struct {
							SecretKeyRef *struct {
								Name string `yaml:"name"`
								Key  string `yaml:"key"`
							} `yaml:"secretKeyRef"`
						} `yaml:"valueFrom"`
					} `yaml:"env"`
					Ports []struct {
						ContainerPort int `yaml:"containerPort"`
					} `yaml:"ports"`
				} `yaml:"containers"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

// TestKubernetesServe: the Deployment runs the image's rollup with serve's arguments, which
// parse under the image's and the container's environment (the Secret's URI stood in for by a
// valid one), every ROLLUP_* variable it sets is a setting of serve that took its value from
// there, and serve listens on every interface on the container's port.
func TestKubernetesServe(t *testing.T) {
	data, err := os.ReadFile(k8sDeploymentPath)
	if err != nil {
		t.Fatal(err)
	}
	var d k8sDeployment
	if err := yaml.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s: %v", k8sDeploymentPath, err)
	}
	if len(d.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("%s: want one container", k8sDeploymentPath)
	}
	c := d.Spec.Template.Spec.Containers[0]
	if len(c.Command) != 0 || len(c.Args) == 0 || c.Args[0] != "serve" {
		t.Fatalf("command %q args %q: want the image's entrypoint rollup with serve ...", c.Command, c.Args)
	}
	for _, kv := range os.Environ() { // only the container's environment counts
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, settings.EnvPrefix) {
			t.Setenv(k, "")
			_ = os.Unsetenv(k)
		}
	}
	for k, v := range dockerfileEnv(t) {
		t.Setenv(k, v)
	}
	var set []string
	for _, e := range c.Env {
		v := e.Value
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			v = "mongodb://db1:27017,db2:27017,db3:27017/?replicaSet=rs0" // the Secret's, at run time
		}
		t.Setenv(e.Name, v)
		set = append(set, e.Name)
	}
	var out strings.Builder
	cfg, err := parseServe(&env{stdout: &out, stderr: &out}, c.Args[1:])
	if err != nil {
		t.Fatalf("rollup %s: %v\n%s", strings.Join(c.Args, " "), err, out.String())
	}
	for _, name := range set {
		if !strings.HasPrefix(name, settings.EnvPrefix) {
			continue
		}
		flag := strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(name, settings.EnvPrefix)), "_", "-")
		if settings.EnvName(flag) != name || !strings.Contains(cfg.source(flag), name) {
			t.Errorf("%s is not a setting of serve (--%s's source: %s): serve would ignore it", name, flag, cfg.source(flag))
		}
	}
	if cfg.MongoURI == "" {
		t.Error("serve has no --mongodb-uri: it would start the embedded store on the read-only root filesystem")
	}
	host, port, _ := strings.Cut(cfg.Listen, ":")
	if host != "" || len(c.Ports) == 0 || port != strconv.Itoa(c.Ports[0].ContainerPort) {
		t.Errorf("serve listens on %q, want :PORT of the container's port %v", cfg.Listen, c.Ports)
	}
}
