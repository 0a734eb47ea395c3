package api

import (
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/gameops/rollup/api/apiv1"
)

// TestOpenAPIDocumentsReadAPI guards docs/openapi.yaml against drifting from the read API:
// every path, error code and parameter is documented, and each response schema lists exactly
// the JSON fields of its apiv1 type, all required.
func TestOpenAPIDocumentsReadAPI(t *testing.T) {
	data, err := os.ReadFile("../docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths      map[string]map[string]any `yaml:"paths"`
		Components struct {
			Schemas map[string]struct {
				Required   []string       `yaml:"required"`
				Properties map[string]any `yaml:"properties"`
			} `yaml:"schemas"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	base := apiv1.ProjectsPath + "/{project}"
	for _, p := range []string{apiv1.ProjectsPath, base + apiv1.TreePath, base + apiv1.SeriesPath, base + apiv1.TopPath, base + apiv1.TicksPath} {
		if _, ok := doc.Paths[p]["get"]; !ok {
			t.Errorf("GET %s is not documented", p)
		}
	}
	text := string(data)
	for _, s := range []string{
		apiv1.ErrInvalidParameter, apiv1.ErrUnknownNode, apiv1.ErrNoData, apiv1.ErrNotFound, apiv1.ErrMethodNotAllowed,
		`"405": {$ref: "#/components/responses/MethodNotAllowed"}`, "Allow:", "in the future", "not due", apiv1.Step5m, apiv1.Step1h, apiv1.Step1d,
		apiv1.AggMax, apiv1.AggMin, apiv1.AggMean, apiv1.AggLast, "--read-only", "10,000 points", "731 days", "tier", "10,000 ticks", "1,000 children",
		"name: tick", "name: from", "name: to", "name: step", "name: agg", "name: node", "name: n\n",
	} {
		if !strings.Contains(text, s) {
			t.Errorf("docs/openapi.yaml does not mention %q", s)
		}
	}
	for name, v := range map[string]any{
		"ProjectsResponse": apiv1.ProjectsResponse{}, "TreeResponse": apiv1.TreeResponse{}, "TreeNode": apiv1.TreeNode{},
		"SeriesResponse": apiv1.SeriesResponse{}, "SeriesPoint": apiv1.SeriesPoint{}, "TopResponse": apiv1.TopResponse{},
		"TickSummary": apiv1.TickSummary{}, "DiffResponse": apiv1.DiffResponse{}, "AnnotationsResponse": apiv1.AnnotationsResponse{}, "DiffNode": apiv1.DiffNode{},
	} {
		sc, ok := doc.Components.Schemas[name]
		if !ok {
			t.Errorf("schema %s is missing", name)
			continue
		}
		var fields []string
		rt := reflect.TypeOf(v)
		for i := range rt.NumField() {
			fields = append(fields, strings.Split(rt.Field(i).Tag.Get("json"), ",")[0])
		}
		var props []string
		for p := range sc.Properties {
			props = append(props, p)
		}
		slices.Sort(fields)
		slices.Sort(props)
		req := slices.Sorted(slices.Values(sc.Required))
		if !slices.Equal(fields, props) || !slices.Equal(fields, req) {
			t.Errorf("schema %s: properties %v, required %v; the type has %v", name, props, req, fields)
		}
	}
}
