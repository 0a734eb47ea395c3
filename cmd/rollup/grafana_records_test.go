package main

import (
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gameops/rollup/api/apiv1"
)

// The "rollup records" checks: rollup's own records (GET /v1/projects/{project}/annotations)
// reach the provisioned dashboards through the Infinity data source plugin. No Docker here,
// so no live Grafana: these tests hold the pieces together instead. The annotation query of
// each dashboard names the fields the API's JSON has (read from apiv1's types by reflection,
// so a renamed JSON key fails here) and the API's route; compose installs the plugin at a
// pinned version and provisions the data source at the stack's rollup1 with the read-only
// token a one-shot writes into a volume Grafana mounts.

const (
	// infinityPlugin is the Infinity data source plugin's id.
	infinityPlugin = "yesoreyeram-infinity-datasource"
	// recordsAnnotation is the name of the dashboards' annotation query of rollup's records.
	recordsAnnotation = "rollup records"
	// openapiPath is the read API's specification.
	openapiPath = "../../docs/openapi.yaml"
)

// pinnedPlugin matches GF_INSTALL_PLUGINS' "ID VERSION" (or plugins.preinstall's ID@VERSION)
// with an exact version.
var pinnedPlugin = regexp.MustCompile(`^` + regexp.QuoteMeta(infinityPlugin) + `[ @](\d+\.\d+\.\d+)$`)

// jsonKey returns the JSON key of typ's field by its Go name.
func jsonKey(t *testing.T, typ reflect.Type, field string) string {
	t.Helper()
	f, ok := typ.FieldByName(field)
	if !ok {
		t.Fatalf("%s has no field %s", typ, field)
	}
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if name == "" || name == "-" {
		t.Fatalf("%s.%s has no JSON key", typ, field)
	}
	return name
}

// recordsQuery is the part of an Infinity annotation query the checks read.
type recordsQuery struct {
	Name       string            `json:"name"`
	Enable     bool              `json:"enable"`
	Datasource map[string]string `json:"datasource"`
	Target     struct {
		Type         string `json:"type"`
		Source       string `json:"source"`
		Parser       string `json:"parser"`
		URL          string `json:"url"`
		RootSelector string `json:"root_selector"`
		URLOptions   struct {
			Method string `json:"method"`
		} `json:"url_options"`
		Columns []struct {
			Selector string `json:"selector"`
			Text     string `json:"text"`
			Type     string `json:"type"`
		} `json:"columns"`
	} `json:"target"`
	Mappings map[string]struct {
		Source string `json:"source"`
		Value  string `json:"value"`
	} `json:"mappings"`
}

// dashboardVariable is a templating variable as the records checks read it.
type dashboardVariable struct {
	Name       string `json:"name"`
	Type       string `json:"type"`
	Query      any    `json:"query"`
	Multi      bool   `json:"multi"`
	IncludeAll bool   `json:"includeAll"`
	Current    struct {
		Value any `json:"value"`
	} `json:"current"`
}

// checkRecordsAnnotation checks one dashboard's "rollup records" annotation query and returns
// the project its variable defaults to and the Infinity version __requires names.
func checkRecordsAnnotation(t *testing.T, base string, data []byte) (project, version string) {
	t.Helper()
	var d struct {
		Requires []struct {
			Type, ID, Version string
		} `json:"__requires"`
		Annotations struct {
			List []json.RawMessage `json:"list"`
		} `json:"annotations"`
		Templating struct {
			List []dashboardVariable `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s: %v", base, err)
	}
	for _, r := range d.Requires {
		if r.Type == "datasource" && r.ID == infinityPlugin {
			version = r.Version
		}
	}
	if version == "" {
		t.Errorf("%s: __requires does not name the %s data source", base, infinityPlugin)
	}
	var q *recordsQuery
	for _, raw := range d.Annotations.List {
		var a recordsQuery
		if err := json.Unmarshal(raw, &a); err != nil {
			t.Fatalf("%s: annotation: %v", base, err)
		}
		if a.Name == recordsAnnotation {
			q = &a
		}
	}
	if q == nil {
		t.Fatalf("%s: no annotation query %q", base, recordsAnnotation)
	}
	// The data source: the dashboard's Infinity variable (checkDashboardPortable checks that
	// it defaults to the DS_ROLLUP_API input), never a uid.
	if q.Datasource["type"] != infinityPlugin || q.Datasource["uid"] != "${rollup_api}" {
		t.Errorf("%s: %q uses data source %v, want type %s uid ${rollup_api}", base, recordsAnnotation, q.Datasource, infinityPlugin)
	}
	tg := q.Target
	if !q.Enable || tg.Type != "json" || tg.Source != "url" || tg.Parser != "backend" || (tg.URLOptions.Method != "" && tg.URLOptions.Method != "GET") {
		t.Errorf("%s: %q: enable %v type %q source %q parser %q method %q: want an enabled JSON GET of a URL, parsed by the backend",
			base, recordsAnnotation, q.Enable, tg.Type, tg.Source, tg.Parser, tg.URLOptions.Method)
	}
	// The rows and columns: JSON keys of apiv1.AnnotationsResponse and apiv1.Annotation.
	resp, ann := reflect.TypeFor[apiv1.AnnotationsResponse](), reflect.TypeFor[apiv1.Annotation]()
	if want := jsonKey(t, resp, "Annotations"); tg.RootSelector != want {
		t.Errorf("%s: %q: rows from %q, the API's list is %q", base, recordsAnnotation, tg.RootSelector, want)
	}
	keys := map[string]bool{}
	for i := range ann.NumField() {
		keys[jsonKey(t, ann, ann.Field(i).Name)] = true
	}
	columnOf := map[string]string{} // column name → the field it selects
	for _, c := range tg.Columns {
		if !keys[c.Selector] {
			t.Errorf("%s: %q: column %q selects %q, which apiv1.Annotation does not have (%v)", base, recordsAnnotation, c.Text, c.Selector, keys)
		}
		columnOf[c.Text] = c.Selector
	}
	// Grafana's annotation fields, each mapped from the column of the API's field.
	for _, m := range []struct{ grafana, field, colType string }{
		{"time", "Time", "timestamp"},
		{"timeEnd", "TimeEnd", "timestamp"},
		{"title", "Title", "string"},
		{"text", "Text", "string"},
		{"tags", "Tags", "string"},
	} {
		want := jsonKey(t, ann, m.field)
		got, ok := q.Mappings[m.grafana]
		if !ok || got.Source != "field" || columnOf[got.Value] != want {
			t.Errorf("%s: %q: Grafana's %s is mapped from %+v (column of %q), want the column of the API's %q",
				base, recordsAnnotation, m.grafana, got, columnOf[got.Value], want)
			continue
		}
		for _, c := range tg.Columns {
			if c.Text == got.Value && c.Type != m.colType {
				t.Errorf("%s: %q: column %q has type %q, want %q", base, recordsAnnotation, c.Text, c.Type, m.colType)
			}
		}
	}
	// The URL: the API's route with the project from a single-valued dashboard variable, and
	// the dashboard's time range as RFC 3339 from and to.
	u, err := url.Parse(tg.URL)
	if err != nil {
		t.Fatalf("%s: %q: URL %q: %v", base, recordsAnnotation, tg.URL, err)
	}
	if u.Scheme != "" || u.Host != "" {
		t.Errorf("%s: %q: URL %q names a host: want a path under the data source's URL", base, recordsAnnotation, tg.URL)
	}
	vars := regexp.MustCompile(`\$\{(\w+)\}`)
	route := apiv1.ProjectsPath + "/{project}" + apiv1.AnnotationsPath
	if got := vars.ReplaceAllString(u.Path, "{project}"); got != route || len(vars.FindAllString(u.Path, -1)) != 1 {
		t.Errorf("%s: %q: URL path %q, want the API's route %s", base, recordsAnnotation, u.Path, route)
	}
	if m := vars.FindStringSubmatch(u.Path); m != nil {
		i := slices.IndexFunc(d.Templating.List, func(v dashboardVariable) bool { return v.Name == m[1] })
		switch {
		case i < 0:
			t.Errorf("%s: %q: URL names ${%s}, which is not a dashboard variable", base, recordsAnnotation, m[1])
		case d.Templating.List[i].Multi || d.Templating.List[i].IncludeAll:
			t.Errorf("%s: %q: ${%s} may hold several projects: the path takes one", base, recordsAnnotation, m[1])
		default:
			project, _ = d.Templating.List[i].Current.Value.(string)
		}
	}
	if q := u.Query(); len(q) != 2 || q.Get("from") != "${__from:date:iso}" || q.Get("to") != "${__to:date:iso}" {
		t.Errorf("%s: %q: URL query %q, want from=${__from:date:iso}&to=${__to:date:iso}", base, recordsAnnotation, u.RawQuery)
	}
	return project, version
}

// TestDashboardRollupRecords: both provisioned dashboards draw rollup's own records from the
// annotations endpoint, which the OpenAPI document describes at the same route.
func TestDashboardRollupRecords(t *testing.T) {
	files, _ := grafanaDashboards(t, composeGrafanas[0].service, composeGrafanas[0].prometheus)
	if len(files) < 2 {
		t.Fatalf("provisioned dashboards %v", files)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if project, _ := checkRecordsAnnotation(t, filepath.Base(f), data); project == "" {
			t.Errorf("%s: the records' project variable has no default", filepath.Base(f))
		}
	}
	spec, err := os.ReadFile(openapiPath)
	if err != nil {
		t.Fatal(err)
	}
	if route := apiv1.ProjectsPath + "/{project}" + apiv1.AnnotationsPath; !strings.Contains(string(spec), "\n  "+route+":\n") {
		t.Errorf("%s does not describe %s", openapiPath, route)
	}
}

// rollupAPISource is the provisioned Infinity data source, as the checks read it.
type rollupAPISource struct {
	Name     string `yaml:"name"`
	UID      string `yaml:"uid"`
	Type     string `yaml:"type"`
	URL      string `yaml:"url"`
	JSONData struct {
		AuthMethod   string   `yaml:"auth_method"`
		AllowedHosts []string `yaml:"allowedHosts"`
	} `yaml:"jsonData"`
	SecureJSONData map[string]string `yaml:"secureJsonData"`
}

// TestComposeGrafanaRollupRecords: each stack's Grafana installs the Infinity plugin at the
// version the dashboards require, pinned, and provisions one Infinity data source at the
// stack's rollup1, allowed that host only, sending the read-only token of the dashboards'
// default project that a one-shot Grafana waits for wrote into a volume Grafana mounts
// read-only.
func TestComposeGrafanaRollupRecords(t *testing.T) {
	c := loadCompose(t)
	files, _ := grafanaDashboards(t, composeGrafanas[0].service, composeGrafanas[0].prometheus)
	projects, versions := map[string]bool{}, map[string]bool{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		p, v := checkRecordsAnnotation(t, filepath.Base(f), data)
		projects[p], versions[v] = true, true
	}
	if len(projects) != 1 || len(versions) != 1 {
		t.Fatalf("the dashboards' records projects %v and Infinity versions %v: want one of each", projects, versions)
	}
	for _, g := range composeGrafanas {
		t.Run(g.service, func(t *testing.T) {
			s := c.Services[g.service]
			prefix := strings.TrimSuffix(g.service, "grafana")
			pinned := false
			for _, e := range []string{s.Environment["GF_INSTALL_PLUGINS"], s.Environment["GF_PLUGINS_PREINSTALL_SYNC"]} {
				for _, p := range strings.Split(e, ",") {
					if m := pinnedPlugin.FindStringSubmatch(strings.TrimSpace(p)); m != nil {
						pinned = true
						if !versions[m[1]] {
							t.Errorf("%s installs %s %s, the dashboards require %v", g.service, infinityPlugin, m[1], versions)
						}
					}
				}
			}
			if !pinned {
				t.Errorf("%s: GF_INSTALL_PLUGINS %q: want %s at an exact version (\"ID X.Y.Z\")", g.service, s.Environment["GF_INSTALL_PLUGINS"], infinityPlugin)
			}
			prov, ok := mountedPath(s, "/etc/grafana/provisioning")
			if !ok {
				t.Fatalf("%s: /etc/grafana/provisioning is not bind-mounted", g.service)
			}
			dsFiles, _ := filepath.Glob(filepath.Join(prov, "datasources", "*.yml"))
			var sources []rollupAPISource
			for _, f := range dsFiles {
				var ds struct {
					Datasources []rollupAPISource `yaml:"datasources"`
				}
				readYAML(t, f, &ds)
				for _, d := range ds.Datasources {
					if d.Type == infinityPlugin {
						sources = append(sources, d)
					}
				}
			}
			if len(sources) != 1 {
				t.Fatalf("%s provisions %d %s data sources, want one", g.service, len(sources), infinityPlugin)
			}
			ds := sources[0]
			expand := func(v string) string {
				return os.Expand(v, func(k string) string {
					val, ok := s.Environment[k]
					if !ok {
						t.Errorf("%s: data source %s names $%s, which %s's environment does not set", g.service, ds.Name, k, g.service)
					}
					return val
				})
			}
			api := prefix + "rollup1"
			if url := expand(ds.URL); url != "http://"+api+":8080" || c.Services[api].Image != rollupImage || s.DependsOn[api].Condition == "" {
				t.Errorf("%s: data source %s at %q (%s): want http://%s:8080, the rollup API it depends on", g.service, ds.Name, url, ds.URL, api)
			}
			if len(ds.JSONData.AllowedHosts) != 1 || expand(ds.JSONData.AllowedHosts[0]) != expand(ds.URL) {
				t.Errorf("%s: data source %s allowedHosts %q: want only its URL %s", g.service, ds.Name, ds.JSONData.AllowedHosts, ds.URL)
			}
			tokenFile, ok := strings.CutPrefix(ds.SecureJSONData["bearerToken"], "$__file{")
			tokenFile, closed := strings.CutSuffix(tokenFile, "}")
			if ds.JSONData.AuthMethod != "bearerToken" || !ok || !closed || !strings.HasPrefix(tokenFile, "/") {
				t.Fatalf("%s: data source %s auth %q secureJsonData %v: want bearerToken from $__file{/path}", g.service, ds.Name, ds.JSONData.AuthMethod, ds.SecureJSONData)
			}
			vol := volumeOf(s, tokenFile)
			if vol == "" || !slices.ContainsFunc(s.Volumes, func(v string) bool { return strings.HasPrefix(v, vol+":") && strings.HasSuffix(v, ":ro") }) {
				t.Errorf("%s: the token file %s is not on a named volume it mounts read-only (%q)", g.service, tokenFile, s.Volumes)
			}
			checkGrafanaToken(t, c, g.service, tokenFile, vol, projects)
		})
	}
}

// checkGrafanaToken checks that a one-shot grafana depends on writes tokenFile on volume vol:
// a read-only token of the dashboards' project.
func checkGrafanaToken(t *testing.T, c composeFile, grafana, tokenFile, vol string, projects map[string]bool) {
	t.Helper()
	writers := 0
	for name, s := range c.Services {
		if s.Image != rollupImage || len(s.Command) != 1 || !strings.Contains(s.Command[0], "mv "+tokenFile+".new "+tokenFile) ||
			volumeOf(s, tokenFile) != vol {
			continue
		}
		writers++
		if c.Services[grafana].DependsOn[name].Condition != "service_completed_successfully" {
			t.Errorf("%s does not wait for %s (which writes its token file) to complete", grafana, name)
		}
		invocations, err := serviceInvocations(s)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for k, v := range s.Environment {
			t.Setenv(k, v)
		}
		created := false
		for _, args := range invocations {
			if len(args) == 0 || args[0] != "token" {
				continue
			}
			var out strings.Builder
			cfg, err := parseToken(&env{stdout: &out, stderr: &out}, args[1:])
			if err != nil {
				t.Fatalf("%s: rollup %s: %v", name, strings.Join(args, " "), err)
			}
			if cfg.sub != "create" {
				continue
			}
			created = true
			if !strings.Contains(s.Command[0], strings.Join(args, " ")+" > "+tokenFile+".new") {
				t.Errorf("%s: the token it creates does not go to %s.new", name, tokenFile)
			}
			if !cfg.readOnly || !projects[cfg.project] {
				t.Errorf("%s: token of project %q read-only %v: want a read-only token of the dashboards' project %v", name, cfg.project, cfg.readOnly, projects)
			}
		}
		if !created {
			t.Errorf("%s: no rollup token create", name)
		}
	}
	if writers != 1 {
		t.Errorf("%d services write %s on volume %q, want one", writers, tokenFile, vol)
	}
}
