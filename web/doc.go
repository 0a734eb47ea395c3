// Package web owns the dashboard's static assets (web/assets: index.html, app.js, app.css and
// the vendored uPlot chart library) and their embedding in the binary: Handler serves the page
// at / and the files at /assets/ from an embed.FS, so nothing is fetched from a CDN at run time.
//
// The page is plain HTML, CSS and JavaScript with no build step. It reads everything it shows
// from the read API (GET /v1/projects, /v1/projects/{p}/tree, /series and /ticks; see
// docs/openapi.yaml) with the bearer token the user gives it in the URL fragment
// (#token=…&project=…&node=…&tick=…) or in its form. The token stays in the tab's
// sessionStorage and is sent only in the API's Authorization header; the fragment is never
// sent to the server.
//
// The package does not serve or implement the API (package api does), authenticate anything
// (the page is public; its data is not), or decide the routes of the process (cmd/rollup mounts
// Handler next to the API).
package web
