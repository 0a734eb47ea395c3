package k8s

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite monitoring/prometheusrule.yaml from deploy/prometheus/rules.yml")

const (
	rulesPath          = "../prometheus/rules.yml"
	prometheusRulePath = "monitoring/prometheusrule.yaml"
	secretTemplatePath = "secret.example.yaml"
	dockerfilePath     = "../../Dockerfile"
	// rulesJob is the Prometheus job the alert rules select (up{job="rollup"}).
	rulesJob = "rollup"
	// placeholder starts the Secret template's value: never a real URI in the repository.
	placeholder = "REPLACE-ME"
)

// kustomization is the part of kustomize's Kustomization (kustomize.config.k8s.io/v1beta1,
// sigs.k8s.io/kustomize/api/types) our kustomizations use: a minimal struct of its documented
// schema rather than the kustomize module and its dependencies. Strict decoding fails on any
// other field, so a field added here must be one kustomize documents.
type kustomization struct {
	metav1.TypeMeta `json:",inline"`
	Resources       []string `json:"resources,omitempty"`
	Images          []struct {
		Name    string `json:"name"`
		NewName string `json:"newName,omitempty"`
		NewTag  string `json:"newTag,omitempty"`
		Digest  string `json:"digest,omitempty"`
	} `json:"images,omitempty"`
}

// newObject returns the typed object of a manifest's apiVersion and kind.
func newObject(apiVersion, kind string) (any, error) {
	switch apiVersion + " " + kind {
	case "apps/v1 Deployment":
		return &appsv1.Deployment{}, nil
	case "v1 Service":
		return &corev1.Service{}, nil
	case "v1 Secret":
		return &corev1.Secret{}, nil
	case "policy/v1 PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}, nil
	case "monitoring.coreos.com/v1 ServiceMonitor":
		return &monitoringv1.ServiceMonitor{}, nil
	case "monitoring.coreos.com/v1 PrometheusRule":
		return &monitoringv1.PrometheusRule{}, nil
	case "kustomize.config.k8s.io/v1beta1 Kustomization":
		return &kustomization{}, nil
	}
	return nil, fmt.Errorf("apiVersion %q kind %q: not a kind this test knows (add its type to newObject)", apiVersion, kind)
}

// decodeStrict decodes one YAML document into obj the way the API server's strict field
// validation does: duplicate keys (sigs.k8s.io/yaml), then case-sensitive JSON with unknown
// and duplicate fields reported (sigs.k8s.io/json). encoding/json would match
// readOnlyRootFileSystem to readOnlyRootFilesystem without a word.
func decodeStrict(doc []byte, obj any) error {
	j, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return fmt.Errorf("yaml: %w", err)
	}
	strictErrs, err := kjson.UnmarshalStrict(j, obj)
	if err != nil {
		return err
	}
	return errors.Join(strictErrs...)
}

// manifest is one decoded YAML document.
type manifest struct {
	path string // relative to deploy/k8s
	obj  any
}

// decodeFile decodes every document of a YAML file strictly into the type of its kind.
func decodeFile(path string, data []byte) ([]manifest, error) {
	var out []manifest
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for i := 0; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", path, i, err)
		}
		j, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", path, i, err)
		}
		if string(bytes.TrimSpace(j)) == "null" { // comments only
			continue
		}
		var tm metav1.TypeMeta
		if err := json.Unmarshal(j, &tm); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", path, i, err)
		}
		obj, err := newObject(tm.APIVersion, tm.Kind)
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", path, i, err)
		}
		if err := decodeStrict(doc, obj); err != nil {
			return nil, fmt.Errorf("%s: document %d (%s): %w", path, i, tm.Kind, err)
		}
		out = append(out, manifest{path: path, obj: obj})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no manifest", path)
	}
	return out, nil
}

// manifestFiles returns every YAML file under deploy/k8s.
func manifestFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if ext := filepath.Ext(path); !d.IsDir() && (ext == ".yaml" || ext == ".yml") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	return files
}

// loadAll decodes every manifest under deploy/k8s strictly.
func loadAll(t *testing.T) []manifest {
	t.Helper()
	var all []manifest
	for _, f := range manifestFiles(t) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		ms, err := decodeFile(f, data)
		if err != nil {
			t.Error(err)
			continue
		}
		all = append(all, ms...)
	}
	if t.Failed() {
		t.FailNow()
	}
	return all
}

// only returns the one manifest of type T, failing the test unless there is exactly one.
func only[T any](t *testing.T, all []manifest) (*T, string) {
	t.Helper()
	var found []manifest
	for _, m := range all {
		if _, ok := m.obj.(*T); ok {
			found = append(found, m)
		}
	}
	if len(found) != 1 {
		var zero T
		t.Fatalf("%d manifests of type %T, want one", len(found), zero)
	}
	return found[0].obj.(*T), found[0].path
}

// TestManifestsDecodeStrictly: every manifest decodes strictly into its official type, and the
// set is the one docs/deploy.md describes.
func TestManifestsDecodeStrictly(t *testing.T) {
	all := loadAll(t)
	var kinds []string
	for _, m := range all {
		kinds = append(kinds, fmt.Sprintf("%s %T", m.path, m.obj))
	}
	want := []string{
		"deployment.yaml *v1.Deployment",
		"kustomization.yaml *k8s.kustomization",
		"monitoring/kustomization.yaml *k8s.kustomization",
		"monitoring/prometheusrule.yaml *v1.PrometheusRule",
		"monitoring/servicemonitor.yaml *v1.ServiceMonitor",
		"pdb.yaml *v1.PodDisruptionBudget",
		"secret.example.yaml *v1.Secret",
		"service.yaml *v1.Service",
	}
	if !slices.Equal(kinds, want) {
		t.Errorf("manifests:\n  %s\nwant:\n  %s", strings.Join(kinds, "\n  "), strings.Join(want, "\n  "))
	}
}

// TestStrictDecodingRejects: a manifest with an unknown, misspelt (also only by case),
// duplicate or mistyped field fails to decode; the same manifest unmutated decodes.
func TestStrictDecodingRejects(t *testing.T) {
	cases := []struct {
		name, file, old, new, wantErr string
	}{
		{"unknown field in a Deployment's spec", "deployment.yaml", "  replicas: 2", "  replica: 2", `unknown field "spec.replica"`},
		{"field misspelt only by case", "deployment.yaml", "readOnlyRootFilesystem: true", "readOnlyRootFileSystem: true", `unknown field "spec.template.spec.containers[0].securityContext.readOnlyRootFileSystem"`},
		{"unknown field in a probe", "deployment.yaml", "path: /readyz", "path: /readyz\n              scheme: HTTP\n              pathh: /x", `unknown field "spec.template.spec.containers[0].readinessProbe.httpGet.pathh"`},
		{"duplicate key", "deployment.yaml", "  replicas: 2", "  replicas: 2\n  replicas: 3", `"replicas" already set in map`},
		{"wrong type", "deployment.yaml", "  replicas: 2", "  replicas: two", "cannot unmarshal string"},
		{"unknown quantity", "deployment.yaml", "memory: 2Gi", "memory: 2GB!", "quantities must match"},
		{"unknown field in a Service", "service.yaml", "targetPort: http", "targetport: http", `unknown field "spec.ports[0].targetport"`},
		{"unknown field in a PodDisruptionBudget", "pdb.yaml", "minAvailable: 1", "minAvailble: 1", `unknown field "spec.minAvailble"`},
		{"unknown field in a Secret", "secret.example.yaml", "stringData:", "stringdata:", `unknown field "stringdata"`},
		{"unknown field in a ServiceMonitor", "monitoring/servicemonitor.yaml", "interval: 15s", "intervall: 15s", `unknown field "spec.endpoints[0].intervall"`},
		{"unknown field in a PrometheusRule", prometheusRulePath, "for: 10m", "fore: 10m", `unknown field "spec.groups[0].rules[0].fore"`},
		{"unknown field in a Kustomization", "kustomization.yaml", "resources:", "resource:", `unknown field "resource"`},
		{"unknown kind", "pdb.yaml", "kind: PodDisruptionBudget", "kind: PodDisruptionBudgets", "not a kind this test knows"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data, err := os.ReadFile(c.file)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := decodeFile(c.file, data); err != nil {
				t.Fatalf("unmutated: %v", err)
			}
			if !bytes.Contains(data, []byte(c.old)) {
				t.Fatalf("%s has no %q to mutate", c.file, c.old)
			}
			mutated := bytes.Replace(data, []byte(c.old), []byte(c.new), 1)
			_, err = decodeFile(c.file, mutated)
			if err == nil {
				t.Fatalf("%s with %q → %q decoded without an error", c.file, c.old, c.new)
			}
			if !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("error %q, want it to contain %q", err, c.wantErr)
			}
		})
	}
	// Why sigs.k8s.io/json and not encoding/json: the latter matches keys case-insensitively,
	// so DisallowUnknownFields alone lets the case-only misspelling through.
	data, err := os.ReadFile("deployment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	j, err := yaml.YAMLToJSON(bytes.Replace(data, []byte("readOnlyRootFilesystem"), []byte("readOnlyRootFileSystem"), 1))
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	var d appsv1.Deployment
	if err := dec.Decode(&d); err != nil {
		t.Errorf("encoding/json now rejects a case-only misspelling (%v): decodeStrict's comment is out of date", err)
	}
}

// podLabels returns the Deployment's pod template labels as a label set.
func podLabels(d *appsv1.Deployment) labels.Set { return labels.Set(d.Spec.Template.Labels) }

// selects reports whether the label selector sel selects the label set ls.
func selects(t *testing.T, sel *metav1.LabelSelector, ls labels.Set) bool {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Fatal(err)
	}
	return !s.Empty() && s.Matches(ls)
}

// imageUID returns the uid of the image's user from the Dockerfile (useradd --uid N).
func imageUID(t *testing.T) int64 {
	t.Helper()
	data, err := os.ReadFile(dockerfilePath)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`useradd [^\n]*--uid (\d+)`).FindSubmatch(data)
	if m == nil {
		t.Fatal("Dockerfile: no useradd --uid")
	}
	var uid int64
	_, _ = fmt.Sscan(string(m[1]), &uid)
	return uid
}

// TestDeployment: two replicas of rollup serve with the probes docs/deploy.md describes on its
// listen port, requests and a memory limit, a non-root read-only root filesystem without
// privilege escalation or capabilities as the image's user, the MongoDB URI from the Secret,
// and no Service links in its environment.
func TestDeployment(t *testing.T) {
	all := loadAll(t)
	d, path := only[appsv1.Deployment](t, all)
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("%s: replicas %v, want 2", path, d.Spec.Replicas)
	}
	if !selects(t, d.Spec.Selector, podLabels(d)) {
		t.Errorf("%s: selector %v does not select the pod template's labels %v", path, d.Spec.Selector, d.Spec.Template.Labels)
	}
	pod := d.Spec.Template.Spec
	if pod.EnableServiceLinks == nil || *pod.EnableServiceLinks {
		t.Errorf("%s: enableServiceLinks must be false: the Service rollup would set ROLLUP_* variables, which are settings", path)
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Errorf("%s: automountServiceAccountToken must be false (rollup never calls the Kubernetes API)", path)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%s: %d containers, want one", path, len(pod.Containers))
	}
	c := pod.Containers[0]
	if len(c.Command) != 0 || len(c.Args) == 0 || c.Args[0] != "serve" {
		t.Errorf("%s: command %q args %q, want the image's entrypoint (rollup) with args serve ...", path, c.Command, c.Args)
	}

	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		if _, dup := env[e.Name]; dup {
			t.Errorf("%s: env %s twice", path, e.Name)
		}
		env[e.Name] = e
	}
	listen := env["ROLLUP_LISTEN"].Value
	_, portStr, ok := strings.Cut(listen, ":")
	if !ok || strings.Contains(listen[:strings.LastIndex(listen, ":")], "127.0.0.1") {
		t.Errorf("%s: ROLLUP_LISTEN %q, want every interface of the pod (:PORT)", path, listen)
	}
	var httpPort *corev1.ContainerPort
	for i, p := range c.Ports {
		if fmt.Sprint(p.ContainerPort) == portStr {
			httpPort = &c.Ports[i]
		}
	}
	if httpPort == nil || httpPort.Name == "" {
		t.Fatalf("%s: no named container port for ROLLUP_LISTEN %q: %v", path, listen, c.Ports)
	}
	uri := env["ROLLUP_MONGODB_URI"]
	if uri.Value != "" || uri.ValueFrom == nil || uri.ValueFrom.SecretKeyRef == nil {
		t.Errorf("%s: ROLLUP_MONGODB_URI must come from a Secret (secretKeyRef), got %+v", path, uri)
	}

	probes := []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{
		{"startupProbe", c.StartupProbe, "/healthz"},
		{"livenessProbe", c.LivenessProbe, "/healthz"},
		{"readinessProbe", c.ReadinessProbe, "/readyz"},
	}
	for _, p := range probes {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("%s: %s: want an httpGet probe of %s", path, p.name, p.path)
			continue
		}
		g := p.probe.HTTPGet
		if g.Path != p.path || (g.Port.String() != httpPort.Name && g.Port.IntValue() != int(httpPort.ContainerPort)) {
			t.Errorf("%s: %s gets %s on port %s, want %s on %s (%d)", path, p.name, g.Path, g.Port.String(), p.path, httpPort.Name, httpPort.ContainerPort)
		}
	}
	if g := pod.TerminationGracePeriodSeconds; g == nil || *g < 12 {
		t.Errorf("%s: terminationGracePeriodSeconds %v, want at least 12 (serve's shutdown bound)", path, g)
	}

	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if q, ok := c.Resources.Requests[name]; !ok || q.IsZero() {
			t.Errorf("%s: no %s request", path, name)
		}
	}
	lim, ok := c.Resources.Limits[corev1.ResourceMemory]
	if !ok || lim.Cmp(c.Resources.Requests[corev1.ResourceMemory]) < 0 {
		t.Errorf("%s: memory limit %v, want one at least the request", path, lim.String())
	}
	// serve's peak RSS with a 1M-node tree (docs/benchmarks.md): a smaller limit OOM-kills it there.
	if lim.Cmp(resource.MustParse("1300Mi")) < 0 {
		t.Errorf("%s: memory limit %s is under serve's measured 1.2 GiB peak", path, lim.String())
	}

	psc, sc := pod.SecurityContext, c.SecurityContext
	if psc == nil || sc == nil {
		t.Fatalf("%s: want a pod and a container securityContext", path)
	}
	uid := imageUID(t)
	checks := []struct {
		what string
		ok   bool
	}{
		{"runAsNonRoot", psc.RunAsNonRoot != nil && *psc.RunAsNonRoot && (sc.RunAsNonRoot == nil || *sc.RunAsNonRoot)},
		{fmt.Sprintf("runAsUser %d (the Dockerfile's user)", uid), psc.RunAsUser != nil && *psc.RunAsUser == uid && (sc.RunAsUser == nil || *sc.RunAsUser == uid)},
		{"readOnlyRootFilesystem", sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem},
		{"allowPrivilegeEscalation false", sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation},
		{"not privileged", sc.Privileged == nil || !*sc.Privileged},
		{"capabilities drop ALL, add none", sc.Capabilities != nil && slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) && len(sc.Capabilities.Add) == 0},
		{"seccompProfile RuntimeDefault", psc.SeccompProfile != nil && psc.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault},
	}
	for _, ch := range checks {
		if !ch.ok {
			t.Errorf("%s: securityContext: want %s", path, ch.what)
		}
	}

	// The root filesystem is read-only: every writable path is a volume, and /tmp is one.
	vols := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		vols[v.Name] = v
	}
	tmp := false
	for _, m := range c.VolumeMounts {
		v, ok := vols[m.Name]
		if !ok {
			t.Errorf("%s: volumeMount %s names no volume", path, m.Name)
			continue
		}
		if m.MountPath == "/tmp" && v.EmptyDir != nil && v.EmptyDir.SizeLimit != nil {
			tmp = true
		}
	}
	if !tmp {
		t.Errorf("%s: want an emptyDir with a sizeLimit at /tmp", path)
	}
	for _, tsc := range pod.TopologySpreadConstraints {
		if !selects(t, tsc.LabelSelector, podLabels(d)) {
			t.Errorf("%s: topologySpreadConstraint selects %v, not the pods", path, tsc.LabelSelector)
		}
	}
}

// TestServiceAndBudget: the Service and the PodDisruptionBudget select the Deployment's pods;
// the Service's target port is the container's named port; the budget leaves a replica to
// drain.
func TestServiceAndBudget(t *testing.T) {
	all := loadAll(t)
	d, _ := only[appsv1.Deployment](t, all)
	svc, svcPath := only[corev1.Service](t, all)
	pdb, pdbPath := only[policyv1.PodDisruptionBudget](t, all)

	if sel := labels.SelectorFromSet(svc.Spec.Selector); len(svc.Spec.Selector) == 0 || !sel.Matches(podLabels(d)) {
		t.Errorf("%s: selector %v does not select the pods %v", svcPath, svc.Spec.Selector, d.Spec.Template.Labels)
	}
	names := map[string]bool{}
	for _, p := range d.Spec.Template.Spec.Containers[0].Ports {
		names[p.Name] = true
	}
	if len(svc.Spec.Ports) == 0 {
		t.Fatalf("%s: no ports", svcPath)
	}
	for _, p := range svc.Spec.Ports {
		if p.Name == "" || !names[p.TargetPort.String()] {
			t.Errorf("%s: port %q targets %q, want a named container port of %v", svcPath, p.Name, p.TargetPort.String(), names)
		}
	}

	if !selects(t, pdb.Spec.Selector, podLabels(d)) {
		t.Errorf("%s: selector %v does not select the pods %v", pdbPath, pdb.Spec.Selector, d.Spec.Template.Labels)
	}
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MaxUnavailable != nil {
		t.Fatalf("%s: want minAvailable only", pdbPath)
	}
	if m := pdb.Spec.MinAvailable.IntValue(); m < 1 || m >= int(*d.Spec.Replicas) {
		t.Errorf("%s: minAvailable %d of %d replicas: want at least one serving and one that may be drained", pdbPath, m, *d.Spec.Replicas)
	}
}

// TestSecretTemplate: the Deployment reads ROLLUP_MONGODB_URI from the template's Secret and
// key; the template holds the placeholder (never a real URI), and no kustomization applies it
// (that would overwrite the real Secret at every apply).
func TestSecretTemplate(t *testing.T) {
	all := loadAll(t)
	d, _ := only[appsv1.Deployment](t, all)
	s, path := only[corev1.Secret](t, all)
	if path != secretTemplatePath {
		t.Fatalf("the Secret is in %s, want %s", path, secretTemplatePath)
	}
	var ref *corev1.SecretKeySelector
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		if e.Name == "ROLLUP_MONGODB_URI" && e.ValueFrom != nil {
			ref = e.ValueFrom.SecretKeyRef
		}
	}
	if ref == nil {
		t.Fatal("the Deployment has no ROLLUP_MONGODB_URI from a Secret")
	}
	if ref.Name != s.Name {
		t.Errorf("ROLLUP_MONGODB_URI reads Secret %q, the template is %q", ref.Name, s.Name)
	}
	if ref.Optional != nil && *ref.Optional {
		t.Error("ROLLUP_MONGODB_URI's Secret is optional: without it serve would start the embedded store on the pod's read-only filesystem")
	}
	v, ok := s.StringData[ref.Key]
	if !ok || len(s.Data) != 0 {
		t.Fatalf("%s: want stringData.%s only, got stringData %v data %v", path, ref.Key, s.StringData, s.Data)
	}
	if !strings.HasPrefix(v, placeholder) {
		t.Errorf("%s: %s = %q, want the placeholder %s... (a real URI never goes into the repository)", path, ref.Key, v, placeholder)
	}
	for _, m := range all {
		if k, ok := m.obj.(*kustomization); ok && slices.Contains(k.Resources, filepath.Base(secretTemplatePath)) {
			t.Errorf("%s applies %s: every apply would overwrite the real Secret with the placeholder", m.path, secretTemplatePath)
		}
	}
}

// TestKustomizations: each kustomization lists exactly the manifests of its directory (the
// Secret template aside), so a new manifest is not forgotten, and its image entry names the
// Deployment's image.
func TestKustomizations(t *testing.T) {
	all := loadAll(t)
	d, _ := only[appsv1.Deployment](t, all)
	dirs := map[string][]string{} // directory → its manifests
	for _, f := range manifestFiles(t) {
		if base := filepath.Base(f); base != "kustomization.yaml" && f != secretTemplatePath {
			dirs[filepath.Dir(f)] = append(dirs[filepath.Dir(f)], base)
		}
	}
	seen := 0
	for _, m := range all {
		k, ok := m.obj.(*kustomization)
		if !ok {
			continue
		}
		seen++
		dir := filepath.Dir(m.path)
		got := slices.Sorted(slices.Values(k.Resources))
		if want := dirs[dir]; !slices.Equal(got, want) {
			t.Errorf("%s: resources %v, want the manifests of %s: %v", m.path, got, dir, want)
		}
		image, _, _ := strings.Cut(d.Spec.Template.Spec.Containers[0].Image, ":")
		for _, img := range k.Images {
			if img.Name != image {
				t.Errorf("%s: images names %q, the Deployment's image is %q", m.path, img.Name, image)
			}
		}
	}
	if seen != len(dirs) {
		t.Errorf("%d kustomizations for %d directories of manifests", seen, len(dirs))
	}
}

// TestServiceMonitor: it scrapes /metrics on the Service's port, and the job it gives the
// targets (the Service's jobLabel) is the one the alert rules select.
func TestServiceMonitor(t *testing.T) {
	all := loadAll(t)
	svc, _ := only[corev1.Service](t, all)
	sm, path := only[monitoringv1.ServiceMonitor](t, all)
	if !selects(t, &sm.Spec.Selector, labels.Set(svc.Labels)) {
		t.Errorf("%s: selector %v does not select the Service's labels %v", path, sm.Spec.Selector, svc.Labels)
	}
	if job := svc.Labels[sm.Spec.JobLabel]; sm.Spec.JobLabel == "" || job != rulesJob {
		t.Errorf("%s: jobLabel %q gives job %q, want %q (the rules' up{job=%q})", path, sm.Spec.JobLabel, job, rulesJob, rulesJob)
	}
	if len(sm.Spec.Endpoints) != 1 {
		t.Fatalf("%s: %d endpoints, want one", path, len(sm.Spec.Endpoints))
	}
	ep := sm.Spec.Endpoints[0]
	if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == ep.Port }) {
		t.Errorf("%s: endpoint port %q is no port name of the Service", path, ep.Port)
	}
	if ep.Path != "/metrics" {
		t.Errorf("%s: path %q, rollup serves /metrics", path, ep.Path)
	}
}

// renderPrometheusRule returns monitoring/prometheusrule.yaml made from rules.yml: its header
// comment replaced, its groups indented under spec.
func renderPrometheusRule(rules []byte) []byte {
	lines := strings.Split(strings.TrimRight(string(rules), "\n"), "\n")
	for len(lines) > 0 && strings.HasPrefix(lines[0], "#") {
		lines = lines[1:]
	}
	var b strings.Builder
	b.WriteString(`# rollup's alert rules for the Prometheus Operator: deploy/prometheus/rules.yml (docs/alerts.md
# says what each alert means and what to do) under spec. Do not edit: edit rules.yml, then
#   cd deploy/k8s && GOWORK=off go test -run TestPrometheusRule -update
# (go test fails while the two differ). Add the label your Prometheus's ruleSelector asks for.
# Prometheus must keep more than a week of data: the weekly drop alert reads a week back.
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: rollup
  labels:
    app.kubernetes.io/name: rollup
spec:
`)
	for _, l := range lines {
		if l != "" {
			b.WriteString("  ")
		}
		b.WriteString(l + "\n")
	}
	return []byte(b.String())
}

// TestPrometheusRule: the PrometheusRule's groups are exactly deploy/prometheus/rules.yml's
// (the one source of the alerts, tested by promtool), decoded strictly into the operator's
// types on both sides.
func TestPrometheusRule(t *testing.T) {
	rules, err := os.ReadFile(rulesPath)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(prometheusRulePath, renderPrometheusRule(rules), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var want monitoringv1.PrometheusRuleSpec
	if err := decodeStrict(rules, &want); err != nil {
		t.Fatalf("%s as a PrometheusRule's spec: %v", rulesPath, err)
	}
	if len(want.Groups) == 0 {
		t.Fatalf("%s: no groups", rulesPath)
	}
	all := loadAll(t)
	pr, path := only[monitoringv1.PrometheusRule](t, all)
	if !reflect.DeepEqual(pr.Spec, want) {
		got, _ := yaml.Marshal(pr.Spec)
		exp, _ := yaml.Marshal(want)
		t.Errorf("%s differs from %s: run  cd deploy/k8s && GOWORK=off go test -run TestPrometheusRule -update\n%s",
			path, rulesPath, firstDiff(string(got), string(exp)))
	}
}

// firstDiff returns the first line where a and b differ, with its neighbours.
func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < max(len(al), len(bl)); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return fmt.Sprintf("line %d:\n  prometheusrule: %q\n  rules.yml:      %q", i+1, x, y)
		}
	}
	return "(no line differs)"
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestPrometheusRuleDrift: the equality check fails when the two differ: a threshold changed in
// a copy of the PrometheusRule is caught.
func TestPrometheusRuleDrift(t *testing.T) {
	var want monitoringv1.PrometheusRuleSpec
	if err := decodeStrict(mustRead(t, rulesPath), &want); err != nil {
		t.Fatal(err)
	}
	data := mustRead(t, prometheusRulePath)
	drifted := bytes.Replace(data, []byte("> 300"), []byte("> 600"), 1)
	if bytes.Equal(drifted, data) {
		t.Fatalf("%s has no \"> 300\" to change", prometheusRulePath)
	}
	ms, err := decodeFile(prometheusRulePath, drifted)
	if err != nil {
		t.Fatal(err)
	}
	if reflect.DeepEqual(ms[0].obj.(*monitoringv1.PrometheusRule).Spec, want) {
		t.Error("a changed threshold compares equal to rules.yml")
	}
}
