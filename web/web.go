package web

import (
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"io"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

// assets holds the dashboard's files. An embedded file system can only be a package variable.
//
//go:embed assets
var assets embed.FS

// indexFile is the page served at /.
const indexFile = "index.html"

// contentSecurityPolicy allows the page only its own scripts, styles and API. uPlot sets
// element styles from script, which style-src 'self' alone does not forbid, but it also
// injects style attributes, hence 'unsafe-inline' for styles (never for scripts).
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; " +
	"img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Handler returns the dashboard: GET or HEAD / serves the page and /assets/<file> its
// files, each with a strong ETag (the content's hash) and Cache-Control: no-cache, so a new
// binary's files are picked up at the next load and unchanged ones are answered 304. Any
// other path under / is 404 and other methods 405; directories are never listed.
func Handler() http.Handler {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		// fs.Sub fails only on an invalid path; "assets" is a constant valid one.
		return http.NotFoundHandler()
	}
	h := &handler{files: sub, etags: map[string]string{}}
	_ = fs.WalkDir(sub, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(sub, p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		h.etags[p] = `"` + base64.RawURLEncoding.EncodeToString(sum[:18]) + `"`
		return nil
	})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { h.serve(w, r, indexFile) })
	mux.HandleFunc("GET /assets/{file...}", func(w http.ResponseWriter, r *http.Request) {
		h.serve(w, r, r.PathValue("file"))
	})
	return mux
}

// handler serves the files of the embedded assets directory.
type handler struct {
	files fs.FS
	// etags maps every regular file's path (relative to assets) to its ETag.
	etags map[string]string
}

// serve writes the file name (relative to assets) or 404 when it is not a regular file.
func (h *handler) serve(w http.ResponseWriter, r *http.Request, name string) {
	name = path.Clean(name)
	tag, ok := h.etags[name]
	if !ok || strings.HasPrefix(name, "../") {
		http.NotFound(w, r)
		return
	}
	f, err := h.files.Open(name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	defer func() { _ = f.Close() }()
	rs, ok := f.(io.ReadSeeker)
	if !ok {
		http.Error(w, "asset not seekable", http.StatusInternalServerError)
		return
	}
	hd := w.Header()
	hd.Set("ETag", tag)
	hd.Set("Cache-Control", "no-cache")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	if name == indexFile {
		hd.Set("Content-Security-Policy", contentSecurityPolicy)
		hd.Set("X-Frame-Options", "DENY")
	}
	// Embedded files have no modification time; ServeContent answers If-None-Match from
	// the ETag set above and picks the Content-Type from the name's extension.
	http.ServeContent(w, r, path.Base(name), time.Time{}, rs)
}
