package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// The real-MongoDB workflow's check: actionlint (.ci/run) checks the workflow's syntax and its
// run: scripts; this test checks what the workflow is for (issue #26): MongoDB 7.0 and 8.0
// replica sets and the compose sharded profile, each running the test suite, the spec suites
// and bench scale through the .ci scripts docs/deploy.md runs by hand, which must exist.

const mongodbWorkflowPath = "../../.github/workflows/mongodb.yml"

// TestMongoDBWorkflow: the replica-set job's matrix is MongoDB 7.0 and 8.0 and the sharded job
// starts the compose profile; both run .ci/mongodb-check tests, spec and bench, in that order,
// after starting their deployment; every .ci script a step runs is an executable file.
func TestMongoDBWorkflow(t *testing.T) {
	data, err := os.ReadFile(mongodbWorkflowPath)
	if err != nil {
		t.Fatal(err)
	}
	var wf struct {
		Jobs map[string]struct {
			Strategy struct {
				Matrix map[string][]string `yaml:"matrix"`
			} `yaml:"strategy"`
			Steps []struct {
				Name string `yaml:"name"`
				Run  string `yaml:"run"`
			} `yaml:"steps"`
		} `yaml:"jobs"`
	}
	if err := yaml.Unmarshal(data, &wf); err != nil {
		t.Fatalf("%s: %v", mongodbWorkflowPath, err)
	}
	jobs := []struct {
		name, start string
		matrix      []string
	}{
		{"replica-set", `.ci/mongodb-rs start "$MONGODB_VERSION"`, []string{"7.0", "8.0"}},
		{"sharded", ".ci/compose-sharded up", nil},
	}
	script := regexp.MustCompile(`\.ci/[a-z0-9-]+`)
	for _, want := range jobs {
		job, ok := wf.Jobs[want.name]
		if !ok {
			t.Errorf("no job %s", want.name)
			continue
		}
		if got := job.Strategy.Matrix["mongodb"]; !slices.Equal(got, want.matrix) {
			t.Errorf("job %s: matrix mongodb %q, want %q", want.name, got, want.matrix)
		}
		var order []string
		for _, s := range job.Steps {
			if strings.Contains(s.Run, want.start) {
				order = append(order, "start")
			}
			for _, check := range []string{"tests", "spec", "bench"} {
				if strings.Contains(s.Run, ".ci/mongodb-check "+check) {
					order = append(order, check)
				}
			}
			for _, sc := range script.FindAllString(s.Run, -1) {
				fi, err := os.Stat(filepath.Join(repoRoot, sc))
				if err != nil || fi.Mode()&0o111 == 0 {
					t.Errorf("job %s step %q runs %s: not an executable file (%v)", want.name, s.Name, sc, err)
				}
			}
		}
		if w := []string{"start", "tests", "spec", "bench"}; !slices.Equal(order, w) {
			t.Errorf("job %s runs %v, want %v", want.name, order, w)
		}
	}
}
