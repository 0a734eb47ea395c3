package web

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func get(t *testing.T, h http.Handler, method, target string, hdr map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, target, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestHandlerRoutes(t *testing.T) {
	h := Handler()
	cases := []struct {
		name, method, target string
		status               int
		contentType          string // prefix
		bodyHas              string
	}{
		{"page", "GET", "/", 200, "text/html", `<script src="assets/app.js" defer></script>`},
		{"page head", "HEAD", "/", 200, "text/html", ""},
		{"script", "GET", "/assets/app.js", 200, "text/javascript", "'use strict';"},
		{"style", "GET", "/assets/app.css", 200, "text/css", "--accent"},
		{"uplot", "GET", "/assets/vendor/uplot/uPlot.iife.min.js", 200, "text/javascript", "uPlot"},
		{"uplot css", "GET", "/assets/vendor/uplot/uPlot.min.css", 200, "text/css", ".uplot"},
		{"uplot license", "GET", "/assets/vendor/uplot/LICENSE", 200, "", "MIT"},
		{"index under assets", "GET", "/assets/index.html", 200, "text/html", "<!doctype html>"},
		{"unknown page", "GET", "/nope", 404, "", ""},
		{"unknown asset", "GET", "/assets/nope.js", 404, "", ""},
		{"assets dir", "GET", "/assets/", 404, "", ""},
		{"vendor dir", "GET", "/assets/vendor/uplot/", 404, "", ""},
		{"vendor dir no slash", "GET", "/assets/vendor", 404, "", ""},
		{"post", "POST", "/", 405, "", ""},
		{"delete asset", "DELETE", "/assets/app.js", 405, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := get(t, h, c.method, c.target, nil)
			if rec.Code != c.status {
				t.Fatalf("%s %s: status %d, want %d", c.method, c.target, rec.Code, c.status)
			}
			if c.contentType != "" && !strings.HasPrefix(rec.Header().Get("Content-Type"), c.contentType) {
				t.Errorf("Content-Type %q, want %s…", rec.Header().Get("Content-Type"), c.contentType)
			}
			if c.bodyHas != "" && !strings.Contains(rec.Body.String(), c.bodyHas) {
				t.Errorf("body lacks %q", c.bodyHas)
			}
			if c.method == "HEAD" && rec.Body.Len() != 0 {
				t.Errorf("HEAD answered %d body bytes", rec.Body.Len())
			}
			if c.status == 200 {
				if rec.Header().Get("ETag") == "" || rec.Header().Get("Cache-Control") != "no-cache" {
					t.Errorf("ETag %q, Cache-Control %q", rec.Header().Get("ETag"), rec.Header().Get("Cache-Control"))
				}
				if rec.Header().Get("X-Content-Type-Options") != "nosniff" {
					t.Error("no X-Content-Type-Options: nosniff")
				}
			}
		})
	}
}

func TestPageSecurityHeaders(t *testing.T) {
	rec := get(t, Handler(), "GET", "/", nil)
	csp := rec.Header().Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "script-src 'self';", "connect-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "script-src 'self' 'unsafe") {
		t.Errorf("CSP allows inline scripts: %q", csp)
	}
	if got := rec.Header().Get("Referrer-Policy"); got != "no-referrer" {
		t.Errorf("Referrer-Policy %q", got)
	}
}

func TestETagRevalidation(t *testing.T) {
	h := Handler()
	for _, target := range []string{"/", "/assets/app.js", "/assets/vendor/uplot/uPlot.iife.min.js"} {
		first := get(t, h, "GET", target, nil)
		tag := first.Header().Get("ETag")
		if !regexp.MustCompile(`^"[A-Za-z0-9_-]{24}"$`).MatchString(tag) {
			t.Fatalf("%s: ETag %q", target, tag)
		}
		if again := get(t, h, "GET", target, nil).Header().Get("ETag"); again != tag {
			t.Errorf("%s: ETag changed %q → %q", target, tag, again)
		}
		if rec := get(t, h, "GET", target, map[string]string{"If-None-Match": tag}); rec.Code != http.StatusNotModified || rec.Body.Len() != 0 {
			t.Errorf("%s: If-None-Match answered %d with %d bytes, want 304 and none", target, rec.Code, rec.Body.Len())
		}
		if rec := get(t, h, "GET", target, map[string]string{"If-None-Match": `"other"`}); rec.Code != http.StatusOK {
			t.Errorf("%s: stale If-None-Match answered %d", target, rec.Code)
		}
	}
	if a, b := get(t, h, "GET", "/assets/app.js", nil).Header().Get("ETag"), get(t, h, "GET", "/assets/app.css", nil).Header().Get("ETag"); a == b {
		t.Errorf("two files share the ETag %q", a)
	}
}

// TestPageReferencesExist checks that every local script and stylesheet the page loads is
// served, and that it loads nothing from another origin (no CDN at run time).
func TestPageReferencesExist(t *testing.T) {
	h := Handler()
	page := get(t, h, "GET", "/", nil).Body.String()
	refs := regexp.MustCompile(`(?:src|href)="([^"]+)"`).FindAllStringSubmatch(page, -1)
	if len(refs) < 4 {
		t.Fatalf("found %d references in the page, want the two scripts and two stylesheets", len(refs))
	}
	for _, m := range refs {
		ref := m[1]
		if strings.Contains(ref, "//") {
			t.Errorf("page loads %q from another origin", ref)
			continue
		}
		rec := get(t, h, "GET", "/"+ref, nil)
		body, _ := io.ReadAll(rec.Result().Body)
		if rec.Code != http.StatusOK || len(body) == 0 {
			t.Errorf("reference %q answered %d with %d bytes", ref, rec.Code, len(body))
		}
	}
}
